"""Immutable results of a sigmoid fit: parameters, posterior draws, bands, JSON view."""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Sequence

import numpy as np
from numpy.typing import ArrayLike

from scalerl.errors import InputError
from scalerl.forecast.averaging import form_compute_near_ceiling
from scalerl.forecast.band_calibration import (
    HeldOutScores, band_multipliers, gain_ahead, horizon, lower_spread, normalised_score, robust_spread, shipped_table,
)
from scalerl.forecast.curves import sigmoid_compute_for_reward, sigmoid_compute_near_ceiling, sigmoid_reward
from scalerl.forecast.diagnostics import FAR_RUN_LENGTH, NEAR_CEILING_WITHIN, at_upper_bound, flat_end_floor, late_stretch, stop_now_floor

PARAM_NAMES = ("A", "B", "C_mid")
LEVEL_NOW_POINTS = 3  # the run's present level r_now: the mean of its last three fitted evaluations


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

    def message(self) -> str:
        if not self.reachable:
            return f"reward {self.target:g} not reachable: above the fitted ceiling"
        hi = "not reachable" if math.isinf(self.hi) else f"{self.hi:.4g}"
        return f"reward {self.target:g} at compute {self.value:.4g} ({self.level:.0%} interval {self.lo:.4g} .. {hi})"


@dataclass(frozen=True)
class ComputeNearCeiling:
    """Compute at which the fitted curve comes within `within` of its own ceiling A: how far a run
    must go before its late points pin A to about that width. value from the fitted parameters, lo and
    hi the `level` interval of the posterior draws; current is the largest fitted compute."""

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
            return (f"the fitted curve is within {self.within:.3g} of its ceiling at the last point "
                    f"(from compute {self.value:.3g}; {self.level:.0%} interval {self.lo:.3g} .. {self.hi:.3g})")
        low = "within the data" if self.lo <= self.current else f"{self.lo:.3g}"
        plan = ("run about that far to pin A to that width" if self.times_current <= FAR_RUN_LENGTH else
                f"over {FAR_RUN_LENGTH:.0f}x the compute so far, so no run pins A to that width: the curve rises "
                "too slowly")
        return (f"the fitted curve comes within {self.within:.3g} of its ceiling at compute ~{self.value:.3g}, "
                f"{self.times_current:.3g} times the current max ({self.level:.0%} interval "
                f"{low} .. {self.hi:.3g}): {plan}")

    def to_dict(self) -> dict:
        return {"within": self.within, "value": _json_number(self.value), "lo": _json_number(self.lo),
                "hi": _json_number(self.hi), "times_current": _json_number(self.times_current),
                "level": self.level}


