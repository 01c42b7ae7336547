"""Gradient accumulation over micro-batches that gives the whole batch's gradient: the aggregation's
normalisers are taken from the whole batch, then each micro-batch back-propagates its share.

Every registered aggregation is linear in the token loss, L = sum_{i,t} w_it * l_it, with weights
that depend only on the whole batch's mask and prompt groups (token: 1 / #tokens; sample:
1 / (N' |y_i|); prompt: 1 / (P' #tokens of i's group)). Every registered loss gives sequence i's
token losses from sequence i alone, so sum over micro-batches b of sum_{i in b, t} w_it * l_it is
L itself, and so is the sum of the micro-batches' gradients.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from scalerl.errors import InputError


def aggregation_token_weights(
    aggregation: Callable[..., torch.Tensor], mask: torch.Tensor, group_ids: torch.Tensor
) -> torch.Tensor:
    """The weights w [N, T] with aggregation(l, mask, group_ids) = sum_{i,t} w_it * l_it.

    For an aggregation linear in the token loss l, w = dL/dl, read off by differentiating it once
    at l = 0 (float64, so the weights carry no rounding of their own). Zero on padding.
    """
    token_loss = torch.zeros(mask.shape, dtype=torch.float64, device=mask.device, requires_grad=True)
    total = aggregation(token_loss, mask.to(torch.float64), group_ids)
    (weights,) = torch.autograd.grad(total, token_loss, allow_unused=True)
    return torch.zeros_like(token_loss).detach() if weights is None else weights.detach()


def micro_batch_slices(num_sequences: int, micro_batch_size: int) -> list[slice]:
    """Consecutive slices of at most `micro_batch_size` sequences covering 0..num_sequences
    (micro_batch_size 0: one slice, the whole batch)."""
    if num_sequences < 0 or micro_batch_size < 0:
        raise InputError(f"cannot split {num_sequences} sequences into micro-batches of {micro_batch_size}")
    size = micro_batch_size if micro_batch_size > 0 else max(num_sequences, 1)
    return [slice(start, min(start + size, num_sequences)) for start in range(0, num_sequences, size)]


@dataclass
class AccumulatedStats:
    """Running sums over micro-batches: the back-propagated loss (sum of the micro-batches' shares,
    equal to the whole batch's aggregated loss), the entropy summed over real tokens, and the loss
    diagnostics weighted by each micro-batch's real tokens."""

    loss: float = 0.0
    entropy_sum: float = 0.0
    tokens: float = 0.0
    ratio_sum: float = 0.0
    clipped_sum: float = 0.0

    def add(self, loss: float, entropy_sum: float, tokens: float, mean_ratio: float, clipped_fraction: float) -> None:
        """One micro-batch: its loss share, its summed token entropy, its real-token count and the
        loss function's mean ratio and clipped fraction on it."""
        self.loss += loss
        self.entropy_sum += entropy_sum
        self.tokens += tokens
        if tokens > 0:
            self.ratio_sum += mean_ratio * tokens
            self.clipped_sum += clipped_fraction * tokens

    def means(self) -> tuple[float, float, float]:
        """(entropy, mean_ratio, clipped_fraction) over the real tokens of every micro-batch
        (nan, nan, 0 without any)."""
        if self.tokens <= 0:
            return float("nan"), float("nan"), 0.0
        return self.entropy_sum / self.tokens, self.ratio_sum / self.tokens, self.clipped_sum / self.tokens
