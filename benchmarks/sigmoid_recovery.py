"""Benchmark: is the ceiling of a textbook sigmoid recovered, over run length and noise?

The ScaleRL sigmoid R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) with A = 0.6, B = 1.5, C_mid = 1,
R0 = 0.1, evaluated at 41 evenly spaced computes from 0 to L x C_mid, plus independent normal
noise of sd s, is fitted on all its points, for L in 2-16 and s in 0.002-0.02 (the grid of the
forecaster issue's known-answer tests), several noise draws per cell. Per cell:

    identified      the verdict is "plateaued" (forecast.verdict, judged at 80 % whatever --level)
    within 0.03     A's 95 % interval inside [A - 0.03, A + 0.03]
    holds A         A's 95 % (and 80 %) interval holds the true A
    run longer      the 95 % headline still says "run ~N x longer"

plus the median |A_hat - A|. The issue's target: identified once the run passes ~4 x C_mid with
noise <= 0.01, A's 95 % interval within 0.03 of the truth. A script, not a test: prints a table,
writes JSON.

    python -m benchmarks.sigmoid_recovery            # ~1 min on 2 cores
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks.common import command_line, write_result
from benchmarks.render.forecast_checks import sigmoid_recovery as recovery_table
from scalerl.errors import ScaleRLError
from scalerl.forecast.curves import sigmoid_reward
from scalerl.forecast.fitting import fit_sigmoid

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "sigmoid_recovery.json"
TRUTH = {"A": 0.6, "B": 1.5, "C_mid": 1.0, "R0": 0.1}
LENGTHS = (2, 4, 6, 8, 12, 16)  # last compute in units of C_mid
NOISE_SDS = (0.002, 0.005, 0.01, 0.02)
N_EVALUATIONS = 41
WITHIN = 0.03
TARGET_LENGTH, TARGET_NOISE = 4, 0.01  # the target holds from here on (longer runs, less noise)


def textbook_run(length: float, noise_sd: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(compute, reward): the TRUTH sigmoid at N_EVALUATIONS evenly spaced computes in [0, length x C_mid],
    plus independent normal noise of sd `noise_sd`."""
    compute = np.linspace(0.0, length * TRUTH["C_mid"], N_EVALUATIONS)
    clean = sigmoid_reward(compute, TRUTH["A"], TRUTH["B"], TRUTH["C_mid"], TRUTH["R0"])
    return compute, clean + rng.normal(0.0, noise_sd, compute.size)


def recovery_verdict(fit, a_true: float = TRUTH["A"]) -> dict:
    """One fit against the true ceiling: identified, A, its 95 % and 80 % intervals, whether the 95 %
    interval lies within WITHIN of the truth, whether each interval holds it, and whether the 95 %
    headline asks for a longer run."""
    lo95, hi95 = fit.conf_int(0.95)["A"]
    lo80, hi80 = fit.conf_int(0.8)["A"]
    return {
        "identified": bool(fit.ceiling_identified),
        "A": float(fit.a),
        "A_interval_95": [float(lo95), float(hi95)],
        "A_interval_80": [float(lo80), float(hi80)],
        "within": bool(a_true - WITHIN <= lo95 and hi95 <= a_true + WITHIN),
        "holds_95": bool(lo95 <= a_true <= hi95),
        "holds_80": bool(lo80 <= a_true <= hi80),
        "run_longer": fit.verdict.advises_longer_run,
    }


def summarise(rows: list[dict], a_true: float = TRUTH["A"]) -> dict:
    """Counts of one cell (or any set of runs): identified, within, holds (95 / 80 %), run longer,
    refused, and the median |A_hat - A|."""
    fitted = [r for r in rows if "refused" not in r]
    errors = [abs(r["A"] - a_true) for r in fitted]
    return {
        "runs": len(rows),
        "refused": len(rows) - len(fitted),
        **{key: sum(r[key] for r in fitted) for key in ("identified", "within", "holds_95", "holds_80", "run_longer")},
        "median_abs_error": float(np.median(errors)) if errors else None,
    }


def in_target(length: float, noise_sd: float) -> bool:
    """The cells the issue's target speaks of: run past ~4 x C_mid, noise <= 0.01."""
    return length >= TARGET_LENGTH and noise_sd <= TARGET_NOISE


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8, help="noise draws per (length, noise) cell")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="one draw per cell")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    per_cell = 1 if args.quick else args.runs
    start = time.perf_counter()
    cells, target_rows = [], []
    for i, length in enumerate(LENGTHS):
        for j, noise_sd in enumerate(NOISE_SDS):
            rows = []
            for k in range(per_cell):
                compute, reward = textbook_run(length, noise_sd, np.random.default_rng([args.seed, i, j, k]))
                try:
                    rows.append(recovery_verdict(fit_sigmoid(compute, reward, level=0.95)))
                except ScaleRLError as error:
                    rows.append({"refused": str(error)})
            cells.append({"length": length, "noise_sd": noise_sd, "summary": summarise(rows), "rows": rows})
            if in_target(length, noise_sd):
                target_rows += rows
    payload = {
        "truth": TRUTH,
        "evaluations": N_EVALUATIONS,
        "within": WITHIN,
        "runs_per_cell": per_cell,
        "seed": args.seed,
        "target": {"length_from": TARGET_LENGTH, "noise_up_to": TARGET_NOISE, **summarise(target_rows)},
        "cells": cells,
        "seconds": time.perf_counter() - start,
    }
    print(recovery_table(payload))
    write_result(args.out, payload, command_line("sigmoid_recovery", argv))
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
