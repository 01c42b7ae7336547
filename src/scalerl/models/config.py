"""The `model` section of a run's config: which policy, the built-in model's shape, its warm start (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from scalerl.checks import require, require_fraction, require_non_negative, require_positive


@dataclass(frozen=True)
class ModelConfig:
    """The policy: a local Hugging Face directory or the built-in tiny model (and its warm start).
    A field's `help` is its meaning in `scalerl config keys` and the CLI."""

    path: str = field(
        default="builtin",
        metadata={
            "help": "'builtin' (tiny Llama-style model, character tokenizer), a local Hugging Face model folder, or a "
            "model id in the local Hugging Face cache (saved as its snapshot folder)"
        },
    )
    fp32_head: bool = field(
        default=True, metadata={"help": "compute the LM head in float32 whatever the body dtype (ScaleRL section 4)"}
    )
    hidden_size: int = field(default=128, metadata={"help": "built-in model: hidden size"})
    num_layers: int = field(default=2, metadata={"help": "built-in model: transformer layers"})
    num_heads: int = field(default=4, metadata={"help": "built-in model: attention heads (must divide hidden_size)"})
    warmstart_steps: int = field(
        default=800, metadata={"help": "built-in model: most supervised warm-start steps (0: none)"}
    )
    warmstart_stop_pass_rate: float = field(
        default=0.12, metadata={"help": "built-in model: stop the warm start at this probed pass rate"}
    )
    warmstart_probe_every: int = field(
        default=5, metadata={"help": "built-in model: probe the pass rate every N warm-start steps"}
    )
    warmstart_cache_dir: str = field(
        default="", metadata={"help": "where warm starts are cached ('': $XDG_CACHE_HOME/scalerl/warmstart)"}
    )
    # Apart from the run's `seed` (prompt order and sampling noise of RL) so that every RL seed and
    # every variant of a study starts from the same warm-started weights: one warm start per
    # model/task configuration.
    init_seed: int = field(
        default=0,
        metadata={"help": "built-in model: seed of its initial weights and warm start (shared by every run seed)"},
    )
    lora_r: int = field(
        default=0,
        metadata={
            "help": "LoRA rank (peft, the 'peft' extra): train low-rank adapters on the starting weights, which stay "
            "frozen (0: train every weight)"
        },
    )
    lora_alpha: float = field(default=16.0, metadata={"help": "LoRA scaling alpha (the update is alpha / r * B A)"})
    lora_target_modules: str = field(
        default="all-linear",
        metadata={
            "help": "modules LoRA adapts: comma-separated names (q_proj,v_proj) or 'all-linear' (every linear layer "
            "but the LM head)"
        },
    )

    chat_template: str = field(
        default="",
        metadata={
            "help": "Jinja chat template that renders chat-form prompts in place of the tokenizer's: the template text "
            "or a .jinja file holding it ('': the tokenizer's own)"
        },
    )

    def __post_init__(self) -> None:
        require(bool(self.path), "model.path", "must be 'builtin' or a model directory")
        require(
            not self.chat_template.endswith((".jinja", ".j2")) or Path(self.chat_template).is_file(),
            "model.chat_template",
            f"no template file {self.chat_template!r}",
        )
        for name in ("hidden_size", "num_layers", "num_heads"):
            require_positive(getattr(self, name), f"model.{name}")
        require(
            self.hidden_size % self.num_heads == 0,
            "model.hidden_size",
            f"{self.hidden_size} is not divisible by model.num_heads={self.num_heads}",
        )
        require_non_negative(self.warmstart_steps, "model.warmstart_steps")
        require_fraction(self.warmstart_stop_pass_rate, "model.warmstart_stop_pass_rate")
        require_positive(self.warmstart_probe_every, "model.warmstart_probe_every")
        require_non_negative(self.init_seed, "model.init_seed")
        require_non_negative(self.lora_r, "model.lora_r")
        require_positive(self.lora_alpha, "model.lora_alpha")
        targets = [name.strip() for name in self.lora_target_modules.split(",")]
        require(
            all(targets),
            "model.lora_target_modules",
            f"must be 'all-linear' or comma-separated module names, got {self.lora_target_modules!r}",
        )
        require(
            "lm_head" not in targets,
            "model.lora_target_modules",
            "the LM head is computed from its weight directly (model.fp32_head); adapt the body's modules",
        )
