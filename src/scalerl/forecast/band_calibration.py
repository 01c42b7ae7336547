"""Split-conformal calibration of the forecast band by horizon, learned across training runs.

A fit's posterior-predictive draws say how uncertain the curve is where it has data; beyond the
last fitted point real runs break the fitted shape more often than the posterior expects (before
the bend) or less (on a plateau). The band is therefore calibrated on other runs (normalised
split-conformal prediction, Lei et al. 2018, arXiv 1604.04173; Romano et al. 2019 for the
asymmetric quantile form). For a fit on the points up to C_last and a later evaluation y at C:

    h = log(C / C_last)                         the forecast horizon (0 at and before C_last)
    m = point forecast at C,   s = sqrt(sigma_d^2 + s_curve^2)   (FitResult.predictive_spread:
                                 sigma_d the second-difference noise, s_curve the robust sd
                                 (q90 - q10) / 2.563 of the posterior curves at C)
    g = max(m - r_now, 0) beyond C_last, 0 within the data: the gain the forecast still expects
                                 over r_now, the mean of the last three fitted evaluations
    s_lo = sqrt(s^2 + g^2)                      the spread below the forecast: a run can stop
                                 improving at any evaluation, and no curve fitted before that
                                 point sees it coming, so the shortfall scales with the gain ahead
    z = (y - m) / s_lo if y < m, else (y - m) / s     the normalised score

Scores of many (run, cut) pairs are pooled per stratum (the fitted points end flat within their
noise, or still rise: diagnostics.LateStretch.is_flat) and horizon bin; each (run, cut) weighs 1,
spread evenly over its later evaluations, so a long run does not outweigh a short one. The table
holds the weighted quantiles of z at PROBABILITIES. The band at level L is

    [m + Q((1 - L) / 2) s_lo,  m + Q((1 + L) / 2) s]

with Q interpolated in the table's probabilities (and widened to hold m). The shipped table
(band_table.json) is built from the bundled curves by `python -m benchmarks.band_table`; the
forecast-accuracy benchmark builds one per held-out source from the other sources only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from scalerl.errors import InputError

HORIZON_EDGES = (0.25, 0.5, 1.0)  # bins: [0, 0.25), [0.25, 0.5), [0.5, 1), [1, inf) in log(C / C_last)
PROBABILITIES = (0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
                 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.975, 0.99)
STRATA = ("flat_end", "rising")
# Cuts (shares of a run's compute) at which calibration runs are fitted.
CUT_FRACTIONS = (0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8)
# A bin with fewer (run, cut) pairs than this borrows the scores of its stratum's other bins.
MIN_PAIRS_PER_BIN = 8
ROBUST_SD_SPAN = 2.563  # q90 - q10 of a standard normal
TABLE_FILE = "band_table.json"


@dataclass(frozen=True)
class HeldOutScores:
    """Normalised scores of one fit's later evaluations: horizon and z per evaluation."""

    stratum: str
    horizon: np.ndarray
    score: np.ndarray
    run: str = ""
    source: str = ""


def horizon(compute: ArrayLike, last_compute: float) -> np.ndarray:
    """h = max(log(C / C_last), 0); 0 at C = 0 as well (inside the data)."""
    compute = np.atleast_1d(np.asarray(compute, dtype=float))
    with np.errstate(divide="ignore"):
        return np.maximum(np.log(np.where(compute > 0, compute, last_compute) / float(last_compute)), 0.0)


def gain_ahead(centre: ArrayLike, compute: ArrayLike, last_compute: float, level_now: float) -> np.ndarray:
    """g = max(m(C) - r_now, 0) for C > C_last, 0 within the data: the rise the forecast m still
    expects over the run's present level r_now."""
    centre, compute = np.asarray(centre, dtype=float), np.asarray(compute, dtype=float)
    return np.where(compute > float(last_compute), np.maximum(centre - float(level_now), 0.0), 0.0)


def lower_spread(spread: ArrayLike, gain: ArrayLike) -> np.ndarray:
    """s_lo = sqrt(s^2 + g^2): the spread below the forecast, widened by the gain ahead."""
    return np.hypot(np.asarray(spread, dtype=float), np.asarray(gain, dtype=float))


def normalised_score(reward: ArrayLike, centre: ArrayLike, spread: ArrayLike, spread_below: ArrayLike) -> np.ndarray:
    """z = (y - m) / s_lo where y < m, else (y - m) / s."""
    gap = np.asarray(reward, dtype=float) - np.asarray(centre, dtype=float)
    return np.where(gap < 0, gap / np.asarray(spread_below, dtype=float), gap / np.asarray(spread, dtype=float))


