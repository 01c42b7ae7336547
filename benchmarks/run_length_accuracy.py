"""Benchmark: does the run length (FitResult.compute_near_ceiling) say when a real run settles?

For every `healthy` run in benchmarks/data/curves (real RL curves that levelled off by their end),
the sigmoid is fitted on the points with compute <= f x max compute (f = 0.25, 0.5; never the last
three), as benchmarks/forecast_accuracy.py does, and asked for the compute at which its curve is
within w of its ceiling. The run's own answer: the first evaluation from which the trailing mean of
three evaluations stays within w of the run's end level (mean of its last three evaluations).
The width is the same on both sides and includes the evaluation noise of a three-point mean:

    w = 0.02 + 2 sigma / sqrt(3)        (sigma: diagnostics.point_noise_sd of the whole run)

A cell scores whether the observed compute lies in the 80 % interval of the predicted one, and the
ratio predicted / observed. A run that settles only in its last three evaluations (its end level is
where it stopped, not a plateau) is censored: the observed compute is a lower bound, and the cell
counts as consistent when the interval's upper end reaches it. A script, not a test: prints a
table, writes JSON.

    python -m benchmarks.run_length_accuracy            # ~10 s
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
from benchmarks.bundled_runs import N_HELD_OUT, load_runs  # noqa: E402
from benchmarks.common import accept_quick, command_line, write_result  # noqa: E402
from scalerl.errors import ScaleRLError  # noqa: E402
from scalerl.forecast.diagnostics import point_noise_sd  # noqa: E402
from scalerl.forecast.fitting import fit_sigmoid  # noqa: E402
from scalerl.forecast.settings import SETTINGS  # noqa: E402

FRACTIONS = (0.25, 0.5)
LEVEL = 0.8
RESULTS = HERE / "results" / "run_length_accuracy.json"


def settle_width(reward: np.ndarray, unit: float = 1.0) -> float:
    """w = 0.02 u + 2 sigma / sqrt(3): the paper's margin (a share of the reward's unit u, the fit's:
    forecast.reward_unit) plus the noise of a three-point mean."""
    return SETTINGS.margin * unit + 2.0 * point_noise_sd(reward) / np.sqrt(3.0)


def observed_settle_index(reward: np.ndarray, width: float) -> int:
    """First index i from which every trailing three-point mean m_j (j >= i) is within `width` of
    the end level L = mean of the last three evaluations: |m_j - L| <= width."""
    end_level = float(np.mean(reward[-N_HELD_OUT:]))
    trailing = np.convolve(reward, np.ones(3) / 3.0, mode="valid")  # m_j for j = 2 .. n-1
    outside = np.flatnonzero(np.abs(trailing - end_level) > width)
    return 2 if outside.size == 0 else int(outside[-1]) + 3


def score_cell(compute: np.ndarray, reward: np.ndarray, fraction: float, reward_range=(0.0, 1.0)) -> dict:
    """One early fit's run length against the run's own settling compute (`reward_range`: the run's,
    as `scalerl fit` infers it: open for a composite reward)."""
    train = (compute <= fraction * compute.max()) & (np.arange(compute.size) < compute.size - N_HELD_OUT)
    if train.sum() < 4:
        return {"skipped": "fewer than 4 points (R0 + 3)"}
    try:
        fit = fit_sigmoid(compute[train], reward[train], level=LEVEL, reward_range=reward_range)
    except ScaleRLError as error:
        return {"error": f"{type(error).__name__}: {error}"}
    width = settle_width(reward, fit.reward_unit)
    index = observed_settle_index(reward, width)
    censored = index >= compute.size - N_HELD_OUT
    observed = float(compute[min(index, compute.size - 1)])
    near = fit.compute_near_ceiling(width, LEVEL)
    inside = (near.lo <= observed <= near.hi) if not censored else near.hi >= observed
    return {
        "width": width,
        "observed": observed,
        "censored": bool(censored),
        "predicted": near.value,
        "lo": near.lo,
        "hi": near.hi,
        "consistent": bool(inside),
        "ratio": near.value / observed if observed > 0 else None,
        "fitted_until": float(compute[train].max()),
    }


def summary(cells: list[dict]) -> dict:
    scored = [c for c in cells if "consistent" in c]
    settled = [c for c in scored if not c["censored"]]
    log_ratios = [abs(np.log10(c["ratio"])) for c in settled if c["ratio"] and c["predicted"] > 0]
    return {
        "cells": len(cells),
        "scored": len(scored),
        "settled": len(settled),
        "settled_inside_interval": int(sum(c["consistent"] for c in settled)),
        "censored": len(scored) - len(settled),
        "censored_consistent": int(sum(c["consistent"] for c in scored if c["censored"])),
        "median_abs_log10_ratio": float(np.median(log_ratios)) if log_ratios else None,
        "within_factor_2": int(sum(lr <= np.log10(2.0) for lr in log_ratios)),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=HERE / "data" / "curves")
    parser.add_argument("--out", type=Path, default=RESULTS)
    accept_quick(parser)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    started = time.perf_counter()
    cells = []
    for run in load_runs(args.data):
        name, status, compute, reward = run.name, run.status, run.compute, run.reward
        if status != "healthy":
            continue
        for fraction in FRACTIONS:
            cells.append({"run": name, "fraction": fraction, **score_cell(compute, reward, fraction, run.reward_range)})
    seconds = time.perf_counter() - started
    print("run | fit on | w | observed settle | predicted [80 %] | predicted / observed | consistent")
    print("--- | --- | --- | --- | --- | --- | ---")
    for c in cells:
        if "consistent" not in c:
            print(f"{c['run']} | {c['fraction']:.0%} | {c.get('skipped') or c.get('error')} | | | |")
            continue
        observed = f"{'>= ' if c['censored'] else ''}{c['observed']:.3g}"
        ratio = "-" if c["ratio"] is None else f"{c['ratio']:.2f}"
        print(
            f"{c['run']} | {c['fraction']:.0%} | {c['width']:.3f} | {observed} | {c['predicted']:.3g} "
            f"[{c['lo']:.3g}, {c['hi']:.3g}] | {ratio} | {'yes' if c['consistent'] else 'NO'}"
        )
    by_fraction = {f"{f:g}": summary([c for c in cells if c["fraction"] == f]) for f in FRACTIONS}
    print()
    for fraction, s in by_fraction.items():
        print(
            f"fit on {float(fraction):.0%}: {s['settled_inside_interval']} of {s['settled']} settled runs inside the "
            f"80 % interval; {s['censored_consistent']} of {s['censored']} censored consistent; median |log10 ratio| "
            f"{s['median_abs_log10_ratio'] if s['median_abs_log10_ratio'] is None else round(s['median_abs_log10_ratio'], 3)}, "
            f"{s['within_factor_2']} within a factor 2"
        )
    payload = {"level": LEVEL, "seconds": seconds, "summary": by_fraction, "cells": cells}
    write_result(args.out, payload, command_line("run_length_accuracy", argv), load_before, indent=2)
    print(f"written: {args.out} ({seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
