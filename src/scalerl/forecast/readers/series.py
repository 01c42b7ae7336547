"""Keep one run's rows, in order: never average different runs into one curve.

- Long format (a run column): `run` picks one series; several series and no choice -> error.
- A resume that repeats a range of x: the later rows replace the earlier ones (what W&B and
  TensorBoard show after a resume), with a note naming the range.
- Runs appended in one file (x goes back to the start of the file): an error naming the
  segments, or the segment picked with `segment` (1-based).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalerl.errors import InputError
from scalerl.forecast.readers.table import Column, cells


@dataclass(frozen=True)
class Segment:
    """Rows [first_row, last_row] (1-based, file order) of one appended run and its x range."""

    first_row: int
    last_row: int
    low: float
    high: float

    def describe(self, number: int) -> str:
        """`segment 2: rows 41-80, x 0-39`."""
        return f"segment {number}: rows {self.first_row}-{self.last_row}, x {self.low:g}-{self.high:g}"


def run_rows(column: Column, run: str | None, run_column: str, source: str) -> np.ndarray:
    """Indices of the rows of one run of a long-format file (InputError lists the runs)."""
    labels = cells(column)
    names = [label_text(label) for label in labels]
    distinct = list(dict.fromkeys(name for name, label in zip(names, labels) if label is not None))
    if run is None:
        if len(distinct) > 1:
            shown = ", ".join(distinct[:20]) + (f" and {len(distinct) - 20} more" if len(distinct) > 20 else "")
            raise InputError(
                f"{source} holds {len(distinct)} runs in column '{run_column}' ({shown}); "
                "pick one with --run NAME (a forecast of several runs averaged is wrong)"
            )
        return np.flatnonzero([label is not None for label in labels])
    if run not in distinct:
        raise InputError(f"no run '{run}' in column '{run_column}' of {source}; runs: {', '.join(distinct[:20])}")
    return np.flatnonzero([name == run for name in names])


def in_order(keys: np.ndarray, rows: np.ndarray) -> np.ndarray | None:
    """The rows with a key when their keys never go down (the common case, vectorised), else None."""
    placed = rows[~np.isnan(keys[rows])]
    if np.all(np.diff(keys[placed]) >= 0):
        return placed.astype(int)
    return None


def label_text(label: object) -> str:
    """A run label as the user types it: a number read as 3.0 is run `3`."""
    if isinstance(label, float) and label.is_integer():
        return str(int(label))
    return str(label)


def resolve_order(
    keys: np.ndarray, rows: np.ndarray, segment: int | None, source: str, key_name: str
) -> tuple[np.ndarray, list[str]]:
    """The rows (indices into `keys`) that make one run, and notes on what was dropped.

    `keys` is the ordering column (x, or the step when x is accumulated), NaN where missing.
    A key below the previous one starts a new segment when it is <= the segment's first key
    (a new run appended) and is a resume otherwise: the earlier rows with key >= it are dropped.
    """
    ordered = in_order(keys, rows)
    if ordered is not None:
        if segment not in (None, 1):
            raise InputError(f"{source} holds one run (no segments); --segment {segment} does not exist")
        return ordered, []
    notes: list[str] = []
    segments: list[list[int]] = [[]]
    starts: list[float] = []
    resumed: list[tuple[float, float]] = []
    previous = None
    for row in rows:
        key = keys[row]
        if key != key:  # NaN: no ordering value, the row cannot be placed
            continue
        kept = segments[-1]
        if previous is not None and key < previous:
            if key <= starts[-1]:
                segments.append([])
                kept = segments[-1]
            else:
                resumed.append((key, previous))
                while kept and keys[kept[-1]] >= key:
                    kept.pop()
        if not kept and len(starts) < len(segments):
            starts.append(key)
        kept.append(int(row))
        previous = key
    segments = [s for s in segments if s]
    for low, high in resumed:
        notes.append(
            f"{source}: '{key_name}' {low:g}-{high:g} was logged twice (a resumed run); "
            "the later rows replace the earlier ones"
        )
    if len(segments) > 1:
        described = [Segment(s[0] + 1, s[-1] + 1, float(keys[s[0]]), float(np.max(keys[s]))) for s in segments]
        if segment is None:
            listing = "; ".join(d.describe(i) for i, d in enumerate(described, start=1))
            raise InputError(
                f"{source} holds {len(segments)} runs appended one after another ('{key_name}' goes back to "
                f"its start): {listing}; pick one with --segment N"
            )
        if not 1 <= segment <= len(segments):
            raise InputError(f"--segment must be between 1 and {len(segments)} for {source}, got {segment}")
        notes.append(f"{source}: using {described[segment - 1].describe(segment)} of {len(segments)}")
        return np.array(segments[segment - 1], dtype=int), notes
    if segment not in (None, 1):
        raise InputError(f"{source} holds one run (no segments); --segment {segment} does not exist")
    return np.array(segments[0] if segments else [], dtype=int), notes
