"""From a log table to one run's (compute, reward) curve: pick columns, keep one run, check cells,
accumulate per-step compute, keep an evaluation before training as R0, count the evaluations left
out, average repeated evaluations, bin very long curves."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from scalerl.errors import InputError
from scalerl.forecast.readers.columns import PER_STEP_COLUMNS, choose_x, choose_y, training_reward_note
from scalerl.forecast.readers.kept_rows import (
    UnusedRows,
    evaluation_notes,
    ordering_axis,
    with_evaluations_before_start,
)
from scalerl.forecast.readers.series import resolve_order, run_rows
from scalerl.forecast.readers.table import LogTable, column_to_floats, has_value

# Beyond this many points, equal-count bins: the fit's cost grows with its points (about 1 s per
# 1,000 on the shared machine), and 2,000 bins of a longer log (per-step training rewards, mostly)
# keep the curve's shape while averaging its noise. Evaluation curves rarely have as many points.
MAX_POINTS = 2_000


@dataclass(frozen=True)
class Curve:
    """One run's evaluation points, sorted by strictly increasing compute.

    `compute` and `reward` are read-only float arrays of equal length; rewards of rows that
    shared a compute value are averaged. `x_name` / `y_name` are the log columns they came from;
    `notes` say what the reader did beyond reading (accumulated, resumed, averaged, binned, an
    evaluation before training kept as R0, evaluations left out, a training reward as y);
    `rows_not_used` counts the evaluations (rows with a y value) left out, by reason.
    """

    compute: np.ndarray
    reward: np.ndarray
    x_name: str
    y_name: str
    source: str
    notes: tuple[str, ...] = field(default=())
    rows_not_used: tuple[UnusedRows, ...] = field(default=())

    def __len__(self) -> int:
        return int(self.compute.size)


def curve_from_table(
    table: LogTable,
    x: str | None,
    y: str | None,
    source: str,
    *,
    run: str | None = None,
    group: str | None = None,
    segment: int | None = None,
    cumulative: bool | None = None,
) -> Curve:
    """Pick x and y, keep one run's rows, check the cells once for all formats and build the curve."""
    columns = table.columns
    notes = list(table.notes)
    run_column = group if group is not None else table.run_column
    if group is not None and group not in columns:
        raise InputError(f"--group column '{group}' not found in {source}")
    if run is not None and run_column is None:
        raise InputError(
            f"{source} has no run column (run, run_name, run_id, series); --run needs one, or --group COLUMN"
        )
    rows = np.arange(table.n_rows)
    if run_column is not None:
        rows = run_rows(columns[run_column], run, run_column, source)
    y_name = choose_y(columns, y, source)
    y_values = column_to_floats(columns[y_name], y_name, source)
    has_y = np.isfinite(y_values)
    training_note = training_reward_note(y_name, columns)
    notes += [training_note] if training_note else []

    def usable(name: str) -> bool:
        return has_value(columns[name], np.flatnonzero(has_y)[:10_000])

    x_name = choose_x(columns, x, usable, source)
    x_values = column_to_floats(columns[x_name], x_name, source)
    accumulate = x_name in PER_STEP_COLUMNS if cumulative is None else cumulative
    evaluations = rows[has_y[rows]]
    axis = ordering_axis(table, x_name, x_values, evaluations, accumulate, source)
    x_values, keys, key_name = axis.x_values, axis.keys, axis.key_name
    negative = rows[x_values[rows] < 0] if rows.size else rows
    if negative.size:
        row = int(negative[0])
        raise InputError(f"negative compute {x_values[row]:g} in column '{x_name}' at row {row + 1} of {source}")
    kept, order_notes = resolve_order(axis.placing, rows, segment, source, key_name)
    if not accumulate:
        kept = with_evaluations_before_start(kept, axis.before_training, axis.placing, rows)
    notes += order_notes
    if accumulate:
        x_kept = running_total(keys[kept], x_values[kept])
        why = "a per-step count" if cumulative is None else "--cumulative"
        notes.append(f"'{x_name}' accumulated over steps ({why}): compute is its running total")
    else:
        x_kept = x_values[kept]
    both = np.isfinite(x_kept) & np.isfinite(y_values[kept])
    if not np.any(both):
        raise InputError(f"{source} has no row where both '{x_name}' and '{y_name}' are present")
    kept_notes, unused = evaluation_notes(
        axis, evaluations, kept[both], x_name=x_name, y_name=y_name, accumulate=accumulate, segment=segment
    )
    notes += kept_notes
    compute, reward = merge_duplicate_compute(x_kept[both], y_values[kept][both])
    if compute.size < int(np.sum(both)):
        notes.append(
            f"repeated evaluations at the same '{x_name}' were averaged "
            f"({int(np.sum(both))} rows -> {compute.size} points)"
        )
    if compute.size > MAX_POINTS:
        notes.append(f"{compute.size} points binned into {MAX_POINTS} equal-count bins (mean compute and reward)")
        compute, reward = bin_points(compute, reward, MAX_POINTS)
    return Curve(_read_only(compute), _read_only(reward), x_name, y_name, source, tuple(notes), unused)


def fit_window_limit(compute: np.ndarray, fit_until: float | None, fit_fraction: float | None) -> float | None:
    """Largest compute a fit uses: `fit_until`, or `fit_fraction * max(compute)`, or None (all).

    The options of `fit`, `compare`, `plot`, `report` and `ablate --from-logs` (one meaning for all):
    a decision from the first part of a run."""
    if fit_until is not None and fit_fraction is not None:
        raise InputError("give either --fit-until or --fit-fraction, not both")
    if fit_fraction is not None:
        if not 0.0 < fit_fraction <= 1.0:
            raise InputError(f"--fit-fraction must be in (0, 1], got {fit_fraction:g}")
        return float(fit_fraction * np.max(compute))
    if fit_until is not None:
        if not np.isfinite(fit_until) or fit_until <= 0:
            raise InputError(f"--fit-until must be a positive compute value, got {fit_until:g}")
        return float(fit_until)
    return None


