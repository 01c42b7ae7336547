"""The bundled real runs (benchmarks/data/curves) and their fits at cuts of each run, shared by the
forecast benchmarks (forecast_accuracy, run_length_accuracy, sampler_check, forecast_seed_spread).
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from scalerl.errors import ScaleRLError
from scalerl.forecast.fitting import fit_sigmoid
from scalerl.forecast.reward_unit import inferred_reward_range

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data" / "curves"
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

    @property
    def reward_range(self) -> tuple[float, float] | None:
        """[0, 1] when every reward lies in it (pass rates), else open (a composite reward), as `scalerl fit` infers."""
        return inferred_reward_range([self.reward])


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
        runs.append(
            Run(
                stem,
                stem.split("__")[0],
                row.status,
                group,
                frame["compute"].to_numpy(float),
                frame["reward"].to_numpy(float),
            )
        )
    return runs


def quick_runs(runs: list[Run]) -> list[Run]:
    """The `--quick` subset: the first run of each status from each source that has a run of every
    forecast status (a handful of runs, still two sources to hold out in turn)."""
    complete = [
        source
        for source in dict.fromkeys(run.source for run in runs)
        if set(FORECAST_STATUSES) <= {run.status for run in runs if run.source == source}
    ]
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
        fit = fit_sigmoid(run.compute[train], run.reward[train], seed=seed, reward_range=run.reward_range)
    except ScaleRLError:
        return None
    later = run.compute > run.compute[train].max()
    return fit, run.compute[later], run.reward[later]


def collect_fits(runs: list[Run], fractions, log=sys.stderr, seconds: list | None = None, seed: int = 0) -> dict:
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
