"""Every key of a run's config with its type, default and meaning (`scalerl config keys`).

A key's meaning is the `help` in its field's metadata (scalerl.train.config.train_config and the section
dataclasses it nests); a field whose metadata names `choices` (a registry catalog) lists them with
their meanings, and each loss parameter's meaning comes from its spec in scalerl.rl.registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scalerl.rl.registry import loss_parameters
from scalerl.train.config.key_paths import config_field, path_type
from scalerl.train.config.train_config import TrainConfig, all_field_paths


def field_help(path: str) -> str:
    """The `help` metadata of the field declared for a config key ('' when it has none, or no
    field declares the key)."""
    declared = config_field(TrainConfig, path)
    return declared.metadata.get("help", "") if declared is not None else ""


def key_meaning(path: str) -> str:
    """The one-line meaning of a config key: its field's help, with the registry's choices where
    the field selects a block ('policy loss, one of cispo: ...; dapo: ...'), or a loss parameter's
    meaning and bounds from its spec."""
    parameters = {f"rl.{spec.config_key}": spec for spec in loss_parameters()}
    if path in parameters:
        spec = parameters[path]
        return f"{spec.meaning}; finite, in {spec.bounds_text()}"
    declared = config_field(TrainConfig, path)
    choices = declared.metadata.get("choices") if declared is not None else None
    if choices is None:
        return field_help(path)
    return f"{field_help(path)}, one of " + "; ".join(f"{name}: {spec.meaning}" for name, spec in choices.items())


@dataclass(frozen=True)
class KeyInfo:
    """One settable key: dotted path, type name, default value and meaning."""

    path: str
    type_name: str
    default: Any
    meaning: str


def describe_keys() -> list[KeyInfo]:
    """Every key of TrainConfig in declaration order, with its default and meaning."""
    defaults = TrainConfig().to_dict()
    keys = []
    for path in all_field_paths():
        value: Any = defaults
        for part in path.split("."):
            value = value[part]
        keys.append(KeyInfo(path, path_type(TrainConfig, path).__name__, value, key_meaning(path)))
    return keys


def keys_table(keys: list[KeyInfo]) -> str:
    """Plain aligned text, one key per line (never wrapped, so grep and pipes read it)."""
    rows = [(key.path, key.type_name, _show(key.default), key.meaning) for key in keys]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    header = ("key".ljust(widths[0]), "type".ljust(widths[1]), "default".ljust(widths[2]), "meaning")
    lines = ["  ".join(header)]
    lines += [
        "  ".join((row[0].ljust(widths[0]), row[1].ljust(widths[1]), row[2].ljust(widths[2]), row[3])) for row in rows
    ]
    return "\n".join(lines)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value) if value == "" else value
    return repr(value)
