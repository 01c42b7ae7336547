"""Which evaluations a curve keeps, and why the others are left out.

An evaluation is a row with a reward (y) value. One logged before training, at step 0, without
the compute counter (verl validates before its first step and logs no token count there; TRL
evaluates at step 0 before any token is counted) is R0 at compute 0. Every other evaluation the
curve does not use is counted by reason and named by its step (or row), so nothing logged is
dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalerl.forecast.readers.columns import STEP_COLUMNS
from scalerl.forecast.readers.table import LogTable, column_to_floats

MAX_NAMED = 6  # steps or rows named per reason; the count says how many there are


@dataclass(frozen=True)
class UnusedRows:
    """Evaluations of one reason left out of the curve: `count` rows, the first of them named in
    `where` (`steps 3, 8` or `rows 4, 9`)."""

    reason: str
    count: int
    where: str

    def describe(self) -> str:
        """`2 without 'tokens' (steps 3, 8)`."""
        return f"{self.count} {self.reason} ({self.where})"

    def to_dict(self) -> dict:
        return {"reason": self.reason, "count": self.count, "where": self.where}


def evaluation_step_column(
    table: LogTable, evaluation_rows: np.ndarray, x_name: str, source: str
) -> tuple[str | None, np.ndarray | None]:
    """(name, values) of the step column that orders the evaluations: the first of STEP_COLUMNS
    (other than x) with a value on every evaluation row, else the first present; (None, None)
    when the log has none. verl's `training/global_step` is logged on training rows only, its
    console `step:N` and TensorBoard's event step on every row."""
    present = [name for name in STEP_COLUMNS if name in table.columns and name != x_name]
    if not present:
        return None, None
    covering = [name for name in present if _has_every_value(table.columns[name], evaluation_rows)]
    name = (covering or present)[0]
    return name, column_to_floats(table.columns[name], name, source)


@dataclass(frozen=True)
class OrderingAxis:
    """How a run's rows are ordered and which evaluations come before training: `x_values` (0
    filled in where an evaluation before training had none), `keys` (the step when x is
    accumulated, else x) named `key_name`, `placing` (the keys resolve_order sees: NaN at the
    evaluations before training of an x that is not accumulated, placed once the run is found, as a
    0 among them would hide an appended run), `steps` (the step column, None without one)."""

    x_values: np.ndarray
    keys: np.ndarray
    key_name: str
    placing: np.ndarray
    steps: np.ndarray | None
    before_training: np.ndarray


def ordering_axis(
    table: LogTable, x_name: str, x_values: np.ndarray, evaluations: np.ndarray, accumulate: bool, source: str
) -> OrderingAxis:
    """The OrderingAxis of a run whose evaluations are the rows `evaluations`."""
    step_name, steps = evaluation_step_column(table, evaluations, x_name, source)
    if accumulate:  # ordered by the step; the running total at step 0 is the compute before training
        keys = x_values if steps is None else steps
        before = (
            evaluations[:0]
            if steps is None
            else evaluations[np.isnan(x_values[evaluations]) & (steps[evaluations] == 0)]
        )
        return OrderingAxis(x_values, keys, step_name or x_name, keys, steps, before)
    x_values, before = zero_compute_before_training(x_values, steps, evaluations)
    placing = x_values.copy()
    placing[before] = np.nan
    return OrderingAxis(x_values, x_values, x_name, placing, steps, before)


def evaluation_notes(
    axis: OrderingAxis,
    evaluations: np.ndarray,
    used_rows: np.ndarray,
    *,
    x_name: str,
    y_name: str,
    accumulate: bool,
    segment: int | None,
) -> tuple[list[str], tuple[UnusedRows, ...]]:
    """(notes on the evaluations before training kept as R0 and on those left out, the left-out
    ones by reason)."""
    notes = []
    kept_before = int(np.isin(axis.before_training, used_rows).sum())
    if kept_before:
        notes.append(before_training_note(x_name, y_name, kept_before))
    x_for_rows = np.zeros_like(axis.keys) if accumulate else axis.x_values  # an accumulated x is never missing
    named_by = axis.x_values if x_name in STEP_COLUMNS else axis.steps
    unused = unused_evaluations(
        evaluations,
        used_rows,
        x_values=x_for_rows,
        keys=axis.keys,
        x_name=x_name,
        key_name=axis.key_name,
        steps=named_by,
        segment=segment,
    )
    if unused:
        notes.append(unused_note(y_name, unused))
    return notes, unused