def horizon_bin(h: ArrayLike) -> np.ndarray:
    """Index of the horizon bin of each h (HORIZON_EDGES are the inner edges)."""
    return np.searchsorted(np.asarray(HORIZON_EDGES), np.asarray(h, dtype=float), side="right")


def robust_spread(draws: np.ndarray, floor: float) -> np.ndarray:
    """s = (q90 - q10) / 2.563 per column of `draws`, at least `floor`."""
    q10, q90 = np.quantile(draws, [0.1, 0.9], axis=0)
    return np.maximum((q90 - q10) / ROBUST_SD_SPAN, float(floor))


def weighted_quantile(values: ArrayLike, weights: ArrayLike, probabilities: Sequence[float]) -> np.ndarray:
    """Quantiles of the weighted empirical distribution (midpoint rule on the cumulative weights)."""
    values, weights = np.asarray(values, dtype=float), np.asarray(weights, dtype=float)
    order = np.argsort(values)
    values, weights = values[order], weights[order]
    cumulative = (np.cumsum(weights) - 0.5 * weights) / np.sum(weights)
    return np.interp(np.asarray(probabilities, dtype=float), cumulative, values)


def _pooled(cells: Sequence[HeldOutScores], stratum: str, bins: Sequence[int]) -> tuple[np.ndarray, np.ndarray, int]:
    """Scores, weights and (run, cut) count of `stratum` in the given horizon bins."""
    scores, weights, pairs = [], [], 0
    for cell in cells:
        if cell.stratum != stratum or cell.score.size == 0:
            continue
        inside = np.isin(horizon_bin(cell.horizon), bins)
        if not np.any(inside):
            continue
        pairs += 1
        scores.append(cell.score[inside])
        weights.append(np.full(int(inside.sum()), 1.0 / cell.score.size))
    if not scores:
        return np.empty(0), np.empty(0), 0
    return np.concatenate(scores), np.concatenate(weights), pairs


def build_table(cells: Sequence[HeldOutScores]) -> dict:
    """{"probabilities", "horizon_edges", "strata": {stratum: {"quantiles": [[...] per bin], "pairs": [...]}}}.

    A bin with fewer than MIN_PAIRS_PER_BIN (run, cut) pairs takes the pooled scores of its
    stratum, a stratum with too few takes every score: a sparse cell never sets the band alone.
    """
    n_bins = len(HORIZON_EDGES) + 1
    every = [cell for cell in cells if cell.score.size]
    if not every:
        raise InputError("no held-out scores to calibrate the band on")
    strata = {}
    for stratum in STRATA:
        rows, counts = [], []
        for b in range(n_bins):
            scores, weights, pairs = _pooled(every, stratum, [b])
            if pairs < MIN_PAIRS_PER_BIN:
                scores, weights, pairs = _pooled(every, stratum, list(range(n_bins)))
            if pairs < MIN_PAIRS_PER_BIN:
                scores = np.concatenate([c.score for c in every])
                weights = np.concatenate([np.full(c.score.size, 1.0 / c.score.size) for c in every])
                pairs = len(every)
            rows.append([round(float(q), 4) for q in weighted_quantile(scores, weights, PROBABILITIES)])
            counts.append(int(pairs))
        strata[stratum] = {"quantiles": rows, "pairs": counts}
    return {"probabilities": list(PROBABILITIES), "horizon_edges": list(HORIZON_EDGES), "strata": strata}


def band_multipliers(table: Mapping, stratum: str, h: ArrayLike, level: float) -> tuple[np.ndarray, np.ndarray]:
    """(Q((1 - L) / 2), Q((1 + L) / 2)) per horizon: the band's offsets in units of s, lower <= 0 <= upper."""
    if not 0.0 < float(level) < 1.0:
        raise InputError(f"level must be in (0, 1), got {level}")
    probabilities = np.asarray(table["probabilities"], dtype=float)
    rows = np.asarray(table["strata"][stratum]["quantiles"], dtype=float)[horizon_bin(h)]
    low_p, high_p = (1.0 - float(level)) / 2.0, (1.0 + float(level)) / 2.0
    lower = np.array([np.interp(low_p, probabilities, row) for row in rows])
    upper = np.array([np.interp(high_p, probabilities, row) for row in rows])
    return np.minimum(lower, 0.0), np.maximum(upper, 0.0)


@lru_cache(maxsize=1)
def shipped_table() -> dict:
    """The table built from the bundled curves (band_table.json next to this module)."""
    text = resources.files("scalerl.forecast").joinpath(TABLE_FILE).read_text(encoding="utf-8")
    return json.loads(text)["table"]
