"""Benchmark: is a plateau read on curve shapes that no bundled run has?

The plateau read of benchmarks/forecast_accuracy.py (fit a complete run on all its points; read
when the ceiling is identified, A is within 0.03 of the level the run settled at and A's 80 %
interval holds that level) is measured there on the bundled real runs only. Here it runs on
synthetic runs of known shape, so a reader can see which shapes and which noise it holds on:

    step        R0 at step 0, then A - (A - R0) exp(-x / tau), tau 1.7-7 % of the run
                (format learned within the first evaluations, flat after)
    saturating  the same with tau 8-15 % of the run
    take_off    R0 + (A - R0) expit((x - t0) / w), t0 20-40 %, w 4 % of the run
    sigmoid     the ScaleRL sigmoid in log compute (B 1.5-3), run to 8-16 C_mid
    slow_decline the saturating run, then down 0.03 per run length after 40 % of it

with x = step / last step, 10-40 evaluations after step 0, R0 in [0.05, 0.4], A - R0 in
[0.1, 0.6] (A <= 0.95), and noise that is either independent (iid) or autocorrelated like a
policy's drift (AR(1) with coefficient 0.6, same marginal sd), sd 0.005, 0.01 or 0.02. The settled
level is forecast_accuracy's (mean of the last quarter of the evaluations, at least three). Also
counted: runs told to run longer (the verdict "still rising") and fits refused.
A script, not a test: prints a table, writes JSON.

    python -m benchmarks.plateau_shapes            # ~1 min
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks.common import command_line, write_result
from benchmarks.forecast_accuracy import plateau_verdict, settled_level
from benchmarks.render.forecast_checks import plateau_shapes as shapes_table
from scalerl.errors import ScaleRLError
from scalerl.forecast.curves import sigmoid_reward
from scalerl.forecast.fitting import fit_sigmoid

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "plateau_shapes.json"
SHAPES = ("step", "saturating", "take_off", "sigmoid", "slow_decline")
NOISE_KINDS = ("iid", "ar1")
NOISE_SDS = (0.005, 0.01, 0.02)
AR_COEFFICIENT = 0.6


def shape_curve(shape: str, x: np.ndarray, r0: float, a: float, rng: np.random.Generator) -> np.ndarray:
    """Noise-free reward at run fractions x (x = 0 is step 0) for one shape (module docstring)."""
    if shape == "step":
        return a - (a - r0) * np.exp(-x / rng.uniform(0.017, 0.07))
    if shape == "saturating":
        return a - (a - r0) * np.exp(-x / rng.uniform(0.08, 0.15))
    if shape == "take_off":
        return r0 + (a - r0) / (1.0 + np.exp(-(x - rng.uniform(0.2, 0.4)) / 0.04))
    if shape == "sigmoid":
        c_mid = 1.0 / rng.uniform(8.0, 16.0)
        return sigmoid_reward(x, a, rng.uniform(1.5, 3.0), c_mid, r0)
    if shape == "slow_decline":
        return a - (a - r0) * np.exp(-x / rng.uniform(0.08, 0.15)) - 0.03 * np.clip(x - 0.4, 0.0, None)
    raise ValueError(f"unknown shape {shape!r}")


def noise(kind: str, sd: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws of sd `sd`: independent, or AR(1) e_i = phi e_(i-1) + sqrt(1 - phi^2) sd z_i (stationary)."""
    if kind == "iid":
        return rng.normal(0.0, sd, n)
    innovations = rng.normal(0.0, sd * np.sqrt(1.0 - AR_COEFFICIENT**2), n)
    out = np.empty(n)
    out[0] = rng.normal(0.0, sd)
    for i in range(1, n):
        out[i] = AR_COEFFICIENT * out[i - 1] + innovations[i]
    return out


def synthetic_run(shape: str, kind: str, sd: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(compute, reward): step 0 at R0 exactly, then 10-40 noisy evaluations, clipped to [0, 1]."""
    n = int(rng.integers(10, 41))
    x = np.arange(n + 1) / n
    r0 = rng.uniform(0.05, 0.4)
    a = min(0.95, r0 + rng.uniform(0.1, 0.6))
    reward = shape_curve(shape, x, r0, a, rng)
    reward[1:] = np.clip(reward[1:] + noise(kind, sd, n, rng), 0.0, 1.0)
    reward[0] = r0
    return x * 1.0e6, reward


def read_run(compute: np.ndarray, reward: np.ndarray) -> dict:
    """forecast_accuracy's plateau read of one complete run (plateau_verdict), or why the fit refused."""
    settled = settled_level(reward)
    try:
        fit = fit_sigmoid(compute, reward)
    except ScaleRLError as error:
        return {"settled": settled, "refused": str(error)}
    return {"settled": settled, **plateau_verdict(fit, settled)}


def summarise(rows: list[dict]) -> dict:
    """Counts of one (shape, noise kind) cell: read, told to run longer, refused, median |A - settled|."""
    fitted = [r for r in rows if "refused" not in r]
    gaps = [abs(r["A"] - r["settled"]) for r in fitted]
    return {
        "runs": len(rows),
        "read": sum(r["read"] for r in fitted),
        "told_to_run_longer": sum(r["told_to_run_longer"] for r in fitted),
        "refused": len(rows) - len(fitted),
        "median_abs_gap": float(np.median(gaps)) if gaps else None,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12, help="runs per shape, noise kind and noise sd")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="one run per cell")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    per_cell = 1 if args.quick else args.runs
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    cells = {}
    for shape in SHAPES:
        for kind in NOISE_KINDS:
            rows = []
            for sd in NOISE_SDS:
                for _ in range(per_cell):
                    rows.append({"noise_sd": sd, **read_run(*synthetic_run(shape, kind, sd, rng))})
            cells[f"{shape}/{kind}"] = {"summary": summarise(rows), "rows": rows}
    every = [row for cell in cells.values() for row in cell["rows"]]
    payload = {
        "runs_per_cell": per_cell * len(NOISE_SDS),
        "seed": args.seed,
        "noise_sds": list(NOISE_SDS),
        "ar_coefficient": AR_COEFFICIENT,
        "total": summarise(every),
        "cells": cells,
        "seconds": time.perf_counter() - start,
    }
    print(shapes_table(payload))
    write_result(args.out, payload, command_line("plateau_shapes", argv))
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
