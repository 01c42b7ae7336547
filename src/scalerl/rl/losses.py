"""Policy-gradient losses of the ScaleRL recipe and its ablations, as pure torch functions.

Every loss takes padded [N, T] tensors: `logprobs` (current policy, requires grad),
`generator_logprobs` (recorded at sampling time, no grad), `advantages` [N] (one per sequence,
broadcast over its tokens) and `mask` [N, T] (1 for real completion tokens). The importance ratio
is always against the generator's own log-probs: rho_t = exp(logp_t - generator_logp_t).

Sign convention: loss = -objective, so minimising the loss ascends the objective. Each function
returns a `LossOutput` whose `token_loss` is zero on padding; an aggregation from
`scalerl.rl.aggregation` turns it into the scalar to back-propagate.

The parameters (eps_max, eps_low, ...) have no defaults here: their defaults, bounds and meanings
are declared once, in each loss's spec in `scalerl.rl.registry` (`LOSSES[name].kwargs({})` gives
the defaults).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from scalerl.errors import ConfigError, InputError
from scalerl.rl.stats import as_float_mask, masked_fill_padding, masked_fraction, masked_mean


@dataclass(frozen=True)
class LossOutput:
    """Per-token loss and its diagnostics.

    token_loss: [N, T], zero on padding (for sequence-level losses: the sequence loss on each of
        its tokens, see `gspo`). mean_ratio: mean importance ratio over real tokens (GSPO: over
        sequences). clipped_fraction: fraction of real tokens (GSPO: sequences) whose ratio was
        clipped or truncated, i.e. whose gradient differs from the unclipped one.
    """

    token_loss: torch.Tensor
    mean_ratio: float
    clipped_fraction: float


def _check_inputs(
    logprobs: torch.Tensor,
    generator_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
) -> torch.Tensor:
    """Validate shapes; return the float mask."""
    if logprobs.dim() != 2:
        raise InputError(f"logprobs must be [N, T], got shape {tuple(logprobs.shape)}")
    if generator_logprobs.shape != logprobs.shape:
        raise InputError(
            f"generator_logprobs has shape {tuple(generator_logprobs.shape)}, expected {tuple(logprobs.shape)}"
        )
    if advantages.shape != (logprobs.shape[0],):
        raise InputError(f"advantages must be [N] = [{logprobs.shape[0]}], got {tuple(advantages.shape)}")
    return as_float_mask(mask, logprobs)


def _token_log_ratio(
    logprobs: torch.Tensor, generator_logprobs: torch.Tensor, float_mask: torch.Tensor
) -> torch.Tensor:
    """log rho_t = logp_t - generator_logp_t, forced to 0 on padding (no inf/nan leaks)."""
    return masked_fill_padding(logprobs - generator_logprobs.detach(), float_mask)


def _check_positive(name: str, value: float) -> None:
    if not value > 0:
        raise ConfigError(f"{name} must be > 0, got {value}")


def cispo(
    logprobs: torch.Tensor,
    generator_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_max: float,
) -> LossOutput:
    """CISPO, truncated importance-sampling REINFORCE (ScaleRL's default loss).

        J = E_t[ sg(min(rho_t, eps_max)) * A * log pi_theta(y_t) ]
        token_loss_t = -sg(min(rho_t, eps_max)) * A * logp_t

    so the gradient is -min(rho_t, eps_max) * A * grad logp_t: every token keeps a gradient (no
    PPO-style zeroing), only the importance weight is truncated from above.
    Sources: MiniMax-M1 (arXiv 2506.13585), ScaleRL (arXiv 2510.13786, section 4), eps_max in
    {4, 5, 8}. `clipped_fraction` = share of tokens with rho_t > eps_max.
    """
    _check_positive("eps_max", eps_max)
    float_mask = _check_inputs(logprobs, generator_logprobs, advantages, mask)
    ratio = _token_log_ratio(logprobs, generator_logprobs, float_mask).exp()
    weight = ratio.clamp(max=eps_max).detach()
    safe_logprobs = masked_fill_padding(logprobs, float_mask)
    token_loss = -weight * advantages.detach()[:, None] * safe_logprobs * float_mask
    return LossOutput(
        token_loss=token_loss,
        mean_ratio=float(masked_mean(ratio.detach(), float_mask)),
        clipped_fraction=masked_fraction(ratio.detach() > eps_max, float_mask),
    )


def _clipped_surrogate(
    logprobs: torch.Tensor,
    generator_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float,
    eps_high: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Token-level PPO clip: returns (-surrogate masked, ratio, clipped bool, float mask)."""
    _check_positive("eps_low", eps_low)
    _check_positive("eps_high", eps_high)
    float_mask = _check_inputs(logprobs, generator_logprobs, advantages, mask)
    ratio = _token_log_ratio(logprobs, generator_logprobs, float_mask).exp()
    token_advantages = advantages.detach()[:, None]
    unclipped = ratio * token_advantages
    clipped = ratio.clamp(1.0 - eps_low, 1.0 + eps_high) * token_advantages
    surrogate = torch.minimum(unclipped, clipped)
    # A token is "clipped" when the clipped branch is the active (gradient-free) one.
    is_clipped = (clipped < unclipped).detach()
    return -surrogate * float_mask, ratio.detach(), is_clipped, float_mask


def _clipped_loss(
    token_loss: torch.Tensor, ratio: torch.Tensor, is_clipped: torch.Tensor, float_mask: torch.Tensor
) -> LossOutput:
    """A token-clipped loss with its mean ratio and clipped fraction over the real tokens."""
    return LossOutput(
        token_loss=token_loss,
        mean_ratio=float(masked_mean(ratio, float_mask)),
        clipped_fraction=masked_fraction(is_clipped, float_mask),
    )


def dapo(
    logprobs: torch.Tensor,
    generator_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float,
    eps_high: float,
) -> LossOutput:
    """DAPO token-level clipped surrogate with clip-higher (arXiv 2503.14476).

        J = E_t[ min(rho_t A, clip(rho_t, 1 - eps_low, 1 + eps_high) A) ]
        token_loss_t = -min(rho_t A, clip(rho_t, 1 - eps_low, 1 + eps_high) A)

    The upper bound is wider than the lower one (0.28 vs 0.2) so low-probability tokens with a
    positive advantage can grow. Pair with `token` aggregation for the paper's setting.
    """
    return _clipped_loss(*_clipped_surrogate(logprobs, generator_logprobs, advantages, mask, eps_low, eps_high))


def grpo(
    logprobs: torch.Tensor,
    generator_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps: float,
    kl_coef: float,
    ref_logprobs: torch.Tensor | None = None,
) -> LossOutput:
    """GRPO clipped surrogate with a symmetric clip (DeepSeekMath, arXiv 2402.03300).

        J = E_t[ min(rho_t A, clip(rho_t, 1 - eps, 1 + eps) A) - kl_coef * KL_t ]
        KL_t = exp(ref_t - logp_t) - (ref_t - logp_t) - 1      (k3 estimator, >= 0)
        token_loss_t = -J_t

    kl_coef = 0 turns the KL term off (the spec's default: ScaleRL uses no KL penalty); with
    `kl_coef` > 0 the reference policy's log-probs `ref_logprobs` [N, T] are required.
    """
    if kl_coef < 0:
        raise ConfigError(f"kl_coef must be >= 0, got {kl_coef}")
    token_loss, ratio, is_clipped, float_mask = _clipped_surrogate(
        logprobs, generator_logprobs, advantages, mask, eps, eps
    )
    if kl_coef > 0:
        if ref_logprobs is None or ref_logprobs.shape != logprobs.shape:
            raise InputError("grpo with kl_coef > 0 needs ref_logprobs of the same shape as logprobs")
        ref_minus_policy = masked_fill_padding(ref_logprobs.detach() - logprobs, float_mask)
        kl_per_token = ref_minus_policy.exp() - ref_minus_policy - 1.0
        token_loss = token_loss + kl_coef * kl_per_token * float_mask
    return _clipped_loss(token_loss, ratio, is_clipped, float_mask)


def gspo(
    logprobs: torch.Tensor,
    generator_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float,
    eps_high: float,
) -> LossOutput:
    """GSPO, sequence-level clipped surrogate (arXiv 2507.18071).

        s_i = exp( mean_{t in y_i} (logp_t - generator_logp_t) )        (length-normalised ratio)
        J_i = min(s_i A_i, clip(s_i, 1 - eps_low, 1 + eps_high) A_i)
        token_loss_{i,t} = -J_i   for every real token t of sequence i

    Each real token carries its whole sequence's loss, so the mean over a sequence's tokens is
    -J_i: `sample` aggregation gives GSPO's (1/G) sum_i J_i exactly, while `token` and `prompt`
    aggregation weight sequences by their length. Values and gradients equal those of the
    paper's GSPO-token form with A_{i,t} = A_i (grad of -J_i per token is s_i A_i grad logp_t / |y_i|).
    `mean_ratio` and `clipped_fraction` are over sequences with at least one real token.
    """
    _check_positive("eps_low", eps_low)
    _check_positive("eps_high", eps_high)
    float_mask = _check_inputs(logprobs, generator_logprobs, advantages, mask)
    log_ratio = _token_log_ratio(logprobs, generator_logprobs, float_mask)
    sequence_ratio = masked_mean(log_ratio, float_mask, dim=1).exp()
    sequence_advantages = advantages.detach()
    unclipped = sequence_ratio * sequence_advantages
    clipped = sequence_ratio.clamp(1.0 - eps_low, 1.0 + eps_high) * sequence_advantages
    sequence_objective = torch.minimum(unclipped, clipped)
    token_loss = -sequence_objective[:, None] * float_mask
    has_tokens = float_mask.sum(dim=1) > 0
    return LossOutput(
        token_loss=token_loss,
        mean_ratio=float(masked_mean(sequence_ratio.detach(), has_tokens)),
        clipped_fraction=float(masked_mean((clipped < unclipped).detach().float(), has_tokens)),
    )
