"""The one configuration of a training run: every knob, validated on construction, saved as JSON.

`TrainConfig` holds nested sections (model, task, sampling, rl, optim, pipeline, forecast);
`--set key=value` overrides address a field by its dotted path (`rl.loss=dapo`) or, when
unambiguous, by its leaf name (`lr=1e-3`). Values are parsed with the field's declared type.
Torch-free on purpose: the CLI validates a config before any heavy import.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from scalerl.checks import require as _require
from scalerl.checks import require_choice as _require_choice
from scalerl.checks import require_fraction as _require_fraction
from scalerl.checks import require_non_negative as _require_non_negative
from scalerl.checks import require_positive as _require_positive
from scalerl.errors import ConfigError
from scalerl.models.config import ModelConfig
from scalerl.rl.registry import LENGTH_CONTROLS, loss_parameters
from scalerl.tasks.config import ANSWER_CHECKS, TaskConfig
from scalerl.rl.config import RLConfig, gather_loss_params, spread_loss_params
from scalerl.train.safe_writes import write_atomically, writing

DTYPE_NAMES = ("float32", "bfloat16")
CONFIG_FILE_NAME = "config.json"


@dataclass(frozen=True)
class SamplingConfig:
    """Rollout generation: batch shape, sampling, and length control (ScaleRL section 4)."""

    prompts_per_step: int = 32
    generations_per_prompt: int = 16
    max_new_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    length_control: str = "interrupt"
    thinking_budget_min: int = 40
    thinking_budget_max: int = 48
    penalty_cache_tokens: int = 16

    def __post_init__(self) -> None:
        for name in ("prompts_per_step", "generations_per_prompt", "max_new_tokens"):
            _require_positive(getattr(self, name), f"sampling.{name}")
        _require_positive(self.temperature, "sampling.temperature")
        _require_fraction(self.top_p, "sampling.top_p", open_low=True)
        _require_choice(self.length_control, "sampling.length_control", tuple(LENGTH_CONTROLS))
        _require_positive(self.thinking_budget_min, "sampling.thinking_budget_min")
        _require(self.thinking_budget_min <= self.thinking_budget_max,
                 "sampling.thinking_budget_max",
                 f"must be >= sampling.thinking_budget_min={self.thinking_budget_min}")
        _require(self.thinking_budget_max < self.max_new_tokens, "sampling.thinking_budget_max",
                 f"must be < sampling.max_new_tokens={self.max_new_tokens}")
        _require(0 < self.penalty_cache_tokens <= self.max_new_tokens,
                 "sampling.penalty_cache_tokens",
                 f"must be in (0, sampling.max_new_tokens={self.max_new_tokens}]")


@dataclass(frozen=True)
class OptimConfig:
    """AdamW with linear warm-up then a constant learning rate, and gradient clipping."""

    lr: float = 1e-4
    warmup_steps: int = 10
    weight_decay: float = 0.01
    adam_eps: float = 1e-15
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    grad_clip: float = 1.0

    def __post_init__(self) -> None:
        _require_positive(self.lr, "optim.lr")
        _require_non_negative(self.warmup_steps, "optim.warmup_steps")
        _require_non_negative(self.weight_decay, "optim.weight_decay")
        _require_positive(self.adam_eps, "optim.adam_eps")
        for name in ("adam_beta1", "adam_beta2"):
            value = getattr(self, name)
            _require(0 <= value < 1, f"optim.{name}", f"must be in [0, 1), got {value!r}")
        _require_positive(self.grad_clip, "optim.grad_clip")


PIPELINE_MODES = ("sync", "async", "ppo-offpolicy")
STALE_BATCH_POLICIES = ("wait", "drop")
GENERATOR_BACKENDS = ("hf", "vllm")


@dataclass(frozen=True)
class PipelineConfig:
    """Where the run executes (scalerl.distributed, docs/distributed.md): "sync" (this package's
    synchronous trainer), "async" (PipelineRL on Ray: the trainer at most max_lag steps ahead of
    its data) or "ppo-offpolicy" (offpolicy_steps optimiser steps per generated round);
    actors, their resources and the Ray cluster to join ("" starts a local one)."""

    mode: str = "sync"
    max_lag: int = 8
    on_stale: str = "wait"
    num_generators: int = 1
    offpolicy_steps: int = 4
    ray_address: str = ""
    num_cpus: int = 0
    generator_cpus: float = 1.0
    trainer_cpus: float = 1.0
    generator_gpus: float = 0.0
    trainer_gpus: float = 0.0
    torch_threads: int = 1
    max_generator_restarts: int = 3
    weight_poll_seconds: float = 0.01  # ray.wait costs ~1-2 ms on a busy CPU: ask at most every 10 ms
    backend: str = "hf"

    def __post_init__(self) -> None:
        _require_choice(self.mode, "pipeline.mode", PIPELINE_MODES)
        _require_choice(self.on_stale, "pipeline.on_stale", STALE_BATCH_POLICIES)
        _require_choice(self.backend, "pipeline.backend", GENERATOR_BACKENDS)
        _require_non_negative(self.max_lag, "pipeline.max_lag")
        for name in ("num_generators", "offpolicy_steps", "torch_threads"):
            _require_positive(getattr(self, name), f"pipeline.{name}")
        for name in ("num_cpus", "generator_cpus", "trainer_cpus", "generator_gpus",
                     "trainer_gpus", "max_generator_restarts", "weight_poll_seconds"):
            _require_non_negative(getattr(self, name), f"pipeline.{name}")


@dataclass(frozen=True)
class ForecastConfig:
    """Live forecast at each validation (scalerl.forecast.live); budget_flops 0: projected to max_steps."""

    enabled: bool = True
    budget_flops: float = 0.0
    n_bootstrap: int = 50

    def __post_init__(self) -> None:
        budget, n_bootstrap = self.budget_flops, self.n_bootstrap
        _require(0 <= budget < float("inf"), "forecast.budget_flops", f"must be finite and >= 0, got {budget!r}")
        _require(20 <= n_bootstrap <= 10_000, "forecast.n_bootstrap", f"must be in [20, 10000], got {n_bootstrap!r}")


@dataclass(frozen=True)
class TrainConfig:
    """Every knob of a run. Invalid values raise ConfigError naming the field on construction."""

    model: ModelConfig = field(default_factory=ModelConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    rl: RLConfig = field(default_factory=RLConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    forecast: ForecastConfig = field(default_factory=ForecastConfig)
    max_steps: int = 100
    eval_every: int = 10
    eval_prompts: int = 64
    eval_samples_per_prompt: int = 4
    # Greedy validation (temperature 0, as verl's default validation): the pass rate of the policy's
    # most likely completion, one per prompt; false: samples at sampling.temperature (the paper's).
    eval_greedy: bool = False
    checkpoint_every: int = 10
    keep_checkpoints: int = 1
    seed: int = 0
    device: str = "cpu"
    dtype: str = "float32"
    num_devices: int = 1
    torch_threads: int = 0  # 0: torch's default; 1 is much faster on a CPU shared with other jobs
    tensorboard: bool = False
    wandb: bool = False
    wandb_project: str = "scalerl"
    wandb_run_name: str = ""

    def __post_init__(self) -> None:
        for name, section_type in _SECTION_TYPES.items():
            _require(isinstance(getattr(self, name), section_type), name,
                     f"must be a {section_type.__name__}")
        for name in ("max_steps", "eval_every", "eval_prompts", "eval_samples_per_prompt",
                     "checkpoint_every", "keep_checkpoints", "num_devices"):
            _require_positive(getattr(self, name), name)
        device_index = self.device[len("cuda:"):] if self.device.startswith("cuda:") else "0"
        _require(self.device in ("cpu", "cuda", "mps") or (self.device.startswith("cuda:") and device_index.isdigit()),
                 "device", f"{self.device!r} is not one of cpu, cuda, cuda:N, mps")
        _require(0 <= self.seed < 2**32, "seed", f"must be in [0, 2**32), got {self.seed!r}")
        _require_choice(self.dtype, "dtype", DTYPE_NAMES)
        _require_non_negative(self.torch_threads, "torch_threads")
        _require(not self.eval_greedy or self.eval_samples_per_prompt == 1, "eval_samples_per_prompt",
                 f"greedy validation (eval_greedy=true) gives one completion per prompt: set "
                 f"eval_samples_per_prompt=1, not {self.eval_samples_per_prompt}")
        _require(self.task.name != "builtin" or self.eval_prompts <= self.task.num_val_prompts,
                 "eval_prompts", f"{self.eval_prompts} exceeds the built-in task's held-out "
                 f"prompts (task.num_val_prompts={self.task.num_val_prompts})")

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (JSON-serialisable); the rl section's loss parameters are keys of it."""
        values = dataclasses.asdict(self)
        values["rl"] = self.rl.to_dict()
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "TrainConfig":
        """Inverse of `to_dict`; unknown keys raise ConfigError with close matches."""
        return _build_dataclass(cls, values, prefix="")

    def with_overrides(self, assignments: typing.Iterable[str]) -> "TrainConfig":
        """A copy with `key=value` strings applied (see `parse_assignment`)."""
        values = self.to_dict()
        for assignment in assignments:
            path, value = parse_assignment(assignment)
            _set_nested(values, path, value)
        return TrainConfig.from_dict(values)


