"""The one configuration of a training run: every knob with its meaning, validated on construction,
saved as JSON.

`TrainConfig` holds nested sections (model, task, sampling, rl, optim, train, pipeline, forecast). Each
field declares its default and, in `metadata["help"]`, its one-line meaning, which
`scalerl config keys` and the CLI's flags show. `--set key=value` overrides address a field by its
dotted path (`rl.loss=dapo`) or, when unambiguous, by its leaf name (`lr=1e-3`); how values and
files are read lives in scalerl.train.config.config_io. Torch-free on purpose: the CLI validates a config
before any heavy import.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalerl.checks import require as _require
from scalerl.checks import require_choice as _require_choice
from scalerl.checks import require_fraction as _require_fraction
from scalerl.checks import require_non_negative as _require_non_negative
from scalerl.checks import require_positive as _require_positive
from scalerl.models.config import ModelConfig
from scalerl.rl.config import RLConfig
from scalerl.rl.registry import LENGTH_CONTROLS
from scalerl.tasks.config import TaskConfig
from scalerl.train.config import config_io

DTYPE_NAMES = ("float32", "bfloat16")
CONFIG_FILE_NAME = "config.json"
MAX_LR = 1.0  # AdamW moves each weight by about lr per step: lr >= 1 replaces weights of size ~0.02-1
# Completions one step (or one evaluation) holds at once: 32x ScaleRL's largest batch (2048 x 16);
# beyond it the rollouts alone outgrow a machine's memory before the first row is written.
MAX_SEQUENCES_PER_STEP = 1 << 20


@dataclass(frozen=True)
class SamplingConfig:
    """Rollout generation: batch shape, sampling, and length control (ScaleRL section 4)."""

    prompts_per_step: int = field(default=32, metadata={"help": "prompts per optimiser step (P)"})
    generations_per_prompt: int = field(
        default=16, metadata={"help": "completions per prompt (G, TRL's num_generations)"}
    )
    max_new_tokens: int = field(
        default=64, metadata={"help": "most generated tokens per completion (TRL's max_completion_length)"}
    )
    temperature: float = field(default=1.0, metadata={"help": "sampling temperature"})
    top_p: float = field(default=1.0, metadata={"help": "nucleus sampling mass (1: off)"})
    top_k: int = field(
        default=0,
        metadata={
            "help": "sample among the k most likely tokens only (0: off); the log-probs recorded for training stay "
            "the policy's own (untruncated, temperature 1), as in TRL and verl"
        },
    )
    repetition_penalty: float = field(
        default=1.0,
        metadata={
            "help": "CTRL repetition penalty (1: off): the logit l of a token already in the prompt or completion "
            "becomes l / penalty if l > 0, else l * penalty, for sampling only (recorded log-probs are the policy's)"
        },
    )
    max_prompt_length: int = field(
        default=0,
        metadata={
            "help": "most prompt tokens (0: no limit); a longer prompt keeps its last max_prompt_length tokens "
            "(left truncation, as TRL's max_prompt_length), in training and validation"
        },
    )
    length_control: str = field(default="interrupt", metadata={"help": "length control", "choices": LENGTH_CONTROLS})
    # `follows`: left unset, the key keeps its share of max_new_tokens when that changes (config_io).
    thinking_budget_min: int = field(
        default=40,
        metadata={
            "help": "interrupt: thinking tokens after which a thinking section may be cut (unset: 5/8 of "
            "max_new_tokens)",
            "follows": "max_new_tokens",
        },
    )
    thinking_budget_max: int = field(
        default=48,
        metadata={
            "help": "interrupt: thinking tokens after which it is always cut (unset: 3/4 of max_new_tokens)",
            "follows": "max_new_tokens",
        },
    )
    penalty_cache_tokens: int = field(
        default=16,
        metadata={
            "help": "penalty: soft-penalty window before max_new_tokens, DAPO (unset: 1/4 of max_new_tokens)",
            "follows": "max_new_tokens",
        },
    )

    def __post_init__(self) -> None:
        for name in ("prompts_per_step", "generations_per_prompt", "max_new_tokens"):
            _require_positive(getattr(self, name), f"sampling.{name}")
        _require_positive(self.temperature, "sampling.temperature")
        _require_fraction(self.top_p, "sampling.top_p", open_low=True)
        _require(self.top_k >= 0, "sampling.top_k", "must be >= 0 (0: off)")
        _require_positive(self.repetition_penalty, "sampling.repetition_penalty")
        _require(self.max_prompt_length >= 0, "sampling.max_prompt_length", "must be >= 0 (0: no limit)")
        _require_choice(self.length_control, "sampling.length_control", tuple(LENGTH_CONTROLS))
        _require_positive(self.thinking_budget_min, "sampling.thinking_budget_min")
        _require(
            self.thinking_budget_min <= self.thinking_budget_max,
            "sampling.thinking_budget_max",
            f"must be >= sampling.thinking_budget_min={self.thinking_budget_min}",
        )
        _require(
            self.thinking_budget_max < self.max_new_tokens,
            "sampling.thinking_budget_max",
            f"must be < sampling.max_new_tokens={self.max_new_tokens}",
        )
        _require(
            0 < self.penalty_cache_tokens <= self.max_new_tokens,
            "sampling.penalty_cache_tokens",
            f"must be in (0, sampling.max_new_tokens={self.max_new_tokens}]",
        )


LR_SCHEDULES = ("constant", "linear", "cosine")
CONFIG_DEFAULTS = ("scalerl", "trl")


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


PIPELINE_MODES = ("sync", "async", "ppo-offpolicy")
STALE_BATCH_POLICIES = ("wait", "drop")
GENERATOR_BACKENDS = ("hf", "vllm")
WEIGHT_SYNC_METHODS = ("object_store", "broadcast")


@dataclass(frozen=True)
class PipelineConfig:
    """Where the run executes (scalerl.distributed, docs/distributed.md): "sync" (this package's
    synchronous trainer), "async" (PipelineRL on Ray: the trainer at most max_lag steps ahead of
    its data) or "ppo-offpolicy" (offpolicy_steps optimiser steps per generated round);
    actors, their resources and the Ray cluster to join ("" starts a local one)."""

    mode: str = field(
        default="sync", metadata={"help": "sync (this process), async (PipelineRL on Ray) or ppo-offpolicy"}
    )
    max_lag: int = field(default=8, metadata={"help": "async: most steps the trainer may be ahead of its data (k)"})
    on_stale: str = field(
        default="wait", metadata={"help": "async: what to do with a batch older than max_lag: wait or drop"}
    )
    num_generators: int = field(default=1, metadata={"help": "Ray generator actors"})
    offpolicy_steps: int = field(default=4, metadata={"help": "ppo-offpolicy: optimiser steps per generated round (k)"})
    ray_address: str = field(
        default="", metadata={"help": "Ray cluster to join ('auto' or host:port; '': start a local one)"}
    )
    num_cpus: int = field(default=0, metadata={"help": "CPUs of the local Ray instance (0: Ray's default)"})
    generator_cpus: float = field(default=1.0, metadata={"help": "CPUs reserved per generator actor"})
    trainer_cpus: float = field(default=1.0, metadata={"help": "CPUs reserved per trainer actor"})
    num_trainers: int = field(
        default=1,
        metadata={
            "help": "trainer actors training one policy data parallel (torch.distributed: gloo on CPU, NCCL on "
            "GPUs; each back-propagates its share of the batch, gradients summed)"
        },
    )
    generator_gpus: float = field(default=0.0, metadata={"help": "GPUs reserved per generator actor"})
    trainer_gpus: float = field(default=0.0, metadata={"help": "GPUs reserved for the trainer actor"})
    torch_threads: int = field(default=1, metadata={"help": "torch threads per actor"})
    max_generator_restarts: int = field(
        default=3, metadata={"help": "restarts of a generator actor that died before the run fails"}
    )
    # ray.wait costs ~1-2 ms on a busy CPU: ask at most every 10 ms.
    weight_poll_seconds: float = field(
        default=0.01, metadata={"help": "async: how often a generator looks for new weights"}
    )
    backend: str = field(default="hf", metadata={"help": "generator backend: hf (transformers) or vllm"})
    weight_sync: str = field(
        default="object_store",
        metadata={
            "help": "how new weights reach the generators: object_store (ray.put, each generator fetches) or "
            "broadcast (a torch.distributed group: gloo on CPU, NCCL on GPUs; a generator that dies "
            "stops the run)"
        },
    )
    bucket_mb: float = field(default=256.0, metadata={"help": "weight_sync=broadcast: MiB of parameters per bucket"})

    def __post_init__(self) -> None:
        _require_choice(self.mode, "pipeline.mode", PIPELINE_MODES)
        _require_choice(self.on_stale, "pipeline.on_stale", STALE_BATCH_POLICIES)
        _require_choice(self.backend, "pipeline.backend", GENERATOR_BACKENDS)
        _require_choice(self.weight_sync, "pipeline.weight_sync", WEIGHT_SYNC_METHODS)
        _require_positive(self.bucket_mb, "pipeline.bucket_mb")
        _require(
            self.weight_sync == "object_store" or self.backend == "hf",
            "pipeline.weight_sync",
            "broadcast needs the hf generator backend (vllm takes weights from the object store)",
        )
        _require_non_negative(self.max_lag, "pipeline.max_lag")
        for name in ("num_generators", "num_trainers", "offpolicy_steps", "torch_threads"):
            _require_positive(getattr(self, name), f"pipeline.{name}")
        for name in (
            "num_cpus",
            "generator_cpus",
            "trainer_cpus",
            "generator_gpus",
            "trainer_gpus",
            "max_generator_restarts",
            "weight_poll_seconds",
        ):
            _require_non_negative(getattr(self, name), f"pipeline.{name}")


@dataclass(frozen=True)
class ForecastConfig:
    """Live forecast at each validation (scalerl.forecast.live); budget_flops 0: projected to max_steps."""

    enabled: bool = field(
        default=True, metadata={"help": "fit the compute-performance sigmoid at every validation (live forecast)"}
    )
    budget_flops: float = field(
        default=0.0, metadata={"help": "compute at which the live forecast predicts (0: projected to max_steps)"}
    )
    n_draws: int = field(default=50, metadata={"help": "posterior draws of each live forecast"})

    def __post_init__(self) -> None:
        budget, n_draws = self.budget_flops, self.n_draws
        _require(0 <= budget < float("inf"), "forecast.budget_flops", f"must be finite and >= 0, got {budget!r}")
        _require(20 <= n_draws <= 10_000, "forecast.n_draws", f"must be in [20, 10000], got {n_draws!r}")


@dataclass(frozen=True)
class TrainConfig:
    """Every knob of a run. Invalid values raise ConfigError naming the field on construction."""

    model: ModelConfig = field(default_factory=ModelConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    rl: RLConfig = field(default_factory=RLConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: StepConfig = field(default_factory=StepConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    forecast: ForecastConfig = field(default_factory=ForecastConfig)
    max_steps: int = field(default=100, metadata={"help": "optimiser steps of the run"})
    eval_every: int = field(
        default=10, metadata={"help": "validate every N steps (and at step 0 for R0, and at the last step)"}
    )
    eval_prompts: int = field(default=64, metadata={"help": "validation prompts per evaluation"})
    eval_samples_per_prompt: int = field(default=4, metadata={"help": "completions per validation prompt"})
    # Greedy validation (temperature 0, as verl's default validation): the pass rate of the policy's
    # most likely completion, one per prompt; false: samples at sampling.temperature (the paper's).
    eval_greedy: bool = field(
        default=False,
        metadata={"help": "validate with greedy decoding (one completion per prompt) instead of sampling"},
    )
    eval_logged_completions: int = field(
        default=8,
        metadata={
            "help": "validation samples appended to RUN/completions.jsonl at each evaluation (prompt, completion, "
            "reward, verdict; 0: none)"
        },
    )
    checkpoint_every: int = field(
        default=10, metadata={"help": "write a checkpoint every N steps (and at the last step)"}
    )
    keep_checkpoints: int = field(default=1, metadata={"help": "how many of the newest checkpoints to keep"})
    seed: int = field(default=0, metadata={"help": "seed of the run (sampling, prompts, built-in model)"})
    device: str = field(
        default="cpu", metadata={"help": "cpu, cuda, cuda:N, mps or auto (cuda when available, else cpu)"}
    )
    dtype: str = field(default="float32", metadata={"help": "model body dtype: float32 or bfloat16"})
    num_devices: int = field(default=1, metadata={"help": "devices counted in device_hours"})
    # 1 is much faster than torch's default on a CPU shared with other jobs.
    torch_threads: int = field(
        default=0, metadata={"help": "torch threads of the trainer process (0: torch's default)"}
    )
    tensorboard: bool = field(
        default=False, metadata={"help": "also log every metric to RUN/tensorboard (grouped train/, eval/, forecast/)"}
    )
    wandb: bool = field(
        default=False, metadata={"help": "also log every metric to Weights & Biases (grouped train/, eval/, forecast/)"}
    )
    wandb_project: str = field(default="", metadata={"help": "W&B project ('': $WANDB_PROJECT, else scalerl)"})
    wandb_run_name: str = field(
        default="", metadata={"help": "W&B run name ('': $WANDB_NAME, else the run directory's name)"}
    )
    config_defaults: str = field(
        default="scalerl",
        metadata={
            "help": "whose defaults the keys a --config file left out took: scalerl (the preset's) or trl (a TRL "
            "GRPOConfig file: TRL's defaults and behaviour)"
        },
    )

    def __post_init__(self) -> None:
        for name, section_type in _SECTION_TYPES.items():
            _require(isinstance(getattr(self, name), section_type), name, f"must be a {section_type.__name__}")
        for name in (
            "max_steps",
            "eval_every",
            "eval_prompts",
            "eval_samples_per_prompt",
            "checkpoint_every",
            "keep_checkpoints",
            "num_devices",
        ):
            _require_positive(getattr(self, name), name)
        device_index = self.device[len("cuda:") :] if self.device.startswith("cuda:") else "0"
        _require(
            self.device in ("cpu", "cuda", "mps", "auto")
            or (self.device.startswith("cuda:") and device_index.isdigit()),
            "device",
            f"{self.device!r} is not one of cpu, cuda, cuda:N, mps, auto",
        )
        _require(0 <= self.seed < 2**32, "seed", f"must be in [0, 2**32), got {self.seed!r}")
        _require_choice(self.dtype, "dtype", DTYPE_NAMES)
        _require_choice(self.config_defaults, "config_defaults", CONFIG_DEFAULTS)
        _require_non_negative(self.torch_threads, "torch_threads")
        _require_non_negative(self.eval_logged_completions, "eval_logged_completions")
        _require(
            self.model.lora_r == 0 or self.pipeline.mode == "sync" or self.pipeline.backend == "hf",
            "model.lora_r",
            "LoRA runs generate with pipeline.backend=hf (the generators receive the adapter weights only), not vllm",
        )
        _require(
            not self.eval_greedy or self.eval_samples_per_prompt == 1,
            "eval_samples_per_prompt",
            f"greedy validation (eval_greedy=true) gives one completion per prompt: set "
            f"eval_samples_per_prompt=1, not {self.eval_samples_per_prompt}",
        )
        _require(
            self.task.name != "builtin"
            or bool(self.task.train_paths)
            or self.eval_prompts <= self.task.num_val_prompts,
            "eval_prompts",
            f"{self.eval_prompts} exceeds the built-in task's held-out "
            f"prompts (task.num_val_prompts={self.task.num_val_prompts})",
        )
        _require(
            self.task.name != "builtin" or self.sampling.prompts_per_step <= self.task.num_train_prompts,
            "sampling.prompts_per_step",
            f"{self.sampling.prompts_per_step} exceeds the built-in task's "
            f"training prompts (task.num_train_prompts={self.task.num_train_prompts})",
        )
        for count, per_prompt, name in (
            (self.sampling.prompts_per_step, self.sampling.generations_per_prompt, "sampling.prompts_per_step"),
            (self.eval_prompts, self.eval_samples_per_prompt, "eval_prompts"),
        ):
            _require(
                count * per_prompt <= MAX_SEQUENCES_PER_STEP,
                name,
                f"{count} prompts x {per_prompt} completions is more than {MAX_SEQUENCES_PER_STEP} "
                "completions at once (their rollouts would outgrow memory)",
            )

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (JSON-serialisable); the rl section's loss parameters are keys of it."""
        values = dataclasses.asdict(self)
        values["rl"] = self.rl.to_dict()
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TrainConfig:
        """Inverse of `to_dict`; unknown keys raise ConfigError with close matches."""
        return config_io.build_config(cls, values)

    def with_overrides(self, assignments: typing.Iterable[str]) -> TrainConfig:
        """A copy with `key=value` strings applied (see `parse_assignment`)."""
        return TrainConfig.from_dict(config_io.apply_assignments(TrainConfig, self.to_dict(), assignments))