@dataclass(frozen=True)
class FitResult:
    """A fitted ScaleRL sigmoid R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) with its uncertainty.

    `param_draws` holds posterior draws as rows (A, B, C_mid); intervals are their quantiles.
    `noise_sd` is the evaluation noise (residual sd, small-sample corrected, floored);
    `noise_scale_draws` the posterior draw of the noise scale that goes with each row of
    `param_draws` (None: `noise_sd` for every row), and `noise_draws` fixed standard Student-t
    draws with `noise_dof` degrees of freedom, so bands for a new observation are deterministic for
    a given result. Observation bands are calibrated by horizon on other runs
    (forecast.band_calibration): `band_table` is that table (None: the shipped one).
    `predict` is the point forecast: the weighted average over `forms` (forecast.averaging: the
    posterior median of R(C), least-squares sigmoids with R0 fixed and R0 = 0, the power law), or the
    posterior median alone when `forms` is empty. Bands are a mixture: each posterior draw is moved
    by the gap between its member form (`form_of_draw`) and the posterior median, so the forms'
    disagreement widens them.
    """

    a: float
    b: float
    c_mid: float
    r0: float
    stderr: dict
    n_points: int
    compute: np.ndarray
    reward: np.ndarray
    ceiling_identified: bool
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
    gain_reached: float = float("nan")  # posterior median share of the gain A - R0 reached at the last point
    band_table: dict | None = None  # band_calibration table; None: the shipped one
    forms: tuple = ()  # averaging.FormCurve members of the point forecast; () = the posterior median alone
    form_of_draw: np.ndarray | None = None  # index into `forms` per posterior draw (averaging.draw_members)
    a_upper_bound: float | None = None  # the top of A's search range (the reward range's top for pass rates)
    band_noise_sd: float | None = None  # evaluation noise of the band's spread (diagnostics.trend_free_noise_sd); None: noise_sd
    reward_unit: float = 1.0  # the reward's unit (forecast.reward_unit): the margins are shares of it

    def __post_init__(self) -> None:
        for name in ("compute", "reward", "param_draws", "noise_draws"):
            object.__setattr__(self, name, _read_only(getattr(self, name)))
        if self.noise_scale_draws is None:
            object.__setattr__(self, "noise_scale_draws", np.full(self.param_draws.shape[0], self.noise_sd))
        object.__setattr__(self, "noise_scale_draws", _read_only(self.noise_scale_draws))
        if self.forms and self.form_of_draw is None:
            raise InputError("forms given without form_of_draw (one member index per posterior draw)")
        if self.form_of_draw is not None:
            members = np.array(self.form_of_draw, dtype=int)
            members.setflags(write=False)
            object.__setattr__(self, "form_of_draw", members)
        object.__setattr__(self, "stderr", MappingProxyType(dict(self.stderr)))

    @property
    def ceiling_at_bound(self) -> bool:
        """The data bound the ceiling from below only: A, or the upper end of its 80 % posterior
        interval, sits at the top of its range (within 1e-3 of the gain). `a` is then a limit, not
        an estimate; the interval's lower end says how far down the ceiling may be."""
        if self.a_upper_bound is None or "A" in self.fixed:
            return False
        upper_end = float(np.quantile(self.param_draws[:, 0], 0.9))
        return any(at_upper_bound(value, self.a_upper_bound, self.r0) for value in (self.a, upper_end))

    def params(self) -> dict:
        return {"A": self.a, "B": self.b, "C_mid": self.c_mid, "R0": self.r0}

    def conf_int(self, level: float = 0.8) -> dict:
        """Posterior percentile interval per parameter: {name: (lo, hi)}, holding the estimate. The
        interval of a free A reaches down to the late level's `level` interval when the fitted
        points end flat (judged at 80 % whatever `level`: diagnostics.flat_end_floor): the data
        cannot tell that ceiling from the fit's."""
        lo_q, hi_q = _tails(level)
        out = {}
        for column, name in enumerate(PARAM_NAMES):
            lo, hi = np.quantile(self.param_draws[:, column], [lo_q, hi_q])
            estimate = self.params()[name]
            out[name] = (float(min(lo, estimate)), float(max(hi, estimate)))
        floor = None if "A" in self.fixed else flat_end_floor(self._late(), level, judged_at=0.8)
        if floor is not None:
            out["A"] = (float(min(out["A"][0], floor)), out["A"][1])
        return out

    def _late(self):
        return late_stretch(self.compute, self.reward, self.noise_sd)

    def predict(self, compute: ArrayLike) -> np.ndarray:
        """Point forecast: sum_f w_f R_f(C) over the averaged forms (the posterior median of R(C) alone without forms)."""
        scalar = np.ndim(compute) == 0
        compute = np.atleast_1d(np.asarray(compute, dtype=float))
        median = np.median(self._mean_draws(compute), axis=0)
        if self.forms:
            median = sum(form.weight * form.reward(compute, median, self.reward_range) for form in self.forms)
        return median[0] if scalar else median

    def _form_shift(self, compute):
        """(n_draws, m): member form of each draw minus the posterior median (0 without forms)."""
        compute = np.atleast_1d(np.asarray(compute, dtype=float))
        if not self.forms:
            return np.zeros((self.param_draws.shape[0], compute.size))
        median = np.median(self._mean_draws(compute), axis=0)
        gaps = np.array([form.reward(compute, median, self.reward_range) - median for form in self.forms])
        return gaps[self.form_of_draw]

    def _mean_draws(self, compute):
        draws = self.param_draws
        compute = np.atleast_1d(np.asarray(compute, dtype=float))
        return sigmoid_reward(compute[None, :], draws[:, :1], draws[:, 1:2], draws[:, 2:3], self.r0)

    def _paired(self, draws):
        """Fixed draws arranged one row per posterior draw: (n_params_draws, n_per_draw)."""
        n_per = draws.size // self.param_draws.shape[0]
        return draws[: n_per * self.param_draws.shape[0]].reshape(-1, n_per)

    def observation_draws(self, compute: ArrayLike, n_average: int = 1) -> np.ndarray:
        """Posterior-predictive samples of a new evaluation at each `compute`: (n_samples, m).

        Sample = curve of one posterior draw (moved to its member form) + that draw's noise scale x
        a Student-t draw; with `n_average` > 1, a sample of the mean of that many independent
        evaluations at each compute (noise / sqrt(n_average)). Not calibrated: `interval` is.
        """
        compute = np.atleast_1d(np.asarray(compute, dtype=float))
        mean_draws = self._mean_draws(compute) + self._form_shift(compute)
        noise = self.noise_scale_draws[:, None] * self._paired(self.noise_draws) / np.sqrt(float(n_average))
        samples = mean_draws[:, None, :] + noise[:, :, None]
        return samples.reshape(-1, mean_draws.shape[1])

    @property
    def stratum(self) -> str:
        """"flat_end" when the last stretch of the fitted points is flat within its noise
        (diagnostics.LateStretch.is_flat at 80 %), else "rising": the band table's stratum."""
        late = self._late()
        return "flat_end" if late is not None and late.is_flat(0.8) else "rising"

    def predictive_spread(self, compute: ArrayLike) -> np.ndarray:
        """s at each compute: a new evaluation is the curve plus independent noise, so

            s = sqrt(sigma_d^2 + s_curve^2)

        with sigma_d the second-difference noise of the fitted points (diagnostics.trend_free_noise_sd:
        blind to misfit, which the band table calibrates across runs) and s_curve the robust sd of the posterior curves
        moved to their member forms (band_calibration.robust_spread)."""
        compute = np.atleast_1d(np.asarray(compute, dtype=float))
        curves = self._mean_draws(compute) + self._form_shift(compute)
        sigma = self.noise_sd if self.band_noise_sd is None else self.band_noise_sd
        return np.sqrt(sigma**2 + robust_spread(curves, 0.0) ** 2)

    def band_spreads(self, compute: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(m, s_lo, s) at each compute: the point forecast, the spread below it and above it.

            s_lo = sqrt(s^2 + g^2),   g = max(m - r_now, 0) beyond the last fitted point

        with r_now the mean of the last three fitted evaluations (band_calibration.gain_ahead): a
        run can stop improving at any evaluation, so the shortfall below the forecast scales with
        the gain it still expects."""
        compute = np.atleast_1d(np.asarray(compute, dtype=float))
        centre, spread = self.predict(compute), self.predictive_spread(compute)
        level_now = float(np.mean(self.reward[-LEVEL_NOW_POINTS:]))
        gain = gain_ahead(centre, compute, float(np.max(self.compute)), level_now)
        return centre, lower_spread(spread, gain), spread

    def calibration_scores(self, compute: ArrayLike, reward: ArrayLike, run: str = "",
                           source: str = "") -> HeldOutScores:
        """Normalised scores z = (y - m) / s_lo below the forecast, (y - m) / s above it
        (band_calibration's input)."""
        compute = np.atleast_1d(np.asarray(compute, dtype=float))
        centre, spread_below, spread = self.band_spreads(compute)
        score = normalised_score(np.atleast_1d(np.asarray(reward, dtype=float)), centre, spread, spread_below)
        return HeldOutScores(self.stratum, horizon(compute, float(np.max(self.compute))), score, run, source)

    def interval(self, compute: ArrayLike, level: float = 0.8,
                 kind: str = "observation") -> tuple[np.ndarray | float, np.ndarray | float]:
        """Band at `compute`: kind="observation" for a new noisy evaluation, "mean" for the curve.

        Observation band = [m + Q_lo s_lo, m + Q_hi s]: the point forecast m, the spreads below and
        above it (band_spreads), and the quantiles Q of normalised errors that other runs made at
        the same horizon log(C / C_last) in the same stratum (forecast.band_calibration); after a
        flat end, its lower edge beyond the data at most where the run would be if it stayed there
        (diagnostics.stop_now_floor); holding the mean band. Mean band =
        quantiles of the posterior curves moved to their member forms. Both contain the point
        forecast, clipped to `reward_range`.
        """
        if kind not in ("observation", "mean"):
            raise InputError(f"interval kind must be 'observation' or 'mean', got {kind!r}")
        lo_q, hi_q = _tails(level)
        scalar = np.ndim(compute) == 0
        compute = np.atleast_1d(np.asarray(compute, dtype=float))
        centre = self.predict(compute)
        if kind == "observation":
            table = shipped_table() if self.band_table is None else self.band_table
            lower, upper = band_multipliers(table, self.stratum, horizon(compute, float(np.max(self.compute))), level)
            _, spread_below, spread = self.band_spreads(compute)
            lo, hi = centre + lower * spread_below, centre + upper * spread
            # A run whose fitted points end flat may stay where it is: beyond the data the lower
            # edge reaches the persistence forecast's (diagnostics.stop_now_floor).
            if self.stratum == "flat_end" and "A" not in self.fixed:
                floor = stop_now_floor(self.reward, self.noise_sd, level)
                lo = np.where(compute > float(np.max(self.compute)), np.minimum(lo, floor), lo)
            # A new evaluation is the curve plus noise: its band holds the curve's.
            mean_lo, mean_hi = self.interval(compute, level, kind="mean")
            lo, hi = np.minimum(lo, mean_lo), np.maximum(hi, mean_hi)
        else:
            samples = self._mean_draws(compute) + self._form_shift(compute)
            lo, hi = np.quantile(samples, [lo_q, hi_q], axis=0)
        lo, hi = np.minimum(lo, centre), np.maximum(hi, centre)
        if self.reward_range is not None:
            lo = np.clip(lo, self.reward_range[0], self.reward_range[1])
            hi = np.clip(hi, self.reward_range[0], self.reward_range[1])
        return (float(lo[0]), float(hi[0])) if scalar else (lo, hi)

    def compute_to_reach(self, target: float, level: float = 0.8) -> ComputeToTarget:
        """Compute at which the point forecast reaches `target`, with a posterior interval.

        value: the point forecast (predict) is increasing in C, so it is inverted by bisection on
        log C; inf when `target` is at or above its limit as C grows (the curve never gets there),
        0 at or below R0. Interval: quantiles of each draw's own inverse
        C(R) = C_mid ((A - R0) / (R - R0) - 1)^(-1/B).
        """
        target = float(target)
        lo_q, hi_q = _tails(level)
        value = self._invert_point_forecast(target)
        draws = self.param_draws
        per_draw = sigmoid_compute_for_reward(target, draws[:, 0], draws[:, 1], draws[:, 2], self.r0)
        lo, hi = np.quantile(per_draw, [lo_q, hi_q], method="inverted_cdf")
        reachable = bool(math.isfinite(value))
        return ComputeToTarget(target, value, float(min(lo, value)), float(max(hi, value)), reachable, level)

    def compute_near_ceiling(self, within: float | None = None, level: float = 0.8) -> ComputeNearCeiling:
        """Compute at which the fitted curve is within `within` of its ceiling (None: the paper's
        margin, 0.02 of the reward's unit):

            C_within = C_mid (|A - R0| / within - 1)^(1/B)    (|R(C_within) - A| = within)

        (0 when the whole gain |A - R0| is within `within`). value: the fitted parameters; interval:
        the `level` quantiles of each posterior draw's own C_within. Read with the fit's caveat: it
        assumes the curve keeps the sigmoid's shape; a ceiling at the top of its range (a limit)
        gives the compute to get that close to the limit. With averaged forms (forecast.averaging)
        a draw of a sigmoid member form is moved as the band moves it, here in log compute:
        C_within(draw) x C_within(form) / C_within(fitted parameters), so the interval also holds
        the sigmoid forms' disagreement about when the run settles (averaging.form_compute_near_ceiling)."""
        within = NEAR_CEILING_WITHIN * self.reward_unit if within is None else float(within)
        if not 0.0 < within < self.reward_unit:
            raise InputError(f"within must be in (0, {self.reward_unit:g}) (the reward's unit), got {within:.3g}")
        lo_q, hi_q = _tails(level)
        value = float(sigmoid_compute_near_ceiling(within, self.a, self.b, self.c_mid, self.r0))
        draws = self.param_draws
        per_draw = sigmoid_compute_near_ceiling(within, draws[:, 0], draws[:, 1], draws[:, 2], self.r0)
        if self.forms and math.isfinite(value) and value > 0:
            ratios = np.array([1.0 if (c := form_compute_near_ceiling(form, within)) is None else c / value
                               for form in self.forms])
            with np.errstate(invalid="ignore"):
                moved = per_draw * ratios[self.form_of_draw]
            per_draw = np.where(np.isnan(moved), per_draw, moved)  # 0 x inf: a draw already settled
        lo, hi = np.quantile(per_draw, [lo_q, hi_q], method="inverted_cdf")
        return ComputeNearCeiling(within, value, float(min(lo, value)), float(max(hi, value)),
                                  float(np.max(self.compute)), float(level))

    def _invert_point_forecast(self, target):
        if target <= self.r0:
            return 0.0
        c_ref = float(np.max(self.compute))
        if target >= float(self.predict(c_ref * 1e30)):  # the forecast's limit as C grows
            return math.inf
        lo, hi = -1.0, 1.0
        while float(self.predict(c_ref * math.exp(lo))) > target and lo > -700:
            lo *= 2.0
        while float(self.predict(c_ref * math.exp(hi))) < target and hi < 700:
            hi *= 2.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if float(self.predict(c_ref * math.exp(mid))) < target else (lo, mid)
            if hi - lo < 1e-13:
                break
        return c_ref * math.exp(0.5 * (lo + hi))

    def __repr__(self) -> str:
        """One line: the parameters with A's standard error, the points, what is fixed and the
        range (the arrays and posterior draws stay out; `summary()` is the full account)."""
        a_error = self.stderr.get("A")
        a_text = f"{self.a:.4g}" if a_error is None or not math.isfinite(a_error) else f"{self.a:.4g}±{a_error:.2g}"
        return (f"FitResult(A={a_text}, B={self.b:.4g}, C_mid={self.c_mid:.4g}, R0={self.r0:.4g}, "
                f"n_points={self.n_points}, ceiling_identified={self.ceiling_identified}, "
                f"fixed={self.fixed!r}, reward_range={self.reward_range!r}, warnings={len(self.warnings)})")

    def summary(self) -> str:
        ci = self.conf_int(0.8)
        fixed = ", ".join(self.fixed)
        lines = [
            "ScaleRL sigmoid fit  R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)",
            f"  points used: {self.n_points}   loss: {self.loss}   fixed: {fixed}",
            f"  R0    = {self.r0:.4f}",
            f"  A     = {self.a:.4f}   80% CI [{ci['A'][0]:.4f}, {ci['A'][1]:.4f}]"
            + ("   (at the top of its range: a limit, not an estimate)" if self.ceiling_at_bound else ""),
            f"  B     = {self.b:.3f}    80% CI [{ci['B'][0]:.3f}, {ci['B'][1]:.3f}]",
            f"  C_mid = {self.c_mid:.4g}  80% CI [{ci['C_mid'][0]:.4g}, {ci['C_mid'][1]:.4g}]",
            f"  evaluation noise sd: {self.noise_sd:.4f}",
            *(["  point forecast averaged over forms: "
               + ", ".join(f"{form.name} {form.weight:.2f}" for form in self.forms)] if self.forms else []),
            f"  ceiling identified: {'yes' if self.ceiling_identified else 'NO'}",
            f"  run length: {self.compute_near_ceiling().message()}",
        ]
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def to_dict(self, level: float = 0.8, predict_at: Sequence[float] = (), target: float | None = None) -> dict:
        """The CLI JSON contract; plain floats, null for NaN / infinity."""
        level = _check_level(level)
        predictions = []
        for x in predict_at:
            lo, hi = self.interval(float(x), level)
            predictions.append(
                {"x": _json_number(float(x)), "reward": _json_number(self.predict(float(x))),
                 "lo": _json_number(lo), "hi": _json_number(hi)}
            )
        compute_to_target = None
        if target is not None:
            compute_to_target = _json_number(self.compute_to_reach(target, level).value)
        return {
            "params": {name: _json_number(v) for name, v in self.params().items()},
            "intervals": {name: [_json_number(lo), _json_number(hi)] for name, (lo, hi) in self.conf_int(level).items()},
            "level": level,
            "ceiling_identified": bool(self.ceiling_identified),
            "ceiling_at_bound": bool(self.ceiling_at_bound),
            "predictions": predictions,
            "compute_to_target": compute_to_target,
            "compute_near_ceiling": self.compute_near_ceiling(level=level).to_dict(),
            "n_points": int(self.n_points),
            "warnings": [str(w) for w in self.warnings],
        }
