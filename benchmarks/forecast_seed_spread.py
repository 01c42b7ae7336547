"""Benchmark: how much of the forecast-accuracy table is the sampler's seed?

benchmarks/forecast_accuracy.py scores scalerl with the posterior sampler's seed 0. Its cells rest
on few runs (3 or 4 still-rising runs per fraction) and on band edges that sit near flat data, so a
different seed, which moves every band by a percent or two, can move a cell's coverage and
interval score by more than the gap to a baseline. This reruns scalerl's part of that benchmark
(same runs, cuts and by-source tables, each table rebuilt from its seed's fits) for several seeds
and reports, per headline cell, seed 0's value, the range over the seeds, and the best baseline of
forecast_accuracy.json (whose forecasts do not depend on this seed). A gap to a baseline inside
the range is a tie, not a win or a loss.

    python -m benchmarks.forecast_seed_spread [--seeds 0 1 2 3 4]     # ~6 min on 2 cores
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.bundled_runs import collect_fits, load_runs, quick_runs
from benchmarks.common import command_line, write_result
from benchmarks.forecast_accuracy import (
    FRACTIONS,
    POINT_BASELINES,
    band_table_summary,
    error_table,
    forecast_cells,
    plateau_read,
)
from benchmarks.render.forecast_checks import seed_spread as spread_table

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "forecast_seed_spread.json"
ACCURACY = HERE / "results" / "forecast_accuracy.json"
STATUSES = ("healthy", "still rising")


def seed_metrics(runs, seed: int) -> dict:
    """scalerl's headline cells with sampler seed `seed`: final-level error (all runs), 80 % coverage
    and interval score (healthy / still rising) per fraction, and the plateau read."""
    fits = collect_fits(runs, FRACTIONS, log=io.StringIO(), seed=seed)
    cells = forecast_cells(runs, fits, baselines={"persistence": POINT_BASELINES["persistence"]})
    errors = error_table(cells, methods=("scalerl",))
    bands = band_table_summary(cells, methods=("scalerl",))
    out = {}
    for fraction in FRACTIONS:
        key = str(fraction)
        row = errors[key]["all"]["scalerl"]
        out[f"median_error@{key}"] = row["median_abs_error"]
        out[f"mean_error@{key}"] = row["mean_abs_error"]
        for status in STATUSES:
            band = bands[key].get(status, {}).get("scalerl")
            if band is not None:
                out[f"coverage80@{key}/{status}"] = band["0.8"]["coverage"]
                out[f"interval_score80@{key}/{status}"] = band["0.8"]["interval_score"]
    summary, _ = plateau_read(runs, seed=seed)
    out["plateau_read"] = summary["read"]
    out["plateau_runs"] = summary["healthy_runs"]
    return out


def best_baselines(accuracy: dict) -> dict:
    """{metric: [method, value]}: the best baseline of forecast_accuracy.json per headline cell
    (lowest error or interval score; coverage has no best and is left out)."""
    out = {}
    for fraction in FRACTIONS:
        key = str(fraction)
        rows = {m: r for m, r in accuracy["errors"][key]["all"].items() if m != "scalerl"}
        for stat, name in (("median_abs_error", "median_error"), ("mean_abs_error", "mean_error")):
            method = min(rows, key=lambda m: rows[m][stat])
            out[f"{name}@{key}"] = [method, rows[method][stat]]
        for status in STATUSES:
            bands = {m: r for m, r in accuracy["bands"][key].get(status, {}).items() if m != "scalerl"}
            if bands:
                method = min(bands, key=lambda m: bands[m]["0.8"]["interval_score"])
                out[f"interval_score80@{key}/{status}"] = [method, bands[method]["0.8"]["interval_score"]]
    return out


def spread(per_seed: list[dict]) -> dict:
    """{metric: {min, max, mean}} over the seeds; a metric no seed could score (None: no cell) is left out."""
    out = {}
    for metric in per_seed[0]["metrics"]:
        values = [s["metrics"].get(metric) for s in per_seed]
        values = [v for v in values if v is not None]
        if values:
            out[metric] = {"min": float(np.min(values)), "max": float(np.max(values)), "mean": float(np.mean(values))}
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--data", type=Path, default=HERE / "data" / "curves")
    parser.add_argument("--accuracy", type=Path, default=ACCURACY, help="forecast_accuracy.json with the baselines")
    parser.add_argument("--quick", action="store_true", help="smoke run on a few runs (band_table.quick_runs)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if not args.accuracy.is_file():
        raise SystemExit(f"error: {args.accuracy} is missing: run python -m benchmarks.forecast_accuracy first")
    runs = quick_runs(load_runs(args.data)) if args.quick else load_runs(args.data)
    start = time.perf_counter()
    per_seed = []
    for seed in args.seeds:
        print(f"seed {seed}: fitting {len(runs)} runs", file=sys.stderr, flush=True)
        per_seed.append({"seed": seed, "metrics": seed_metrics(runs, seed)})
    payload = {
        "runs": len(runs),
        "seeds": args.seeds,
        "per_seed": per_seed,
        "spread": spread(per_seed),
        "baselines": best_baselines(json.loads(args.accuracy.read_text())),
        "seconds": time.perf_counter() - start,
    }
    print(spread_table(payload))
    write_result(args.out, payload, command_line("forecast_seed_spread", argv))
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
