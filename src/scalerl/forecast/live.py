"""Live forecast during a run: refit the ScaleRL sigmoid on the evaluations so far and turn the fit
into the few numbers a training log carries (ceiling A, its interval, the reward at a budget).

Torch-free: the synchronous trainer (scalerl.train.trainer) and the TRL callback
(scalerl.integrations.trl_callback) both call `live_forecast`. The fit is exactly
`fit_sigmoid(compute, reward, n_draws=..., level=..., reward_range=...)`, i.e. what
`scalerl fit LOG --json --n-draws N --predict-at BUDGET` reports on the same points; only the
posterior sample kept is smaller than the offline default so that refitting at every evaluation stays cheap.

When no fit is possible yet (fewer than four evaluations: R0 plus three points for A, B, C_mid;
or a run that has not moved from R0) the forecast is None and the log row gets no forecast keys.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scalerl.errors import ConfigError, FitError, InputError
from scalerl.forecast.fitting import fit_sigmoid
from scalerl.forecast.result import FitResult

LIVE_N_DRAWS = 50  # offline fits use 200; 50 keeps a refit at ~0.1 s (benchmarks/live_forecast_overhead.py)
LIVE_PLOT_NAME = "forecast_live.png"
FORECAST_KEYS = (
    "forecast_A",
    "forecast_A_low",
    "forecast_A_high",
    "forecast_budget",
    "forecast_at_budget",
    "ceiling_identified",
)


@dataclass(frozen=True)
class LiveForecast:
    """The forecast made at one evaluation: ceiling A with its interval, the reward predicted at
    `budget` (same compute unit as the points), the fit's verdict (forecast.verdict: its kind and
    sentence; ceiling_identified is "plateaued"), and the fit."""

    a: float
    a_low: float
    a_high: float
    budget: float
    at_budget: float
    ceiling_identified: bool
    n_points: int
    fit: FitResult

    @property
    def verdict(self):
        return self.fit.verdict

    def row(self) -> dict[str, Any]:
        """The keys added to a validation row of metrics.jsonl (or to a TRL log)."""
        return {
            "forecast_A": self.a,
            "forecast_A_low": self.a_low,
            "forecast_A_high": self.a_high,
            "forecast_budget": self.budget,
            "forecast_at_budget": self.at_budget,
            "ceiling_identified": self.ceiling_identified,
        }

    def short_text(self) -> str:
        """`A 0.412 [0.380, 0.455] still_rising` (the verdict's kind after A), for a progress bar."""
        return f"A {self.a:.3f} [{self.a_low:.3f}, {self.a_high:.3f}] {self.verdict.kind}"


def projected_budget(compute_so_far: float, steps_so_far: int, max_steps: int) -> float:
    """Compute the run will have spent at `max_steps`, at the rate so far:
    budget = compute_so_far / steps_so_far * max_steps (linear in steps: the cost of a step is
    roughly constant once the batch shape is fixed). NaN before the first step."""
    if steps_so_far <= 0 or compute_so_far <= 0:
        return math.nan
    return float(compute_so_far) / steps_so_far * max_steps


def check_live_options(n_draws: int, level: float, budget: float | None) -> None:
    """ConfigError for a number of posterior draws below fit_sigmoid's minimum (20), a level outside (0, 1) or a
    budget that is not a positive finite number."""
    if int(n_draws) < 20:
        raise ConfigError(f"live forecast n_draws must be >= 20, got {n_draws}")
    if not 0.0 < level < 1.0:
        raise ConfigError(f"live forecast level must be in (0, 1), got {level}")
    if budget is not None and not (math.isfinite(budget) and budget > 0):
        raise ConfigError(f"live forecast budget must be a positive number, got {budget}")


def live_forecast(
    compute: Sequence[float],
    reward: Sequence[float],
    *,
    budget: float,
    n_draws: int = LIVE_N_DRAWS,
    level: float = 0.8,
    reward_range: tuple[float, float] | None = (0.0, 1.0),
    seed: int = 0,
    on_refused: Callable[[str], None] | None = None,
) -> LiveForecast | None:
    """Fit R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) (arXiv 2510.13786) to the points so far;
    None when they cannot be fitted yet (too few points, no learning, data the fitter rejects),
    after passing the fitter's reason to `on_refused` when given.

    A and its interval are the fit's posterior median and percentile interval at `level`;
    `at_budget` = the point forecast at the budget (NaN when the budget is unknown)."""
    compute = np.asarray(compute, dtype=float)
    reward = np.asarray(reward, dtype=float)
    try:
        fit = fit_sigmoid(compute, reward, n_draws=n_draws, level=level, reward_range=reward_range, seed=seed)
    except (FitError, InputError) as error:
        if on_refused is not None:
            on_refused(str(error))
        return None
    a_low, a_high = fit.conf_int(level)["A"]
    has_budget = budget is not None and math.isfinite(budget) and budget > 0
    at_budget = float(fit.predict(float(budget))) if has_budget else math.nan
    return LiveForecast(
        a=fit.a,
        a_low=a_low,
        a_high=a_high,
        budget=float(budget) if has_budget else math.nan,
        at_budget=at_budget,
        ceiling_identified=fit.ceiling_identified,
        n_points=fit.n_points,
        fit=fit,
    )


def forecast_history(rows: Sequence[dict]) -> dict[str, np.ndarray] | None:
    """The live forecasts logged in metrics rows, as arrays: compute (flops), A, A_low, A_high and
    ceiling_identified, in row order; None when no row has a forecast."""
    logged = [row for row in rows if row.get("forecast_A") is not None and row.get("flops") is not None]
    if not logged:
        return None
    return {
        "flops": np.array([row["flops"] for row in logged], dtype=float),
        "A": np.array([row["forecast_A"] for row in logged], dtype=float),
        "A_low": np.array([row.get("forecast_A_low", row["forecast_A"]) for row in logged], dtype=float),
        "A_high": np.array([row.get("forecast_A_high", row["forecast_A"]) for row in logged], dtype=float),
        "identified": np.array([bool(row.get("ceiling_identified")) for row in logged]),
    }
