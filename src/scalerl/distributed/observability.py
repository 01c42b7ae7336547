"""Pipeline metrics beyond the synchronous trainer's: idle fractions, policy lag, weight sync.

Each actor reports the wall-clock intervals it spent working (a generator producing a batch, the
trainer stepping, publishing and validating). For the window between two metrics rows,

    idle_fraction = 1 - sum_workers |busy intervals ∩ window| / (|window| * num_workers)

so 0 means every worker of that role was busy all the time and 1 means none did anything.
Pure Python: no torch, no ray.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scalerl.distributed.staleness import LagStats

PIPELINE_COLUMNS = (
    "policy_lag_mean",
    "policy_lag_max",
    "generator_idle_fraction",
    "trainer_idle_fraction",
    "weight_sync_seconds",
)


@dataclass(frozen=True)
class BusyInterval:
    """One stretch of work by one worker, in wall-clock seconds (time.time())."""

    start: float
    end: float


def overlap_seconds(interval: BusyInterval, window_start: float, window_end: float) -> float:
    """|[start, end] ∩ [window_start, window_end]| in seconds (0 if disjoint)."""
    return max(0.0, min(interval.end, window_end) - max(interval.start, window_start))


def idle_fraction(intervals: Iterable[BusyInterval], window_start: float, window_end: float, num_workers: int) -> float:
    """1 - busy / (window * workers), clipped to [0, 1]; 0.0 for an empty window."""
    window_seconds = window_end - window_start
    if window_seconds <= 0 or num_workers <= 0:
        return 0.0
    busy = sum(overlap_seconds(i, window_start, window_end) for i in intervals)
    return min(1.0, max(0.0, 1.0 - busy / (window_seconds * num_workers)))


class BusyLedger:
    """Busy intervals of one role (generators or trainer), pruned as the windows move on."""

    def __init__(self, num_workers: int) -> None:
        self.num_workers = int(num_workers)
        self._intervals: list[BusyInterval] = []

    def add(self, start: float, end: float) -> None:
        self._intervals.append(BusyInterval(float(start), float(end)))

    def idle_fraction(self, window_start: float, window_end: float, in_progress_since: Iterable[float] = ()) -> float:
        """Idle fraction over the window; work still running counts as busy from its start."""
        running = [BusyInterval(start, window_end) for start in in_progress_since]
        fraction = idle_fraction([*self._intervals, *running], window_start, window_end, self.num_workers)
        self._intervals = [i for i in self._intervals if i.end > window_end]
        return fraction


def pipeline_columns(
    lag: LagStats,
    generator_idle: float,
    trainer_idle: float,
    weight_sync_seconds: float,
) -> dict[str, float]:
    """The five extra metrics.jsonl columns of a pipeline step (names in PIPELINE_COLUMNS)."""
    return {
        "policy_lag_mean": float(lag.mean),
        "policy_lag_max": int(lag.max),
        "generator_idle_fraction": float(generator_idle),
        "trainer_idle_fraction": float(trainer_idle),
        "weight_sync_seconds": float(weight_sync_seconds),
    }


def strip_timing_columns(row: Mapping[str, object]) -> dict[str, object]:
    """A metrics row without the columns that depend on wall-clock time or the pipeline.

    Used to compare a k = 0 pipeline run with the synchronous trainer row by row.
    """
    timing = {"device_hours", "wall_seconds", "time", "elapsed_seconds", *PIPELINE_COLUMNS}
    return {key: value for key, value in row.items() if key not in timing and not key.endswith("_seconds")}
