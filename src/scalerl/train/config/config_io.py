"""A run's config files: JSON (a run's config.json), YAML and TOML read (parsed with the bounds of
scalerl.parsing_limits), their keys (nested, dotted, a unique leaf name or TRL's GRPOConfig name)
laid over a config, and a config written as JSON.

Generic over the root dataclass (scalerl.train.config.train_config passes TrainConfig). Torch-free,
like the config.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scalerl.errors import ConfigError
from scalerl.parsing_limits import load_json, load_toml, load_yaml, shown
from scalerl.train.config.key_paths import field_paths, field_types, leaf_names, resolve_key, unknown_keys_message
from scalerl.train.config.overrides import follow_scaled_keys, set_path
from scalerl.train.config.trl_config import is_trl_key, refused_keys, trl_assignments

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
            set_path(after, key, value)
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
