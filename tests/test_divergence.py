"""The divergence guard: a non-finite generation log-prob, loss, gradient norm or weight stops the
step before the optimiser applies it; the run stops with one error naming the step and the
quantity, or (train.skip_nonfinite_steps = N) skips up to N such steps, each said."""

import math

import pytest
import torch

from cli_invocation import assert_one_line_error, invoke
from scalerl.tasks.rollout import Rollout
from scalerl.train import train_step as train_step_module
from scalerl.train.batch.packed_rollouts import pack_rollouts
from scalerl.train.guards.divergence_guard import DivergenceGuard, require_finite_validation
from scalerl.train.records.metrics_log import read_rows
from scalerl.train.guards.finite_checks import DivergenceError, NonFiniteStep, nonfinite_logprobs, require_finite_update
from scalerl.train.trainer import open_run, run_one_step
from scalerl.train.train_step import build_optimizer, build_scheduler, guarded_train_step


def _rollout(logprobs, loss_mask):
    n = len(logprobs)
    return Rollout(prompt_index=0, group_index=0, prompt_token_ids=(1, 2), completion_token_ids=(3,) * n,
                   generator_logprobs=tuple(logprobs), token_policy_versions=(0,) * n, reward=1.0,
                   truncated=False, interrupted=False, completion_text="x" * n, loss_mask=tuple(loss_mask))


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
    stats = guarded_train_step(guard, 3, model, optimizer, scheduler, _batch([-1.0], [1]), tiny_config())
    assert not stats.updated and math.isnan(stats.loss) and math.isnan(stats.grad_norm)
    assert stats.nonfinite.startswith("warning: step 3: the loss is nan; step skipped")
    assert "1 of train.skip_nonfinite_steps=1" in stats.nonfinite
    assert scheduler.last_epoch == 1  # the schedule advanced as for a filtered-out step
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    with pytest.raises(DivergenceError, match="step 4: the loss is nan; the run stopped before applying it"):
        guarded_train_step(guard, 4, model, optimizer, scheduler, _batch([-1.0], [1]), tiny_config())
    with pytest.raises(DivergenceError, match="--set train.skip_nonfinite_steps=N"):
        guarded_train_step(DivergenceGuard(allowed=0), 1, model, optimizer, scheduler, _batch([-1.0], [1]),
                           tiny_config())


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


@pytest.mark.slow  # trains until the weights blow up (~20-60 s on 2 shared cores)
def test_a_huge_learning_rate_ends_in_one_error_not_a_good_looking_run(tiny_set_options, tmp_path):
    out = tmp_path / "run"
    result = invoke("train", "--out", out, *tiny_set_options("optim.lr=1e10", "optim.warmup_steps=0"),
                    "--max-steps", "6", "--no-progress")
    assert_one_line_error(result, "step ", "not finite", "the run stopped before applying it")
    rows = read_rows(out / "metrics.jsonl")
    assert all(value is None or not isinstance(value, float) or math.isfinite(value)
               for row in rows for key, value in row.items() if key not in ("entropy", "mean_ratio"))
    assert rows[-1]["step"] < 6 and "trained" not in result.stdout
