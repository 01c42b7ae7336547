"""Forecast-accuracy benchmark: fit early, predict the last points, score against baselines.

For every `healthy` run in benchmarks/data/curves/: fit on the points with compute <= f * max
compute (f = 0.25, 0.5, 0.75; the last three points never enter a fit), predict the last three
observed points, report median / max absolute error and the coverage of the 80 % prediction
interval. Methods: scalerl.fit_sigmoid, and baselines (a) seed-style linearised grid over A,
(b) the paper's A x C_mid grid with B by least squares, (c) plain curve_fit, (d) the power law.
`collapsed` runs check the collapse rule, `pre_plateau` runs check the ceiling flag.
The same scoring runs on a seeded ensemble of synthetic sigmoids with binomial evaluation noise
(known truth; not tuned on, a check that the numbers on the real runs are not luck).

    python benchmarks/forecast_accuracy.py [--data DIR] [--out DIR] [--synthetic N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import curve_fit_default, paper_grid_fit, seed_linearised_fit  # noqa: E402

from scalerl.errors import ScaleRLError  # noqa: E402
from scalerl.forecast.curves import sigmoid_reward  # noqa: E402
from scalerl.forecast.diagnostics import detect_collapse  # noqa: E402
from scalerl.forecast.fitting import fit_sigmoid  # noqa: E402
from scalerl.forecast.power_law import fit_power_law  # noqa: E402

FRACTIONS = (0.25, 0.5, 0.75)
N_HELD_OUT = 3
LEVEL = 0.8
HERE = Path(__file__).resolve().parent


def fit_scalerl(compute, reward):
    fit = fit_sigmoid(compute, reward, level=LEVEL)
    return fit.predict, lambda c: fit.interval(c, LEVEL)


def fit_power(compute, reward):
    fit = fit_power_law(compute, reward)
    return fit.predict, lambda c: fit.interval(c, LEVEL)


def baseline_method(fitter):
    def fit(compute, reward):
        r0 = float(reward[0])
        positive = (compute > 0) & (np.arange(compute.size) > 0)
        if positive.sum() < 3:
            raise ValueError("fewer than 3 points after R0")
        result = fitter(compute[positive], reward[positive], r0)
        return result.predict, lambda c: result.interval(c, LEVEL)

    return fit


METHODS = {
    "scalerl": fit_scalerl,
    "seed_linearised": baseline_method(seed_linearised_fit),
    "paper_grid": baseline_method(paper_grid_fit),
    "curve_fit": baseline_method(curve_fit_default),
    "power_law": fit_power,
}


def score_cell(method, train_c, train_r, test_c, test_r):
    """Fit one method on one training window; abs errors, coverage flags (or None), seconds."""
    start = time.perf_counter()
    try:
        predict, interval = method(train_c, train_r)
        predicted = np.asarray(predict(test_c), dtype=float)
        band = interval(test_c)
    except (ScaleRLError, ValueError, RuntimeError, np.linalg.LinAlgError) as error:
        return {"error": f"{type(error).__name__}: {error}"}
    seconds = time.perf_counter() - start
    if not np.all(np.isfinite(predicted)):
        return {"error": "non-finite prediction"}
    covered = None if band is None else [bool(lo <= y <= hi) for lo, hi, y in zip(*band, test_r)]
    return {"abs_errors": np.abs(predicted - test_r).tolist(), "covered": covered, "seconds": seconds}


def load_runs(data_dir):
    manifest = pd.read_csv(data_dir / "manifest.csv")
    runs = []
    for row in manifest.itertuples():
        frame = pd.read_csv(data_dir / row.file).sort_values("compute", kind="stable")
        runs.append((row.file.removesuffix(".csv"), row.status, frame["compute"].to_numpy(float), frame["reward"].to_numpy(float)))
    return runs


def synthetic_runs(n_runs, seed=0):
    """ScaleRL-like runs: A in [0.4, 0.9], R0 up to 0.4 A, B in [0.8, 3], compute unit anywhere in
    1e-2..1e18, C_mid at 3-30 % of the last compute, 10-40 evaluations on a linear (70 %) or
    log grid, pass rates measured on 300-3000 prompts (binomial noise)."""
    rng = np.random.default_rng(seed)
    runs = []
    for index in range(n_runs):
        a, b = rng.uniform(0.4, 0.9), rng.uniform(0.8, 3.0)
        r0 = rng.uniform(0.0, 0.4) * a
        c_max = 10 ** rng.uniform(-2, 18)
        c_mid = c_max * 10 ** rng.uniform(-1.5, -0.5)
        n = int(rng.integers(10, 41))
        if rng.random() < 0.7:
            compute = np.linspace(0.0, c_max, n + 1)
        else:
            compute = np.concatenate([[0.0], np.geomspace(c_max / 100, c_max, n)])
        prompts = int(rng.choice([300, 1000, 3000]))
        reward = rng.binomial(prompts, sigmoid_reward(compute, a, b, c_mid, r0)) / prompts
        runs.append((f"synthetic_{index}", "healthy", compute, reward))
    return runs


def accuracy_cells(runs):
    cells = []
    for name, status, compute, reward in runs:
        if status != "healthy":
            continue
        test_c, test_r = compute[-N_HELD_OUT:], reward[-N_HELD_OUT:]
        for fraction in FRACTIONS:
            train = (compute <= fraction * compute.max()) & (np.arange(compute.size) < compute.size - N_HELD_OUT)
            cell = {"run": name, "fraction": fraction, "n_train": int(train.sum())}
            if train.sum() < 3:
                cell["skipped"] = "fewer than 3 points"
            else:
                cell["methods"] = {m: score_cell(f, compute[train], reward[train], test_c, test_r) for m, f in METHODS.items()}
            cells.append(cell)
    return cells


def summarise(cells, fraction=None):
    rows = {}
    chosen = [c for c in cells if "methods" in c and (fraction is None or c["fraction"] == fraction)]
    for method in METHODS:
        errors, covered, seconds, failures = [], [], [], 0
        for cell in chosen:
            scored = cell["methods"][method]
            if "error" in scored:
                failures += 1
                continue
            errors += scored["abs_errors"]
            seconds.append(scored["seconds"])
            if scored["covered"] is not None:
                covered += scored["covered"]
        rows[method] = {
            "cells": len(chosen), "failed": failures,
            "median_abs_error": float(np.median(errors)) if errors else None,
            "max_abs_error": float(np.max(errors)) if errors else None,
            "coverage_80": float(np.mean(covered)) if covered else None,
            "median_seconds": float(np.median(seconds)) if seconds else None,
        }
    return rows


def diagnostics(runs):
    out = []
    for name, status, compute, reward in runs:
        row = {"run": name, "status": status, "collapse_fired": detect_collapse(compute, reward) is not None}
        try:
            fit = fit_sigmoid(compute, reward, level=LEVEL)
            row["ceiling_identified"] = fit.ceiling_identified
            row["A"] = fit.a
        except ScaleRLError as error:
            row["fit_error"] = str(error)
        out.append(row)
    return out


def diagnostics_summary(rows):
    def share(status, key, value=True):
        chosen = [r for r in rows if r["status"] == status and key in r]
        return f"{sum(r[key] == value for r in chosen)}/{len(chosen)}"

    return {
        "collapse_fired_on_collapsed": share("collapsed", "collapse_fired"),
        "collapse_fired_on_healthy": share("healthy", "collapse_fired"),
        "ceiling_unidentified_on_pre_plateau": share("pre_plateau", "ceiling_identified", False),
        "ceiling_unidentified_on_healthy": share("healthy", "ceiling_identified", False),
    }


def markdown_table(summary):
    fmt = lambda v, spec: "n/a" if v is None else format(v, spec)  # noqa: E731
    lines = []
    for fraction, rows in summary.items():
        lines += [f"\n### fit on compute <= {fraction} x max\n",
                  "| method | cells | failed | median abs err | max abs err | 80% PI coverage | median s/fit |",
                  "|---|---|---|---|---|---|---|"]
        for method, r in rows.items():
            lines.append(f"| {method} | {r['cells']} | {r['failed']} | {fmt(r['median_abs_error'], '.4f')} | "
                         f"{fmt(r['max_abs_error'], '.4f')} | {fmt(r['coverage_80'], '.2f')} | {fmt(r['median_seconds'], '.3f')} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=HERE / "data" / "curves")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--synthetic", type=int, default=60, help="number of synthetic runs (0: none)")
    args = parser.parse_args(argv)
    runs = load_runs(args.data)
    cells = accuracy_cells(runs)
    summary = {str(f): summarise(cells, f) for f in FRACTIONS}
    summary["all"] = summarise(cells)
    synthetic_cells = accuracy_cells(synthetic_runs(args.synthetic)) if args.synthetic else []
    synthetic_summary = {str(f): summarise(synthetic_cells, f) for f in FRACTIONS} if synthetic_cells else {}
    diag_rows = diagnostics(runs)
    report = {
        "level": LEVEL, "fractions": FRACTIONS, "held_out_points": N_HELD_OUT,
        "skipped_cells": sum("skipped" in c for c in cells), "summary": summary,
        "diagnostics": diagnostics_summary(diag_rows), "diagnostics_per_run": diag_rows, "cells": cells,
        "synthetic": {"runs": args.synthetic, "summary": synthetic_summary},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "forecast_accuracy.json").write_text(json.dumps(report, indent=1))
    table = markdown_table(summary)
    diag = "\n".join(f"- {k}: {v}" for k, v in report["diagnostics"].items())
    text = (f"# Forecast accuracy on {len(runs)} runs (80 % prediction intervals, last {N_HELD_OUT} points held out)\n"
            f"{table}\n\nSkipped cells (fewer than 3 training points): {report['skipped_cells']}\n\n## Diagnostics\n{diag}\n")
    if synthetic_summary:
        text += (f"\n# Synthetic ensemble: {args.synthetic} seeded sigmoids with binomial noise (same scoring)\n"
                 f"{markdown_table(synthetic_summary)}\n")
    (args.out / "forecast_accuracy.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
