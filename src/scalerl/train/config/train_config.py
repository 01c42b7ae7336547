"""The one configuration of a training run: every knob with its meaning, validated on construction,
saved as JSON.

`TrainConfig` holds nested sections (model, task, sampling, rl, optim, train, pipeline, forecast;
the run's own sections in sampling_config, optimiser_config and pipeline_config, the live forecast's
here). Each field declares its default and, in `metadata["help"]`, its one-line meaning, which
`scalerl config keys` and the CLI's flags show. `--set key=value` overrides address a field by its
dotted path (`rl.loss=dapo`) or, when unambiguous, by its leaf name (`lr=1e-3`); how keys are found
lives in scalerl.train.config.key_paths, how values are read in field_values, overrides in
overrides, files in config_io. Torch-free on purpose: the CLI validates a config before any heavy
import.
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
from scalerl.checks import require_non_negative as _require_non_negative
from scalerl.checks import require_positive as _require_positive
from scalerl.models.config import ModelConfig
from scalerl.rl.config import RLConfig
from scalerl.tasks.config import TaskConfig
from scalerl.train.config import config_io, field_values, key_paths, overrides
from scalerl.train.config.optimiser_config import OptimConfig, StepConfig
from scalerl.train.config.pipeline_config import PipelineConfig
from scalerl.train.config.sampling_config import SamplingConfig

DTYPE_NAMES = ("float32", "bfloat16")
CONFIG_FILE_NAME = "config.json"
# Completions one step (or one evaluation) holds at once: 32x ScaleRL's largest batch (2048 x 16);
# beyond it the rollouts alone outgrow a machine's memory before the first row is written.
MAX_SEQUENCES_PER_STEP = 1 << 20
CONFIG_DEFAULTS = ("scalerl", "trl")


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
        return field_values.build_config(cls, values)

    def with_overrides(self, assignments: typing.Iterable[str]) -> TrainConfig:
        """A copy with `key=value` strings applied (see `parse_assignment`)."""
        return TrainConfig.from_dict(overrides.apply_assignments(TrainConfig, self.to_dict(), assignments))


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
    return key_paths.field_paths(TrainConfig)


def parse_assignment(assignment: str) -> tuple[str, Any]:
    """'rl.loss=dapo' -> ('rl.loss', 'dapo'); the value parsed with the field's type."""
    return overrides.parse_assignment(TrainConfig, assignment)


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
