"""JSON logs: JSON lines (the project's metrics.jsonl, verl's file logger), or one JSON array.

verl's file logger writes `{"step": N, "data": {metric: value, ...}}` per line; those records are
unwrapped to flat rows. Nested objects become `/`-joined names, as loggers spell them.
A torn last line (a writer killed mid-write; metrics.jsonl appends whole lines) is skipped with
a note; a bad line anywhere else is an error.
"""

from __future__ import annotations

import json
from pathlib import Path

from scalerl.errors import InputError
from scalerl.forecast.readers.table import LogTable, records_to_columns

RUN_KEYS: tuple[str, ...] = ("run", "run_name", "run_id", "series")


def read_json_table(text: str, path: Path) -> LogTable:
    """The table of a JSON-lines file or of a JSON array of objects."""
    notes: list[str] = []
    stripped = text.lstrip()
    if stripped.startswith("["):
        numbered = list(enumerate(load_json(stripped, path), start=1))
    else:
        numbered = parse_json_lines(text, path, notes)
    records = [unwrap_record(check_object(record, line, path)) for line, record in numbered]
    columns = records_to_columns(records)
    run_column = next((name for name in RUN_KEYS if name in columns), None)
    return LogTable(columns, notes=notes, run_column=run_column)


def load_json(text: str, path: Path, where: str = ""):
    """json.loads with every failure as InputError (bad syntax, huge integers, deep nesting)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{where}{path} is not valid JSON: {error.msg} at line {error.lineno}") from None
    except (ValueError, RecursionError) as error:  # a number past the int-string limit, deep nesting
        raise InputError(f"{where}{path} is not usable JSON: {str(error).split(';')[0]}") from None


def parse_json_lines(text: str, path: Path, notes: list[str]) -> list[tuple[int, object]]:
    """(line number, value) of each non-blank line; a torn last line is skipped with a note."""
    lines = text.splitlines()
    numbered = []
    for line_number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            numbered.append((line_number, json.loads(line)))
        except json.JSONDecodeError as error:
            if line_number == len(lines) and not text.endswith("\n") and numbered:
                notes.append(f"skipped the unfinished last line {line_number} of {path} (a write cut short)")
                continue
            raise InputError(f"line {line_number} of {path} is not valid JSON: {error.msg}") from None
        except (ValueError, RecursionError) as error:
            raise InputError(f"line {line_number} of {path} is not usable JSON: {str(error).split(';')[0]}") from None
    return numbered


def check_object(record, line_number: int, path: Path) -> dict:
    """`record` when it is a JSON object; InputError naming the line otherwise."""
    if not isinstance(record, dict):
        raise InputError(f"line {line_number} of {path} is not a JSON object")
    return record


def unwrap_record(record: dict) -> dict:
    """verl's `{"step": N, "data": {...}}` as one flat row; other records flattened as they are."""
    if set(record) == {"step", "data"} and isinstance(record["data"], dict):
        return {"step": record["step"], **flatten_record(record["data"])}
    return flatten_record(record)


def flatten_record(record: dict, prefix: str = "") -> dict:
    """Nested objects become `/`-joined names: {"val": {"pass_rate": x}} -> val/pass_rate."""
    flat = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten_record(value, prefix=f"{name}/"))
        else:
            flat[name] = value
    return flat
