"""The simulated-device backend (benchmark/test only): its cost arithmetic, its fake rollouts
meet the generator contract, and a short real pipeline run on it paces at its analytic bound."""

import subprocess
import sys
import time

import numpy as np
import pytest
from generator_contract import rollout_violations

from benchmarks.overlap_bounds import async_step_seconds
from benchmarks.simulated_device import DeviceCosts, fake_packed
from scalerl.errors import InputError


def test_costs_for_a_step_reproduce_the_step_times():
    costs = DeviceCosts.for_step(0.3, 0.1, sequences_per_step=64, completion_tokens=32)
    assert costs.generate_seconds(64) == pytest.approx(0.3)
    assert costs.generate_seconds(128) == pytest.approx(0.6)  # two steps' batch on one generator
    assert costs.train_seconds(64 * 32) == pytest.approx(0.1)
    with pytest.raises(InputError):
        DeviceCosts(0.0, 1e-3)


def test_fake_batches_meet_the_contract_and_keep_every_prompt_in_the_pool():
    """The simulated generator's packed batch equals packing the Rollouts it stands for, meets
    the generator contract and keeps a 0.5 pass rate in every group."""
    from scalerl.tasks.rollout import Rollout
    from scalerl.train.batch.packed_rollouts import pack_rollouts, unpack_rollouts

    costs = DeviceCosts(1e-4, 1e-4, completion_tokens=4, prompt_tokens=3)
    packed = fake_packed([3, 8], 4, costs, [1, 1, 2, 2])
    by_hand = pack_rollouts(
        [
            Rollout(
                prompt_index=prompt,
                group_index=group,
                prompt_token_ids=(1, 1, 1),
                completion_token_ids=(2,) * 4,
                generator_logprobs=(-1.0,) * 4,
                token_policy_versions=(1, 1, 2, 2),
                reward=(-1.0) ** j,
                truncated=False,
                interrupted=False,
                completion_text="",
                loss_mask=(1,) * 4,
            )
            for group, prompt in enumerate([3, 8])
            for j in range(4)
        ]
    )
    for name in packed.__dataclass_fields__:
        got, expected = getattr(packed, name), getattr(by_hand, name)
        assert got.dtype == expected.dtype and np.array_equal(got, expected), name
    rollouts = unpack_rollouts(packed)
    assert rollout_violations(rollouts, [3, 8], 4, min_version=1, max_version=2) == []
    for group in (0, 1):
        rewards = [r.reward for r in rollouts if r.group_index == group]
        assert sorted(rewards) == [-1.0, -1.0, 1.0, 1.0]


def test_the_registry_and_a_simulated_generator_start_without_torch():
    # their actor processes only pass snapshots along; eight of them importing torch on a
    # 2-core machine took longer to start than the benchmark cell ran
    code = (
        "import sys, scalerl.distributed.weight_sync.object_store, benchmarks.simulated_device; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_a_simulated_async_run_paces_near_its_bound(tmp_path):
    ray = pytest.importorskip("ray")
    from benchmarks.simulated_trainer import simulated_workers
    from scalerl.distributed.pipeline import run_pipeline
    from scalerl.distributed.settings import PipelineConfig
    from scalerl.train.config.train_config import TrainConfig

    steps, generate_seconds, train_seconds = 14, 0.4, 0.1
    config = TrainConfig().with_overrides(
        [
            "model.num_layers=1",
            "model.hidden_size=32",
            "model.num_heads=2",
            "model.warmstart_steps=0",
            "prompts_per_step=4",
            "generations_per_prompt=4",
            f"max_steps={steps}",
            f"eval_every={steps}",
            f"checkpoint_every={steps}",
        ]
    )
    costs = DeviceCosts.for_step(generate_seconds, train_seconds, 16)
    pipeline = PipelineConfig(
        mode="async", max_lag=4, num_generators=2, num_cpus=2, generator_cpus=0.0, trainer_cpus=0.0
    )
    stamps = []
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        result = run_pipeline(
            config,
            pipeline,
            tmp_path / "run",
            workers=simulated_workers(costs),
            log=lambda _m: None,
            on_row=lambda row, _s: stamps.append(time.perf_counter()),
        )
    finally:
        ray.shutdown()
    assert result.steps_done == steps
    bound = async_step_seconds(generate_seconds, train_seconds, 2)  # 0.2 s: generation-bound
    measured = (stamps[-1] - stamps[4]) / (len(stamps) - 5)
    assert bound * 0.9 < measured < bound * 1.6, (measured, bound)
    assert all(row["policy_lag_max"] <= 4 for row in result.rows[1:])
    assert max(row["policy_lag_max"] for row in result.rows[1:]) >= 1  # generation overlapped
    assert (tmp_path / "run" / "checkpoints" / f"step_{steps:08d}").is_dir()
