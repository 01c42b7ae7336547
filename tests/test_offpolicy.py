"""Weight snapshots (what the trainer publishes) and the PPO-off-policy-k round slicing."""

import numpy as np
import pytest
import torch

from scalerl.distributed.weight_sync.object_store import load_snapshot, snapshot_weights
from scalerl.models.policy import TinyModelSpec, build_tiny_model

TINY = TinyModelSpec(num_layers=1, hidden_size=32, num_heads=2, intermediate_size=64, max_positions=64)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_snapshot_round_trip_is_bit_exact_and_in_place(dtype):
    source, _ = build_tiny_model(TINY, seed=1, dtype=dtype)
    target, _ = build_tiny_model(TINY, seed=2, dtype=dtype)
    target_tensors = [p for p in target.parameters()]
    snapshot = snapshot_weights(source, version=7)
    assert snapshot.version == 7 and snapshot.num_bytes > 0
    assert all(isinstance(a, np.ndarray) for a in snapshot.arrays.values())
    load_snapshot(target, snapshot)
    for (name, a), (_, b) in zip(source.state_dict().items(), target.state_dict().items()):
        assert a.dtype == b.dtype and torch.equal(a, b), name
    # same tensor objects: a generator's modules (and KV cache) survive the swap
    assert all(p is q for p, q in zip(target_tensors, target.parameters()))


def _rollout(group_index, prompt_index, versions=(0,)):
    from scalerl.tasks.rollout import Rollout

    return Rollout(
        prompt_index=prompt_index,
        group_index=group_index,
        prompt_token_ids=(1,),
        completion_token_ids=(2,) * len(versions),
        generator_logprobs=(0.0,) * len(versions),
        token_policy_versions=tuple(versions),
        reward=1.0,
        truncated=False,
        interrupted=False,
        completion_text="x",
    )


def test_split_groups_keeps_order_and_balances():
    from scalerl.distributed.offpolicy import split_groups

    assert split_groups([5, 6, 7, 8, 9], 2) == [[5, 6, 7], [8, 9]]
    assert split_groups([5, 6], 4) == [[5], [6]]
    assert split_groups([1, 2, 3], 1) == [[1, 2, 3]]


def test_slice_rounds_cuts_whole_prompt_groups_and_renumbers_them():
    from scalerl.distributed.offpolicy import slice_rounds
    from scalerl.train.batch.packed_rollouts import pack_rollouts

    # 5 prompt groups of 2 generations (group ids as a round of two batches tags them); the
    # completions' versions tell the rollouts apart
    groups = (100, 100, 101, 101, 200, 200, 201, 201, 202, 202)
    packed = pack_rollouts([_rollout(g, 10 + g, versions=(i,)) for i, g in enumerate(groups)])
    slices = slice_rounds(packed, prompts_per_step=2)
    assert len(slices) == 3
    assert [s.group_index.tolist() for s in slices] == [[0, 0, 1, 1], [0, 0, 1, 1], [0, 0]]
    assert slices[1].prompt_index.tolist() == [210, 210, 211, 211]
    assert [s.versions.tolist() for s in slices] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert slice_rounds(pack_rollouts([]), prompts_per_step=2) == []


def test_actor_gpus_share_one_gpu_unless_told_otherwise():
    from scalerl.distributed.settings import PipelineConfig, actor_gpus

    assert actor_gpus("cpu", PipelineConfig(num_generators=2)) == (0.0, 0.0)
    assert actor_gpus("cuda", PipelineConfig(num_generators=2)) == (0.5, 0.25)
    assert actor_gpus("cuda:0", PipelineConfig(trainer_gpus=1, generator_gpus=1)) == (1.0, 1.0)


def test_device_auto_is_the_ray_clusters_device_and_sets_the_actors_gpus():
    from scalerl.distributed.settings import PipelineConfig, actor_gpus, with_cluster_device
    from scalerl.train.config.train_config import TrainConfig

    auto = TrainConfig().with_overrides(["device=auto"])
    on_gpus, on_cpus = with_cluster_device(auto, cluster_gpus=2.0), with_cluster_device(auto, cluster_gpus=0.0)
    assert (on_gpus.device, on_cpus.device) == ("cuda", "cpu")
    assert actor_gpus(on_gpus.device, PipelineConfig(num_generators=2)) == (0.5, 0.25)
    assert actor_gpus(on_cpus.device, PipelineConfig(num_generators=2)) == (0.0, 0.0)
    explicit = TrainConfig().with_overrides(["device=cpu"])
    assert with_cluster_device(explicit, cluster_gpus=8.0) is explicit


def test_the_pipeline_session_resolves_device_auto_before_anything_reads_it(monkeypatch, tmp_path):
    from scalerl.distributed import session
    from scalerl.distributed.settings import PipelineConfig
    from scalerl.train.config.train_config import TrainConfig

    seen = []

    def stop_at_check_paths(config, **_):
        seen.append(config.device)
        raise RuntimeError("stop")

    monkeypatch.setattr(session, "cluster_gpus", lambda: 1.0)  # a cluster with a GPU, no Ray started
    monkeypatch.setattr(session, "check_paths", stop_at_check_paths)
    with pytest.raises(RuntimeError, match="stop"):
        session.PipelineSession(TrainConfig().with_overrides(["device=auto"]), PipelineConfig(), tmp_path)
    assert seen == ["cuda"]
