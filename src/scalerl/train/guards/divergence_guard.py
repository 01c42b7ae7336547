"""What a run does with a step that computed a non-finite number (scalerl.train.guards.finite_checks).

By default the run stops: `DivergenceError` names the step and the quantity, nothing of the step
is applied, and no checkpoint is written after it (the run keeps its last checkpoint, whose
weights are finite: a checkpoint is never written from non-finite tensors). With
`train.skip_nonfinite_steps = N` up to N such steps of one process are skipped instead (no optimiser
update, the LR schedule advances as for a step the filter left empty), each said in a warning;
the next one stops the run. The synchronous trainer and the pipeline's trainer actor both step
through `guarded_train_step`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from scalerl.tasks.rollout import Rollout
from scalerl.train.config.train_config import TrainConfig
from scalerl.train.guards.finite_checks import DivergenceError, NonFiniteStep
from scalerl.train.train_step import StepStats, rewards_and_groups, train_step

SKIP_KEY = "train.skip_nonfinite_steps"
__all__ = ["DivergenceError", "DivergenceGuard", "guard_for", "guarded_train_step", "require_finite_validation"]


@dataclass
class DivergenceGuard:
    """Counts the steps skipped for non-finite numbers against `allowed` (train.skip_nonfinite_steps)."""

    allowed: int
    skipped: int = 0

    def admit(self, step: int, error: NonFiniteStep) -> str:
        """The warning of skipping step `step`, or DivergenceError when no skip is left."""
        if self.skipped >= self.allowed:
            allowance = (f"{self.allowed} such step(s) were skipped already" if self.allowed
                         else f"lower optim.lr, or allow skipping with --set {SKIP_KEY}=N")
            raise DivergenceError(
                f"step {step}: {error.quantity}; the run stopped before applying it (checkpoints written "
                f"so far are kept; {allowance})")
        self.skipped += 1
        return (f"warning: step {step}: {error.quantity}; step skipped, no update applied "
                f"({self.skipped} of {SKIP_KEY}={self.allowed})")


def guarded_train_step(guard: DivergenceGuard, step: int, model: torch.nn.Module,
                       optimizer: torch.optim.Optimizer, scheduler: Any, rollouts: Sequence[Rollout],
                       config: TrainConfig, reference: torch.nn.Module | None = None) -> StepStats:
    """`train_step` for step `step`; a non-finite step is skipped (its StepStats say why in
    `nonfinite`, loss and gradient norm NaN, not updated) or stops the run (DivergenceError)."""
    try:
        return train_step(model, optimizer, scheduler, rollouts, config, reference=reference)
    except NonFiniteStep as error:
        optimizer.zero_grad(set_to_none=True)
        note = guard.admit(step, error)
    lr = float(optimizer.param_groups[0]["lr"])
    with warnings.catch_warnings():  # stepping the schedule without an optimiser step is intended
        warnings.simplefilter("ignore", UserWarning)
        scheduler.step()
    nan = float("nan")
    return StepStats(loss=nan, grad_norm=nan, lr=lr, entropy=nan, mean_ratio=nan, clipped_fraction=0.0,
                     kept_prompts=0, total_prompts=int(rewards_and_groups(rollouts)[1].unique().numel()),
                     kept_sequences=0, tokens_trained=0, trained_context_sum=0, updated=False, nonfinite=note)


def guard_for(config: TrainConfig) -> DivergenceGuard:
    """The guard of a run's config (train.skip_nonfinite_steps)."""
    return DivergenceGuard(allowed=config.train.skip_nonfinite_steps)


def require_finite_validation(step: int, pass_rate: float) -> float:
    """`pass_rate` when it is a finite number; DivergenceError naming step `step` otherwise
    (a validation row never holds NaN silently)."""
    if not math.isfinite(float(pass_rate)):
        raise DivergenceError(f"step {step}: the validation pass rate is {pass_rate!r}; the run stopped "
                              "(checkpoints written so far are kept)")
    return pass_rate