def zero_compute_before_training(
    x_values: np.ndarray, steps: np.ndarray | None, evaluation_rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(x with 0 at every evaluation logged at step 0 without x, the rows so filled).

    Compute counters (tokens, GPU-hours, FLOPs) are 0 before training, so such an evaluation is
    the starting reward R0 at compute 0."""
    if steps is None:
        return x_values, np.zeros(0, dtype=int)
    filled = evaluation_rows[np.isnan(x_values[evaluation_rows]) & (steps[evaluation_rows] == 0)]
    if filled.size == 0:
        return x_values, filled
    x_values = x_values.copy()
    x_values[filled] = 0.0
    return x_values, filled


def with_evaluations_before_start(
    kept: np.ndarray, before_training: np.ndarray, placing: np.ndarray, rows: np.ndarray
) -> np.ndarray:
    """`kept` (the run's rows in order) with each evaluation before training that comes just before
    the run's first kept row in the file (no other placed row between them) put first."""
    if kept.size == 0 or before_training.size == 0:
        return kept
    placed = rows[~np.isnan(placing[rows])]
    joined = [row for row in before_training if (later := placed[placed > row]).size and later[0] == kept[0]]
    return np.concatenate([np.asarray(joined, dtype=int), kept]) if joined else kept


def before_training_note(x_name: str, y_name: str, count: int) -> str:
    return (
        f"{'an evaluation' if count == 1 else f'{count} evaluations'} of '{y_name}' at step 0 without "
        f"'{x_name}' (logged before training): kept as R0 at compute 0"
    )


def unused_evaluations(
    evaluation_rows: np.ndarray,
    used_rows: np.ndarray,
    *,
    x_values: np.ndarray,
    keys: np.ndarray,
    x_name: str,
    key_name: str,
    steps: np.ndarray | None,
    segment: int | None,
) -> tuple[UnusedRows, ...]:
    """The evaluations (rows with y) not in `used_rows`, grouped by why: no x, no ordering key,
    or replaced (a resume's later rows replace the earlier ones; --segment keeps one run)."""
    unused = np.setdiff1d(evaluation_rows, used_rows)
    if unused.size == 0:
        return ()
    no_x = np.isnan(x_values[unused])
    no_key = ~no_x & np.isnan(keys[unused])
    replaced = ~no_x & ~no_key
    placed_elsewhere = (
        "in another segment or replaced after a resume"
        if segment is not None
        else "replaced by the rows logged after a resume"
    )
    groups = [
        (f"without '{x_name}'", unused[no_x]),
        (f"without '{key_name}' to place them", unused[no_key]),
        (placed_elsewhere, unused[replaced]),
    ]
    return tuple(UnusedRows(reason, int(rows.size), _where(rows, steps)) for reason, rows in groups if rows.size)


def unused_note(y_name: str, groups: tuple[UnusedRows, ...]) -> str:
    """`3 evaluations of 'val' not used: 2 without 'tokens' (steps 3, 8); 1 ...`."""
    total = sum(group.count for group in groups)
    return f"{total} evaluation{'s' if total != 1 else ''} of '{y_name}' not used: " + "; ".join(
        group.describe() for group in groups
    )


def _where(rows: np.ndarray, steps: np.ndarray | None) -> str:
    shown = rows[:MAX_NAMED]
    more = f" and {rows.size - MAX_NAMED} more" if rows.size > MAX_NAMED else ""
    if steps is not None and np.all(np.isfinite(steps[shown])):
        return f"step{'s' if rows.size > 1 else ''} " + ", ".join(f"{steps[row]:g}" for row in shown) + more
    return f"row{'s' if rows.size > 1 else ''} " + ", ".join(str(int(row) + 1) for row in shown) + more


def _has_every_value(column, rows: np.ndarray) -> bool:
    if isinstance(column, np.ndarray):
        return bool(np.all(~np.isnan(column[rows])))
    return all(column[i] is not None for i in rows)
