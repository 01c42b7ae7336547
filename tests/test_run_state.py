"""RunState: the one home of a run's state, shared by the synchronous trainer and the pipeline."""

import pytest
import torch
from step_stats import step_stats

from scalerl.errors import ConfigError
from scalerl.models.policy import TinyModelSpec, build_tiny_model
from scalerl.tasks.rollout import Rollout
from scalerl.train.batch.packed_rollouts import pack_rollouts
from scalerl.train.checkpoint.save_load import latest_checkpoint, load_checkpoint
from scalerl.train.config.train_config import TrainConfig
from scalerl.train.flops import ModelShape
from scalerl.train.records.metrics_log import read_rows
from scalerl.train.run_checkpoint import restore_training, save_run_checkpoint
from scalerl.train.run_state import RunState
from scalerl.train.train_step import build_optimizer, build_scheduler

TINY_SPEC = TinyModelSpec(num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32, max_positions=32)
SHAPE = ModelShape(n_params=1000, n_layers=1, d_model=8)


def _config(*extra):
    return TrainConfig().with_overrides(
        ["max_steps=10", "eval_every=4", "checkpoint_every=3", "prompts_per_step=2", "generations_per_prompt=2", *extra]
    )


def _rollout(prompt, reward, tokens=3):
    return Rollout(
        prompt_index=prompt,
        group_index=prompt,
        prompt_token_ids=(1, 2),
        completion_token_ids=(4,) * tokens,
        generator_logprobs=(-1.0,) * tokens,
        token_policy_versions=(0,) * tokens,
        reward=reward,
        truncated=False,
        interrupted=False,
        completion_text="x",
    )


def _columns(*rollouts):
    """The columns of these rollouts packed: what the trainer and the pipeline book a step from."""
    return pack_rollouts(list(rollouts)).columns()


def _stats(tokens=10):
    return step_stats(tokens_trained=tokens, trained_context_sum=3 * tokens)


def test_schedule_validates_at_r0_every_eval_every_and_at_the_end(tmp_path):
    state = RunState(_config(), tmp_path, num_train_prompts=20)
    assert [s for s in range(11) if state.validation_due(s)] == [0, 4, 8, 10]
    assert [s for s in range(11) if state.checkpoint_due(s)] == [3, 6, 9, 10]
    assert not state.finished()
    state.step = 10
    assert state.finished()
    state.close()


def test_book_step_adds_generation_training_and_dropped_batches_to_the_counters(tmp_path):
    state = RunState(_config(), tmp_path, num_train_prompts=20)
    batch = _columns(_rollout(0, 1.0), _rollout(0, -1.0, tokens=5))
    row = state.book_step(1, batch, _stats(), shape=SHAPE, wall_seconds=3600.0, dropped=[_columns(_rollout(1, 1.0))])
    assert state.step == 1 and row["step"] == 1
    assert row["samples"] == 3 and row["tokens_generated"] == 3 + 5 + 3
    assert row["tokens_trained"] == 10 and row["device_hours"] == pytest.approx(1.0)
    assert row["train_reward"] == 0.0 and row["train_pass_rate"] == 0.5
    assert row["mean_length"] == 4.0 and row["flops"] > 0
    state.close()


def test_the_sampling_stream_is_lent_to_one_request_at_a_time(tmp_path):
    state = RunState(_config(), tmp_path, num_train_prompts=20)
    first = state.take_rng_state()
    assert first is not None and state.take_rng_state() is None  # the second request seeds itself
    advanced = torch.Generator().manual_seed(99).get_state()
    state.return_rng_state(None)
    state.return_rng_state(advanced)
    assert torch.equal(state.rollout_generator.get_state(), advanced)
    assert torch.equal(state.take_rng_state(), advanced)
    state.close()


def test_a_checkpoint_restores_the_run_state_and_drops_later_rows(tmp_path):
    config = _config()
    state = RunState.open(config, tmp_path, resume=False, num_train_prompts=20)
    state.append(state.initial_row())
    prompts = state.sample_prompts()
    state.update_pool(_columns(_rollout(prompts[0], 1.0), _rollout(prompts[0], 1.0)))  # solved: retired
    state.append(state.book_step(1, _columns(_rollout(prompts[0], 1.0)), _stats(), shape=SHAPE, wall_seconds=1.0))
    model, tokenizer = build_tiny_model(TINY_SPEC, seed=0)
    optimizer = build_optimizer(model, config.optim)
    scheduler = build_scheduler(optimizer, config.optim.warmup_steps)
    snapshot = state.snapshot()
    save_run_checkpoint(
        tmp_path, snapshot, model=model, optimizer=optimizer, scheduler=scheduler, keep=1, tokenizer=tokenizer
    )
    next_prompts = state.sample_prompts()
    next_sample = torch.rand(3, generator=state.rollout_generator)
    state.append({"step": 2, "flops": 1.0})  # written after the checkpoint: dropped on resume
    state.close()

    resumed = RunState.open(config, tmp_path, resume=True, num_train_prompts=20)
    assert resumed.resumed_from == latest_checkpoint(tmp_path) and resumed.step == 1
    assert resumed.pool.active_count == 19 and resumed.counters == state.counters
    assert resumed.sample_prompts() == next_prompts
    assert torch.equal(torch.rand(3, generator=resumed.rollout_generator), next_sample)
    assert [row["step"] for row in read_rows(tmp_path / "metrics.jsonl")] == [0, 1]
    other, _ = build_tiny_model(TINY_SPEC, seed=1)
    other_optimizer = build_optimizer(other, config.optim)
    assert (
        restore_training(
            resumed.resumed_from, model=other, optimizer=other_optimizer, scheduler=build_scheduler(other_optimizer, 1)
        )
        == 1
    )
    assert all(torch.equal(a, b) for a, b in zip(other.parameters(), model.parameters()))
    assert load_checkpoint(resumed.resumed_from)[1]["pool"] == snapshot.run["pool"]
    resumed.close()


def test_open_refuses_a_run_directory_that_does_not_suit(tmp_path):
    with pytest.raises(ConfigError, match="no run to resume"):
        RunState.open(_config(), tmp_path / "empty", resume=True, num_train_prompts=5)
    RunState.open(_config(), tmp_path / "run", resume=False, num_train_prompts=5).close()
    with pytest.raises(ConfigError, match="already holds a run"):
        RunState.open(_config(), tmp_path / "run", resume=False, num_train_prompts=5)
