"""The validation completions table (RUN/completions.jsonl, written by scalerl.train.held_out)
mirrored to the trackers: a W&B table and TensorBoard text at the step each sample was validated at.

The file is the one record: the mirrors read the lines appended since their last read, so the
synchronous trainer and the Ray pipeline (whose trainer actor validates) feed them alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

COMPLETIONS_FILE = "completions.jsonl"
COMPLETIONS_TAG = "eval/completions"


class CompletionsFeed:
    """The completions of each metrics row's step, read from RUN/completions.jsonl as it grows.

    `due(step)`: the samples validated at `step` (and untagged ones) among the lines appended
    since the last call; samples of a later step wait for its row (a pipeline's trainer may
    validate ahead of the rows), those of an earlier step (a run's history read on resume) go."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._offset = 0
        self._waiting: list[dict[str, Any]] = []

    def due(self, step: int) -> list[dict[str, Any]]:
        self._waiting += self._new_rows()
        due = [row for row in self._waiting if row.get("step") in (step, None)]
        self._waiting = [row for row in self._waiting if isinstance(row.get("step"), int) and row["step"] > step]
        return due

    def _new_rows(self) -> list[dict[str, Any]]:
        """Whole lines appended since the last read (a line being written waits for its newline)."""
        if not self.path.is_file():
            return []
        with self.path.open("rb") as handle:
            handle.seek(self._offset)
            data = handle.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        rows = []
        for line in complete.splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                rows.append(row)
        return rows


def table_columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every column of the rows but `step`, in the order they first appear."""
    columns: dict[str, None] = {}
    for row in rows:
        columns.update((key, None) for key in row if key != "step")
    return list(columns)


def table_cell(value: Any) -> Any:
    """A cell as the trackers take it: numbers and booleans as they are, None empty, others text."""
    if value is None:
        return ""
    return value if isinstance(value, (int, float, bool, str)) else json.dumps(value, default=str)


def markdown_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows as a Markdown table (TensorBoard's text plugin renders it); '|' is escaped and line
    breaks become <br> so each sample stays one table row."""
    columns = table_columns(rows)

    def cell(value: Any) -> str:
        return str(table_cell(value)).replace("|", "\\|").replace("\r\n", "<br>").replace("\n", "<br>")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(column)) for column in columns) + " |" for row in rows]
    return "\n".join(lines)
