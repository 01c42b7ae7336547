"""No-positive-resampling curriculum: prompts the policy has mastered leave the training pool.

Source: Polaris (An et al., 2025) as adopted by ScaleRL (arXiv 2510.13786, section 3): a prompt
whose pass rate in a step reaches >= 0.9 is removed from the pool for the rest of the run.
The pool's state is plain JSON (saved with checkpoints, loaded without unpickling).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from scalerl.errors import ConfigError, InputError, ScaleRLError

DEFAULT_PASS_RATE_THRESHOLD = 0.9
_STATE_VERSION = 1


class PromptPoolExhaustedError(ScaleRLError):
    """Every prompt of the pool has been removed: nothing is left to train on."""


def pass_rates_by_prompt(prompt_indices: Iterable[int], rewards: Iterable[float]) -> dict[int, float]:
    """Pass rate of each prompt over its generations: share of rewards > 0 (rewards are +1 / -1)."""
    passed: dict[int, int] = {}
    seen: dict[int, int] = {}
    for prompt_index, reward in zip(prompt_indices, rewards, strict=True):
        key = int(prompt_index)
        seen[key] = seen.get(key, 0) + 1
        passed[key] = passed.get(key, 0) + (1 if float(reward) > 0 else 0)
    return {key: passed[key] / seen[key] for key in seen}


class PromptPool:
    """The training pool of prompt indices 0..num_prompts-1 with no-positive-resampling."""

    def __init__(
        self, num_prompts: int, *, threshold: float = DEFAULT_PASS_RATE_THRESHOLD, enabled: bool = True
    ) -> None:
        if num_prompts <= 0:
            raise ConfigError(f"num_prompts must be > 0, got {num_prompts}")
        if not 0.0 < threshold <= 1.0:
            raise ConfigError(f"npr threshold must be in (0, 1], got {threshold}")
        self.num_prompts = int(num_prompts)
        self.threshold = float(threshold)
        self.enabled = bool(enabled)
        self._removed: set[int] = set()

    @property
    def active_count(self) -> int:
        """Prompts still eligible for sampling."""
        return self.num_prompts - len(self._removed)

    @property
    def removed(self) -> frozenset[int]:
        return frozenset(self._removed)

    def active_indices(self) -> np.ndarray:
        """Sorted int64 array of the prompts still in the pool."""
        is_active = np.ones(self.num_prompts, dtype=bool)
        is_active[list(self._removed)] = False
        return np.flatnonzero(is_active)

    def sample(self, num_prompts: int, rng: np.random.Generator) -> list[int]:
        """Draw `num_prompts` distinct active prompts (all of them, shuffled, if fewer remain).

        Raises PromptPoolExhaustedError when no active prompt is left: the run cannot go on.
        """
        if num_prompts <= 0:
            raise ConfigError(f"num_prompts to sample must be > 0, got {num_prompts}")
        active = self.active_indices()
        if active.size == 0:
            raise PromptPoolExhaustedError(
                f"all {self.num_prompts} prompts reached pass rate >= {self.threshold} and left the pool"
            )
        chosen = rng.choice(active, size=min(num_prompts, active.size), replace=False)
        return [int(index) for index in chosen]

    def update(self, prompt_index: int, pass_rate: float) -> bool:
        """Record a prompt's pass rate in this step; returns True if it was removed now.

        Removal happens when pass_rate >= threshold and the pool is enabled, and is permanent.
        """
        if not 0 <= prompt_index < self.num_prompts:
            raise InputError(f"prompt_index {prompt_index} outside the pool 0..{self.num_prompts - 1}")
        if not 0.0 <= pass_rate <= 1.0:
            raise InputError(f"pass_rate must be in [0, 1], got {pass_rate}")
        if not self.enabled or prompt_index in self._removed or pass_rate < self.threshold:
            return False
        self._removed.add(int(prompt_index))
        return True

    def update_many(self, pass_rates: Mapping[int, float]) -> list[int]:
        """`update` for each prompt; returns the prompts removed by this call, sorted."""
        return sorted(index for index, rate in pass_rates.items() if self.update(index, rate))

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state (ints, floats, bools and a list of ints only)."""
        return {
            "version": _STATE_VERSION,
            "num_prompts": self.num_prompts,
            "threshold": self.threshold,
            "enabled": self.enabled,
            "removed": sorted(self._removed),
        }

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> PromptPool:
        """Rebuild a pool from `state_dict()` output (e.g. after json.loads)."""
        missing = {"version", "num_prompts", "threshold", "enabled", "removed"} - set(state)
        if missing:
            raise InputError(f"prompt pool state lacks {sorted(missing)}")
        if state["version"] != _STATE_VERSION:
            raise InputError(f"prompt pool state version {state['version']!r} is not {_STATE_VERSION}")
        pool = cls(
            int(state["num_prompts"]),
            threshold=float(state["threshold"]),
            enabled=bool(state["enabled"]),
        )
        removed = [int(index) for index in state["removed"]]
        if any(not 0 <= index < pool.num_prompts for index in removed):
            raise InputError(f"prompt pool state removes indices outside 0..{pool.num_prompts - 1}")
        pool._removed = set(removed)
        return pool
