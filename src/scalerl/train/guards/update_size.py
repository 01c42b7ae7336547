"""The size of the update an AdamW step is about to apply, computed before it is applied.

A learning rate far too large does not always produce a NaN: it can move every weight by about
lr (AdamW's normalised step) and leave finite weights of 1e30 that a run would checkpoint and
export. `update_problem` computes the step's update from the optimiser's state and the gradients
(nothing is changed) and names what is out of bounds: a learning rate that is not finite or not
below `MAX_LR` (scalerl.train.config.optimiser_config's bound), or an update larger than `MAX_RELATIVE_UPDATE` times
the weights it changes (Euclidean norms over every parameter the step updates). A healthy step
changes the weights by a small fraction of their norm (0.07-0.13 at lr 1e-2 on the test's
one-layer model, far less at the usual 1e-6 to 1e-4); an update as large as the weights replaces
them. scalerl.train.guards.finite_checks' checks and this one run between backward and `optimizer.step`.
"""

from __future__ import annotations

import math

import torch

from scalerl.train.config.optimiser_config import MAX_LR

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
