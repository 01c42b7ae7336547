"""Read a compute-performance curve (compute, reward) from a training log.

Formats: CSV (including W&B history exports: `_step`, metric names with `/`), JSONL (one object
per line, sparse evaluation rows among training rows), TensorBoard event files or directories.
Every reader yields a raw table (column name -> list of cell values, None where a cell is
missing); `curve_from_table` then picks the two columns and checks them once for all formats.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scalerl.errors import InputError

# Searched in this order when --x / --y are not given.
DEFAULT_X_COLUMNS = ("gpu_hours", "compute", "flops", "tokens", "step", "_step")
DEFAULT_Y_COLUMNS = ("val_pass_rate", "val/pass_rate", "reward")

CSV_SUFFIXES = (".csv", ".tsv")
JSON_SUFFIXES = (".jsonl", ".ndjson", ".json")

RawTable = dict[str, list]


@dataclass(frozen=True)
class Curve:
    """One run's evaluation points, sorted by strictly increasing compute.

    `compute` and `reward` are read-only float arrays of equal length; rewards of rows that
    shared a compute value are averaged. `x_name` / `y_name` are the log columns they came from.
    """

    compute: np.ndarray
    reward: np.ndarray
    x_name: str
    y_name: str
    source: str

    def __len__(self) -> int:
        return int(self.compute.size)


def read_curve(path, x: str | None = None, y: str | None = None) -> Curve:
    """Read `path` (CSV, JSONL, TensorBoard file or directory) and return its (x, y) curve.

    Without `x` / `y` the first present column of DEFAULT_X_COLUMNS / DEFAULT_Y_COLUMNS is used.
    Raises InputError for a missing or unreadable file, an unknown format, a missing column
    (the message lists the available ones), non-numeric, NaN/inf or negative compute values.
    """
    path = Path(path)
    table = read_table(path)
    return curve_from_table(table, x=x, y=y, source=str(path))


def read_table(path: Path) -> RawTable:
    """Dispatch on the log format and return the raw table of `path`."""
    if not path.exists():
        raise InputError(f"file not found: {path}")
    if path.is_dir() or is_tensorboard_file(path):
        from scalerl.forecast.readers_tensorboard import read_tensorboard_table

        return read_tensorboard_table(path)
    suffix = path.suffix.lower()
    text = _read_text(path)
    if not text.strip():
        raise InputError(f"{path} is empty")
    if suffix in CSV_SUFFIXES:
        return parse_csv_table(text, path, delimiter="\t" if suffix == ".tsv" else ",")
    if suffix in JSON_SUFFIXES:
        return parse_json_table(text, path)
    raise InputError(
        f"unknown log format for {path}: expected .csv, .jsonl, a TensorBoard event file "
        "(events.out.tfevents.*) or a directory of them"
    )


def is_tensorboard_file(path: Path) -> bool:
    """TensorBoard names its event files `events.out.tfevents.<time>.<host>...`."""
    return "tfevents" in path.name


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(f"{path} is not a UTF-8 text file (byte {error.start})") from None
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror or error}") from None


def parse_csv_table(text: str, path: Path, delimiter: str = ",") -> RawTable:
    """CSV with a header row; empty cells are missing values (W&B exports leave them empty)."""
    try:
        rows = [row for row in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter) if row]
    except csv.Error as error:
        raise InputError(f"{path} is not a valid CSV file: {error}") from None
    header = [name.strip() for name in rows[0]]
    if len(set(header)) != len(header):
        raise InputError(f"{path} has duplicated column names in its header: {header}")
    table: RawTable = {name: [] for name in header}
    for line_number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise InputError(
                f"{path} is not a valid CSV file: row {line_number} has {len(row)} fields, "
                f"the header has {len(header)}"
            )
        for name, cell in zip(header, row):
            cell = cell.strip()
            table[name].append(cell if cell else None)
    return table


def parse_json_table(text: str, path: Path) -> RawTable:
    """JSON lines (one object per line) or a single JSON array of objects."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            records = json.loads(stripped)
        except json.JSONDecodeError as error:
            raise InputError(f"{path} is not valid JSON: {error.msg} at line {error.lineno}") from None
        except (ValueError, RecursionError) as error:  # a number past the int-string limit, deep nesting
            raise InputError(f"{path} is not usable JSON: {_short(error)}") from None
        numbered = list(enumerate(records, start=1))
    else:
        numbered = []
        for line_number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                numbered.append((line_number, json.loads(line)))
            except json.JSONDecodeError as error:
                raise InputError(f"line {line_number} of {path} is not valid JSON: {error.msg}") from None
            except (ValueError, RecursionError) as error:  # a number past the int-string limit, deep nesting
                raise InputError(f"line {line_number} of {path} is not usable JSON: {_short(error)}") from None
    return _records_to_table(numbered, path)