_SECTION_TYPES: dict[str, type] = {
    "model": ModelConfig,
    "task": TaskConfig,
    "sampling": SamplingConfig,
    "rl": RLConfig,
    "optim": OptimConfig,
    "train": StepConfig,
    "pipeline": PipelineConfig,
    "forecast": ForecastConfig,
}


def all_field_paths() -> list[str]:
    """Every settable dotted path, e.g. ['model.path', ..., 'tensorboard']."""
    return config_io.field_paths(TrainConfig)


def parse_assignment(assignment: str) -> tuple[str, Any]:
    """'rl.loss=dapo' -> ('rl.loss', 'dapo'); the value parsed with the field's type."""
    return config_io.parse_assignment(TrainConfig, assignment)


def save_config(config: TrainConfig, run_dir: str | os.PathLike) -> Path:
    """Write `config.json` into the run directory (atomically; OutputError names it when the
    write fails) and return its path."""
    return config_io.write_json_config(config.to_dict(), Path(run_dir) / CONFIG_FILE_NAME)


def load_config(path: str | os.PathLike) -> TrainConfig:
    """Read a config.json (or a run directory holding one)."""
    path = Path(path)
    return TrainConfig.from_dict(config_io.read_json_config(path / CONFIG_FILE_NAME if path.is_dir() else path))


def config_from_file(path: str | os.PathLike, base: TrainConfig | None = None) -> TrainConfig:
    """The config of a file (JSON or YAML, see `config_io.read_config_file`) laid over `base`
    (default: the defaults); ConfigError names the file."""
    return config_io.config_over_file(path, base or TrainConfig())
