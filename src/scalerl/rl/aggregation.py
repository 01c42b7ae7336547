"""Loss aggregation: how a padded [N, T] token loss becomes the scalar that is back-propagated.

Source: ScaleRL (arXiv 2510.13786, section 3, "loss aggregation"). Sequences or prompt groups
without any real token (e.g. dropped by the zero-variance filter through the mask) are left out
of every average instead of counting as zero. With no real token at all the result is a zero
that is still connected to the graph, so `backward()` works and gives zero gradients.
"""

from __future__ import annotations

import torch

from scalerl.errors import InputError
from scalerl.rl.stats import as_float_mask


def _masked_token_loss(token_loss: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if token_loss.dim() != 2:
        raise InputError(f"token_loss must be [N, T], got shape {tuple(token_loss.shape)}")
    float_mask = as_float_mask(mask, token_loss)
    return token_loss * float_mask, float_mask


def _mean_over_nonempty(sums: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """mean_k sums_k / counts_k over the k with counts_k > 0 (a graph-connected 0 if none)."""
    nonempty = counts > 0
    per_unit = sums / counts.clamp(min=1.0)
    return (per_unit * nonempty).sum() / nonempty.sum().clamp(min=1)


def token_mean(token_loss: torch.Tensor, mask: torch.Tensor, group_ids: torch.Tensor | None = None) -> torch.Tensor:
    """Token-level average (DAPO, arXiv 2503.14476).

        L = sum_{i,t} mask_it * l_it / sum_{i,t} mask_it

    Every token of the batch weighs the same, so long sequences weigh more. `group_ids` unused.
    """
    masked_loss, float_mask = _masked_token_loss(token_loss, mask)
    return masked_loss.sum() / float_mask.sum().clamp(min=1.0)


def sample_mean(token_loss: torch.Tensor, mask: torch.Tensor, group_ids: torch.Tensor | None = None) -> torch.Tensor:
    """Sample-level average (GRPO, DeepSeekMath arXiv 2402.03300).

        L = (1 / N') sum_i ( sum_t mask_it * l_it / sum_t mask_it )

    N' = number of sequences with at least one real token. `group_ids` unused.
    """
    masked_loss, float_mask = _masked_token_loss(token_loss, mask)
    return _mean_over_nonempty(masked_loss.sum(dim=1), float_mask.sum(dim=1))


def prompt_mean(token_loss: torch.Tensor, mask: torch.Tensor, group_ids: torch.Tensor | None = None) -> torch.Tensor:
    """Prompt-level average (ScaleRL's choice, arXiv 2510.13786).

        L = (1 / P') sum_g ( sum_{i in g, t} mask_it * l_it / sum_{i in g, t} mask_it )

    Tokens are averaged within each prompt's group of generations, then groups are averaged.
    P' = number of groups with at least one real token. `group_ids` [N] (any integers) is required.
    """
    masked_loss, float_mask = _masked_token_loss(token_loss, mask)
    if group_ids is None or group_ids.shape != (token_loss.shape[0],):
        raise InputError(f"prompt aggregation needs group_ids of shape [{token_loss.shape[0]}]")
    if token_loss.shape[0] == 0:
        return masked_loss.sum()
    _, group_of_sequence = torch.unique(group_ids.to(token_loss.device), return_inverse=True)
    num_groups = int(group_of_sequence.max()) + 1
    zeros = torch.zeros(num_groups, dtype=masked_loss.dtype, device=masked_loss.device)
    group_sums = zeros.index_add(0, group_of_sequence, masked_loss.sum(dim=1))
    group_counts = zeros.index_add(0, group_of_sequence, float_mask.sum(dim=1))
    return _mean_over_nonempty(group_sums, group_counts)
