"""Group-relative advantages and their normalisation (one advantage per sequence).

Source: ScaleRL (arXiv 2510.13786, section 3): A_i = r_i - mean(r over the prompt's group),
divided by the standard deviation of those centred advantages over the whole batch; the GRPO
alternative (DeepSeekMath, arXiv 2402.03300) divides by each group's own std.
All standard deviations are population ones (ddof = 0), and `eps` keeps a zero std from
producing inf/nan: A / (std + eps), so a group whose rewards are all equal keeps A = 0.

Zero-variance filtering (ScaleRL section 3) is defined by those centred advantages: a group whose
rewards all agree has every A_i = 0, so it carries no gradient but still dilutes the loss average;
the recipe drops these prompts from the loss (the effective batch shrinks) and does not resample
replacements.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from scalerl.errors import InputError
from scalerl.rl.registry import get_advantage_normalisation

DEFAULT_STD_EPS = 1e-6


def _group_index(group_ids: torch.Tensor, num_sequences: int) -> tuple[torch.Tensor, int]:
    if group_ids.shape != (num_sequences,):
        raise InputError(f"group_ids must have shape [{num_sequences}], got {tuple(group_ids.shape)}")
    _, group_of_sequence = torch.unique(group_ids, return_inverse=True)
    num_groups = int(group_of_sequence.max()) + 1 if num_sequences else 0
    return group_of_sequence, num_groups


def _group_mean(values: torch.Tensor, group_of_sequence: torch.Tensor, num_groups: int) -> torch.Tensor:
    """Per-sequence mean of `values` over its group, [N]."""
    zeros = torch.zeros(num_groups, dtype=values.dtype, device=values.device)
    sums = zeros.index_add(0, group_of_sequence, values)
    counts = torch.bincount(group_of_sequence, minlength=num_groups).to(values.dtype)
    return (sums / counts)[group_of_sequence]


def group_centered_advantages(rewards: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
    """A_i = r_i - mean_{j in group(i)} r_j, shape [N], float."""
    if rewards.dim() != 1:
        raise InputError(f"rewards must be [N], got shape {tuple(rewards.shape)}")
    rewards = rewards.float() if not rewards.is_floating_point() else rewards
    group_of_sequence, num_groups = _group_index(group_ids.to(rewards.device), rewards.shape[0])
    if num_groups == 0:
        return rewards.clone()
    return rewards - _group_mean(rewards, group_of_sequence, num_groups)


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


def normalise_by_batch_std(
    centred: torch.Tensor, group_ids: torch.Tensor, eps: float = DEFAULT_STD_EPS
) -> torch.Tensor:
    """ScaleRL: A_i / (std_{j in batch}(A_j) + eps), population std over the whole batch."""
    if centred.numel() == 0:
        return centred.clone()
    return centred / (centred.std(unbiased=False) + eps)


def normalise_by_prompt_std(
    centred: torch.Tensor, group_ids: torch.Tensor, eps: float = DEFAULT_STD_EPS
) -> torch.Tensor:
    """GRPO: A_i / (std_{j in group(i)}(A_j) + eps), population std within each prompt group."""
    group_of_sequence, num_groups = _group_index(group_ids.to(centred.device), centred.shape[0])
    if num_groups == 0:
        return centred.clone()
    group_variance = (
        _group_mean(centred**2, group_of_sequence, num_groups)
        - _group_mean(centred, group_of_sequence, num_groups) ** 2
    )
    return centred / (group_variance.clamp(min=0.0).sqrt() + eps)


TRL_STD_EPS = 1e-4


def normalise_by_prompt_sample_std(
    centred: torch.Tensor, group_ids: torch.Tensor, eps: float = DEFAULT_STD_EPS
) -> torch.Tensor:
    """TRL's scale_rewards="group": A_i / (s_{group(i)} + 1e-4), s the sample std (Bessel's
    n - 1) of the group's rewards, the same as of its centred advantages; a group of one keeps its
    centred value 0. `eps` is not used: TRL's 1e-4 is part of the rule."""
    group_of_sequence, num_groups = _group_index(group_ids.to(centred.device), centred.shape[0])
    if num_groups == 0:
        return centred.clone()
    sizes = torch.bincount(group_of_sequence, minlength=num_groups).to(centred.dtype)
    squares = torch.zeros(num_groups, dtype=centred.dtype, device=centred.device).index_add_(
        0, group_of_sequence, centred**2
    )
    sample_std = (squares / (sizes - 1).clamp(min=1)).sqrt()
    return centred / (sample_std[group_of_sequence] + TRL_STD_EPS)


def no_normalisation(centred: torch.Tensor, group_ids: torch.Tensor, eps: float = DEFAULT_STD_EPS) -> torch.Tensor:
    """Centred advantages as they are (Dr. GRPO-style, no std division)."""
    return centred.clone()


def compute_advantages(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    normalisation: str = "batch",
    *,
    keep_mask: torch.Tensor | None = None,
    eps: float = DEFAULT_STD_EPS,
) -> torch.Tensor:
    """`normalised_advantages` with the normalisation named `normalisation` in the registry's
    ADVANTAGE_NORMALISATIONS ("batch", "prompt", "none"; unknown: ConfigError)."""
    normalise = get_advantage_normalisation(normalisation)
    return normalised_advantages(rewards, group_ids, normalise, keep_mask=keep_mask, eps=eps)


def normalised_advantages(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    normalise: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor],
    *,
    keep_mask: torch.Tensor | None = None,
    eps: float = DEFAULT_STD_EPS,
) -> torch.Tensor:
    """Group-centred advantages normalised by `normalise` `(centred, group_ids, eps) -> advantages`
    (one of the functions above: the registry's entry for rl.advantage_norm, resolved once per run).

    With `keep_mask` [N] bool (e.g. from the zero-variance filter), centring and normalisation
    use only the kept sequences (dropped prompts do not dilute the batch std) and dropped
    sequences get A = 0. Returns a float tensor [N] without grad.
    """
    rewards = rewards.detach()
    if not rewards.is_floating_point():
        rewards = rewards.float()
    if keep_mask is None:
        return normalise(group_centered_advantages(rewards, group_ids), group_ids, eps)
    if keep_mask.shape != rewards.shape:
        raise InputError(f"keep_mask must have shape {tuple(rewards.shape)}, got {tuple(keep_mask.shape)}")
    keep = keep_mask.to(rewards.device).bool()
    advantages = torch.zeros_like(rewards)
    kept_group_ids = group_ids.to(rewards.device)[keep]
    centred = group_centered_advantages(rewards[keep], kept_group_ids)
    advantages[keep] = normalise(centred, kept_group_ids, eps)
    return advantages
