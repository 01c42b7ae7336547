"""Schemas of the files `scalerl report` reads: study.json (`scalerl study`), ablation.json and
sweep.json (`scalerl ablate`) and the live-forecast rows of a metrics.jsonl (pydantic).

Every file is checked before anything is drawn; the first problem becomes one InputError naming
the file and the field (`variants[2].fit.intervals.A: List should have at least 2 items`). Numbers
are strict (a string or a boolean where a number belongs is refused) and finite; unknown fields
are ignored (newer writers may add some).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError

from scalerl.errors import InputError
from scalerl.escaping import plain

Number = Annotated[float, Strict(), Field(allow_inf_nan=False)]
Count = Annotated[int, Strict(), Field(ge=0)]
Interval = Annotated[list[Number | None], Field(min_length=2, max_length=2)]
MAX_FILE_BYTES = 64 * 2**20


class _Schema(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class FitSummary(_Schema):
    params: dict[str, Number | None] = {}
    intervals: dict[str, Interval] = {}
    ceiling_identified: bool | None = None
    n_points: Count | None = None
    warnings: list[str] = []


class SharedCeilingB(_Schema):
    variant: Number | list[Number | None] | None = None
    base: Number | list[Number | None] | None = None


class VersusBase(_Schema):
    verdict: str | None = None
    decided_by: str | None = None
    delta_A: Number | None = None
    B_at_shared_A: SharedCeilingB | None = None
    shared_A: Number | None = None
    note: str | None = None


class StudyVariant(_Schema):
    slug: str
    name: str | None = None
    knob: str | None = None
    is_base: bool = False
    metrics: list[str] = []
    fit: FitSummary | None = None
    error: str | None = None
    paper_moves: str | None = None
    versus_base: VersusBase | None = None


class StudySummary(_Schema):
    """study.json."""

    base: str | None = None
    x: str | None = None
    y: str | None = None
    margin: Number | None = None
    level: Number | None = None
    variants: list[StudyVariant]


class SeedFit(_Schema):
    metrics: str | None = None
    params: dict[str, Number | None] | None = None
    ceiling_identified: bool | None = None
    error: str | None = None


class ParameterSpread(_Schema):
    mean: Number | None = None
    lo: Number | None = None
    hi: Number | None = None
    n: Count | None = None


class Effect(_Schema):
    effect: str | None = None
    direction: str | None = None
    delta_A: Number | None = None
    margin: Number | None = None
    delta_B: Number | None = None
    B_margin: Number | None = None
    reason: str | None = None


class AblationVariant(_Schema):
    slug: str
    name: str | None = None
    knob: str | None = None
    is_base: bool = False
    seeds: list[SeedFit] = []
    params: dict[str, ParameterSpread] = {}
    effect: Effect | None = None
    shared_A: Number | None = None
    B_at_shared_A: SharedCeilingB | None = None
    paper: str | None = None


class Margin(_Schema):
    value: Number | None = None
    source: str | None = None
    pooled_seed_sd_A: Number | None = None
    dof: Count | None = None


class AblationSummary(_Schema):
    """ablation.json and sweep.json."""

    kind: str | None = None
    sweep_knob: str | None = None
    base: str | None = None
    x: str | None = None
    y: str | None = None
    level: Number | None = None
    seeds: Count | None = None
    margin: Margin | None = None
    variants: list[AblationVariant]


class ForecastRow(_Schema):
    """A metrics.jsonl row that carries a live forecast (`forecast_A` present)."""

    flops: Number | None = None
    forecast_A: Number
    forecast_A_low: Number | None = None
    forecast_A_high: Number | None = None
    ceiling_identified: bool | None = None


SUMMARY_SCHEMAS: dict[str, type[_Schema]] = {"study": StudySummary, "ablation": AblationSummary}


_TYPE_TAGS = frozenset({"float", "int", "str", "bool", "list", "dict", "none"})


def field_path(location: tuple) -> str:
    """pydantic's error location as `variants[2].fit.intervals.A` (the union branch names dropped)."""
    text = ""
    for part in location:
        if isinstance(part, int):
            text += f"[{part}]"
        elif isinstance(part, str) and not ("[" in part or part.startswith("function-") or part in _TYPE_TAGS):
            text += f".{part}" if text else part
    return text or "(top level)"


def first_problem(error: ValidationError) -> str:
    """`field: message` of the first validation error (one line)."""
    details = error.errors(include_url=False, include_context=False, include_input=False)[0]
    return f"field {field_path(tuple(details['loc']))}: {details['msg']}"


def read_json_file(path: Path):
    """The JSON document of `path`; InputError for unreadable, non-UTF-8, huge, invalid or hostile JSON."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise InputError(f"{plain(path)}: {size} bytes, more than a summary file holds ({MAX_FILE_BYTES} at most)")
        data = path.read_bytes()
    except OSError as error:
        raise InputError(f"{plain(path)}: not readable ({error.strerror or error})") from None
    return parse_json_text(data, str(path))


def parse_json_text(data: bytes, source: str):
    """json.loads of UTF-8 bytes with every failure as InputError naming `source`."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(f"{plain(source)}: not UTF-8 text (byte {error.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{plain(source)}: not valid JSON ({error.msg} at line {error.lineno})") from None
    except (ValueError, RecursionError) as error:  # a number past the int-string limit, deep nesting
        raise InputError(f"{plain(source)}: not usable JSON ({str(error).split(';')[0]})") from None


def validate_summary(document, kind: str, source: str) -> dict:
    """The summary as checked plain data (unknown fields dropped); InputError naming file and field."""
    try:
        model = SUMMARY_SCHEMAS[kind].model_validate(document)
    except ValidationError as error:
        raise InputError(f"{plain(source)}: {first_problem(error)}") from None
    return model.model_dump()


def validate_forecast_row(row: dict, line_number: int, source: str) -> ForecastRow:
    """A metrics row with `forecast_A`, checked; InputError naming file, line and field."""
    try:
        return ForecastRow.model_validate(row)
    except ValidationError as error:
        raise InputError(f"{plain(source)}: line {line_number}: {first_problem(error)}") from None
