"""Forecast-accuracy benchmark: fit the first 25 / 50 / 75 % of a run, forecast its end.

For every `healthy` and `pre_plateau` (still rising) run in benchmarks/data/curves/, each method
is fitted on the points with compute <= f x max compute (never the last three) and forecasts the
mean of the last three evaluations. Methods: scalerl.fit_sigmoid and the baselines of
baselines.py: the paper's grid with R0 = first evaluation and with R0 = 0, the power law, plain
least squares (curve_fit) and the last value. Errors are given over every cell, a failed fit
scored as the last value (the headline), over the forecasts each method made, and over the cells
every method forecast. scalerl's 50 / 80 / 95 % bands (with their floor where the fitted
points end flat, as FitResult.interval gives them) are scored leave-one-curve-out (calibration.py): the band-widening constants used for a run are chosen on the
other runs only; runs from the same training run are held out together.

    nice python benchmarks/forecast_accuracy.py [--data DIR] [--out DIR] [--figure PNG]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from baselines import curve_fit_default, last_value_fit, paper_grid_fit  # noqa: E402
from calibration import (  # noqa: E402
    CHOICE_LEVEL, KAPPA_GRID, LEVELS, band_quantiles, calibration_figure, choose_constants, coverage_table,
    loco_coverage,
)

from scalerl.errors import ScaleRLError  # noqa: E402
from scalerl.forecast.diagnostics import detect_collapse, late_plateau_floor  # noqa: E402
from scalerl.forecast.fitting import fit_sigmoid  # noqa: E402
from scalerl.forecast.power_law import fit_power_law  # noqa: E402

FRACTIONS = (0.25, 0.5, 0.75)
N_HELD_OUT = 3
REPORT_LEVELS = (0.5, 0.8, 0.95)
STATUSES = {"healthy": ("healthy",), "still rising": ("pre_plateau",)}
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BASELINES = {
    "paper_grid_r0_first": lambda c, r: paper_grid_fit(c[1:][c[1:] > 0], r[1:][c[1:] > 0], float(r[0])),
    "paper_grid_r0_zero": lambda c, r: paper_grid_fit(c[c > 0], r[c > 0], 0.0),
    "power_law": lambda c, r: fit_power_law(c, r),
    "least_squares": lambda c, r: curve_fit_default(c[1:][c[1:] > 0], r[1:][c[1:] > 0], float(r[0])),
    "last_value": lambda c, r: last_value_fit(c, r, float(r[0])),
}
METHODS = ("scalerl",) + tuple(BASELINES)


def score_scalerl(train_c, train_r, test_c, truth):
    """One scalerl forecast: error, un-stretched band quantiles per kappa and level, seconds.

    The band is for the mean of the N_HELD_OUT held-out evaluations (noise / sqrt(3)); seconds
    time the fit and one band, as a user pays them: wall clock, and the CPU time of this process
    (all its threads), which other jobs on a shared machine do not inflate.
    """
    start, cpu_start = time.perf_counter(), time.process_time()
    fit = fit_sigmoid(train_c, train_r)
    fit.interval(test_c, CHOICE_LEVEL)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    centre = float(np.mean(fit.predict(test_c)))
    base = fit.observation_draws(test_c, n_average=N_HELD_OUT, rate_scale=0.0).mean(axis=1)
    unit = fit.observation_draws(test_c, n_average=N_HELD_OUT, rate_scale=1.0).mean(axis=1) - base
    bands = {kappa: band_quantiles(base + kappa * unit, centre) for kappa in KAPPA_GRID}
    # The band's floor where the fitted points end flat (FitResult.interval: a flat continuation).
    floors = {level: late_plateau_floor(fit.compute, fit.reward, level, N_HELD_OUT, fit.noise_sd) for level in LEVELS}
    return {"abs_error": abs(centre - truth), "forecast": centre, "seconds": seconds, "cpu_seconds": cpu_seconds,
            "bands": bands, "floors": floors,
            "gain_reached": fit.gain_reached}


def score_baseline(fitter, train_c, train_r, test_c, truth):
    try:
        with np.errstate(all="ignore"):
            forecast = float(np.mean(fitter(train_c, train_r).predict(test_c)))
    except (ScaleRLError, ValueError, RuntimeError, np.linalg.LinAlgError, AttributeError) as error:
        return {"error": f"{type(error).__name__}: {error}"}
    if not np.isfinite(forecast):
        return {"error": "non-finite forecast"}
    return {"abs_error": abs(forecast - truth), "forecast": forecast}


def load_runs(data_dir):
    """(name, status, group, compute, reward) per run; `group` ties files of one training run."""
    manifest = pd.read_csv(data_dir / "manifest.csv")
    stems = [f.removesuffix(".csv") for f in manifest["file"]]
    runs = []
    for row in manifest.itertuples():
        stem = row.file.removesuffix(".csv")
        group = stem
        same = re.search(r"SAME TRAINING RUN as \S*?__(\S+?)[,.;]?(\s|$)", str(row.notes))
        if same:
            group = next((s for s in stems if s.endswith("__" + same.group(1))), stem)
        frame = pd.read_csv(data_dir / row.file).sort_values("compute", kind="stable")
        runs.append((stem, row.status, group, frame["compute"].to_numpy(float), frame["reward"].to_numpy(float)))
    return runs


def forecast_cells(runs):
    cells = []
    for name, status, group, compute, reward in runs:
        if status not in ("healthy", "pre_plateau"):
            continue
        test_c = compute[-N_HELD_OUT:]
        truth = float(np.mean(reward[-N_HELD_OUT:]))
        for fraction in FRACTIONS:
            train = (compute <= fraction * compute.max()) & (np.arange(compute.size) < compute.size - N_HELD_OUT)
            cell = {"run": name, "status": status, "group": group, "fraction": fraction, "n_train": int(train.sum()),
                    "truth": truth}
            if train.sum() < 4:
                cell["skipped"] = "fewer than 4 points (R0 + 3)"
                cells.append(cell)
                continue
            train_c, train_r = compute[train], reward[train]
            try:
                cell["scalerl"] = score_scalerl(train_c, train_r, test_c, truth)
            except ScaleRLError as error:
                cell["scalerl"] = {"error": f"{type(error).__name__}: {error}"}
            for method, fitter in BASELINES.items():
                cell[method] = score_baseline(fitter, train_c, train_r, test_c, truth)
            cells.append(cell)
    return cells


def error_with_fallback(cell, method):
    """The method's abs error on a cell; where its fit failed, the last value's (what a user who
    asked for that forecast falls back to), so every method is scored on every cell."""
    return cell[method]["abs_error"] if "abs_error" in cell[method] else cell["last_value"]["abs_error"]


def error_table(cells):
    """{fraction: {method: {...}}}: median and mean abs error over every cell (a failed fit scored
    as the last value), over the forecasts each method made, and over the common cells (those every
    method forecast). The first is the headline: a method that fails on the hardest early cells
    would look better for it in the second."""
    table = {}
    for fraction in FRACTIONS:
        chosen = [c for c in cells if c["fraction"] == fraction and "skipped" not in c]
        common = [c for c in chosen if all("abs_error" in c[m] for m in METHODS)]
        table[fraction] = {}
        for method in METHODS:
            errors = [c[method]["abs_error"] for c in chosen if "abs_error" in c[method]]
            every = [error_with_fallback(c, method) for c in chosen]
            shared = [c[method]["abs_error"] for c in common]
            table[fraction][method] = {
                "cells": len(chosen), "failed": len(chosen) - len(errors),
                "all_median_abs_error": float(np.median(every)) if every else None,
                "all_mean_abs_error": float(np.mean(every)) if every else None,
                "median_abs_error": float(np.median(errors)) if errors else None,
                "mean_abs_error": float(np.mean(errors)) if errors else None,
                "common_cells": len(common),
                "common_median_abs_error": float(np.median(shared)) if shared else None,
                "common_mean_abs_error": float(np.mean(shared)) if shared else None,
            }
    return table


def diagnostics(runs):
    """Collapse rule on every run (collapsed ones must fire, others must not)."""
    return [{"run": name, "status": status, "collapse_fired": detect_collapse(compute, reward) is not None}
            for name, status, _, compute, reward in runs]


def markdown(errors, coverage, constants, seconds, diag):
    fmt = lambda v, spec: "n/a" if v is None else format(v, spec)  # noqa: E731
    lines = ["| fit on | method | cells | failed | median abs err | mean abs err | median (made) | "
             "mean (made) | common cells | median (common) | mean (common) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for fraction, rows in errors.items():
        for method, r in rows.items():
            lines.append(f"| {fraction:.0%} | {method} | {r['cells']} | {r['failed']} | "
                         f"{fmt(r['all_median_abs_error'], '.4f')} | {fmt(r['all_mean_abs_error'], '.4f')} | "
                         f"{fmt(r['median_abs_error'], '.4f')} | {fmt(r['mean_abs_error'], '.4f')} | "
                         f"{r['common_cells']} | {fmt(r['common_median_abs_error'], '.4f')} | "
                         f"{fmt(r['common_mean_abs_error'], '.4f')} |")
    lines += ["", "| runs | forecasts | " + " | ".join(f"{lv:.0%} band" for lv in REPORT_LEVELS) + " |",
              "|---|---|" + "---|" * len(REPORT_LEVELS)]
    for name, (table, n_cells) in coverage.items():
        lines.append(f"| {name} | {n_cells} | " + " | ".join(fmt(table[lv], ".2f") for lv in REPORT_LEVELS) + " |")
    lines += ["", f"Band-widening constants chosen on all curves (the library's): {constants}",
              f"scalerl fit + band per forecast: wall clock median {seconds['median']:.3f} s, slowest "
              f"{seconds['max']:.3f} s; CPU time median {seconds['cpu_median']:.3f} s, slowest {seconds['cpu_max']:.3f} s",
              "Collapse rule: " + ", ".join(f"{k} {v}" for k, v in diag.items())]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=HERE / "data" / "curves")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--figure", type=Path, default=ROOT / "docs" / "forecast_calibration.png")
    args = parser.parse_args(argv)
    runs = load_runs(args.data)
    cells = forecast_cells(runs)
    scored = [c for c in cells if "bands" in c.get("scalerl", {})]
    calibration_cells = [{"group": c["group"], "status": c["status"], "truth": c["truth"],
                          "centre": c["scalerl"]["forecast"], "bands": c["scalerl"].pop("bands"),
                          "floors": c["scalerl"].pop("floors")} for c in scored]
    loco_coverage(calibration_cells)
    for cell, calibrated in zip(scored, calibration_cells):
        cell["scalerl"].update(loco_constants=calibrated["constants"], covered=calibrated["covered"])
    coverage = {name: coverage_table(calibration_cells, statuses) for name, statuses in STATUSES.items()}
    kappa, k = choose_constants(calibration_cells)
    constants = {"RATE_SCALE (kappa)": kappa, "BAND_SCALE (k)": round(k, 3)}
    times = [c["scalerl"]["seconds"] for c in scored]
    cpu_times = [c["scalerl"]["cpu_seconds"] for c in scored]
    seconds = {"median": float(np.median(times)), "max": float(np.max(times)),
               "cpu_median": float(np.median(cpu_times)), "cpu_max": float(np.max(cpu_times))}
    diag_rows = diagnostics(runs)
    diag = {f"fired on {status}": f"{sum(r['collapse_fired'] for r in diag_rows if r['status'] == status)}/"
            f"{sum(r['status'] == status for r in diag_rows)}" for status in ("collapsed", "healthy", "pre_plateau")}
    errors = error_table(cells)
    report = {"fractions": FRACTIONS, "held_out_points": N_HELD_OUT, "target": "mean of the last three evaluations",
              "errors": {str(f): rows for f, rows in errors.items()},
              "coverage": {name: {"cells": n, "by_level": {str(lv): v for lv, v in table.items()}}
                           for name, (table, n) in coverage.items()},
              "constants_all_curves": constants, "choice_level": CHOICE_LEVEL, "levels": LEVELS,
              "seconds_per_forecast": seconds, "collapse_rule": diag, "cells": cells}
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in (("forecast_accuracy.json", json.dumps(report, indent=1, default=float)),
                       ("forecast_accuracy.md", f"# Forecast accuracy on {len(runs)} runs\n\n"
                        + markdown(errors, coverage, constants, seconds, diag) + "\n")):
        tmp = args.out / (name + ".tmp")
        tmp.write_text(text)
        tmp.replace(args.out / name)
    calibration_figure(coverage, args.figure)
    print(markdown(errors, coverage, constants, seconds, diag))


if __name__ == "__main__":
    main()
