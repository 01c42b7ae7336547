"""Trainer tests: one train_step on hand-made batches, then short end-to-end runs."""

import pytest
import torch

from scalerl.models.forward import teacher_forced_logprobs
from scalerl.models.policy import TinyModelSpec, build_tiny_model
from scalerl.tasks.rollout import Rollout
from scalerl.train.batch.packed_rollouts import pack_rollouts
from scalerl.train.config.step_recipe import step_recipe
from scalerl.train.config.train_config import TrainConfig
from scalerl.train.train_step import (
    build_batch,
    build_optimizer,
    build_scheduler,
    train_step,
    warmup_lr_factor,
)

TINY_SPEC = TinyModelSpec(num_layers=1, hidden_size=32, num_heads=2, intermediate_size=64, max_positions=64)


def _tiny_model():
    model, tokenizer = build_tiny_model(TINY_SPEC, seed=0)
    return model, tokenizer


def _rollout(model, tokenizer, prompt, completion, reward, group):
    prompt_ids = tuple(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    completion_ids = tuple(tokenizer(completion, add_special_tokens=False)["input_ids"])
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        logprobs = teacher_forced_logprobs(model, ids, torch.ones_like(ids))[0]
    generator_logprobs = tuple(logprobs[len(prompt_ids) - 1 :].tolist())
    return Rollout(
        prompt_index=group,
        group_index=group,
        prompt_token_ids=prompt_ids,
        completion_token_ids=completion_ids,
        generator_logprobs=generator_logprobs,
        token_policy_versions=(0,) * len(completion_ids),
        reward=reward,
        truncated=False,
        interrupted=False,
        completion_text=completion,
    )


def _sequence_logprob(model, rollout):
    ids = torch.tensor([rollout.prompt_token_ids + rollout.completion_token_ids])
    with torch.no_grad():
        logprobs = teacher_forced_logprobs(model, ids, torch.ones_like(ids))[0]
    return float(logprobs[len(rollout.prompt_token_ids) - 1 :].sum())


def _optimiser(model, config):
    optimizer = build_optimizer(model, config.optim)
    return optimizer, build_scheduler(optimizer, config.optim.warmup_steps)


def test_warmup_is_linear_then_constant():
    assert [warmup_lr_factor(step, 4) for step in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert warmup_lr_factor(0, 0) == 1.0


def test_batch_left_pads_prompts_and_right_pads_completions():
    model, tokenizer = _tiny_model()
    rollouts = [
        _rollout(model, tokenizer, "1+2=", "<think>1+2=3</think>3", 1.0, 0),
        _rollout(model, tokenizer, "12+2=", "14", -1.0, 1),
    ]
    batch = build_batch(pack_rollouts(rollouts), pad_token_id=0)
    assert batch.prompt_width == 5
    assert batch.attention_mask[0].tolist()[:5] == [0, 1, 1, 1, 1]
    completion_width = batch.completion_ids.shape[1]
    assert batch.loss_mask[1].tolist() == [1.0, 1.0] + [0.0] * (completion_width - 2)
    assert batch.input_ids[0, 5:].tolist() == list(rollouts[0].completion_token_ids)
    assert batch.rewards.tolist() == [1.0, -1.0]


@pytest.mark.parametrize("loss_name", ["cispo", "dapo", "grpo", "gspo"])
def test_train_step_raises_good_and_lowers_bad_completions(loss_name):
    model, tokenizer = _tiny_model()
    config = TrainConfig().with_overrides([f"rl.loss={loss_name}", "optim.lr=1e-2", "warmup_steps=0"])
    rollouts = [
        _rollout(model, tokenizer, "3+4=", "<think>3+4=7</think>7", 1.0, 0),
        _rollout(model, tokenizer, "3+4=", "<think>3+4=8</think>8", -1.0, 0),
        _rollout(model, tokenizer, "5+1=", "<think>5+1=6</think>6", 1.0, 1),
        _rollout(model, tokenizer, "5+1=", "<think>5+1=9</think>9", -1.0, 1),
    ]
    before = [_sequence_logprob(model, r) for r in rollouts]
    optimizer, scheduler = _optimiser(model, config)
    stats = train_step(model, optimizer, scheduler, pack_rollouts(rollouts), step_recipe(config))
    after = [_sequence_logprob(model, r) for r in rollouts]
    assert stats.updated and stats.kept_prompts == 2 and stats.total_prompts == 2
    assert stats.mean_ratio == pytest.approx(1.0, abs=1e-4)  # on-policy: ratio 1
    assert stats.lr == pytest.approx(1e-2) and stats.grad_norm > 0
    assert after[0] > before[0] and after[2] > before[2]
    assert after[1] < before[1] and after[3] < before[3]


def test_zero_variance_groups_are_dropped_and_an_all_constant_batch_does_not_update():
    model, tokenizer = _tiny_model()
    config = TrainConfig()
    constant = [_rollout(model, tokenizer, "3+4=", "7", 1.0, 0), _rollout(model, tokenizer, "3+4=", "7", 1.0, 0)]
    mixed = [_rollout(model, tokenizer, "5+1=", "6", 1.0, 1), _rollout(model, tokenizer, "5+1=", "9", -1.0, 1)]
    optimizer, scheduler = _optimiser(model, config)
    weights = [p.detach().clone() for p in model.parameters()]
    stats = train_step(model, optimizer, scheduler, pack_rollouts(constant), step_recipe(config))
    assert not stats.updated and stats.kept_prompts == 0 and stats.tokens_trained == 0
    assert all(torch.equal(w, p) for w, p in zip(weights, model.parameters()))
    assert scheduler.last_epoch == 1  # the LR schedule still advances
    stats = train_step(model, optimizer, scheduler, pack_rollouts(constant + mixed), step_recipe(config))
    assert stats.updated and (stats.kept_prompts, stats.total_prompts) == (1, 2)
    assert stats.kept_sequences == 2
    assert stats.tokens_trained == sum(len(r.prompt_token_ids) + len(r.completion_token_ids) for r in mixed)


def test_a_step_with_a_reference_policy_counts_its_forward_as_recomputed_tokens():
    model, tokenizer = _tiny_model()
    reference, _ = _tiny_model()
    mixed = [_rollout(model, tokenizer, "5+1=", "6", 1.0, 0), _rollout(model, tokenizer, "5+1=", "9", -1.0, 0)]
    plain = TrainConfig()
    stats = train_step(model, *_optimiser(model, plain), pack_rollouts(mixed), step_recipe(plain))
    assert stats.tokens_recomputed == 0 and stats.recomputed_context_sum == 0
    kl = TrainConfig().with_overrides(["rl.loss=grpo", "rl.grpo_kl_coef=0.1"])
    stats = train_step(model, *_optimiser(model, kl), pack_rollouts(mixed), step_recipe(kl), reference=reference)
    assert (stats.tokens_recomputed, stats.recomputed_context_sum) == (stats.tokens_trained, stats.trained_context_sum)


def test_a_step_keeping_fewer_prompts_than_min_kept_prompts_makes_no_update():
    model, tokenizer = _tiny_model()
    mixed = [
        _rollout(model, tokenizer, "5+1=", "6", 1.0, 0),
        _rollout(model, tokenizer, "5+1=", "9", -1.0, 0),
        _rollout(model, tokenizer, "2+2=", "4", 1.0, 1),
        _rollout(model, tokenizer, "2+2=", "5", -1.0, 1),
        _rollout(model, tokenizer, "3+4=", "7", 1.0, 2),
        _rollout(model, tokenizer, "3+4=", "7", 1.0, 2),
    ]
    gated = TrainConfig().with_overrides(["rl.min_kept_prompts=3"])
    optimizer, scheduler = _optimiser(model, gated)
    weights = [p.detach().clone() for p in model.parameters()]
    stats = train_step(
        model, optimizer, scheduler, pack_rollouts(mixed), step_recipe(gated)
    )  # 2 of 3 prompts kept, 3 required
    assert not stats.updated and (stats.kept_prompts, stats.total_prompts) == (2, 3)
    assert all(torch.equal(w, p) for w, p in zip(weights, model.parameters()))
    assert scheduler.last_epoch == 1
    stats = train_step(
        model,
        optimizer,
        scheduler,
        pack_rollouts(mixed),
        step_recipe(TrainConfig().with_overrides(["rl.min_kept_prompts=2"])),
    )
    assert stats.updated and stats.kept_prompts == 2
    assert not all(torch.equal(w, p) for w, p in zip(weights, model.parameters()))
    for bad in ("0", "1.5", "true"):
        with pytest.raises(ConfigError, match="rl.min_kept_prompts"):
            TrainConfig().with_overrides([f"rl.min_kept_prompts={bad}"])


# ---------------------------------------------------------------- end-to-end runs of the trainer

from scalerl.errors import ConfigError  # noqa: E402
from scalerl.train.records.metrics_log import TRAIN_COLUMNS, append_row, read_rows  # noqa: E402
from scalerl.train.trainer import train  # noqa: E402


def test_three_step_run_writes_the_metrics_columns_and_read_curve_reads_them(tiny_config, tmp_path):
    from scalerl.forecast.readers import read_curve

    # no zero-variance filter: the untrained model's generations may all be cut at the same
    # length (equal penalties), and this test is about the columns, not the filter
    config = tiny_config("max_steps=3", "eval_every=2", "checkpoint_every=2", "rl.zero_variance_filter=false")
    result = train(config, tmp_path, show_progress=False)
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert [row["step"] for row in rows] == [0, 1, 2, 3]
    assert rows[0]["flops"] == 0 and "val_pass_rate" in rows[0]
    for row in rows[1:]:
        assert set(TRAIN_COLUMNS) <= set(row)
    assert [row["samples"] for row in rows] == [0, 9, 18, 27]
    assert [("val_pass_rate" in row) for row in rows] == [True, False, True, True]
    flops = [row["flops"] for row in rows]
    assert all(later > earlier for earlier, later in zip(flops, flops[1:]))
    assert all(row["tokens_trained"] > 0 for row in rows[1:])
    assert rows[1]["lr"] == pytest.approx(0.5e-2) and rows[2]["lr"] == pytest.approx(1e-2)
    curve = read_curve(tmp_path / "metrics.jsonl", x="flops", y="val_pass_rate")
    assert list(curve.compute) == [rows[0]["flops"], rows[2]["flops"], rows[3]["flops"]]
    assert result.val_steps == (0, 2, 3) and result.last_step == 3
    assert TrainConfig.from_dict(__import__("json").loads((tmp_path / "config.json").read_text())) == config
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step_00000003"]


def _final_weights(run_dir):
    from safetensors.torch import load_file

    return load_file(str(sorted((run_dir / "checkpoints").iterdir())[-1] / "model.safetensors"))


def _comparable(rows):
    return [{k: v for k, v in row.items() if k != "device_hours"} for row in rows]


class _Crash(Exception):
    pass


def test_resume_after_a_crash_reproduces_the_uninterrupted_run(tiny_config, tmp_path):
    config = tiny_config("max_steps=5", "eval_every=2", "checkpoint_every=2", "keep_checkpoints=2")
    train(config, tmp_path / "whole", show_progress=False)

    def crash_at_step_3(row):
        if row["step"] == 3:
            raise _Crash

    crashed = tmp_path / "crashed"
    with pytest.raises(_Crash):
        train(config, crashed, show_progress=False, on_row=crash_at_step_3)
    with open(crashed / "metrics.jsonl", "ab") as handle:  # kill -9 in the middle of a write
        handle.write(b'{"step": 4, "sampl')
    train(config, crashed, resume=True, show_progress=False)

    whole_rows, resumed_rows = read_rows(tmp_path / "whole" / "metrics.jsonl"), read_rows(crashed / "metrics.jsonl")
    assert [row["step"] for row in resumed_rows] == [0, 1, 2, 3, 4, 5]
    assert _comparable(resumed_rows) == _comparable(whole_rows)
    whole_weights, resumed_weights = _final_weights(tmp_path / "whole"), _final_weights(crashed)
    assert all(torch.equal(whole_weights[name], resumed_weights[name]) for name in whole_weights)


def test_resume_can_extend_max_steps(tiny_config, tmp_path):
    train(tiny_config("max_steps=1", "eval_every=1"), tmp_path, show_progress=False)
    train(tiny_config("max_steps=2", "eval_every=1"), tmp_path, resume=True, show_progress=False)
    assert [row["step"] for row in read_rows(tmp_path / "metrics.jsonl")] == [0, 1, 2]


def test_run_directory_errors(tiny_config, tmp_path):
    with pytest.raises(ConfigError, match="no run to resume"):
        train(tiny_config("max_steps=1"), tmp_path / "empty", resume=True, show_progress=False)
    append_row(tmp_path / "metrics.jsonl", {"step": 0})
    (tmp_path / "config.json").write_text(__import__("json").dumps(tiny_config("max_steps=1").to_dict()))
    with pytest.raises(ConfigError, match="already holds a run"):
        train(tiny_config("max_steps=1"), tmp_path, show_progress=False)
    with pytest.raises(ConfigError, match="differs from the saved run's in optim"):
        train(tiny_config("max_steps=1", "optim.lr=0.5"), tmp_path, resume=True, show_progress=False)


@pytest.mark.slow
def test_resume_after_kill_9_of_a_real_process(tiny_config, tiny_set_options, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    config = tiny_config("max_steps=12", "eval_every=3", "checkpoint_every=2")
    train(config, tmp_path / "whole", show_progress=False)
    killed = tmp_path / "killed"
    sets = tiny_set_options("max_steps=12", "eval_every=3", "checkpoint_every=2")
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from scalerl.cli.app import main; main()",
            "train",
            "--out",
            str(killed),
            "--no-progress",
            *sets,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(read_rows(killed / "metrics.jsonl")) < 6:
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert len(read_rows(killed / "metrics.jsonl")) < 13  # really interrupted
    train(config, killed, resume=True, show_progress=False)
    assert _comparable(read_rows(killed / "metrics.jsonl")) == _comparable(
        read_rows(tmp_path / "whole" / "metrics.jsonl")
    )
    whole_weights, resumed_weights = _final_weights(tmp_path / "whole"), _final_weights(killed)
    assert all(torch.equal(whole_weights[name], resumed_weights[name]) for name in whole_weights)
