"""The divergence guard: a non-finite generation log-prob, loss, gradient norm or weight stops the
step before the optimiser applies it; the run stops with one error naming the step and the
quantity, or (train.skip_nonfinite_steps = N) skips up to N such steps, each said."""

import math
import re

import pytest
import torch
from cli_invocation import assert_one_line_error, invoke

from scalerl.tasks.rollout import Rollout
from scalerl.train import train_step as train_step_module
from scalerl.train.batch.packed_rollouts import pack_rollouts
from scalerl.train.config.step_recipe import step_recipe
from scalerl.train.guards.divergence_guard import (
    DivergenceError,
    DivergenceGuard,
    NonFiniteStep,
    adamw_update_norms,
    nonfinite_logprobs,
    require_bounded_step,
    require_finite_update,
    require_finite_validation,
    update_problem,
)
from scalerl.train.train_step import build_optimizer, build_scheduler, guarded_train_step
from scalerl.train.trainer import open_run, run_one_step


def _rollout(logprobs, loss_mask):
    n = len(logprobs)
    return Rollout(
        prompt_index=0,
        group_index=0,
        prompt_token_ids=(1, 2),
        completion_token_ids=(3,) * n,
        generator_logprobs=tuple(logprobs),
        token_policy_versions=(0,) * n,
        reward=1.0,
        truncated=False,
        interrupted=False,
        completion_text="x" * n,
        loss_mask=tuple(loss_mask),
    )


def _batch(logprobs, loss_mask):
    """A packed batch of one rollout with these generation log-probs."""
    return pack_rollouts([_rollout(logprobs, loss_mask)])


def test_generation_log_probs_nan_anywhere_or_infinite_on_a_sampled_token():
    assert nonfinite_logprobs(_batch([-0.5, -1.0], [1, 1])) is None
    assert nonfinite_logprobs(_batch([-0.5, -math.inf], [1, 0])) is None  # a forced token may be impossible
    assert "1 of 2 tokens, first -inf" in nonfinite_logprobs(_batch([-0.5, -math.inf], [1, 1]))
    assert "first nan" in nonfinite_logprobs(_batch([math.nan, -1.0], [0, 1]))


def test_a_non_finite_loss_gradient_norm_or_weight_is_named():
    model = torch.nn.Linear(2, 2)
    require_finite_update(torch.tensor(0.3), torch.tensor(1.0), model)
    for loss, norm, named in [(math.nan, 1.0, "the loss is nan"), (0.3, math.inf, "the gradient norm is inf")]:
        with pytest.raises(NonFiniteStep, match=named):
            require_finite_update(torch.tensor(loss), torch.tensor(norm), model)
    with torch.no_grad():
        model.bias[1] = math.nan
    with pytest.raises(NonFiniteStep, match="weight bias is not finite"):
        require_finite_update(0.3, 1.0, model)


def test_skipping_is_bounded_and_each_skip_is_said(monkeypatch, tiny_config):
    def nan_step(*_args, **_kwargs):
        raise NonFiniteStep("the loss is nan")

    monkeypatch.setattr(train_step_module, "train_step", nan_step)
    model = torch.nn.Linear(2, 2)
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = build_optimizer(model, tiny_config().optim)
    scheduler = build_scheduler(optimizer, 2)
    guard = DivergenceGuard(allowed=1)
    stats = guarded_train_step(guard, 3, model, optimizer, scheduler, _batch([-1.0], [1]), step_recipe(tiny_config()))
    assert not stats.updated and math.isnan(stats.loss) and math.isnan(stats.grad_norm)
    assert stats.nonfinite.startswith("warning: step 3: the loss is nan; step skipped")
    assert "1 of train.skip_nonfinite_steps=1" in stats.nonfinite
    assert scheduler.last_epoch == 1  # the schedule advanced as for a filtered-out step
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    with pytest.raises(DivergenceError, match="step 4: the loss is nan; the run stopped before applying it"):
        guarded_train_step(guard, 4, model, optimizer, scheduler, _batch([-1.0], [1]), step_recipe(tiny_config()))
    with pytest.raises(DivergenceError, match="--set train.skip_nonfinite_steps=N"):
        guarded_train_step(
            DivergenceGuard(allowed=0), 1, model, optimizer, scheduler, _batch([-1.0], [1]), step_recipe(tiny_config())
        )


def test_a_nan_validation_pass_rate_is_an_error_never_a_row():
    assert require_finite_validation(3, 0.25) == 0.25
    with pytest.raises(DivergenceError, match="step 3: the validation pass rate is nan"):
        require_finite_validation(3, math.nan)


def test_a_nan_weight_stops_the_real_step_before_the_optimiser(tiny_config, tmp_path):
    run = open_run(tiny_config("max_steps=2"), tmp_path / "run", resume=False)
    try:
        with torch.no_grad():
            next(run.model.parameters()).view(-1)[0] = math.nan
        with pytest.raises(DivergenceError, match="step 1: the policy's generation log-probs are not finite"):
            run_one_step(run)
        assert run.step == 0 and run.optimizer.state == {}  # nothing applied
    finally:
        run.state.close()


def test_the_update_size_is_adamws_own_step_computed_before_it(tiny_config):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    optimizer = build_optimizer(model, tiny_config("optim.lr=0.05", "optim.weight_decay=0.1").optim)
    for _ in range(3):  # the norms of steps 1-3 (no Adam state, then with it) equal the steps taken
        model(torch.randn(5, 4)).square().sum().backward()
        before = [p.detach().clone() for p in model.parameters()]
        update_norm, weight_norm = adamw_update_norms(optimizer)
        optimizer.step()
        optimizer.zero_grad()
        taken = math.sqrt(sum(float((p.detach() - b).square().sum()) for p, b in zip(model.parameters(), before)))
        assert update_norm == pytest.approx(taken, rel=1e-5)
        assert weight_norm == pytest.approx(math.sqrt(sum(float(b.square().sum()) for b in before)), rel=1e-6)