_SECTION_TYPES: dict[str, type] = {
    "model": ModelConfig, "task": TaskConfig, "sampling": SamplingConfig,
    "rl": RLConfig, "optim": OptimConfig, "pipeline": PipelineConfig, "forecast": ForecastConfig,
}


@functools.lru_cache(maxsize=None)
def _type_hints(cls: type) -> dict[str, Any]:
    # Fixed per class and slow to evaluate (~3 ms): `--set` resolves every key through it.
    return typing.get_type_hints(cls)


def _field_types(cls: type) -> dict[str, Any]:
    """The keys of a section and their types (RLConfig: one per registered loss parameter in
    place of its loss_params)."""
    types = _type_hints(cls)
    return spread_loss_params(types) if cls is RLConfig else dict(types)


def _build_dataclass(cls: type, values: Mapping[str, Any], prefix: str) -> Any:
    if not isinstance(values, Mapping):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected an object, got {values!r}")
    types = _field_types(cls)
    unknown = [key for key in values if key not in types]
    if unknown:
        raise ConfigError(_unknown_key_message(prefix + unknown[0]))
    kwargs = {}
    for name, value in values.items():
        field_type = types[name]
        if dataclasses.is_dataclass(field_type):
            kwargs[name] = _build_dataclass(field_type, value, prefix + name + ".")
        else:
            kwargs[name] = _coerce(value, field_type, prefix + name)
    return cls(**(gather_loss_params(kwargs) if cls is RLConfig else kwargs))


