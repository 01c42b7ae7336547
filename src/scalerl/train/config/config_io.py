"""Reading a run's config: nested values into the config dataclasses, dotted keys and `--set
key=value` text, JSON, YAML and TOML files (parsed with the bounds of scalerl.parsing_limits; a
file may name keys nested, dotted, by a unique leaf name or by TRL's GRPOConfig name).

Generic over the root dataclass (scalerl.train.config.train_config passes TrainConfig), so the dataclasses hold
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
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from scalerl.errors import ConfigError
from scalerl.parsing_limits import MAX_INT, load_json, load_toml, load_yaml, shown
from scalerl.rl.config import RLConfig, gather_loss_params, spread_loss_params
from scalerl.rl.registry import loss_parameters
from scalerl.train.config.trl_config import DIRECT_KEYS, is_trl_key, refused_keys, trl_assignments

# Names TRL / transformers users type, and the key that does the job here (suggestions only).
FOREIGN_KEY_NAMES: dict[str, str] = {
    "learning_rate": "optim.lr",
    "num_generations": "sampling.generations_per_prompt",
    "max_completion_length": "sampling.max_new_tokens",
    "batch_size": "sampling.prompts_per_step",
    "per_device_train_batch_size": "sampling.prompts_per_step",
    "max_grad_norm": "optim.grad_clip",
    "loss_type": "rl.loss",
    "scale_rewards": "rl.advantage_norm",
    "model_name_or_path": "model.path",
    "dataset": "task.name",
    "eval_steps": "eval_every",
    "save_steps": "checkpoint_every",
    "save_total_limit": "keep_checkpoints",
    "bf16": "dtype",
    "adam_epsilon": "optim.adam_eps",
    "report_to": "tensorboard",
    "num_train_epochs": "max_steps",
    "warmup_ratio": "optim.warmup_steps",
}
KEYS_COMMAND = "scalerl config keys"


# --- keys of a config dataclass -------------------------------------------------------------------


@functools.cache
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
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected an object, got {shown(values)}")
    types = field_types(cls)
    unknown = [key for key in values if key not in types]
    if unknown:
        raise ConfigError(unknown_keys_message(root, [prefix + str(key) for key in unknown]))
    kwargs = {}
    for name, value in values.items():
        field_type = types[name]
        if dataclasses.is_dataclass(field_type):
            kwargs[name] = build_config(field_type, value, root, prefix + name + ".")
        else:
            kwargs[name] = _coerce(value, field_type, prefix + name)
    return cls(**(gather_loss_params(kwargs) if cls is RLConfig else kwargs))


def _coerce(value: Any, field_type: type, field_path: str) -> Any:
    """Check a JSON value against the field's type (ints are accepted for float fields); numbers
    in range (|int| < 2**63, finite floats)."""
    if field_type in (int, float) and isinstance(value, str):  # YAML reads 1e-6 (no dot) as text
        return parse_value(value, field_type, field_path)
    if field_type is float and isinstance(value, int) and not isinstance(value, bool):
        if not -MAX_INT < value < MAX_INT:
            raise ConfigError(f"{field_path}: number out of range, got {shown(value)}")
        return float(value)
    if field_type is bool and not isinstance(value, bool):
        raise ConfigError(f"{field_path}: expected true/false, got {shown(value)}")
    if field_type is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{field_path}: expected an integer, got {shown(value)}")
    if not isinstance(value, field_type):
        raise ConfigError(f"{field_path}: expected {field_type.__name__}, got {shown(value)}")
    if field_type is int and not -MAX_INT < value < MAX_INT:
        raise ConfigError(f"{field_path}: integer out of range (|n| must be < 2**63), got {shown(value)}")
    if field_type is float and not math.isfinite(value):
        raise ConfigError(f"{field_path}: expected a finite number, got {shown(value)}")
    return value


def close_keys(root: type, key: str, trl_names: bool = False) -> list[str]:
    """Up to 4 keys of `root` close to `key` (never `key` itself), TRL's names for them included
    (`trl_names`: TRL GRPOConfig names too, which a config file accepts)."""
    paths = [path for path in field_paths(root) if path != key]
    leaf = key.rsplit(".", 1)[-1]
    foreign = {
        **FOREIGN_KEY_NAMES,
        **{name: f"rl.{spec.config_key}" for spec in loss_parameters() for name in spec.trl_names},
    }
    close = [foreign[leaf]] if leaf in foreign else []
    close += [p for p in difflib.get_close_matches(key, paths, n=3, cutoff=0.6) if p not in close]
    leaf_to_path = {p.rsplit(".", 1)[-1]: p for p in paths}
    for near_leaf in difflib.get_close_matches(leaf, list(leaf_to_path), n=3, cutoff=0.6):
        if leaf_to_path[near_leaf] not in close:
            close.append(leaf_to_path[near_leaf])
    if trl_names and "." not in key:
        names = [name for name in DIRECT_KEYS if DIRECT_KEYS[name] in paths]
        close[:0] = [name for name in difflib.get_close_matches(key, names, n=2, cutoff=0.8) if name != key]
    return close[:4]


def unknown_key_message(root: type, key: str, trl_names: bool = False) -> str:
    """'unknown config key ...; did you mean ...?' with the closest keys of `root` (`close_keys`)."""
    close = close_keys(root, key, trl_names)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"unknown config key {shown(key)}{hint} (`{KEYS_COMMAND}` lists every key)"


def unknown_keys_message(root: type, keys: list[str], trl_names: bool = False) -> str:
    """`unknown_key_message` for one key; for several, every one with its closest keys in one line."""
    if len(keys) == 1:
        return unknown_key_message(root, keys[0], trl_names)
    parts = []
    for key in keys[:20]:
        close = close_keys(root, key, trl_names)
        parts.append(f"{shown(key)} (did you mean {', '.join(close)}?)" if close else shown(key))
    more = f" and {len(keys) - 20} more" if len(keys) > 20 else ""
    return f"unknown config keys {', '.join(parts)}{more} (`{KEYS_COMMAND}` lists every key)"


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
        raise ConfigError(f"config key {shown(key)} is ambiguous: use one of {', '.join(by_leaf)}")
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
        raise ConfigError(f"{field_path}: expected a boolean (true/false), got {shown(text)}")
    if value_type is int:
        try:
            if len(stripped) > 40:
                raise ValueError(stripped)
            number = float(stripped) if any(c in stripped for c in ".eE") else int(stripped)
        except ValueError:
            raise ConfigError(f"{field_path}: expected an integer, got {shown(text)}") from None
        if not math.isfinite(number) or number != int(number) or not -MAX_INT < int(number) < MAX_INT:
            raise ConfigError(f"{field_path}: expected an integer (|n| < 2**63), got {shown(text)}")
        return int(number)
    if value_type is float:
        try:
            number = float(stripped) if len(stripped) <= 400 else math.nan
        except ValueError:
            raise ConfigError(f"{field_path}: expected a number, got {shown(text)}") from None
        if not math.isfinite(number):
            raise ConfigError(f"{field_path}: expected a finite number, got {shown(text)}")
        return number
    return text


def parse_assignment(root: type, assignment: str) -> tuple[str, Any]:
    """'rl.loss=dapo' -> ('rl.loss', 'dapo'); the value parsed with the type of `root`'s field."""
    key, sep, text = assignment.partition("=")
    key = key.strip().lstrip("+")  # hydra's `+key=value` / `++key=value` set a key the same way here
    if not sep or not key:
        raise ConfigError(f"expected key=value, got {shown(assignment)}")
    path, value_type = resolve_key(root, key)
    return path, parse_value(text, value_type, path)


