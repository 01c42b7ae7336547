"""Step timing of benchmarks/pipeline_efficiency.py: how many steps a cell runs, which rows are
timed, and the steady-state step time from the rows' arrival times (shared by the benchmark and
its report, which re-estimates saved cells)."""

from __future__ import annotations

import math


def cell_steps(cell: dict, generate_s: float, train_s: float, intervals: int) -> tuple[int, int]:
    """(optimiser steps to run, rows to skip before timing) for one cell.

    Async/sync: skip the fill, at least twice the steps one batch takes to cross the pipeline
    at the cell's own pace t = max(G / n, T, (G + T) / (k + 1)), i.e. 2 ceil((G + T) / t) + 1
    rows, and at least the first half of the run (a start-up stall leaves up to k + 1 finished
    batches waiting, which the trainer works off faster than the steady pace: see
    first_timed_row); then time at least `intervals` steps; one more row (the last, which waits
    for the final validation and checkpoint) is not timed. Off-policy-k: three rounds of k
    steps, the second one timed.
    """
    from benchmarks import overlap_bounds as ob

    n, k = cell["generators"], cell["k"]
    if cell["mode"] == "ppo-offpolicy":
        return 3 * k, k
    pace = ob.async_lag_step_seconds(generate_s, train_s, n, k)
    skip = 2 * math.ceil((generate_s + train_s) / pace - 1e-9) + 1
    return max(skip + intervals + 1, 2 * (intervals + 1)), skip


def first_timed_row(num_rows: int, skip: int) -> int:
    """Step of the first timed row: past the fill (`skip`) and in the second half of the run."""
    return max(skip, math.ceil(num_rows / 2))


def steady_step_seconds(stamps: list[float], skip: int, mode: str, k: int, generators: int) -> float:
    """Seconds per step in the steady state (see cell_steps), from the rows' arrival times.

    Rows arrive in bursts: with n generators running back to back, the n batches of one round
    of generation reach the trainer close together (and with a binding lag bound, k + 1 batches
    go round the pipeline together). So the window runs between two rows at the same phase of
    that pattern, a multiple of p = min(n, k + 1) rows apart, from the first timed row
    (first_timed_row) to the last timed one:
        t_step = (s_last - s_first) / (last - first),   last - first = m p
    Off-policy-k: one whole round, (s_{2k} - s_k) / k (rows of step j at index j - 1).
    """
    if mode == "ppo-offpolicy":
        return (stamps[2 * k - 1] - stamps[k - 1]) / k
    period = max(1, min(int(generators), int(k) + 1))
    last = len(stamps) - 2  # index of the last timed row (the final row is not timed)
    first = first_timed_row(len(stamps), skip) - 1
    first = last - period * max(1, (last - first) // period)
    return (stamps[last] - stamps[first]) / (last - first)


def reestimate(cell: dict) -> dict:
    """A saved cell with its steady-state step time and efficiency recomputed from its rows'
    arrival times (`row_seconds`) by steady_step_seconds (the report re-renders with this)."""
    from benchmarks import overlap_bounds as ob

    skip = cell.get("fill_steps", cell["timed_from_step"])
    stamps = cell["row_seconds"]
    measured = steady_step_seconds(stamps, skip, cell["mode"], cell["k"], cell["generators"])
    timed_from = cell["k"] if cell["mode"] == "ppo-offpolicy" else first_timed_row(len(stamps), skip)
    return {
        **cell,
        "fill_steps": skip,
        "timed_from_step": timed_from,
        "measured_step_seconds": measured,
        "efficiency": ob.efficiency(measured, cell["bound_step_seconds"]),
    }
