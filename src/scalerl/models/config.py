"""The `model` section of a run's config: which policy, the built-in model's shape, its warm start (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

from scalerl.checks import require, require_fraction, require_non_negative, require_positive

@dataclass(frozen=True)
class ModelConfig:
    """The policy: a local Hugging Face directory or the built-in tiny model (and its warm start)."""

    path: str = "builtin"
    fp32_head: bool = True
    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    warmstart_steps: int = 800
    warmstart_stop_pass_rate: float = 0.12
    warmstart_probe_every: int = 5
    warmstart_cache_dir: str = ""
    # Seed of the built-in model's initial weights and of its warm start. Apart from the run's
    # `seed` (prompt order and sampling noise of RL) so that every RL seed and every variant of a
    # study starts from the same warm-started weights: one warm start per model/task configuration.
    init_seed: int = 0

    def __post_init__(self) -> None:
        require(bool(self.path), "model.path", "must be 'builtin' or a model directory")
        for name in ("hidden_size", "num_layers", "num_heads"):
            require_positive(getattr(self, name), f"model.{name}")
        require(self.hidden_size % self.num_heads == 0, "model.hidden_size",
                 f"{self.hidden_size} is not divisible by model.num_heads={self.num_heads}")
        require_non_negative(self.warmstart_steps, "model.warmstart_steps")
        require_fraction(self.warmstart_stop_pass_rate, "model.warmstart_stop_pass_rate")
        require_positive(self.warmstart_probe_every, "model.warmstart_probe_every")
        require_non_negative(self.init_seed, "model.init_seed")