def curve_up_to(curve: Curve, fit_until: float | None, fit_fraction: float | None) -> tuple[Curve, Curve | None]:
    """(the points of `curve` with compute <= the fit window's limit, the points after it or None
    when the window holds the whole curve); InputError when the window holds no point."""
    limit = fit_window_limit(curve.compute, fit_until, fit_fraction)
    if limit is None or limit >= curve.compute.max():
        return curve, None
    inside = curve.compute <= limit
    if not np.any(inside):
        raise InputError(f"no point of {curve.source} has {curve.x_name} <= {limit:g}")
    note = (
        f"fitted on its first {int(inside.sum())} of {len(curve)} points ({curve.x_name} <= {limit:.4g}); "
        "the later points are held out"
    )

    def part(mask: np.ndarray, notes: tuple[str, ...]) -> Curve:
        return replace(
            curve, compute=_read_only(curve.compute[mask]), reward=_read_only(curve.reward[mask]), notes=notes
        )

    return part(inside, (*curve.notes, note)), part(~inside, ())


def axis_warnings(curves: dict[str, Curve]) -> list[str]:
    """A warning per axis (x, y) whose column differs between the runs `curves` holds: their fits
    are then in different units, and A or B compared across them may mean nothing."""
    warnings = []
    for axis in ("x", "y"):
        columns = {name: getattr(curve, f"{axis}_name") for name, curve in curves.items()}
        if len(set(columns.values())) > 1:
            listed = ", ".join(f"{name}: {column}" for name, column in columns.items())
            warnings.append(
                f"the runs' {axis} columns differ ({listed}): compared in different units; "
                f"pass --{axis} COLUMN to use one for all"
            )
    apart = compute_ranges_apart(curves)
    if apart is not None:
        warnings.append(apart)
    return warnings


# Compute ranges this many decades apart, with no overlap, are read as two units (GPU-hours
# against samples is 3-6 decades); runs of one recipe at two scales are rarely 100x apart and never disjoint.
UNITS_APART_DECADES = 2.0


def compute_ranges_apart(curves: dict[str, Curve]) -> str | None:
    """A warning when the runs' positive compute ranges split into two sets with a gap of at least
    UNITS_APART_DECADES decades between them (max of the lower set * 10^d <= min of the upper):
    their x columns are likely in different units (GPU-hours against samples), so C_mid, the
    compute axis and compute figures do not compare, whatever the column names; A and B do not
    depend on the unit. None otherwise."""
    ranges = []
    for name, curve in curves.items():
        positive = np.asarray(curve.compute, dtype=float)
        positive = positive[positive > 0]
        if positive.size:
            ranges.append((float(positive.min()), float(positive.max()), name))
    ranges.sort()
    for index in range(1, len(ranges)):
        lower_top = max(high for _, high, _ in ranges[:index])
        if ranges[index][0] >= lower_top * 10.0**UNITS_APART_DECADES:
            listed = ", ".join(f"{name}: {low:.3g}..{high:.3g}" for low, high, name in ranges)
            return (
                f"the runs' compute ranges lie {np.log10(ranges[index][0] / lower_top):.1f} decades apart ({listed}): "
                "if their x columns are in different units (GPU-hours, samples, tokens), C_mid and the compute axis "
                "do not compare (A and B do not depend on the unit); pass --x COLUMN to use one unit for all"
            )
    return None


def running_total(steps: np.ndarray, per_step: np.ndarray) -> np.ndarray:
    """Compute at each row: the sum of the per-step counts of every step up to the row's.

    total(s) = sum over distinct steps t <= s of count(t), where count(t) is the last value
    logged at step t (missing counts are 0), so a step logged on several rows counts once.
    `steps` is non-decreasing (the rows of one run, in order).
    """
    if steps.size == 0:
        return np.zeros(0)
    starts = np.flatnonzero(np.r_[True, steps[1:] != steps[:-1]])
    group = np.cumsum(np.r_[True, steps[1:] != steps[:-1]]) - 1
    counts = np.zeros(starts.size)
    finite = np.isfinite(per_step)
    counts[group[finite]] = per_step[finite]  # later rows of a step overwrite earlier ones
    return np.cumsum(counts)[group]


def merge_duplicate_compute(compute: np.ndarray, reward: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort by compute and average the rewards of points that share a compute value.

    The result has strictly increasing compute (repeated evaluations of one checkpoint become
    their mean, which is the better estimate of the reward at that compute).
    """
    unique_compute, inverse = np.unique(compute, return_inverse=True)
    reward_sum = np.bincount(inverse, weights=reward, minlength=unique_compute.size)
    count = np.bincount(inverse, minlength=unique_compute.size)
    return unique_compute, reward_sum / count


def bin_points(compute: np.ndarray, reward: np.ndarray, n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted points in `n_bins` consecutive equal-count bins: bin k holds points
    [floor(k n / n_bins), floor((k+1) n / n_bins)); each bin becomes (mean compute, mean reward)."""
    edges = (np.arange(n_bins + 1) * compute.size) // n_bins
    counts = np.diff(edges)
    bin_index = np.repeat(np.arange(n_bins), counts)
    return (np.bincount(bin_index, weights=compute) / counts, np.bincount(bin_index, weights=reward) / counts)


def _read_only(values: np.ndarray) -> np.ndarray:
    values = np.array(values, dtype=float)
    values.setflags(write=False)
    return values