def _assigned_values(root: type, values: Mapping[str, Any], assignment: str) -> dict[str, Any]:
    """{dotted key: value} of one `key=value`: our key, or a TRL GRPOConfig name (its value read
    as a YAML scalar, mapped as in a TRL config file against the current `values`)."""
    key, sep, text = assignment.partition("=")
    key = key.strip().lstrip("+")
    try:
        resolve_key(root, key)
    except ConfigError as error:
        if not is_trl_key(key):
            if "unknown" in str(error):
                raise ConfigError(unknown_key_message(root, key, trl_names=True)) from None
            raise
    else:
        return dict([parse_assignment(root, assignment)])
    if not sep:
        raise ConfigError(f"expected key=value, got {shown(assignment)}")
    if key in DIRECT_KEYS:
        return dict([parse_assignment(root, f"{DIRECT_KEYS[key]}={text}")])
    value = _scalar(text)
    refused = refused_keys({key: value})
    if refused:
        raise ConfigError("TRL key with no counterpart here: " + "; ".join(refused))
    return trl_assignments({key: value}, values)


def _scalar(text: str) -> Any:
    """A `--set` value in TRL's words: a number, true/false/null, or the text."""
    for parse in (int, float):
        try:
            return parse(text.strip())
        except ValueError:
            pass
    lowered = text.strip().lower()
    return {"true": True, "false": False, "null": None, "none": None}.get(lowered, text.strip())