def test_an_out_of_bounds_step_is_named_before_anything_changes(tiny_config):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    optimizer = build_optimizer(model, tiny_config().optim)
    model(torch.randn(5, 4)).square().sum().backward()
    assert update_problem(optimizer) is None  # lr 1e-2: about 1e-2 per weight of size ~0.3
    before = [p.detach().clone() for p in model.parameters()]
    for lr, named in [
        (1e3, "the learning rate is 1000.0, not a finite number below 1.0"),
        (1e300, "the learning rate is 1e+300"),
        (math.inf, "the learning rate is inf"),
        (0.9, "times the weights' norm (at most 1: a blow-up)"),
    ]:
        optimizer.param_groups[0]["lr"] = lr
        with pytest.raises(NonFiniteStep, match=re.escape(named)):
            require_bounded_step(optimizer)
    assert optimizer.state == {} and all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_a_generation_log_prob_out_of_its_range_is_named():
    assert nonfinite_logprobs(_batch([-0.5, -900.0], [1, 1])) is None
    assert nonfinite_logprobs(_batch([-0.5, -5e7], [1, 0])) is None  # forced, not sampled
    assert "out of range (1 of 2 tokens outside [-1000, 0], first -5e+07)" in nonfinite_logprobs(
        _batch([-0.5, -5e7], [1, 1])
    )
    assert "first 0.5" in nonfinite_logprobs(_batch([0.5, -1.0], [1, 1]))
    with pytest.raises(NonFiniteStep, match=r"the loss is 3e\+07, beyond \+-1e\+06"):
        require_finite_update(3e7, 1.0, torch.nn.Linear(2, 2))


@pytest.mark.parametrize("lr", [1e3, 1e30, 1e300, 0.5])
def test_a_huge_learning_rate_set_past_the_config_stops_the_real_step_unapplied(tiny_config, tmp_path, lr):
    run = open_run(tiny_config("max_steps=4"), tmp_path / "run", resume=False)
    try:
        for group in run.optimizer.param_groups:
            group["lr"] = group["initial_lr"] = lr
        run.scheduler.base_lrs = [lr]
        with pytest.raises(DivergenceError) as stopped:
            for _ in range(4):
                before = [p.detach().clone() for p in run.model.parameters()]
                run_one_step(run)
        message = str(stopped.value)
        assert message.startswith(f"step {run.step + 1}: the ") and "the run stopped before applying it" in message
        assert ("the learning rate" if lr >= 1 else "times the weights' norm") in message
        assert all(torch.equal(a, b) for a, b in zip(before, run.model.parameters()))  # nothing applied
    finally:
        run.state.close()


@pytest.mark.parametrize("lr, shown", [("1e3", "1000.0"), ("1e30", "1e+30"), ("1e300", "1e+300"), ("1", "1.0")])
def test_a_learning_rate_of_one_or_more_is_refused_at_config_time(tiny_set_options, tmp_path, lr, shown):
    result = invoke("train", "--out", tmp_path / "run", *tiny_set_options(f"optim.lr={lr}"), "--no-progress")
    assert_one_line_error(result, "optim.lr: must be below 1 (AdamW moves each weight by about lr", f"got {shown}")
    assert not (tmp_path / "run").exists()


def test_a_blow_up_below_the_config_bound_exits_2_naming_the_step(tiny_set_options, tmp_path):
    result = invoke(
        "train",
        "--out",
        tmp_path / "run",
        *tiny_set_options("optim.lr=0.9", "optim.warmup_steps=0"),
        "--max-steps",
        "4",
        "--no-progress",
    )
    assert_one_line_error(result, "error: step ", "times the weights' norm", "the run stopped before applying it")
    assert "trained" not in result.stdout


def test_after_a_stop_export_ships_the_last_good_checkpoint(tiny_set_options, tmp_path, monkeypatch):
    """The schedule turns lr 1e-2 into 1e3 after two steps: the run stops naming the step, its
    newest checkpoint is the step before, and export ships those finite, pre-blow-up weights."""
    from safetensors.torch import load_file

    monkeypatch.setattr(train_step_module, "warmup_lr_factor", lambda step, _warmup: 1.0 if step < 2 else 1e5)
    out = tmp_path / "run"
    result = invoke("train", "--out", out, *tiny_set_options("checkpoint_every=1"), "--max-steps", "6", "--no-progress")
    assert_one_line_error(result, ": the learning rate is 1000.0", "the run stopped before applying it")
    stopped_at = int(re.match(r"error: step (\d+):", result.stderr).group(1))  # >= 3 (a filtered step has no update)
    good = f"step_{stopped_at - 1:08d}"
    assert stopped_at >= 3 and [p.name for p in (out / "checkpoints").iterdir()] == [good]
    exported = invoke("export", out, tmp_path / "model")
    assert exported.exit_code == 0, exported.output
    weights = load_file(str(tmp_path / "model" / "model.safetensors"))
    assert all(bool(torch.isfinite(w).all()) and float(w.abs().max()) < 10 for w in weights.values())
    checkpoint = load_file(str(out / "checkpoints" / good / "model.safetensors"))
    assert all(torch.equal(weights[name], checkpoint[name]) for name in weights)
