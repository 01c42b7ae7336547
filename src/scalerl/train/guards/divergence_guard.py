"""The guard of one optimiser step against divergence: its checks, and what the run does when one fails.

The checks. A step is refused before the optimiser applies it when the policy's generation
log-probs (sampled tokens) are not finite or out of their range, the loss is not finite or beyond
`MAX_ABS_LOSS`, the gradient norm or a weight is not finite, or the update it would apply is out
of bounds: `NonFiniteStep` names the quantity. A learning rate far too large does not always
produce a NaN: it can move every weight by about lr (AdamW's normalised step) and leave finite
weights of 1e30 that a run would checkpoint and export. `update_problem` computes the step's
update from the optimiser's state and the gradients (nothing is changed) and names what is out of
bounds: a learning rate that is not finite or not below `MAX_LR` (scalerl.train.config.optimiser_config's
bound), or an update larger than `MAX_RELATIVE_UPDATE` times the weights it changes (Euclidean norms
over every parameter the step updates). A healthy step changes the weights by a small fraction of
their norm (0.07-0.13 at lr 1e-2 on the test's one-layer model, far less at the usual 1e-6 to
1e-4); an update as large as the weights replaces them. The checks run between backward and
`optimizer.step`.

What the run does. By default it stops: `DivergenceError` names the step and the quantity, nothing
of the step is applied, and no checkpoint is written after it (the run keeps its last checkpoint,
whose weights are finite: a checkpoint is never written from non-finite tensors). With
`train.skip_nonfinite_steps = N` up to N such steps of one process are skipped instead (no
optimiser update, the LR schedule advances as for a step the filter left empty), each said in a
warning; the next one stops the run. The synchronous trainer and the pipeline's trainer actor both
step through scalerl.train.train_step.guarded_train_step, which asks a `DivergenceGuard` here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch

from scalerl.errors import ScaleRLError
from scalerl.train.batch.packed_rollouts import PackedRollouts
from scalerl.train.config.optimiser_config import MAX_LR
from scalerl.train.config.train_config import TrainConfig

SKIP_KEY = "train.skip_nonfinite_steps"
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
    rate, or the update's size against the weights': update_problem); nothing changes."""
    problem = update_problem(optimizer)
    if problem is not None:
        raise NonFiniteStep(problem)


MAX_RELATIVE_UPDATE = 1.0  # ||update|| / ||weights|| of one step
_CHUNK = 1 << 24  # elements of one tensor handled at a time (bounded scratch memory)


def adamw_update_norms(optimizer: torch.optim.AdamW) -> tuple[float, float]:
    """(||update||, ||weights||) of the AdamW step `optimizer.step()` would take now.

    torch.optim.AdamW (amsgrad off), step t = the parameter's step count + 1, gradient g:
        m = beta1 m + (1 - beta1) g,   v = beta2 v + (1 - beta2) g^2
        update = -lr wd w - lr (m / (1 - beta1^t)) / (sqrt(v) / sqrt(1 - beta2^t) + eps)
    (Loshchilov & Hutter, arXiv 1711.05101). Parameters without a gradient are not updated and
    not counted. Computed in float32 in place, `_CHUNK` elements at a time; one device synchronisation."""
    update_sq: list[torch.Tensor] = []
    weight_sq: list[torch.Tensor] = []
    for group in optimizer.param_groups:
        lr, wd, eps = float(group["lr"]), float(group["weight_decay"]), float(group["eps"])
        beta1, beta2 = group["betas"]
        for param in group["params"]:
            if param.grad is None:
                continue
            state = optimizer.state.get(param, {})
            t = float(state["step"]) + 1 if "step" in state else 1.0
            correction1, correction2_sqrt = 1 - beta1**t, math.sqrt(1 - beta2**t)
            pieces = [param.detach().reshape(-1), param.grad.detach().reshape(-1)]
            if "exp_avg" in state:
                pieces += [state["exp_avg"].reshape(-1), state["exp_avg_sq"].reshape(-1)]
            for chunk in zip(*(piece.split(_CHUNK) for piece in pieces)):
                weight, grad = chunk[0].float(), chunk[1].float()
                m = grad.mul(1 - beta1)
                v = grad.square().mul_(1 - beta2)
                if len(chunk) == 4:
                    m.add_(chunk[2].float(), alpha=beta1)
                    v.add_(chunk[3].float(), alpha=beta2)
                update = m.div_(v.sqrt_().div_(correction2_sqrt).add_(eps)).mul_(lr / correction1)
                update.add_(weight, alpha=lr * wd)
                update_sq.append(torch.dot(update, update).double())
                weight_sq.append(torch.dot(weight, weight).double())
    if not update_sq:
        return 0.0, 0.0
    update_total, weight_total = torch.stack([torch.stack(update_sq).sum(), torch.stack(weight_sq).sum()]).cpu()
    return math.sqrt(float(update_total)), math.sqrt(float(weight_total))


def update_problem(optimizer: torch.optim.Optimizer) -> str | None:
    """What is out of bounds in the step `optimizer` is about to take, or None: a learning rate
    not finite or >= MAX_LR, or (AdamW) an update norm above MAX_RELATIVE_UPDATE x the weights'
    norm. Nothing of the optimiser or the weights is changed."""
    for group in optimizer.param_groups:
        lr = float(group["lr"])
        if not (math.isfinite(lr) and 0 <= lr < MAX_LR):
            return f"the learning rate is {lr!r}, not a finite number below {MAX_LR}"
    if not isinstance(optimizer, torch.optim.AdamW):
        return None
    update_norm, weight_norm = adamw_update_norms(optimizer)
    if not math.isfinite(update_norm):
        return f"the update's norm is {update_norm!r}"
    if weight_norm > 0 and update_norm > MAX_RELATIVE_UPDATE * weight_norm:
        return (
            f"the update is {update_norm / weight_norm:.3g} times the weights' norm (at most "
            f"{MAX_RELATIVE_UPDATE:g}: a blow-up)"
        )
    return None


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
