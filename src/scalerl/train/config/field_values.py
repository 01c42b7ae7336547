"""Values read into their fields' types: the text of a `--set` value (bool words, ints, floats),
a value of a JSON, YAML or TOML file (checked against the field's type, numbers in range), and
nested values (as `to_dict` gives them) built into the config dataclasses. Torch-free.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from scalerl.errors import ConfigError
from scalerl.parsing_limits import MAX_INT, shown
from scalerl.rl.config import RLConfig, gather_loss_params
from scalerl.train.config.key_paths import field_types, unknown_keys_message

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
