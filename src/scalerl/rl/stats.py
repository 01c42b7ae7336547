"""Diagnostics of a training batch: masked means, token entropy, importance-ratio statistics.

All functions take padded [N, T] tensors with a `mask` (1 for real completion tokens) and ignore
padding completely, even when padding holds inf or nan.
"""

from __future__ import annotations

import torch

from scalerl.errors import InputError


def as_float_mask(mask: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """`mask` (bool or 0/1) as a float tensor of `like`'s dtype and device, checked for shape."""
    if mask.shape != like.shape:
        raise InputError(f"mask has shape {tuple(mask.shape)}, expected {tuple(like.shape)}")
    return mask.to(device=like.device, dtype=like.dtype if like.is_floating_point() else torch.float32)


def masked_fill_padding(values: torch.Tensor, mask: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
    """`values` with padding positions replaced by `fill` (safe against inf/nan in padding)."""
    return torch.where(mask.bool(), values, torch.full_like(values, fill))


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of `values` over positions where `mask` is set.

        masked_mean = sum(values * mask) / max(sum(mask), 1)

    With `dim`, the mean is taken along that dimension only. Rows without any real token give 0
    (not nan), so an empty row never poisons a later sum.
    """
    float_mask = as_float_mask(mask, values)
    masked_values = masked_fill_padding(values, float_mask) * float_mask
    if dim is None:
        return masked_values.sum() / float_mask.sum().clamp(min=1.0)
    return masked_values.sum(dim) / float_mask.sum(dim).clamp(min=1.0)


def token_entropy(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean entropy (nats) of the sampling distribution over real completion tokens.

        H_t = -sum_v p_t(v) log p_t(v),  p_t = softmax(logits_t)   (computed in float32)
        token_entropy = masked_mean(H_t, mask)

    `logits` is [N, T, V], `mask` [N, T]. Gradients flow through; wrap the call in
    `torch.no_grad()` when it is only logged (it materialises a float32 copy of the logits).
    """
    if logits.dim() != 3 or logits.shape[:2] != mask.shape:
        raise InputError(f"logits must be [N, T, V] matching mask {tuple(mask.shape)}, got {tuple(logits.shape)}")
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    entropy_per_token = -(log_probs.exp() * log_probs).sum(dim=-1)
    return masked_mean(entropy_per_token, mask)


def masked_fraction(condition: torch.Tensor, mask: torch.Tensor) -> float:
    """Fraction of real tokens where the bool `condition` holds (0.0 when there is no token)."""
    return float(masked_mean(condition.float(), mask).detach())


def importance_ratio_stats(
    logprobs: torch.Tensor, generator_logprobs: torch.Tensor, mask: torch.Tensor
) -> dict[str, float]:
    """Statistics of the token ratio rho_t = exp(logp_t - generator_logp_t) over real tokens.

    Returns `ratio_mean`, `ratio_min`, `ratio_max` and `generator_kl`, the k3 estimate of
    KL(pi_gen || pi_theta) = E_gen[rho - 1 - log rho] (Schulman, "Approximating KL divergence",
    2020), which measures the generator/trainer mismatch (e.g. without an FP32 LM head).
    """
    with torch.no_grad():
        float_mask = as_float_mask(mask, logprobs)
        log_ratio = masked_fill_padding(logprobs.float() - generator_logprobs.float(), float_mask)
        ratio = log_ratio.exp()
        real = float_mask.bool()
        if not bool(real.any()):
            return {"ratio_mean": 1.0, "ratio_min": 1.0, "ratio_max": 1.0, "generator_kl": 0.0}
        return {
            "ratio_mean": float(masked_mean(ratio, float_mask)),
            "ratio_min": float(ratio[real].min()),
            "ratio_max": float(ratio[real].max()),
            "generator_kl": float(masked_mean(ratio - 1.0 - log_ratio, float_mask)),
        }
