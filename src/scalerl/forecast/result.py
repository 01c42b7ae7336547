"""Immutable results of a sigmoid fit: every number a summary of one posterior, and the JSON view."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from types import MappingProxyType

import numpy as np
from numpy.typing import ArrayLike

from scalerl.errors import InputError
from scalerl.forecast.curves import gain_ahead_ceiling, gain_ahead_compute_for_reward, gain_ahead_reward
from scalerl.forecast.diagnostics import at_upper_bound
from scalerl.forecast.settings import SETTINGS

# of to_dict's JSON: 2 added verdict, collapse_compute, noise_sd, reward_range, compute intervals;
# 3: compute_near_ceiling is null where the fitted curve does not describe the run's end
SCHEMA_VERSION = 3
PARAM_NAMES = ("A", "B", "C_mid")


def _check_level(level):
    if not 0.0 < float(level) < 1.0:
        raise InputError(f"level must be in (0, 1), got {level}")
    return float(level)


def _tails(level):
    alpha = 1.0 - _check_level(level)
    return alpha / 2.0, 1.0 - alpha / 2.0


def _json_number(value):
    """Plain float, or None for NaN / infinity (JSON has neither)."""
    value = float(value)
    return value if math.isfinite(value) else None


def _read_only(array):
    array = np.array(array, dtype=float)
    array.setflags(write=False)
    return array


@dataclass(frozen=True)
class ComputeToTarget:
    """Compute needed to reach a target reward; value is inf when the target is above the ceiling."""

    target: float
    value: float
    lo: float
    hi: float
    reachable: bool
    level: float

    def to_dict(self) -> dict:
        return {
            "target": self.target,
            "value": _json_number(self.value),
            "lo": _json_number(self.lo),
            "hi": _json_number(self.hi),
            "reachable": self.reachable,
            "level": self.level,
        }

    @property
    def within_ceiling_interval(self) -> bool:
        """Not reached by the median draw, yet by at least the lower tail's share of the draws: the
        target lies above the ceiling A (the median of A*) but inside A's interval at this level."""
        return not self.reachable and math.isfinite(self.lo)

    def message(self, of_curve: bool = False) -> str:
        """`reward 0.6 at compute 5.1e+04 (80% interval 3e+04 .. never)`; a target above A but inside
        A's interval is probably not reached, one above that interval not reachable. `of_curve`: the
        fitted curve's, not the run's (the verdict says the curve does not describe the run's end)."""
        subject = f"the fitted curve reaches reward {self.target:g}" if of_curve else f"reward {self.target:g}"
        if self.within_ceiling_interval:
            return (
                f"reward {self.target:g} probably not reached: above the fitted ceiling A but inside its "
                f"{self.level:.0%} interval (reached at the earliest at compute {self.lo:.4g})"
            )
        if not self.reachable:
            return f"reward {self.target:g} not reachable: above the fitted ceiling's {self.level:.0%} interval"
        hi = "never" if math.isinf(self.hi) else f"{self.hi:.4g}"
        return f"{subject} at compute {self.value:.4g} ({self.level:.0%} interval {self.lo:.4g} .. {hi})"


@dataclass(frozen=True)
class ComputeNearCeiling:
    """Compute at which the fitted curve comes within `within` of its own ceiling A (a fact of the
    curve; what to do about it is the verdict's, forecast.verdict). value the posterior median of each
    draw's own C_within, lo and hi its `level` interval; current is the largest fitted compute."""

    within: float
    value: float
    lo: float
    hi: float
    current: float
    level: float

    @property
    def times_current(self) -> float:
        return self.value / self.current if self.current > 0 else math.inf

    def message(self) -> str:
        if self.value <= self.current:
            return (
                f"the fitted curve is within {self.within:.3g} of its ceiling at the last point "
                f"(from compute {self.value:.3g}; {self.level:.0%} interval {self.lo:.3g} .. {self.hi:.3g})"
            )
        low = "within the data" if self.lo <= self.current else f"{self.lo:.3g}"
        return (
            f"the fitted curve comes within {self.within:.3g} of its ceiling at compute ~{self.value:.3g}, "
            f"{self.times_current:.3g} times the current max ({self.level:.0%} interval {low} .. {self.hi:.3g})"
        )

    def to_dict(self) -> dict:
        return {
            "within": self.within,
            "value": _json_number(self.value),
            "lo": _json_number(self.lo),
            "hi": _json_number(self.hi),
            "times_current": _json_number(self.times_current),
            "level": self.level,
        }


def _per_draw_summary(per_draw: np.ndarray, level: float) -> tuple[float, float, float]:
    """(median, lo, hi) of per-draw values that may be infinite (inverted-CDF quantiles)."""
    lo_q, hi_q = _tails(level)
    median, lo, hi = np.quantile(per_draw, [0.5, lo_q, hi_q], method="inverted_cdf")
    return float(median), float(lo), float(hi)


