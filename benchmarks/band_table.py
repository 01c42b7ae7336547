"""Rebuild the forecast band's calibration table from the bundled curves.

Every `healthy` and `pre_plateau` run of benchmarks/data/curves is fitted at each cut of
band_calibration.CUT_FRACTIONS (compute <= f x max compute, never the last three evaluations),
each later evaluation is scored z = (y - m) / s, and the weighted quantiles per stratum and
horizon bin are written to src/scalerl/forecast/band_table.json, the table `fit_sigmoid` uses
(forecast.band_calibration says how). The forecast-accuracy benchmark uses the same scores, one
table per held-out source.

    python -m benchmarks.band_table [--data DIR] [--out FILE] [--check]     # ~4 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.common import write_text
from scalerl.errors import ScaleRLError
from scalerl.forecast.band_calibration import CUT_FRACTIONS, build_table
from scalerl.forecast.fitting import fit_sigmoid

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data" / "curves"
TABLE = ROOT / "src" / "scalerl" / "forecast" / "band_table.json"
N_HELD_OUT = 3  # the last evaluations are never fitted: they are what a forecast is scored on
FORECAST_STATUSES = ("healthy", "pre_plateau")


@dataclass(frozen=True)
class Run:
    name: str
    source: str
    status: str
    group: str  # files of one training run share a group
    compute: np.ndarray
    reward: np.ndarray


def load_runs(data_dir: Path = DATA) -> list[Run]:
    """Every run of the manifest, sorted by compute; `source` is the file name's prefix."""
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
        runs.append(Run(stem, stem.split("__")[0], row.status, group,
                        frame["compute"].to_numpy(float), frame["reward"].to_numpy(float)))
    return runs


def quick_runs(runs: list[Run]) -> list[Run]:
    """The `--quick` subset: the first run of each status from each source that has a run of every
    forecast status (a handful of runs, still two sources to hold out in turn)."""
    complete = [source for source in dict.fromkeys(run.source for run in runs)
                if set(FORECAST_STATUSES) <= {run.status for run in runs if run.source == source}]
    firsts = {}
    for run in runs:
        if run.source in complete:
            firsts.setdefault((run.source, run.status), run)
    return list(firsts.values())


def cut_mask(compute: np.ndarray, fraction: float) -> np.ndarray:
    """Points a forecast at `fraction` may use: compute <= fraction x max, never the last N_HELD_OUT."""
    return (compute <= fraction * compute.max()) & (np.arange(compute.size) < compute.size - N_HELD_OUT)


def fit_at_cut(run: Run, fraction: float, seed: int = 0):
    """(fit, later compute, later reward), or None when fewer than 4 points (R0 + 3) or the fit
    refuses; `seed` is the sampler's (fit_sigmoid)."""
    train = cut_mask(run.compute, fraction)
    if train.sum() < 4:
        return None
    try:
        fit = fit_sigmoid(run.compute[train], run.reward[train], seed=seed)
    except ScaleRLError:
        return None
    later = run.compute > run.compute[train].max()
    return fit, run.compute[later], run.reward[later]


def collect_fits(runs: list[Run], fractions=CUT_FRACTIONS, log=sys.stderr, seconds: list | None = None,
                 seed: int = 0) -> dict:
    """{(run name, fraction): (fit, later compute, later reward) or None} for the forecastable runs;
    the wall-clock seconds of each fit are appended to `seconds` when given; `seed`: the sampler's."""
    fits = {}
    chosen = [run for run in runs if run.status in FORECAST_STATUSES]
    for i, run in enumerate(chosen, 1):
        print(f"[{i}/{len(chosen)}] fitting {run.name} at {len(fractions)} cuts", file=log, flush=True)
        for fraction in fractions:
            started = time.perf_counter()
            fits[(run.name, fraction)] = fit_at_cut(run, fraction, seed)
            if seconds is not None and fits[(run.name, fraction)] is not None:
                seconds.append(time.perf_counter() - started)
    return fits


def scores_of(fits: dict, runs: list[Run], fractions=CUT_FRACTIONS, exclude_source: str | None = None) -> list:
    """HeldOutScores of every fit at `fractions`, leaving out one source's runs when asked."""
    by_name = {run.name: run for run in runs}
    out = []
    for (name, fraction), entry in fits.items():
        run = by_name[name]
        if entry is None or fraction not in fractions or run.source == exclude_source:
            continue
        fit, compute, reward = entry
        out.append(fit.calibration_scores(compute, reward, name, run.source))
    return out


def table_document(table: dict, runs: list[Run], data_dir: Path) -> dict:
    used = sorted({run.name for run in runs if run.status in FORECAST_STATUSES})
    return {"command": "python -m benchmarks.band_table", "data": os.path.relpath(data_dir, ROOT),
            "runs": used, "sources": sorted({name.split("__")[0] for name in used}),
            "cut_fractions": list(CUT_FRACTIONS), "table": table}


def tables_match(a: dict, b: dict, tolerance: float = 0.02) -> bool:
    """Same layout and every quantile within `tolerance` (floating-point order may differ by machine)."""
    if a["probabilities"] != b["probabilities"] or a["horizon_edges"] != b["horizon_edges"]:
        return False
    for stratum, cell in a["strata"].items():
        left, right = np.asarray(cell["quantiles"]), np.asarray(b["strata"][stratum]["quantiles"])
        if left.shape != right.shape or np.max(np.abs(left - right)) > tolerance:
            return False
    return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=TABLE)
    parser.add_argument("--check", action="store_true", help="rebuild and compare with --out instead of writing")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run on a few runs (quick_runs); give --out, the table is not the shipped one")
    args = parser.parse_args(argv)
    if args.quick and args.out == TABLE and not args.check:
        parser.error("--quick builds a table from a few runs: give --out, not the shipped table")
    runs = quick_runs(load_runs(args.data)) if args.quick else load_runs(args.data)
    fits = collect_fits(runs)
    table = build_table(scores_of(fits, runs))
    if args.check:
        shipped = json.loads(args.out.read_text(encoding="utf-8"))["table"]
        same = tables_match(table, shipped)
        print(f"{args.out}: {'reproduced' if same else 'DIFFERS from the rebuilt table'}")
        return 0 if same else 1
    write_text(args.out, json.dumps(table_document(table, runs, args.data), indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
