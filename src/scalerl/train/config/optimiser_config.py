"""The optimiser step of a run's config: AdamW, its learning-rate schedule and clipping (the
`optim` section), and how one step is computed within memory (the `train` section: micro-batches,
chunked log-probs, activation checkpointing, non-finite steps skipped). Torch-free, like the config.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scalerl.checks import require as _require
from scalerl.checks import require_choice as _require_choice
from scalerl.checks import require_non_negative as _require_non_negative
from scalerl.checks import require_positive as _require_positive

MAX_LR = 1.0  # AdamW moves each weight by about lr per step: lr >= 1 replaces weights of size ~0.02-1
LR_SCHEDULES = ("constant", "linear", "cosine")


@dataclass(frozen=True)
class OptimConfig:
    """AdamW with linear warm-up then a constant (or decaying) learning rate, and gradient clipping."""

    lr: float = field(
        default=1e-4,
        metadata={
            "help": "AdamW learning rate (TRL's learning_rate); below 1: AdamW moves each weight by about lr "
            "per step, so lr >= 1 replaces the weights (RL fine-tuning uses 1e-6 to 1e-4)"
        },
    )
    warmup_steps: int = field(default=10, metadata={"help": "linear learning-rate warm-up steps"})
    lr_schedule: str = field(
        default="constant",
        metadata={
            "help": "learning rate after the warm-up: constant, linear or cosine decay to 0 at max_steps "
            "(TRL's lr_scheduler_type)"
        },
    )
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW decoupled weight decay"})
    adam_eps: float = field(default=1e-15, metadata={"help": "AdamW epsilon"})
    adam_beta1: float = field(default=0.9, metadata={"help": "AdamW beta1"})
    adam_beta2: float = field(default=0.999, metadata={"help": "AdamW beta2"})
    grad_clip: float = field(
        default=1.0, metadata={"help": "clip the gradient norm to this value (TRL's max_grad_norm)"}
    )

    def __post_init__(self) -> None:
        _require_positive(self.lr, "optim.lr")
        _require(
            self.lr < MAX_LR,
            "optim.lr",
            f"must be below {MAX_LR:g} (AdamW moves each weight by about lr per "
            f"step: a larger rate replaces the weights), got {self.lr!r}",
        )
        _require_non_negative(self.warmup_steps, "optim.warmup_steps")
        _require_choice(self.lr_schedule, "optim.lr_schedule", LR_SCHEDULES)
        _require_non_negative(self.weight_decay, "optim.weight_decay")
        _require_positive(self.adam_eps, "optim.adam_eps")
        for name in ("adam_beta1", "adam_beta2"):
            value = getattr(self, name)
            _require(0 <= value < 1, f"optim.{name}", f"must be in [0, 1), got {value!r}")
        _require_positive(self.grad_clip, "optim.grad_clip")


@dataclass(frozen=True)
class StepConfig:
    """How one optimiser step is computed, not what it computes: memory bounds that leave the
    gradient unchanged (micro-batches with the whole batch's normalisers, chunked log-probs,
    activation checkpointing)."""

    micro_batch_size: int = field(
        default=0,
        metadata={
            "help": "sequences per forward/backward, gradients accumulated to the whole batch's "
            "(0: the whole batch at once)"
        },
    )
    logprob_chunk_size: int = field(
        default=0,
        metadata={"help": "completion positions whose vocabulary logits exist at once, forward and backward (0: all)"},
    )
    gradient_checkpointing: bool = field(
        default=False,
        metadata={"help": "recompute the transformer layers' activations in the backward pass (transformers' switch)"},
    )
    skip_nonfinite_steps: int = field(
        default=0,
        metadata={
            "help": "steps with a non-finite loss, gradient norm or weight skipped (each logged) before the run "
            "stops (0: stop at the first)"
        },
    )

    def __post_init__(self) -> None:
        _require_non_negative(self.micro_batch_size, "train.micro_batch_size")
        _require_non_negative(self.logprob_chunk_size, "train.logprob_chunk_size")
        _require_non_negative(self.skip_nonfinite_steps, "train.skip_nonfinite_steps")
