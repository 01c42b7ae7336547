"""The checks of one optimiser step for numbers that are not finite (NaN, +-inf) or out of range.

A step is refused before the optimiser applies it when the policy's generation log-probs
(sampled tokens) are not finite or out of their range, the loss is not finite or beyond
`MAX_ABS_LOSS`, the gradient norm or a weight is not finite, or the update it would apply is out
of bounds (scalerl.train.guards.update_size): `NonFiniteStep` names the quantity. What the run then
does (stop with a DivergenceError, or skip the step) is scalerl.train.guards.divergence_guard's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import torch

from scalerl.errors import ScaleRLError
from scalerl.train.batch.packed_rollouts import PackedRollouts
from scalerl.train.guards.update_size import update_problem

# A sampled token's log-prob lies in [MIN_SAMPLED_LOGPROB, MAX_LOGPROB]: a token sampled at all had a
# probability of at least float32's smallest (log ~ -104), and a log-prob is at most 0 (the
# tolerance covers rounding); -1000 or below comes from logits of a blown-up policy.
MIN_SAMPLED_LOGPROB, MAX_LOGPROB = -1000.0, 1e-3
MAX_ABS_LOSS = 1e6  # the loss is a mean of ratio x advantage terms: O(1) for a healthy policy


class DivergenceError(ScaleRLError):
    """The run computed a non-finite number it may not skip (or would checkpoint one): it stops."""


class NonFiniteStep(ScaleRLError):
    """A step computed a non-finite quantity; `quantity` names it (e.g. 'the loss is nan')."""

    def __init__(self, quantity: str) -> None:
        super().__init__(quantity)
        self.quantity = quantity


def nonfinite_logprobs(packed: PackedRollouts) -> str | None:
    """What is wrong with the generation log-probs, or None: NaN anywhere, or +-inf on a token the
    policy sampled (loss_mask 1; a forced token may be impossible under the policy); then a
    sampled token's log-prob outside [MIN_SAMPLED_LOGPROB, MAX_LOGPROB]. Read from the batch's
    flat buffers, as they are."""
    logprobs, sampled = packed.logprobs.astype(np.float64, copy=False), packed.loss_mask > 0
    bad = np.isnan(logprobs) | (~np.isfinite(logprobs) & sampled)
    if bad.any():
        return (
            f"the policy's generation log-probs are not finite ({int(bad.sum())} of {bad.size} tokens, "
            f"first {float(logprobs[bad][0])!r})"
        )
    out_of_range = ((logprobs > MAX_LOGPROB) | (logprobs < MIN_SAMPLED_LOGPROB)) & sampled
    if out_of_range.any():
        return (
            f"the policy's generation log-probs are out of range ({int(out_of_range.sum())} of "
            f"{out_of_range.size} tokens outside [{MIN_SAMPLED_LOGPROB:g}, 0], first "
            f"{float(logprobs[out_of_range][0]):.4g})"
        )
    return None


def nonfinite_parameter(named_parameters: Iterable[tuple[str, torch.Tensor]], kind: str = "weight") -> str | None:
    """The first tensor holding a NaN or an infinity, as '`kind` NAME is not finite', or None.
    One device synchronisation for all the tensors."""
    named = [(name, tensor) for name, tensor in named_parameters]
    if not named:
        return None
    flags = torch.stack([torch.isfinite(tensor.detach()).all() for _, tensor in named]).cpu().tolist()
    for (name, _), finite in zip(named, flags):
        if not finite:
            return f"{kind} {name} is not finite"
    return None


def require_finite_rollouts(rollouts: PackedRollouts) -> None:
    """NonFiniteStep when the generation log-probs are not finite (the policy's forward is)."""
    problem = nonfinite_logprobs(rollouts)
    if problem is not None:
        raise NonFiniteStep(problem)


def require_finite_update(loss: float | torch.Tensor, grad_norm: float | torch.Tensor, model: torch.nn.Module) -> None:
    """NonFiniteStep when the loss is not finite or beyond +-MAX_ABS_LOSS, or the gradient norm
    (before clipping) or a weight is not finite: called between backward/clip and optimizer.step,
    so nothing is applied."""
    loss_value, norm_value = float(loss), float(grad_norm)
    if not math.isfinite(loss_value):
        raise NonFiniteStep(f"the loss is {loss_value!r}")
    if abs(loss_value) > MAX_ABS_LOSS:
        raise NonFiniteStep(f"the loss is {loss_value:.4g}, beyond +-{MAX_ABS_LOSS:g} (a blow-up)")
    if not math.isfinite(norm_value):
        raise NonFiniteStep(f"the gradient norm is {norm_value!r}")
    problem = nonfinite_parameter(model.named_parameters())
    if problem is not None:
        raise NonFiniteStep(problem)


def require_bounded_step(optimizer: torch.optim.Optimizer) -> None:
    """NonFiniteStep when the step `optimizer` is about to take is out of bounds (its learning
    rate, or the update's size against the weights': scalerl.train.guards.update_size); nothing changes."""
    problem = update_problem(optimizer)
    if problem is not None:
        raise NonFiniteStep(problem)
