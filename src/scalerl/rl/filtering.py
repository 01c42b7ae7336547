"""Zero-variance filtering: drop prompts whose generations all got the same reward.

Source: ScaleRL (arXiv 2510.13786, section 3): such a group has all centred advantages equal to
zero, so it carries no gradient but still dilutes the loss average; the paper drops these prompts
from the loss (the effective batch shrinks) and does not resample replacements.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from scalerl.errors import InputError


@dataclass(frozen=True)
class KeptPrompts:
    """How many prompt groups survived the filter: `kept` of `total` (and the sequences kept)."""

    kept: int
    total: int
    kept_sequences: int

    @property
    def kept_fraction(self) -> float:
        return self.kept / self.total if self.total else 0.0


def zero_variance_keep_mask(
    rewards: torch.Tensor, group_ids: torch.Tensor, *, reward_tolerance: float = 1e-6
) -> torch.Tensor:
    """Bool [N]: False for every sequence of a group whose rewards all agree.

        keep_i = (max_{j in g(i)} r_j - min_{j in g(i)} r_j) > reward_tolerance

    A group of a single sequence has zero variance and is dropped too.
    """
    if rewards.dim() != 1 or group_ids.shape != rewards.shape:
        raise InputError(
            f"rewards and group_ids must both be [N]; got {tuple(rewards.shape)} and {tuple(group_ids.shape)}"
        )
    if rewards.numel() == 0:
        return torch.zeros(0, dtype=torch.bool, device=rewards.device)
    rewards = rewards.detach().float()
    _, group_of_sequence = torch.unique(group_ids.to(rewards.device), return_inverse=True)
    num_groups = int(group_of_sequence.max()) + 1
    group_max = torch.full((num_groups,), -torch.inf, device=rewards.device)
    group_max = group_max.scatter_reduce(0, group_of_sequence, rewards, reduce="amax")
    group_min = torch.full((num_groups,), torch.inf, device=rewards.device)
    group_min = group_min.scatter_reduce(0, group_of_sequence, rewards, reduce="amin")
    group_has_signal = (group_max - group_min) > reward_tolerance
    return group_has_signal[group_of_sequence]


def count_kept_prompts(keep_mask: torch.Tensor, group_ids: torch.Tensor) -> KeptPrompts:
    """Count the groups with at least one kept sequence, out of all groups in `group_ids`."""
    if keep_mask.shape != group_ids.shape:
        raise InputError(f"keep_mask {tuple(keep_mask.shape)} and group_ids {tuple(group_ids.shape)} differ in shape")
    keep = keep_mask.bool()
    return KeptPrompts(
        kept=int(torch.unique(group_ids[keep]).numel()),
        total=int(torch.unique(group_ids).numel()),
        kept_sequences=int(keep.sum()),
    )
