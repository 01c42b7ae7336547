"""The one number scalerl's forecaster learns across runs: kappa_1, the log-sd at one decade of
data of the factor on the gain beyond the data (SETTINGS.gain_ahead_log_sd_at_decade,
fitting.gain_ahead_log_sd), chosen for each source on the other sources' cells of
benchmarks.forecast_accuracy: calibrated first, then sharp (Gneiting, Balabdaoui & Raftery 2007).

A cell here is forecast_accuracy's: {"source", "fraction", "unit", "scalerl_by_log_sd": {str(log_sd):
{"bands": {"0.8": {"covered": [...], "score": [...]}}}}}, one per (run, fraction of the run fitted).
"""

from __future__ import annotations

import numpy as np

GAIN_AHEAD_GRID = (0.0, 0.25, 0.5, 0.75, 0.9, 1.0, 1.25, 1.5)
# An 80 % band is calibrated when it holds at least this share of the later evaluations at every
# fraction: the lower end of the range the project accepts for an 80 % band (0.72-0.88).
CALIBRATION_FLOOR = 0.72


def gain_ahead_by_source(cells) -> dict:
    """{source: the log-sd its cells were scored with} (forecast_cells chose it on the others)."""
    return {c["source"]: c["gain_ahead_log_sd"] for c in cells}


def mean_interval_score(cells, log_sd) -> float:
    """The mean over cells of each cell's mean 80 % interval score in reward units, with the gain
    factor's log-sd `log_sd` (cells with a scalerl band only)."""
    scores = [
        np.mean(c["scalerl_by_log_sd"][str(log_sd)]["bands"]["0.8"]["score"]) / c["unit"]
        for c in cells
        if (c.get("scalerl_by_log_sd") or {}).get(str(log_sd), {}).get("bands")
    ]
    return float(np.mean(scores)) if scores else float("inf")


def pooled_coverage(cells, log_sd) -> dict:
    """{fraction: share of the later evaluations inside the 80 % band} with the gain factor's
    log-sd `log_sd`, pooled over the cells with a scalerl band."""
    covered = {}
    for c in cells:
        bands = (c.get("scalerl_by_log_sd") or {}).get(str(log_sd), {}).get("bands")
        if bands:
            covered.setdefault(c["fraction"], []).extend(bands["0.8"]["covered"])
    return {fraction: float(np.mean(values)) for fraction, values in covered.items()}


def calibrated_choice(cells) -> float:
    """The log-sd of GAIN_AHEAD_GRID with the lowest mean 80 % interval score among those whose
    80 % band holds at least CALIBRATION_FLOOR at every fraction; the best-covering one if none does."""
    lowest = {log_sd: min(pooled_coverage(cells, log_sd).values(), default=0.0) for log_sd in GAIN_AHEAD_GRID}
    calibrated = [log_sd for log_sd in GAIN_AHEAD_GRID if lowest[log_sd] >= CALIBRATION_FLOOR]
    if not calibrated:
        return max(GAIN_AHEAD_GRID, key=lowest.get)
    return min(calibrated, key=lambda log_sd: mean_interval_score(cells, log_sd))


def gain_ahead_choices(cells) -> dict:
    """{source: log-sd chosen on the other sources' cells (calibrated_choice)}, and under "all" the
    one chosen on every cell (what the package ships, SETTINGS.gain_ahead_log_sd_at_decade)."""
    sources = sorted({c["source"] for c in cells})
    return {source: calibrated_choice([c for c in cells if c["source"] != source]) for source in sources + ["all"]}
