"""Length control, the pure parts: forced-interruption budgets, overlong penalty, truncation rate.

Sources: ScaleRL (arXiv 2510.13786, section 3): forced interruption at a random point between two
thinking budgets, followed by `INTERRUPTION_PHRASE`; DAPO (arXiv 2503.14476, eq. 13): soft
overlong punishment as the alternative. The generator owns the decoding; this file only decides.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from scalerl.errors import ConfigError, InputError

INTERRUPTION_PHRASE = "Okay, time is up. Let me stop thinking and formulate a final answer now. </think>"


def sample_interruption_budget(min_tokens: int, max_tokens: int, rng: np.random.Generator | torch.Generator) -> int:
    """Thinking budget (tokens) drawn uniformly from the integers min_tokens..max_tokens inclusive.

    `rng` is a numpy Generator or a torch.Generator (so the generator's own seeded stream can be
    used and generation stays deterministic).
    """
    if min_tokens < 0 or max_tokens < min_tokens:
        raise ConfigError(
            f"thinking budgets must satisfy 0 <= min_tokens <= max_tokens, got {min_tokens}, {max_tokens}"
        )
    if isinstance(rng, torch.Generator):
        return int(torch.randint(min_tokens, max_tokens + 1, (1,), generator=rng, device=rng.device).item())
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(min_tokens, max_tokens, endpoint=True))
    raise InputError(f"rng must be a numpy.random.Generator or torch.Generator, got {type(rng).__name__}")


def overlong_length_penalty(lengths: torch.Tensor | Sequence[int], max_len: int, cache_len: int) -> torch.Tensor:
    """DAPO soft overlong punishment, added to the reward; float32 tensor shaped like `lengths`.

    R_len(L) = 0                              if L <= max_len - cache_len
             = (max_len - cache_len - L) / cache_len   if max_len - cache_len < L <= max_len
             = -1                             if L > max_len
    """
    if cache_len <= 0 or cache_len > max_len:
        raise ConfigError(f"cache_len must be in (0, max_len={max_len}], got {cache_len}")
    lengths = torch.as_tensor(lengths, dtype=torch.float32)
    soft_start = max_len - cache_len
    ramp = (soft_start - lengths) / cache_len
    penalty = torch.where(lengths <= soft_start, torch.zeros_like(lengths), ramp)
    return torch.where(lengths > max_len, torch.full_like(lengths, -1.0), penalty)


def truncation_rate(truncated: torch.Tensor | Sequence[bool]) -> float:
    """Share of sequences cut at the generation limit (ScaleRL: above ~10 % destabilises training)."""
    truncated = torch.as_tensor(truncated)
    if truncated.numel() == 0:
        raise InputError("truncation_rate needs at least one sequence")
    return float(truncated.float().mean())
