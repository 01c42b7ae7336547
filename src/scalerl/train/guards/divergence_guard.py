"""What a run does with a step that computed a non-finite number or would apply an update out of
bounds (scalerl.train.guards.finite_checks, scalerl.train.guards.update_size).

By default the run stops: `DivergenceError` names the step and the quantity, nothing of the step
is applied, and no checkpoint is written after it (the run keeps its last checkpoint, whose
weights are finite: a checkpoint is never written from non-finite tensors). With
`train.skip_nonfinite_steps = N` up to N such steps of one process are skipped instead (no optimiser
update, the LR schedule advances as for a step the filter left empty), each said in a warning;
the next one stops the run. The synchronous trainer and the pipeline's trainer actor both step
through scalerl.train.train_step.guarded_train_step, which asks a `DivergenceGuard` here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scalerl.train.config.train_config import TrainConfig
from scalerl.train.guards.finite_checks import DivergenceError, NonFiniteStep

SKIP_KEY = "train.skip_nonfinite_steps"
__all__ = ["DivergenceError", "DivergenceGuard", "guard_for", "require_finite_validation"]


@dataclass
class DivergenceGuard:
    """Counts the steps skipped for non-finite numbers against `allowed` (train.skip_nonfinite_steps)."""

    allowed: int
    skipped: int = 0

    def admit(self, step: int, error: NonFiniteStep) -> str:
        """The warning of skipping step `step`, or DivergenceError when no skip is left."""
        if self.skipped >= self.allowed:
            allowance = (
                f"{self.allowed} such step(s) were skipped already"
                if self.allowed
                else f"lower optim.lr, or allow skipping with --set {SKIP_KEY}=N"
            )
            raise DivergenceError(
                f"step {step}: {error.quantity}; the run stopped before applying it (checkpoints written "
                f"so far are kept; {allowance})"
            )
        self.skipped += 1
        return (
            f"warning: step {step}: {error.quantity}; step skipped, no update applied "
            f"({self.skipped} of {SKIP_KEY}={self.allowed})"
        )


def guard_for(config: TrainConfig) -> DivergenceGuard:
    """The guard of a run's config (train.skip_nonfinite_steps)."""
    return DivergenceGuard(allowed=config.train.skip_nonfinite_steps)


def require_finite_validation(step: int, pass_rate: float) -> float:
    """`pass_rate` when it is a finite number; DivergenceError naming step `step` otherwise
    (a validation row never holds NaN silently)."""
    if not math.isfinite(float(pass_rate)):
        raise DivergenceError(
            f"step {step}: the validation pass rate is {pass_rate!r}; the run stopped "
            "(checkpoints written so far are kept)"
        )
    return pass_rate