def _coerce(value: Any, field_type: type, field_path: str) -> Any:
    """Check a JSON value against the field's type (ints are accepted for float fields)."""
    if field_type is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if field_type is bool and not isinstance(value, bool):
        raise ConfigError(f"{field_path}: expected true/false, got {value!r}")
    if field_type is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{field_path}: expected an integer, got {value!r}")
    if not isinstance(value, field_type):
        raise ConfigError(f"{field_path}: expected {field_type.__name__}, got {value!r}")
    return value


def all_field_paths() -> list[str]:
    """Every settable dotted path, e.g. ['model.path', ..., 'tensorboard']."""
    paths = []
    for name, field_type in _field_types(TrainConfig).items():
        if dataclasses.is_dataclass(field_type):
            paths.extend(f"{name}.{leaf}" for leaf in _field_types(field_type))
        else:
            paths.append(name)
    return paths


# Names TRL / transformers users type, and the key that does the job here (suggestions only).
FOREIGN_KEY_NAMES: dict[str, str] = {
    "learning_rate": "optim.lr", "num_generations": "sampling.generations_per_prompt",
    "max_completion_length": "sampling.max_new_tokens", "batch_size": "sampling.prompts_per_step",
    "per_device_train_batch_size": "sampling.prompts_per_step", "max_grad_norm": "optim.grad_clip",
    "loss_type": "rl.loss", "scale_rewards": "rl.advantage_norm", "model_name_or_path": "model.path",
    "dataset": "task.name",
    "eval_steps": "eval_every", "save_steps": "checkpoint_every", "save_total_limit": "keep_checkpoints",
    "bf16": "dtype", "adam_epsilon": "optim.adam_eps", "report_to": "tensorboard",
    "num_train_epochs": "max_steps", "warmup_ratio": "optim.warmup_steps",
}
KEYS_COMMAND = "scalerl config keys"


def _unknown_key_message(key: str) -> str:
    paths = all_field_paths()
    leaf = key.rsplit(".", 1)[-1]
    foreign = {**FOREIGN_KEY_NAMES, **{name: f"rl.{spec.config_key}" for spec in loss_parameters()
                                       for name in spec.trl_names}}
    close = [foreign[leaf]] if leaf in foreign else []
    close += [p for p in difflib.get_close_matches(key, paths, n=3, cutoff=0.6) if p not in close]
    leaf_to_path = {p.rsplit(".", 1)[-1]: p for p in paths}
    for near_leaf in difflib.get_close_matches(leaf, list(leaf_to_path), n=3, cutoff=0.6):
        if leaf_to_path[near_leaf] not in close:
            close.append(leaf_to_path[near_leaf])
    hint = f"; did you mean {', '.join(close[:4])}?" if close else ""
    return f"unknown config key {key!r}{hint} (`{KEYS_COMMAND}` lists every key)"


