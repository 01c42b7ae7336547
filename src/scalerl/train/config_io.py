"""Reading a run's config: nested values into the config dataclasses, dotted keys and `--set
key=value` text, JSON and YAML files.

Generic over the root dataclass (scalerl.train.config passes TrainConfig), so the dataclasses hold
only their fields, meanings and checks. A section's keys are its fields, except the `rl` section,
whose `loss_params` field is one key per registered loss parameter (scalerl.rl.config).
Torch-free, like the config.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
import os
import typing
from pathlib import Path
from typing import Any, Iterable, Mapping

from scalerl.errors import ConfigError
from scalerl.rl.config import RLConfig, gather_loss_params, spread_loss_params
from scalerl.rl.registry import loss_parameters
from scalerl.train.safe_writes import write_atomically, writing

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


# --- keys of a config dataclass -------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _type_hints(cls: type) -> dict[str, Any]:
    # Fixed per class and slow to evaluate (~3 ms): `--set` resolves every key through it.
    return typing.get_type_hints(cls)


def field_types(cls: type) -> dict[str, Any]:
    """The keys of a section and their types (RLConfig: one per registered loss parameter in
    place of its loss_params)."""
    types = _type_hints(cls)
    return spread_loss_params(types) if cls is RLConfig else dict(types)


def field_paths(root: type) -> list[str]:
    """Every settable dotted path of `root`, e.g. ['model.path', ..., 'tensorboard']."""
    paths = []
    for name, field_type in field_types(root).items():
        if dataclasses.is_dataclass(field_type):
            paths.extend(f"{name}.{leaf}" for leaf in field_types(field_type))
        else:
            paths.append(name)
    return paths


def path_type(root: type, path: str) -> type:
    """The declared type of the key at dotted `path`."""
    cls: Any = root
    for part in path.split("."):
        cls = field_types(cls)[part]
    return cls


def config_field(root: type, path: str) -> dataclasses.Field | None:
    """The dataclass field declared for dotted `path` (its default and metadata), or None for a key
    no field declares (a loss parameter of the rl section)."""
    *sections, leaf = path.split(".")
    cls: Any = root
    for section in sections:
        cls = field_types(cls)[section]
    return next((item for item in dataclasses.fields(cls) if item.name == leaf), None)


# --- nested values -> dataclasses ----------------------------------------------------------------


def build_config(cls: type, values: Mapping[str, Any], root: type | None = None, prefix: str = "") -> Any:
    """`cls` built from nested values (as `to_dict` gives them), each checked against its field's
    type; an unknown key raises ConfigError naming the close keys of `root` (default `cls`)."""
    root = root or cls
    if not isinstance(values, Mapping):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected an object, got {values!r}")
    types = field_types(cls)
    unknown = [key for key in values if key not in types]
    if unknown:
        raise ConfigError(unknown_key_message(root, prefix + unknown[0]))
    kwargs = {}
    for name, value in values.items():
        field_type = types[name]
        if dataclasses.is_dataclass(field_type):
            kwargs[name] = build_config(field_type, value, root, prefix + name + ".")
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


def unknown_key_message(root: type, key: str) -> str:
    """'unknown config key ...; did you mean ...?' with the closest keys of `root`, TRL's names
    for them included."""
    paths = field_paths(root)
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


# --- `--set key=value` ----------------------------------------------------------------------------


def resolve_key(root: type, key: str) -> tuple[str, type]:
    """Full dotted path and type for `key` (a dotted path or an unambiguous leaf name)."""
    types = {p: path_type(root, p) for p in field_paths(root)}
    if key in types:
        return key, types[key]
    by_leaf = [p for p in types if p.rsplit(".", 1)[-1] == key]
    if len(by_leaf) == 1:
        return by_leaf[0], types[by_leaf[0]]
    if len(by_leaf) > 1:
        raise ConfigError(f"config key {key!r} is ambiguous: use one of {', '.join(by_leaf)}")
    raise ConfigError(unknown_key_message(root, key))


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


def parse_assignment(root: type, assignment: str) -> tuple[str, Any]:
    """'rl.loss=dapo' -> ('rl.loss', 'dapo'); the value parsed with the type of `root`'s field."""
    key, sep, text = assignment.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set expects key=value, got {assignment!r}")
    path, value_type = resolve_key(root, key.strip())
    return path, parse_value(text, value_type, path)


def apply_assignments(root: type, values: Mapping[str, Any], assignments: Iterable[str]) -> dict[str, Any]:
    """Nested values of `root` with `key=value` strings applied (a copy; sections copied as changed)."""
    updated = dict(values)
    for assignment in assignments:
        path, value = parse_assignment(root, assignment)
        *sections, leaf = path.split(".")
        target = updated
        for section in sections:
            target[section] = dict(target[section])
            target = target[section]
        target[leaf] = value
    return updated


# --- files ---------------------------------------------------------------------------------------


def _read_text(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"config file {path} is unreadable: {error}") from None


def _parse_json(text: str, path: Path) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"config file {path} is not valid JSON: {error}") from None


def read_json_config(path: str | os.PathLike) -> Any:
    """The JSON values of a saved config file (ConfigError when it is missing or not JSON)."""
    path = Path(path)
    return _parse_json(_read_text(path), path)


def read_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """The values of a config file: JSON (a run's config.json) or YAML (.yaml/.yml), nested like
    `TrainConfig.to_dict()`; keys it leaves out keep their defaults."""
    path = Path(path)
    text = _read_text(path)
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            values = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise ConfigError(f"config file {path} is not valid YAML: {' '.join(str(error).split())}") from None
    else:
        values = _parse_json(text, path)
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


def config_over_file(path: str | os.PathLike, base: Any) -> Any:
    """The values of a config file laid over the config `base`, built as `base`'s class;
    ConfigError names the file."""
    values = read_config_file(path)
    try:
        return type(base).from_dict(merge_config_values(base.to_dict(), values))
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None


def write_json_config(values: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """Write nested config values as indented, key-sorted JSON (atomically; OutputError names the
    file when the write fails) and return the path."""
    path = Path(path)
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, (json.dumps(values, indent=2, sort_keys=True) + "\n").encode())
    return path
