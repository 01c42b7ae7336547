"""Immutable results of a sigmoid fit: parameters, posterior draws, bands, JSON view."""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from scalerl.errors import InputError
from scalerl.forecast.curves import sigmoid_compute_for_reward, sigmoid_reward
from scalerl.forecast.uncertainty import widen

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

    def message(self) -> str:
        if not self.reachable:
            return f"reward {self.target:g} not reachable: above the fitted ceiling"
        hi = "not reachable" if math.isinf(self.hi) else f"{self.hi:.4g}"
        return f"reward {self.target:g} at compute {self.value:.4g} ({self.level:.0%} interval {self.lo:.4g} .. {hi})"


@dataclass(frozen=True)
class FitResult:
    """A fitted ScaleRL sigmoid R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) with its uncertainty.

    `param_draws` holds posterior draws as rows (A, B, C_mid); intervals are their quantiles.
    `noise_sd` is the evaluation noise (residual sd, small-sample corrected, floored);
    `noise_scale_draws` the posterior draw of the noise scale that goes with each row of
    `param_draws` (None: `noise_sd` for every row), and `noise_draws` fixed standard Student-t
    draws with `noise_dof` degrees of freedom, so bands for a new observation are deterministic for
    a given result. `band_scale` stretches observation bands about the point forecast (see
    uncertainty.widen).
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
    band_scale: float = 1.0

    def __post_init__(self):
        for name in ("compute", "reward", "param_draws", "noise_draws"):
            object.__setattr__(self, name, _read_only(getattr(self, name)))
        if self.noise_scale_draws is None:
            object.__setattr__(self, "noise_scale_draws", np.full(self.param_draws.shape[0], self.noise_sd))
        object.__setattr__(self, "noise_scale_draws", _read_only(self.noise_scale_draws))
        object.__setattr__(self, "stderr", MappingProxyType(dict(self.stderr)))

    def params(self) -> dict:
        return {"A": self.a, "B": self.b, "C_mid": self.c_mid, "R0": self.r0}

    def conf_int(self, level=0.8) -> dict:
        """Posterior percentile interval per parameter: {name: (lo, hi)}."""
        lo_q, hi_q = _tails(level)
        out = {}
        for column, name in enumerate(PARAM_NAMES):
            lo, hi = np.quantile(self.param_draws[:, column], [lo_q, hi_q])
            estimate = self.params()[name]
            out[name] = (float(min(lo, estimate)), float(max(hi, estimate)))
        return out

    def predict(self, compute) -> np.ndarray:
        return sigmoid_reward(compute, self.a, self.b, self.c_mid, self.r0)

    def _mean_draws(self, compute):
        draws = self.param_draws
        compute = np.atleast_1d(np.asarray(compute, dtype=float))
        return sigmoid_reward(compute[None, :], draws[:, :1], draws[:, 1:2], draws[:, 2:3], self.r0)

    def observation_draws(self, compute, n_average=1) -> np.ndarray:
        """Posterior-predictive samples of a new evaluation at each `compute`: (n_samples, m).

        Sample = curve of one posterior draw + that draw's noise scale * a Student-t draw; with
        `n_average` > 1 it is a sample of the mean of that many independent evaluations at each
        compute (noise / sqrt(n_average)). Not widened by `band_scale`.
        """
        mean_draws = self._mean_draws(compute)
        n_noise = self.noise_draws.size // mean_draws.shape[0]
        standard = self.noise_draws[: n_noise * mean_draws.shape[0]].reshape(-1, n_noise)
        noise = self.noise_scale_draws[:, None] * standard / np.sqrt(float(n_average))
        return (mean_draws[:, None, :] + noise[:, :, None]).reshape(-1, mean_draws.shape[1])

    def interval(self, compute, level=0.8, kind="observation"):
        """Band at `compute`: kind="observation" for a new noisy evaluation, "mean" for the curve.

        Observation band = quantiles of the posterior-predictive samples (curve uncertainty plus
        evaluation noise), stretched about the point forecast by `band_scale`; mean band =
        quantiles of the posterior curves. Both contain the point forecast, clipped to `reward_range`.
        """
        if kind not in ("observation", "mean"):
            raise InputError(f"interval kind must be 'observation' or 'mean', got {kind!r}")
        lo_q, hi_q = _tails(level)
        scalar = np.ndim(compute) == 0
        centre = self.predict(np.atleast_1d(np.asarray(compute, dtype=float)))
        if kind == "observation":
            samples = widen(self.observation_draws(compute), centre, self.band_scale)
        else:
            samples = self._mean_draws(compute)
        lo, hi = np.quantile(samples, [lo_q, hi_q], axis=0)
        lo, hi = np.minimum(lo, centre), np.maximum(hi, centre)
        if self.reward_range is not None:
            lo = np.clip(lo, self.reward_range[0], self.reward_range[1])
            hi = np.clip(hi, self.reward_range[0], self.reward_range[1])
        return (float(lo[0]), float(hi[0])) if scalar else (lo, hi)

    def compute_to_reach(self, target, level=0.8) -> ComputeToTarget:
        """Compute at which the fitted curve reaches `target`, with a posterior interval."""
        target = float(target)
        lo_q, hi_q = _tails(level)
        value = float(sigmoid_compute_for_reward(target, self.a, self.b, self.c_mid, self.r0))
        draws = self.param_draws
        per_draw = sigmoid_compute_for_reward(target, draws[:, 0], draws[:, 1], draws[:, 2], self.r0)
        lo, hi = np.quantile(per_draw, [lo_q, hi_q], method="inverted_cdf")
        reachable = bool(math.isfinite(value))
        return ComputeToTarget(target, value, float(min(lo, value)), float(max(hi, value)), reachable, level)

    def summary(self) -> str:
        ci = self.conf_int(0.8)
        fixed = ", ".join(self.fixed)
        lines = [
            "ScaleRL sigmoid fit  R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)",
            f"  points used: {self.n_points}   loss: {self.loss}   fixed: {fixed}",
            f"  R0    = {self.r0:.4f}",
            f"  A     = {self.a:.4f}   80% CI [{ci['A'][0]:.4f}, {ci['A'][1]:.4f}]",
            f"  B     = {self.b:.3f}    80% CI [{ci['B'][0]:.3f}, {ci['B'][1]:.3f}]",
            f"  C_mid = {self.c_mid:.4g}  80% CI [{ci['C_mid'][0]:.4g}, {ci['C_mid'][1]:.4g}]",
            f"  evaluation noise sd: {self.noise_sd:.4f}",
            f"  ceiling identified: {'yes' if self.ceiling_identified else 'NO'}",
        ]
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def to_dict(self, level=0.8, predict_at=(), target=None) -> dict:
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
            "predictions": predictions,
            "compute_to_target": compute_to_target,
            "n_points": int(self.n_points),
            "warnings": [str(w) for w in self.warnings],
        }
