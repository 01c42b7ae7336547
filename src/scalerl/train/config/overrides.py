"""`--set key=value` assignments applied to a config's nested values: a key by its dotted path, its
unique leaf name or TRL's GRPOConfig name, and keys whose field `follows` another key keeping their
share of it. Torch-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from scalerl.errors import ConfigError
from scalerl.parsing_limits import shown
from scalerl.train.config.field_values import parse_value
from scalerl.train.config.key_paths import field_types, resolve_key, unknown_key_message
from scalerl.train.config.trl_config import DIRECT_KEYS, is_trl_key, refused_keys, trl_assignments


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


def set_path(values: dict[str, Any], path: str, value: Any) -> None:
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
                set_path(after, path, max(1, value * new // old))


def apply_assignments(root: type, values: Mapping[str, Any], assignments: Iterable[str]) -> dict[str, Any]:
    """Nested values of `root` with `key=value` strings applied (a copy; sections copied as changed;
    keys that follow another move with it unless set, see `follow_scaled_keys`)."""
    updated = dict(values)
    set_paths = set()
    for assignment in assignments:
        for path, value in _assigned_values(root, updated, assignment).items():
            set_path(updated, path, value)
            set_paths.add(path)
    follow_scaled_keys(root, values, updated, set_paths)
    return updated
