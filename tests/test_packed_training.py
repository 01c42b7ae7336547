"""The trainer and the driver read a packed batch as it is, without unpacking it: its padded
tensors, step, rewards, bookkeeping and lag statistics are those of the Rollouts it packs (by
hand, or as the Rollouts' own fields give them); weights are published off the step in version
order."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from step_stats import step_stats
from test_packed_rollouts import ragged_rollouts

from scalerl.distributed.staleness import batch_lag_stats, packed_lag_stats
from scalerl.distributed.weight_sync.object_store import BackgroundPublisher
from scalerl.models.policy import TinyModelSpec, build_tiny_model
from scalerl.tasks.rollout import Rollout
from scalerl.train.batch.packed_rollouts import generation_totals, pack_rollouts, unpack_rollouts
from scalerl.train.config.step_recipe import step_recipe
from scalerl.train.config.train_config import TrainConfig
from scalerl.train.flops import ModelShape
from scalerl.train.guards.divergence_guard import nonfinite_logprobs
from scalerl.train.run_state import RunState
from scalerl.train.step_rollouts import training_rewards
from scalerl.train.train_step import build_batch, build_optimizer, build_scheduler, train_step

TINY_SPEC = TinyModelSpec(num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32, max_positions=64)


def _rollout(
    prompt: int, group: int, prompt_ids: tuple, completion: tuple, reward: float, versions=None, truncated=False
) -> Rollout:
    return Rollout(
        prompt_index=prompt,
        group_index=group,
        prompt_token_ids=prompt_ids,
        completion_token_ids=completion,
        generator_logprobs=tuple(-0.5 - 0.1 * t for t in completion),
        token_policy_versions=versions or (0,) * len(completion),
        reward=reward,
        truncated=truncated,
        interrupted=False,
        completion_text="c" * len(completion),
        loss_mask=tuple(int(t % 5 != 0) for t in completion),
    )


def _batch() -> list[Rollout]:
    """Three groups of ragged sequences; group 2 has one reward only (the zero-variance filter
    drops it)."""
    return [
        _rollout(0, 0, (3, 4, 5), (6, 7, 8, 9), 1.0),
        _rollout(0, 0, (3, 4, 5), (10,), -1.0),
        _rollout(1, 1, (11, 12), (13, 14, 15, 16, 17, 18), -1.0, truncated=True),
        _rollout(1, 1, (11, 12), (19, 20), 1.0),
        _rollout(2, 2, (21,), (22, 23), 1.0),
        _rollout(2, 2, (21,), (24,), 1.0),
    ]


def test_select_equals_packing_the_chosen_rollouts():
    rollouts = ragged_rollouts()
    packed = pack_rollouts(rollouts)
    for rows in ([2, 0], [1], [], [0, 1, 2, 1]):
        chosen = packed.select(rows)
        assert unpack_rollouts(chosen) == [rollouts[i] for i in rows]
        assert (
            chosen.completion_offsets.tolist() == pack_rollouts([rollouts[i] for i in rows]).completion_offsets.tolist()
        )


def _padded_rows(rows, width: int, fill, *, left: bool) -> list[list]:
    """Each row padded with `fill` to `width`, on the left or the right."""
    return [
        [fill] * (width - len(row)) + list(row) if left else list(row) + [fill] * (width - len(row)) for row in rows
    ]


def test_packed_batch_tensors_are_the_rollouts_padded():
    rollouts = ragged_rollouts()  # an empty prompt, an empty completion, 2**40 as a token id
    batch = build_batch(pack_rollouts(rollouts), pad_token_id=1)
    prompts, completions = [r.prompt_token_ids for r in rollouts], [r.completion_token_ids for r in rollouts]
    assert batch.prompt_width == 3 and batch.completion_ids.shape[1] == 4
    expected = {
        "input_ids": [
            p + c for p, c in zip(_padded_rows(prompts, 3, 1, left=True), _padded_rows(completions, 4, 1, left=False))
        ],
        "attention_mask": [
            p + c
            for p, c in zip(
                _padded_rows([[1] * len(p) for p in prompts], 3, 0, left=True),
                _padded_rows([[1] * len(c) for c in completions], 4, 0, left=False),
            )
        ],
        "completion_ids": _padded_rows(completions, 4, 1, left=False),
        "generator_logprobs": _padded_rows([r.generator_logprobs for r in rollouts], 4, 0.0, left=False),
        "loss_mask": _padded_rows([r.loss_mask for r in rollouts], 4, 0, left=False),
        "rewards": [r.reward for r in rollouts],
        "group_ids": [r.group_index for r in rollouts],
    }
    for name, rows in expected.items():
        got = getattr(batch, name)
        assert torch.equal(got, torch.tensor(rows, dtype=got.dtype)), name
    assert [getattr(batch, name).dtype for name in expected] == [torch.long] * 3 + [torch.float32] * 3 + [torch.long]
    assert batch.completion_ids[0].tolist() == [9, 10, 11, 2]
    assert batch.input_ids[2].tolist() == [1, 1, 1, 2**40, 1, 1, 1]


@pytest.mark.parametrize(
    "overrides",
    [
        [],
        [
            "train.micro_batch_size=2",
            "sampling.length_control=penalty",
            "max_new_tokens=6",
            "sampling.penalty_cache_tokens=4",
        ],
    ],
)
def test_a_step_on_the_packed_batch_trains_the_kept_groups_tokens(overrides):
    config = TrainConfig().with_overrides(["optim.lr=1e-2", "warmup_steps=0", *overrides])
    model, _ = build_tiny_model(TINY_SPEC, seed=0)
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = build_optimizer(model, config.optim)
    stats = train_step(
        model,
        optimizer,
        build_scheduler(optimizer, 0),
        training_rewards(pack_rollouts(_batch()), config),
        step_recipe(config),
    )
    assert stats.updated and (stats.kept_prompts, stats.total_prompts, stats.kept_sequences) == (2, 3, 4)
    assert stats.tokens_trained == (3 + 4) + (3 + 1) + (2 + 6) + (2 + 2)  # groups 0 and 1, prompt + completion
    assert not all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_overlong_penalty_on_packed_rewards_equals_the_rollouts_rewards():
    config = TrainConfig().with_overrides(
        ["sampling.length_control=penalty", "max_new_tokens=6", "sampling.penalty_cache_tokens=4"]
    )
    # completion lengths 4, 1, 6, 2, 2, 1; no penalty up to 6 - 4 = 2 tokens, then (2 - L) / 4
    assert training_rewards(pack_rollouts(_batch()), config).reward.tolist() == [
        1.0 - 0.5,
        -1.0,
        -1.0 - 1.0,
        1.0,
        1.0,
        1.0,
    ]


def test_nonfinite_logprobs_read_from_the_packed_buffers():
    bad = _batch()
    bad[1] = Rollout(**{**bad[1].__dict__, "generator_logprobs": (float("nan"),)})
    assert nonfinite_logprobs(pack_rollouts(bad)) == (
        "the policy's generation log-probs are not finite (1 of 16 tokens, first nan)"
    )
    assert nonfinite_logprobs(pack_rollouts(_batch())) is None


def test_columns_and_generation_totals_of_a_packed_batch_by_hand():
    packed = pack_rollouts(_batch()).columns()
    assert packed.prompt_index.tolist() == [0, 0, 1, 1, 2, 2]
    assert packed.reward.tolist() == [1.0, -1.0, -1.0, 1.0, 1.0, 1.0]
    assert packed.truncated.tolist() == [False, False, True, False, False, False]
    assert packed.interrupted.tolist() == [False] * 6
    assert packed.prompt_lengths.tolist() == [3, 3, 2, 2, 1, 1]
    assert packed.completion_lengths.tolist() == [4, 1, 6, 2, 2, 1]
    # sum_i L_i ; sum_i (L_i P_i + L_i (L_i + 1) / 2) by hand
    assert generation_totals(packed) == (
        16,
        (4 * 3 + 10) + (1 * 3 + 1) + (6 * 2 + 21) + (2 * 2 + 3) + (2 + 3) + (1 + 1),
    )


def test_book_step_of_a_packed_batch_writes_its_row(tmp_path):
    shape = ModelShape(n_params=1000, n_layers=1, d_model=8)
    stats = step_stats(kept_prompts=2, total_prompts=3, kept_sequences=4)
    config = TrainConfig().with_overrides(["max_steps=10", "prompts_per_step=3", "generations_per_prompt=2"])
    state = RunState(config, tmp_path, num_train_prompts=20)
    columns = pack_rollouts(_batch()).columns()
    state.update_pool(columns)
    dropped = pack_rollouts(_batch()[:2]).columns()
    row = state.book_step(1, columns, stats, shape=shape, wall_seconds=0.0, dropped=[dropped])
    state.close()
    assert row["samples"] == 8 and row["tokens_generated"] == 16 + 5
    assert row["train_pass_rate"] == 4 / 6 and row["truncation_rate"] == 1 / 6
    assert row["train_reward"] == 2 / 6 and row["mean_length"] == 16 / 6
    assert state.pool.active_count == 19  # prompt 2 passed every generation: retired


def test_packed_lag_stats_by_hand():
    versions = [(4, 4, 5), (), (3, 6)]
    packed = pack_rollouts([_rollout(0, 0, (1,), (7,) * len(v), 1.0, versions=v or None) for v in versions])
    lag = packed_lag_stats(packed.versions, trainer_version=6)
    assert lag == batch_lag_stats(versions, trainer_version=6)
    assert lag.mean == (2 + 2 + 1 + 3 + 0) / 5 and lag.max == 3 and lag.oldest_policy_version == 3
    with pytest.raises(Exception, match="without completion tokens"):
        packed_lag_stats(np.zeros(0, dtype=np.int64), trainer_version=1)


class _Registry:
    """Records (version, ref) in the order publications arrive; the `publish.remote` of an actor."""

    def __init__(self) -> None:
        self.seen: list = []
        self.publish = self
        self.fail = False

    def remote(self, version: int, wrapped_ref: list) -> None:
        if self.fail:
            raise RuntimeError("object store full")
        self.seen.append((version, wrapped_ref[0], threading.current_thread().name))


def test_background_publication_is_a_copy_registered_in_version_order_and_a_failure_surfaces():
    model, _ = build_tiny_model(TINY_SPEC, seed=0)
    registry = _Registry()
    publisher = BackgroundPublisher(registry, put=lambda snapshot: snapshot)
    first = next(model.parameters())
    for version in (1, 2, 3):
        with torch.no_grad():
            first.fill_(float(version))  # the step after a publish changes the weights in place
        publisher.publish(model, version)
    publisher.wait()
    assert [v for v, _, _ in registry.seen] == [1, 2, 3]
    assert all(name.startswith("scalerl-publish") for _, _, name in registry.seen)
    name = next(n for n, p in model.named_parameters() if p is first)
    assert [float(snapshot.arrays[name].flat[0]) for _, snapshot, _ in registry.seen] == [1.0, 2.0, 3.0]
    registry.fail = True
    publisher.publish(model, 4)
    with pytest.raises(RuntimeError, match="object store full"):
        publisher.wait()
    with pytest.raises(RuntimeError, match="object store full"):
        publisher.publish(model, 5)
