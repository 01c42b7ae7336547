"""The checks of one optimiser step for numbers that are not finite (NaN, +-inf).

A step is refused before the optimiser applies it when the policy's generation log-probs
(sampled tokens), the loss, the gradient norm or a weight is not finite: `NonFiniteStep`
names the quantity. What the run then does (stop with a DivergenceError, or skip the step) is
scalerl.train.guards.divergence_guard's.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np
import torch

from scalerl.train.batch.packed_rollouts import PackedRollouts
from scalerl.errors import ScaleRLError


class DivergenceError(ScaleRLError):
    """The run computed a non-finite number it may not skip (or would checkpoint one): it stops."""


class NonFiniteStep(ScaleRLError):
    """A step computed a non-finite quantity; `quantity` names it (e.g. 'the loss is nan')."""

    def __init__(self, quantity: str) -> None:
        super().__init__(quantity)
        self.quantity = quantity


def nonfinite_logprobs(packed: PackedRollouts) -> str | None:
    """What is wrong with the generation log-probs, or None: NaN anywhere, or +-inf on a token the
    policy sampled (loss_mask 1; a forced token may be impossible under the policy). Read from the
    batch's flat buffers, as they are."""
    logprobs, sampled = packed.logprobs.astype(np.float64, copy=False), packed.loss_mask > 0
    bad = np.isnan(logprobs) | (~np.isfinite(logprobs) & sampled)
    if not bad.any():
        return None
    return (f"the policy's generation log-probs are not finite ({int(bad.sum())} of {bad.size} tokens, "
            f"first {float(logprobs[bad][0])!r})")


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


def require_finite_update(loss: float | torch.Tensor, grad_norm: float | torch.Tensor,
                          model: torch.nn.Module) -> None:
    """NonFiniteStep when the loss, the gradient norm (before clipping) or a weight is not finite:
    called between backward/clip and optimizer.step, so nothing is applied."""
    loss_value, norm_value = float(loss), float(grad_norm)
    if not math.isfinite(loss_value):
        raise NonFiniteStep(f"the loss is {loss_value!r}")
    if not math.isfinite(norm_value):
        raise NonFiniteStep(f"the gradient norm is {norm_value!r}")
    problem = nonfinite_parameter(model.named_parameters())
    if problem is not None:
        raise NonFiniteStep(problem)