def _short(error: Exception) -> str:
    return str(error).split(";")[0]


def _records_to_table(numbered_records, path: Path) -> RawTable:
    names: dict[str, None] = {}
    flat_records = []
    for line_number, record in numbered_records:
        if not isinstance(record, dict):
            raise InputError(f"line {line_number} of {path} is not a JSON object")
        flat = flatten_record(record)
        names.update(dict.fromkeys(flat))
        flat_records.append(flat)
    return {name: [record.get(name) for record in flat_records] for name in names}


def flatten_record(record: dict, prefix: str = "") -> dict:
    """Nested objects become `/`-joined names, as loggers spell them: {"val": {"pass_rate": x}} -> val/pass_rate."""
    flat = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten_record(value, prefix=f"{name}/"))
        else:
            flat[name] = value
    return flat


def choose_column(table: RawTable, requested: str | None, defaults, axis: str, source: str) -> str:
    """The requested column, or the first default present; InputError lists what exists."""
    available = ", ".join(table) or "none"
    if requested is not None:
        if requested not in table:
            raise InputError(f"column '{requested}' not found in {source}; available columns: {available}")
        return requested
    for name in defaults:
        if name in table:
            return name
    raise InputError(
        f"none of the default {axis} columns ({', '.join(defaults)}) is in {source}; "
        f"pass --{axis} (available columns: {available})"
    )


def cell_to_float(cell, column: str, row_number: int, source: str) -> float | None:
    """A numeric cell as float, None when missing; InputError for text, booleans, NaN or inf.

    Missing cells (empty, null, absent key) are not errors: sparse evaluation rows are normal.
    A value written out as NaN or inf is an error, since it is a broken measurement.
    """
    if cell is None:
        return None
    if isinstance(cell, bool) or isinstance(cell, (list, dict)):
        raise InputError(f"non-numeric value {cell!r} in column '{column}' at row {row_number} of {source}")
    try:
        value = float(cell)
    except (TypeError, ValueError):
        raise InputError(
            f"non-numeric value {cell!r} in column '{column}' at row {row_number} of {source}"
        ) from None
    except OverflowError:  # a JSON integer beyond the float range
        value = math.inf
    if not math.isfinite(value):
        raise InputError(f"column '{column}' has a non-finite value ({cell}) at row {row_number} of {source}")
    return value


def curve_from_table(table: RawTable, x: str | None, y: str | None, source: str) -> Curve:
    """Pick the x and y columns, keep rows where both are present, merge duplicates, sort."""
    x_name = choose_column(table, x, DEFAULT_X_COLUMNS, "x", source)
    y_name = choose_column(table, y, DEFAULT_Y_COLUMNS, "y", source)
    pairs = []
    for row_number, (x_cell, y_cell) in enumerate(zip(table[x_name], table[y_name]), start=1):
        x_value = cell_to_float(x_cell, x_name, row_number, source)
        y_value = cell_to_float(y_cell, y_name, row_number, source)
        if x_value is None or y_value is None:
            continue
        if x_value < 0:
            raise InputError(f"negative compute {x_value:g} in column '{x_name}' at row {row_number} of {source}")
        pairs.append((x_value, y_value))
    if not pairs:
        raise InputError(f"{source} has no row where both '{x_name}' and '{y_name}' are present")
    compute, reward = merge_duplicate_compute(np.array(pairs)[:, 0], np.array(pairs)[:, 1])
    return Curve(_read_only(compute), _read_only(reward), x_name, y_name, source)


def merge_duplicate_compute(compute: np.ndarray, reward: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort by compute and average the rewards of points that share a compute value.

    The result has strictly increasing compute (repeated evaluations of one checkpoint become
    their mean, which is the better estimate of the reward at that compute).
    """
    unique_compute, inverse = np.unique(compute, return_inverse=True)
    reward_sum = np.bincount(inverse, weights=reward, minlength=unique_compute.size)
    count = np.bincount(inverse, minlength=unique_compute.size)
    return unique_compute, reward_sum / count


def _read_only(values: np.ndarray) -> np.ndarray:
    values = np.array(values, dtype=float)
    values.setflags(write=False)
    return values
