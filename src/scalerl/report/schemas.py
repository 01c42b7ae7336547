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
from typing import Annotated, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError

from scalerl.errors import InputError
from scalerl.escaping import plain

Number = Annotated[float, Strict(), Field(allow_inf_nan=False)]
Count = Annotated[int, Strict(), Field(ge=0)]
Interval = Annotated[list[Optional[Number]], Field(min_length=2, max_length=2)]
MAX_FILE_BYTES = 64 * 2**20


class _Schema(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class FitSummary(_Schema):
    params: dict[str, Optional[Number]] = {}
    intervals: dict[str, Interval] = {}
    ceiling_identified: Optional[bool] = None
    n_points: Optional[Count] = None
    warnings: list[str] = []


class SharedCeilingB(_Schema):
    variant: Optional[Union[Number, list[Optional[Number]]]] = None
    base: Optional[Union[Number, list[Optional[Number]]]] = None


class VersusBase(_Schema):
    verdict: Optional[str] = None
    decided_by: Optional[str] = None
    delta_A: Optional[Number] = None
    B_at_shared_A: Optional[SharedCeilingB] = None
    shared_A: Optional[Number] = None
    note: Optional[str] = None


class StudyVariant(_Schema):
    slug: str
    name: Optional[str] = None
    knob: Optional[str] = None
    is_base: bool = False
    metrics: list[str] = []
    fit: Optional[FitSummary] = None
    error: Optional[str] = None
    paper_moves: Optional[str] = None
    versus_base: Optional[VersusBase] = None


class StudySummary(_Schema):
    """study.json."""

    base: Optional[str] = None
    x: Optional[str] = None
    y: Optional[str] = None
    margin: Optional[Number] = None
    level: Optional[Number] = None
    variants: list[StudyVariant]


class SeedFit(_Schema):
    metrics: Optional[str] = None
    params: Optional[dict[str, Optional[Number]]] = None
    ceiling_identified: Optional[bool] = None
    error: Optional[str] = None


class ParameterSpread(_Schema):
    mean: Optional[Number] = None
    lo: Optional[Number] = None
    hi: Optional[Number] = None
    n: Optional[Count] = None


class Effect(_Schema):
    effect: Optional[str] = None
    direction: Optional[str] = None
    delta_A: Optional[Number] = None
    margin: Optional[Number] = None
    delta_B: Optional[Number] = None
    B_margin: Optional[Number] = None
    reason: Optional[str] = None


class AblationVariant(_Schema):
    slug: str
    name: Optional[str] = None
    knob: Optional[str] = None
    is_base: bool = False
    seeds: list[SeedFit] = []
    params: dict[str, ParameterSpread] = {}
    effect: Optional[Effect] = None
    shared_A: Optional[Number] = None
    B_at_shared_A: Optional[SharedCeilingB] = None
    paper: Optional[str] = None


class Margin(_Schema):
    value: Optional[Number] = None
    source: Optional[str] = None
    pooled_seed_sd_A: Optional[Number] = None
    dof: Optional[Count] = None


class AblationSummary(_Schema):
    """ablation.json and sweep.json."""

    kind: Optional[str] = None
    sweep_knob: Optional[str] = None
    base: Optional[str] = None
    x: Optional[str] = None
    y: Optional[str] = None
    level: Optional[Number] = None
    seeds: Optional[Count] = None
    margin: Optional[Margin] = None
    variants: list[AblationVariant]


class ForecastRow(_Schema):
    """A metrics.jsonl row that carries a live forecast (`forecast_A` present)."""

    flops: Optional[Number] = None
    forecast_A: Number
    forecast_A_low: Optional[Number] = None
    forecast_A_high: Optional[Number] = None
    ceiling_identified: Optional[bool] = None


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