def resolve_key(key: str) -> tuple[str, type]:
    """Full dotted path and type for `key` (a dotted path or an unambiguous leaf name)."""
    types = {p: _path_type(p) for p in all_field_paths()}
    if key in types:
        return key, types[key]
    by_leaf = [p for p in types if p.rsplit(".", 1)[-1] == key]
    if len(by_leaf) == 1:
        return by_leaf[0], types[by_leaf[0]]
    if len(by_leaf) > 1:
        raise ConfigError(f"config key {key!r} is ambiguous: use one of {', '.join(by_leaf)}")
    raise ConfigError(_unknown_key_message(key))


def _path_type(path: str) -> type:
    cls: Any = TrainConfig
    for part in path.split("."):
        cls = _field_types(cls)[part]
    return cls


_TRUE_WORDS = ("true", "1", "yes", "on")
_FALSE_WORDS = ("false", "0", "no", "off")


def parse_value(text: str, value_type: type, field_path: str) -> Any:
    """Parse the text of a `--set` value with the field's type (bool words, ints, floats)."""
    stripped = text.strip()
    if value_type is bool:
        if stripped.lower() in _TRUE_WORDS:
            return True
        if stripped.lower() in _FALSE_WORDS:
            return False
        raise ConfigError(f"{field_path}: expected a boolean (true/false), got {text!r}")
    if value_type is int:
        try:
            number = float(stripped) if any(c in stripped for c in ".eE") else int(stripped)
        except ValueError:
            raise ConfigError(f"{field_path}: expected an integer, got {text!r}") from None
        if not math.isfinite(number) or number != int(number):
            raise ConfigError(f"{field_path}: expected an integer, got {text!r}")
        return int(number)
    if value_type is float:
        try:
            return float(stripped)
        except ValueError:
            raise ConfigError(f"{field_path}: expected a number, got {text!r}") from None
    return text


def parse_assignment(assignment: str) -> tuple[str, Any]:
    """'rl.loss=dapo' -> ('rl.loss', 'dapo'); the value parsed with the field's type."""
    key, sep, text = assignment.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set expects key=value, got {assignment!r}")
    path, value_type = resolve_key(key.strip())
    return path, parse_value(text, value_type, path)


def _set_nested(values: dict[str, Any], path: str, value: Any) -> None:
    *sections, leaf = path.split(".")
    target = values
    for section in sections:
        target = target[section]
    target[leaf] = value


def save_config(config: TrainConfig, run_dir: str | os.PathLike) -> Path:
    """Write `config.json` into the run directory (atomically; OutputError names it when the
    write fails) and return its path."""
    path = Path(run_dir) / CONFIG_FILE_NAME
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, (json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n").encode())
    return path


def read_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """The values of a config file: JSON (a run's config.json) or YAML (.yaml/.yml), nested like
    `TrainConfig.to_dict()`; keys it leaves out keep their defaults."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"config file {path} is unreadable: {error}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            values = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise ConfigError(f"config file {path} is not valid YAML: {' '.join(str(error).split())}") from None
    else:
        try:
            values = json.loads(text)
        except json.JSONDecodeError as error:
            raise ConfigError(f"config file {path} is not valid JSON: {error}") from None
    if not isinstance(values, dict):
        raise ConfigError(f"config file {path}: expected an object of config keys, got {type(values).__name__}")
    return values


def merge_config_values(base: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `values` laid over it, section by section (a nested dict replaces only the
    keys it names)."""
    merged = dict(base)
    for key, value in values.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_config_values(merged[key], value)
        else:
            merged[key] = value
    return merged


def config_from_file(path: str | os.PathLike, base: TrainConfig | None = None) -> TrainConfig:
    """The config of a file laid over `base` (default: the defaults); ConfigError names the file."""
    values = read_config_file(path)
    try:
        return TrainConfig.from_dict(merge_config_values((base or TrainConfig()).to_dict(), values))
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None


def load_config(path: str | os.PathLike) -> TrainConfig:
    """Read a config.json (or a run directory holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / CONFIG_FILE_NAME
    try:
        values = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except json.JSONDecodeError as error:
        raise ConfigError(f"config file {path} is not valid JSON: {error}") from None
    return TrainConfig.from_dict(values)