def _set_path(values: dict[str, Any], path: str, value: Any) -> None:
    """Set dotted `path` in nested `values` in place (each section on the way copied once)."""
    *sections, leaf = path.split(".")
    target = values
    for section in sections:
        target[section] = dict(target[section])
        target = target[section]
    target[leaf] = value


def _get_path(values: Mapping[str, Any], path: str) -> Any:
    for part in path.split("."):
        values = values[part]
    return values


def follow_scaled_keys(root: type, before: Mapping[str, Any], after: dict[str, Any], set_paths: set[str]) -> None:
    """Keys whose field metadata names `follows` (a sibling key) keep their share of it: when the
    followed key changed and the key itself was not set, key = max(1, key * new // old), in place.
    E.g. the thinking budgets (40, 48 of max_new_tokens 64) become 20, 24 at max_new_tokens 32."""
    for section, section_type in field_types(root).items():
        if not dataclasses.is_dataclass(section_type):
            continue
        for item in dataclasses.fields(section_type):
            followed = item.metadata.get("follows")
            path = f"{section}.{item.name}"
            if followed is None or path in set_paths:
                continue
            old, new = _get_path(before, f"{section}.{followed}"), _get_path(after, f"{section}.{followed}")
            value = _get_path(after, path)
            if old != new and isinstance(old, int) and isinstance(new, int) and isinstance(value, int) and old > 0:
                _set_path(after, path, max(1, value * new // old))


def apply_assignments(root: type, values: Mapping[str, Any], assignments: Iterable[str]) -> dict[str, Any]:
    """Nested values of `root` with `key=value` strings applied (a copy; sections copied as changed;
    keys that follow another move with it unless set, see `follow_scaled_keys`)."""
    updated = dict(values)
    set_paths = set()
    for assignment in assignments:
        for path, value in _assigned_values(root, updated, assignment).items():
            _set_path(updated, path, value)
            set_paths.add(path)
    follow_scaled_keys(root, values, updated, set_paths)
    return updated


# --- files ---------------------------------------------------------------------------------------


MAX_CONFIG_BYTES = 1 << 20  # a config of every key is ~5 KB


def _read_text(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"config file {path} is larger than {MAX_CONFIG_BYTES} bytes: not a config")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not UTF-8 text") from None
    except OSError as error:
        raise ConfigError(f"config file {path} is unreadable: {error.strerror or error}") from None


def _parse_json(text: str, path: Path) -> Any:
    try:
        return load_json(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"config file {path} is not valid JSON: {error}") from None
    except ValueError as error:
        raise ConfigError(f"config file {path} {error}") from None


def read_json_config(path: str | os.PathLike) -> Any:
    """The JSON values of a saved config file (ConfigError when it is missing or not JSON)."""
    path = Path(path)
    return _parse_json(_read_text(path), path)


def read_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """The values of a config file: JSON (a run's config.json), YAML (.yaml/.yml) or TOML (.toml);
    keys it leaves out keep their defaults."""
    path = Path(path)
    text = _read_text(path)
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml", ".toml"):
        import tomllib
        import yaml

        kind, load = ("YAML", load_yaml) if suffix != ".toml" else ("TOML", load_toml)
        try:
            values = load(text)
        except (yaml.YAMLError, tomllib.TOMLDecodeError) as error:
            reason = shown(" ".join(str(error).split()))
            raise ConfigError(f"config file {path} is not valid {kind}: {reason}") from None
        except ValueError as error:
            raise ConfigError(f"config file {path} {error}") from None
    else:
        values = _parse_json(text, path)
    if not isinstance(values, dict):
        raise ConfigError(f"config file {path}: expected an object of config keys, got {type(values).__name__}")
    return values


RUN_DIRECTORY_KEY = "output_dir"  # TRL's name of the run directory: the caller's, never a config key


def leaf_names(root: type) -> set[str]:
    """The last part of every dotted key of `root` (what a file may name a key by)."""
    return {path.rsplit(".", 1)[-1] for path in field_paths(root)}


def is_trl_file(root: type, values: Mapping[str, Any]) -> bool:
    """Whether a config file's values are a TRL GRPOConfig: some key is a TRL name and neither a
    key nor a leaf name of `root` (`temperature` alone is ours; `learning_rate` is TRL's)."""
    ours = set(field_paths(root)) | leaf_names(root)
    return any(is_trl_key(str(key)) and str(key) not in ours for key in values)


def file_assignments(root: type, values: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """{dotted key: value} of a config file's values: sections as objects (`rl: {loss: cispo}`),
    dotted keys (`rl.loss: cispo`), unique leaf names (`lr: 1e-4`) and TRL GRPOConfig names
    (scalerl.train.config.trl_config, read against the nested `base` values; a TRL file's missing keys
    take TRL's defaults). Every unknown or refused key is listed in one ConfigError, each unknown
    one with its closest keys."""
    paths = set(field_paths(root))
    sections = {name for name, kind in field_types(root).items() if dataclasses.is_dataclass(kind)}
    ours: dict[str, Any] = {}
    trl: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in values.items():
        key = str(key)
        if key in sections and not (is_trl_key(key) and isinstance(value, str)):  # TRL's optim: adamw_torch
            if not isinstance(value, Mapping):
                raise ConfigError(f"{key}: expected an object of its keys, got {shown(value)}")
            for leaf, leaf_value in value.items():
                if f"{key}.{leaf}" in paths:
                    ours[f"{key}.{leaf}"] = leaf_value
                else:
                    unknown.append(f"{key}.{leaf}")
        elif key in paths:
            ours[key] = value
        elif is_trl_key(key):
            trl[key] = value
        elif "." not in key and sum(path.rsplit(".", 1)[-1] == key for path in paths) == 1:
            ours[resolve_key(root, key)[0]] = value
        elif key != RUN_DIRECTORY_KEY:
            unknown.append(key)
    refused = refused_keys({**trl, **({"max_steps": ours["max_steps"]} if "max_steps" in ours else {})})
    if unknown or refused:
        messages = [unknown_keys_message(root, unknown, trl_names=True)] if unknown else []
        messages += ["TRL keys with no counterpart here: " + "; ".join(refused)] if refused else []
        raise ConfigError("; ".join(messages))
    if trl:
        context = {"max_steps": ours["max_steps"]} if "max_steps" in ours else {}
        assigned = trl_assignments({**trl, **context}, base, with_defaults=is_trl_file(root, values))
        return {**assigned, **ours}
    return ours


def config_over_file(path: str | os.PathLike, base: Any) -> Any:
    """The values of a config file laid over the config `base`, built as `base`'s class (keys
    that follow another move with it unless the file sets them); ConfigError names the file."""
    values = read_config_file(path)
    try:
        before = base.to_dict()
        assigned = file_assignments(type(base), values, before)
        after = dict(before)
        for key, value in assigned.items():
            _set_path(after, key, value)
        follow_scaled_keys(type(base), before, after, set(assigned))
        return type(base).from_dict(after)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None


def run_directory_of(path: str | os.PathLike) -> str | None:
    """The file's `output_dir` (TRL's run directory), or None when it names none."""
    value = read_config_file(path).get(RUN_DIRECTORY_KEY)
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigError(f"{path}: {RUN_DIRECTORY_KEY} must be a folder path, got {shown(value)}")
    return value


def write_json_config(values: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """Write nested config values as indented, key-sorted JSON (atomically; OutputError names the
    file when the write fails) and return the path."""
    from scalerl.train.records.safe_writes import (
        write_atomically,
        writing,
    )  # safetensors: not in the forecaster-only install

    path = Path(path)
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, (json.dumps(values, indent=2, sort_keys=True) + "\n").encode())
    return path