@dataclass(frozen=True)
class FitResult:
    """A fitted ScaleRL sigmoid R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) with its uncertainty.

    Every number is a summary of one posterior (forecast.posterior): `param_draws` holds its draws
    as rows (A, B, C_mid), `noise_scale_draws` the noise scale of each row and `gain_factor_draws`
    each row's factor m on the gain beyond the last fitted evaluation (curves.gain_ahead_reward:
    the curve there is R(C_last) + m (R(C) - R(C_last)), its ceiling A* = R(C_last) + m (A - R(C_last));
    m = 1 is the plain sigmoid); `noise_draws` are fixed standard Student-t draws (`noise_dof`
    degrees of freedom) so that a result's bands are deterministic. The reported ceiling A is the
    median of A*, B and C_mid posterior medians, their intervals posterior quantiles, so every
    estimate lies inside its interval; the point forecast at C is the posterior median of
    R*(C; theta) <= A*(theta) draw by draw, so it never exceeds the reported A, which is its limit;
    the band for a new evaluation holds quantiles of the posterior predictive R*(C; theta) + sigma e.
    The verdict (forecast.verdict.decide) is a property of the result.
    """

    a: float
    b: float
    c_mid: float
    r0: float
    stderr: dict
    n_points: int
    compute: np.ndarray
    reward: np.ndarray
    warnings: tuple
    param_draws: np.ndarray
    noise_sd: float
    noise_dof: float
    noise_draws: np.ndarray
    reward_range: tuple | None = (0.0, 1.0)
    fixed: tuple = ("R0",)
    collapse_compute: float | None = None
    loss: str = "linear"
    noise_scale_draws: np.ndarray | None = None
    a_upper_bound: float | None = None  # the top of A's search range (the reward range's top for pass rates)
    reward_unit: float = 1.0  # the reward's unit (forecast.reward_unit): the margins are shares of it
    gain_factor_draws: np.ndarray | None = None  # m per row of param_draws (None: 1, the plain sigmoid)
    # The fitted points' successive-difference noise (diagnostics.point_noise_sd; None: noise_sd):
    # unlike the residuals' noise it is not inflated where the sigmoid cannot follow the run.
    difference_noise_sd: float | None = None

    def __post_init__(self) -> None:
        for name in ("compute", "reward", "param_draws", "noise_draws"):
            object.__setattr__(self, name, _read_only(getattr(self, name)))
        if self.noise_scale_draws is None:
            object.__setattr__(self, "noise_scale_draws", np.full(self.param_draws.shape[0], self.noise_sd))
        object.__setattr__(self, "noise_scale_draws", _read_only(self.noise_scale_draws))
        if self.gain_factor_draws is None:
            object.__setattr__(self, "gain_factor_draws", np.ones(self.param_draws.shape[0]))
        object.__setattr__(self, "gain_factor_draws", _read_only(self.gain_factor_draws))
        object.__setattr__(self, "stderr", MappingProxyType(dict(self.stderr)))

    @property
    def last_compute(self) -> float:
        """C_last: the largest compute fitted, beyond which the gain factor acts."""
        return float(np.max(self.compute))

    @cached_property
    def ceiling_draws(self) -> np.ndarray:
        """A* per posterior row: R(C_last) + m (A - R(C_last)), the limit of that row's curve."""
        a, b, c_mid = self.param_draws.T
        return _read_only(gain_ahead_ceiling(a, b, c_mid, self.r0, self.last_compute, self.gain_factor_draws))

    def with_gain_factors(self, factors: ArrayLike) -> FitResult:
        """This fit with other gain factors m per row; A (the median of A*) and its sd follow them."""
        changed = replace(self, gain_factor_draws=np.asarray(factors, dtype=float))
        ceiling = changed.ceiling_draws
        return replace(
            changed, a=float(np.median(ceiling)), stderr={**dict(self.stderr), "A": float(np.std(ceiling, ddof=1))}
        )

    @cached_property
    def verdict(self):
        """forecast.verdict.decide(self): the one verdict every view prints."""
        from scalerl.forecast.verdict import decide

        return decide(self)

    @property
    def ceiling_identified(self) -> bool:
        """A known to the paper's margin: the verdict is "plateaued"."""
        return self.verdict.kind == "plateaued"

    @property
    def ceiling_at_bound(self) -> bool:
        """The data bound the ceiling from below only: the upper end of A's 80 % posterior interval
        sits at the top of its range (diagnostics.at_upper_bound). A is then a limit, not an estimate."""
        if self.a_upper_bound is None or "A" in self.fixed:
            return False
        upper_end = float(np.quantile(self.ceiling_draws, 0.9))
        return at_upper_bound(upper_end, self.a_upper_bound, self.r0)

    def params(self) -> dict:
        return {"A": self.a, "B": self.b, "C_mid": self.c_mid, "R0": self.r0}

    def conf_int(self, level: float = 0.8) -> dict:
        """Posterior quantile interval per parameter: {name: (lo, hi)}; it holds the posterior median
        (A's is of the ceiling A*, ceiling_draws)."""
        lo_q, hi_q = _tails(level)
        out = {}
        for column, name in enumerate(PARAM_NAMES):
            draws = self.ceiling_draws if name == "A" else self.param_draws[:, column]
            lo, hi = np.quantile(draws, [lo_q, hi_q])
            out[name] = (float(lo), float(hi))
        return out

    def _mean_draws(self, compute):
        draws = self.param_draws
        compute = np.atleast_1d(np.asarray(compute, dtype=float))
        return gain_ahead_reward(
            compute[None, :],
            draws[:, :1],
            draws[:, 1:2],
            draws[:, 2:3],
            self.r0,
            self.last_compute,
            self.gain_factor_draws[:, None],
        )

    def predict(self, compute: ArrayLike) -> np.ndarray:
        """Point forecast: the posterior median of R*(C; theta)."""
        scalar = np.ndim(compute) == 0
        median = np.median(self._mean_draws(compute), axis=0)
        return median[0] if scalar else median

    def _paired(self, draws):
        """Fixed draws arranged one row per posterior draw: (n_params_draws, n_per_draw)."""
        n_per = draws.size // self.param_draws.shape[0]
        return draws[: n_per * self.param_draws.shape[0]].reshape(-1, n_per)

    def observation_draws(self, compute: ArrayLike, n_average: int = 1) -> np.ndarray:
        """Posterior-predictive samples of a new evaluation at each `compute`: (n_samples, m).

        Sample = curve of one posterior draw + that draw's noise scale x a Student-t draw; with
        `n_average` > 1, a sample of the mean of that many independent evaluations (noise / sqrt(n))."""
        mean_draws = self._mean_draws(compute)
        noise = self.noise_scale_draws[:, None] * self._paired(self.noise_draws) / np.sqrt(float(n_average))
        samples = mean_draws[:, None, :] + noise[:, :, None]
        return samples.reshape(-1, mean_draws.shape[1])

    def interval(
        self, compute: ArrayLike, level: float = 0.8, kind: str = "observation"
    ) -> tuple[np.ndarray | float, np.ndarray | float]:
        """Band at `compute`: kind="observation" for a new noisy evaluation (quantiles of the
        posterior predictive, observation_draws), "mean" for the curve (quantiles of R(C; theta)).
        Both hold the point forecast and are clipped to `reward_range`."""
        if kind not in ("observation", "mean"):
            raise InputError(f"interval kind must be 'observation' or 'mean', got {kind!r}")
        lo_q, hi_q = _tails(level)
        scalar = np.ndim(compute) == 0
        compute = np.atleast_1d(np.asarray(compute, dtype=float))
        centre = self.predict(compute)
        samples = self.observation_draws(compute) if kind == "observation" else self._mean_draws(compute)
        lo, hi = np.quantile(samples, [lo_q, hi_q], axis=0)
        lo, hi = np.minimum(lo, centre), np.maximum(hi, centre)
        if self.reward_range is not None:
            lo = np.clip(lo, self.reward_range[0], self.reward_range[1])
            hi = np.clip(hi, self.reward_range[0], self.reward_range[1])
        return (float(lo[0]), float(hi[0])) if scalar else (lo, hi)

    def compute_to_reach(self, target: float, level: float = 0.8) -> ComputeToTarget:
        """Compute at which the curve reaches `target`: per posterior draw the inverse of R*
        (curves.gain_ahead_compute_for_reward: inf at or above the draw's A*, 0 at or below R0),
        summarised by its median (where the point forecast, a median too, crosses the target) and
        `level` quantiles."""
        draws = self.param_draws
        per_draw = gain_ahead_compute_for_reward(
            float(target), draws[:, 0], draws[:, 1], draws[:, 2], self.r0, self.last_compute, self.gain_factor_draws
        )
        value, lo, hi = _per_draw_summary(per_draw, level)
        return ComputeToTarget(float(target), value, lo, hi, bool(math.isfinite(value)), float(level))

    def near_ceiling_draws(self, within: float) -> np.ndarray:
        """Per posterior draw the compute at which R* comes within `within` of its ceiling A*: the
        inverse of R* at A* - within sign(A - R0) (beyond C_last the sigmoid's C_mid
        (|A - R0| / (within / m) - 1)^(1/B); 0 when the whole gain is within)."""
        draws = self.param_draws
        target = self.ceiling_draws - within * np.sign(draws[:, 0] - self.r0)
        return gain_ahead_compute_for_reward(
            target, draws[:, 0], draws[:, 1], draws[:, 2], self.r0, self.last_compute, self.gain_factor_draws
        )

    def compute_near_ceiling(self, within: float | None = None, level: float = 0.8) -> ComputeNearCeiling:
        """The run length: per posterior draw the compute at which the curve is within `within` of
        its own ceiling (None: the paper's margin, SETTINGS.margin of the reward's unit;
        near_ceiling_draws), summarised by its median and `level` quantiles."""
        within = SETTINGS.margin * self.reward_unit if within is None else float(within)
        if not 0.0 < within < self.reward_unit:
            raise InputError(f"within must be in (0, {self.reward_unit:g}) (the reward's unit), got {within:.3g}")
        per_draw = self.near_ceiling_draws(within)
        value, lo, hi = _per_draw_summary(per_draw, level)
        return ComputeNearCeiling(within, value, lo, hi, float(np.max(self.compute)), float(level))

    def run_length_text(self, level: float = 0.8) -> str:
        """The run length as a sentence, or why there is none for this run (the verdict's
        run_length_missing_because)."""
        missing = self.verdict.run_length_missing_because
        return f"none: {missing}" if missing else self.compute_near_ceiling(level=level).message()

    def __repr__(self) -> str:
        """One line: the parameters with A's standard error, the points, the verdict's kind and the
        range (the arrays and posterior draws stay out; `summary()` is the full account)."""
        a_error = self.stderr.get("A")
        a_text = f"{self.a:.4g}" if a_error is None or not math.isfinite(a_error) else f"{self.a:.4g}±{a_error:.2g}"
        return (
            f"FitResult(A={a_text}, B={self.b:.4g}, C_mid={self.c_mid:.4g}, R0={self.r0:.4g}, "
            f"n_points={self.n_points}, verdict={self.verdict.kind!r}, "
            f"fixed={self.fixed!r}, reward_range={self.reward_range!r}, warnings={len(self.warnings)})"
        )

    def summary(self) -> str:
        ci = self.conf_int(0.8)
        fixed = ", ".join(self.fixed)
        lines = [
            "ScaleRL sigmoid fit  R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)  (posterior medians, 80% intervals)",
            f"  points used: {self.n_points}   loss: {self.loss}   fixed: {fixed}",
            f"  R0    = {self.r0:.4f}",
            f"  A     = {self.a:.4f}   80% CI [{ci['A'][0]:.4f}, {ci['A'][1]:.4f}]"
            + ("   (at the top of its range: a limit, not an estimate)" if self.ceiling_at_bound else ""),
            f"  B     = {self.b:.3f}    80% CI [{ci['B'][0]:.3f}, {ci['B'][1]:.3f}]",
            f"  C_mid = {self.c_mid:.4g}  80% CI [{ci['C_mid'][0]:.4g}, {ci['C_mid'][1]:.4g}]",
            f"  evaluation noise sd: {self.noise_sd:.4f}",
            f"  verdict: {self.verdict.text}",
            f"  run length: {self.run_length_text()}",
        ]
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def to_dict(self, level: float = 0.8, predict_at: Sequence[float] = (), target: float | None = None) -> dict:
        """The CLI JSON contract (docs/forecasting.md, "JSON output"); plain floats, null for NaN / infinity."""
        level = _check_level(level)
        predictions = []
        for x in predict_at:
            lo, hi = self.interval(float(x), level)
            predictions.append(
                {
                    "x": _json_number(float(x)),
                    "reward": _json_number(self.predict(float(x))),
                    "lo": _json_number(lo),
                    "hi": _json_number(hi),
                }
            )
        compute_to_target = None if target is None else self.compute_to_reach(target, level).to_dict()
        return {
            "schema_version": SCHEMA_VERSION,
            "verdict": self.verdict.to_dict(),
            "params": {name: _json_number(v) for name, v in self.params().items()},
            "intervals": {
                name: [_json_number(lo), _json_number(hi)] for name, (lo, hi) in self.conf_int(level).items()
            },
            "level": level,
            "ceiling_identified": bool(self.ceiling_identified),
            "ceiling_at_bound": bool(self.ceiling_at_bound),
            "predictions": predictions,
            "compute_to_target": compute_to_target,
            "compute_near_ceiling": (
                None if self.verdict.run_length_missing_because else self.compute_near_ceiling(level=level).to_dict()
            ),
            "collapse_compute": None if self.collapse_compute is None else _json_number(self.collapse_compute),
            "noise_sd": _json_number(self.noise_sd),
            "reward_range": None if self.reward_range is None else [float(v) for v in self.reward_range],
            "n_points": int(self.n_points),
            "warnings": [str(w) for w in self.warnings],
        }
