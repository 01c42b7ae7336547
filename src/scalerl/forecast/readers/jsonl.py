"""JSON logs: JSON lines (the project's metrics.jsonl, verl's file logger), or one JSON array.

verl's file logger writes `{"step": N, "data": {metric: value, ...}}` per line; those records are
unwrapped to flat rows. Nested objects become `/`-joined names, as loggers spell them.
A torn last line (a writer killed mid-write; metrics.jsonl appends whole lines) is skipped with
a note; a bad line anywhere else is an error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from scalerl.errors import InputError
from scalerl.forecast.readers.table import LogTable

RUN_KEYS: tuple[str, ...] = ("run", "run_name", "run_id", "series")
MAX_DEPTH = 32  # nested objects in one log record (loggers nest two or three levels)
CHUNK_ROWS = 10_000


def read_json_table(text: str, path: Path) -> LogTable:
    """The table of a JSON-lines file or of a JSON array of objects."""
    notes: list[str] = []
    stripped = text.lstrip()
    if stripped.startswith("["):
        numbered = enumerate(load_json(stripped, path), start=1)
    else:
        numbered = parse_json_lines(text, path, notes)
    columns = ColumnBuilder()
    chunk: list[dict] = []
    for line, record in numbered:
        record = check_object(record, line, path)
        try:
            chunk.append(unwrap_record(record))
        except InputError as error:
            raise InputError(f"line {line} of {path}: {error}") from None
        if len(chunk) == CHUNK_ROWS:
            columns.extend(chunk)
            chunk = []
    columns.extend(chunk)
    run_column = next((name for name in RUN_KEYS if name in columns.columns), None)
    return LogTable(columns.columns, notes=notes, run_column=run_column)


class ColumnBuilder:
    """Rows added a chunk at a time, kept as columns (a key first seen late is None in earlier rows).

    Memory is one pointer per cell plus the values; no list of every row's dict is kept.
    """

    def __init__(self) -> None:
        self.columns: dict[str, list] = {}
        self.n_rows = 0

    def extend(self, records: list[dict]) -> None:
        """Append flat rows; `columns` keeps names in the order they were first seen."""
        for record in records:
            if not self.columns.keys() >= record.keys():
                for name in record:
                    self.columns.setdefault(name, [None] * self.n_rows)
        for name, column in self.columns.items():
            column.extend([record.get(name) for record in records])
        self.n_rows += len(records)


def load_json(text: str, path: Path, where: str = "") -> object:
    """json.loads with every failure as InputError (bad syntax, huge integers, deep nesting)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{where}{path} is not valid JSON: {error.msg} at line {error.lineno}") from None
    except (ValueError, RecursionError) as error:  # a number past the int-string limit, deep nesting
        raise InputError(f"{where}{path} is not usable JSON: {str(error).split(';')[0]}") from None


def parse_json_lines(text: str, path: Path, notes: list[str]) -> Iterator[tuple[int, object]]:
    """(line number, value) of each non-blank line; a torn last line is skipped with a note.

    Lines are split a chunk of the text at a time, so no list of every line is held.
    """
    parsed_any = False
    for line_number, line, is_last in numbered_lines(text):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            if is_last and not text.endswith("\n") and parsed_any:
                notes.append(f"skipped the unfinished last line {line_number} of {path} (a write cut short)")
                continue
            raise InputError(f"line {line_number} of {path} is not valid JSON: {error.msg}") from None
        except (ValueError, RecursionError) as error:
            raise InputError(f"line {line_number} of {path} is not usable JSON: {str(error).split(';')[0]}") from None
        parsed_any = True
        yield line_number, value


def numbered_lines(text: str, chunk_chars: int = 1 << 20) -> Iterator[tuple[int, str, bool]]:
    """(line number, line, whether it is the last line) as str.splitlines numbers them.

    The text is cut after a newline at least every `chunk_chars` characters; splitlines breaks at
    \n among others, so cutting there keeps the same lines.
    """
    line_number, start = 0, 0
    while start < len(text):
        cut = text.find("\n", start + chunk_chars)
        end = len(text) if cut == -1 else cut + 1
        lines = text[start:end].splitlines()
        for index, line in enumerate(lines):
            line_number += 1
            yield line_number, line, end == len(text) and index == len(lines) - 1
        start = end


def check_object(record: object, line_number: int, path: Path) -> dict:
    """`record` when it is a JSON object; InputError naming the line otherwise."""
    if not isinstance(record, dict):
        raise InputError(f"line {line_number} of {path} is not a JSON object")
    return record


def unwrap_record(record: dict) -> dict:
    """verl's `{"step": N, "data": {...}}` as one flat row; other records flattened as they are.

    InputError (without a line number: the caller adds it) for nesting deeper than MAX_DEPTH or
    a flattened name that a key of the record already holds.
    """
    if dict not in map(type, record.values()):
        return record  # already flat (most lines of a long log): no copy
    if set(record) == {"step", "data"} and isinstance(record["data"], dict):
        return flat_row({"step": record["step"]}, record["data"])
    return flatten_record(record)


def flat_row(head: dict, nested: dict) -> dict:
    """`head`'s keys followed by `nested` flattened, a name in both being an error."""
    row = dict(head)
    for name, value in flatten_record(nested).items():
        if name in row:
            raise InputError(f"'{_short(name)}' is both a key and a flattened nested name")
        row[name] = value
    return row


def flatten_record(record: dict, prefix: str = "", depth: int = 1) -> dict:
    """Nested objects become `/`-joined names: {"val": {"pass_rate": x}} -> val/pass_rate.

    A name written both ways (`"val/pass_rate"` beside `"val": {"pass_rate": ...}`) is an
    InputError, never one value silently replacing the other; so is nesting deeper than MAX_DEPTH.
    """
    if depth > MAX_DEPTH:
        raise InputError(f"objects nested deeper than {MAX_DEPTH} levels (under '{_short(prefix)}')")
    flat: dict = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        inner = flatten_record(value, prefix=f"{name}/", depth=depth + 1) if isinstance(value, dict) else {name: value}
        for inner_name, inner_value in inner.items():
            if inner_name in flat:
                raise InputError(f"'{_short(inner_name)}' is both a key and a flattened nested name")
            flat[inner_name] = inner_value
    return flat


def _short(text: str, limit: int = 200) -> str:
    """At most `limit` characters of a name for an error message."""
    return text if len(text) <= limit else f"{text[:limit]}..."
