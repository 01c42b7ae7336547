"""Validation helpers shared by the settings types of every package: one `ConfigError` naming the field."""

from __future__ import annotations

import math

from scalerl.errors import ConfigError


def require(ok: bool, field_path: str, message: str) -> None:
    """Raise ConfigError("field_path: message") unless `ok`."""
    if not ok:
        raise ConfigError(f"{field_path}: {message}")


def require_choice(value: str, field_path: str, choices: tuple[str, ...]) -> None:
    """`value` must be one of `choices`."""
    require(value in choices, field_path, f"{value!r} is not one of {', '.join(choices)}")


def require_finite(value: float, field_path: str) -> None:
    """`value` is a finite number (no inf, no NaN)."""
    try:
        finite = math.isfinite(value)
    except TypeError:
        finite = False
    require(finite, field_path, f"must be a finite number, got {value!r}")


def require_positive(value: float, field_path: str) -> None:
    """`value` > 0 and finite."""
    require_finite(value, field_path)
    require(value > 0, field_path, f"must be > 0, got {value!r}")


def require_non_negative(value: float, field_path: str) -> None:
    """`value` >= 0 and finite."""
    require_finite(value, field_path)
    require(value >= 0, field_path, f"must be >= 0, got {value!r}")


def require_fraction(value: float, field_path: str, *, open_low: bool = False) -> None:
    """`value` in [0, 1] (or (0, 1] with open_low)."""
    low_ok = value > 0 if open_low else value >= 0
    bounds = "(0, 1]" if open_low else "[0, 1]"
    require(low_ok and value <= 1, field_path, f"must be in {bounds}, got {value!r}")
