"""Diagnostics of a reward curve: noise level, collapse, learning, the late stretch.

Each rule is a small function; its thresholds live in forecast.settings. The verdict that uses
them is decided in forecast.verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from scalerl.forecast.settings import SETTINGS

DEFAULT_NOISE_FLOOR = SETTINGS.noise_floor


def point_noise_sd(reward: ArrayLike, noise_floor: float = DEFAULT_NOISE_FLOOR) -> float:
    """Evaluation noise from successive differences (robust, trend-insensitive).

        sigma = 1.4826 * MAD(diff(R)) / sqrt(2), floored at `noise_floor`.

    A difference of two independent evaluations has variance 2 sigma^2; the median absolute
    deviation around the median difference removes a smooth trend and ignores single jumps.
    """
    reward = np.asarray(reward, dtype=float)
    if reward.size < 3:
        return float(noise_floor)
    diff = np.diff(reward)
    mad = np.median(np.abs(diff - np.median(diff)))
    return float(max(1.4826 * mad / np.sqrt(2.0), noise_floor))


@dataclass(frozen=True)
class CollapseReport:
    """Where a run left the sigmoid: the last good point, the first point of the sustained drop."""

    onset_index: int
    onset_compute: float
    last_good_index: int
    last_good_compute: float
    peak_reward: float
    drop: float
    threshold: float
    rose: bool = True  # the run rose before the fall (else it only fell below where it started: decreasing)

    def message(self) -> str:
        return (
            f"collapse: reward fell {self.drop:.3f} below the level {self.peak_reward:.3f} it had reached, "
            f"from compute {self.onset_compute:.4g} on (threshold {self.threshold:.3f}); "
            f"the run left the sigmoid after compute {self.last_good_compute:.4g}"
        )


def running_plateau_peak(reward: ArrayLike, window: int = 3) -> np.ndarray:
    """Best level reached before each point: peak_i = max(R_0, best `window`-point mean ending before i).

    Means of 3 points keep the noise of the best evaluation out of the peak (a raw running
    maximum sits ~2 sds above the plateau on a long noisy run and makes ordinary dips look like
    falls).
    """
    reward = np.asarray(reward, dtype=float)
    peaks = np.full(reward.size, reward[0])
    if reward.size > window:
        means = np.convolve(reward, np.ones(window) / window, mode="valid")  # means[j]: points j..j+window-1
        best_so_far = np.maximum.accumulate(means)
        peaks[window:] = np.maximum(reward[0], best_so_far[: reward.size - window])
    return peaks


def noise_before(reward: ArrayLike, index: int, sigma_all: float, noise_floor: float = DEFAULT_NOISE_FLOOR) -> float:
    """Noise sd of the points before `index`, at most the whole run's `sigma_all`.

    An erratic fall inflates the successive differences of the whole run (0.06 on a run that rose
    0.51 -> 0.56 with sd 0.01, then fell to 0.09 in jumps); the points before the fall measure the
    noise of the run while it was healthy. With fewer than SETTINGS.min_points_for_noise points before
    `index` the whole run's sigma is used.
    """
    if index < SETTINGS.min_points_for_noise:
        return float(sigma_all)
    return float(min(sigma_all, point_noise_sd(np.asarray(reward, dtype=float)[:index], noise_floor)))


def first_fall(
    reward: np.ndarray, peaks: np.ndarray, sigmas: np.ndarray, stop: int | None = None
) -> tuple[int, float] | None:
    """First index i < `stop` where the run is down: (i, threshold) or None.

    threshold_i = max(3 sigma_i, 0.2 (peak_i - R_first)); down at i when R_i and R_{i+1} are below
    peak_i - threshold_i (two in a row, so one noisy point never fires), the median of the points
    from i on is below it too (the run stays down), and the run rose first (peak_i - R_first >=
    3 sigma_i) or that median is below R_first - threshold_i (it fell below where it started):
    a noisy run that never rose is flat, not collapsed.
    """
    stop = reward.size - 1 if stop is None else stop
    for i in range(1, stop):
        threshold = max(
            SETTINGS.collapse_noise_sds * sigmas[i], SETTINGS.collapse_gain_fraction * (peaks[i] - reward[0])
        )
        floor = peaks[i] - threshold
        rest = float(np.median(reward[i:]))
        rose = peaks[i] - reward[0] >= SETTINGS.collapse_noise_sds * sigmas[i] or rest < reward[0] - threshold
        if rose and reward[i] < floor and reward[i + 1] < floor and rest < floor:
            return i, float(threshold)
    return None


def detect_collapse(
    compute: ArrayLike, reward: ArrayLike, noise_floor: float = DEFAULT_NOISE_FLOOR
) -> CollapseReport | None:
    """Sustained fall below the plateau reached so far (first_fall), found in two passes.

    Whether the run collapsed is judged with the noise sigma of the whole run (point_noise_sd),
    which is robust on long noisy healthy runs; where it began is then the first fall under the
    noise of the points before each candidate onset (noise_before), so an erratic fall that
    inflates the whole run's sigma is dated at its first step down, not at its deepest jumps.
    On synthetic noisy sigmoids (100-1000 prompts, 10-60 evaluations) it fires on < 1 % of healthy
    runs and on > 93 % of runs that fall back to R0; on noisy flat runs (sd 0.03) on about 3 %.
    `rose` says whether the run had risen above its start by collapse_noise_sds of the healthy
    part's noise before the fall: a run that only fell is decreasing, not collapsed (verdict).
    """
    compute = np.asarray(compute, dtype=float)
    reward = np.asarray(reward, dtype=float)
    sigma_all = point_noise_sd(reward, noise_floor)
    peaks = running_plateau_peak(reward)
    fired = first_fall(reward, peaks, np.full(reward.size, sigma_all))
    if fired is None:
        return None
    local = np.array([noise_before(reward, i, sigma_all, noise_floor) for i in range(reward.size)])
    i, threshold = first_fall(reward, peaks, local, stop=fired[0] + 1) or fired
    return CollapseReport(
        onset_index=i,
        onset_compute=float(compute[i]),
        last_good_index=i - 1,
        last_good_compute=float(compute[i - 1]),
        peak_reward=float(peaks[i]),
        drop=float(peaks[i] - np.median(reward[i:])),
        threshold=float(threshold),
        rose=bool(peaks[i] - reward[0] >= SETTINGS.collapse_noise_sds * local[i]),
    )


def learning_gain(reward: ArrayLike, r0: float) -> float:
    """The run's gain over R0: best 3-point running mean of `reward` minus R0 (means of 3 keep one
    lucky evaluation from counting as learning)."""
    reward = np.asarray(reward, dtype=float)
    window = min(3, reward.size)
    smoothed = np.convolve(reward, np.ones(window) / window, mode="valid")
    return float(np.max(smoothed) - r0)


def net_fall(reward: ArrayLike, noise_sd: float) -> float:
    """How far the last third of a run lies below its first third, in standard errors:

        z = (mean(first third) - mean(last third)) / (sigma sqrt(1 / n_first + 1 / n_last))

    (0 with fewer than 6 points). A decreasing run has z >= learning_noise_sds."""
    reward = np.asarray(reward, dtype=float)
    third = reward.size // 3
    if third < 2:
        return 0.0
    first, last = reward[:third], reward[-third:]
    return float((first.mean() - last.mean()) / (max(noise_sd, 1e-12) * math.sqrt(2.0 / third)))


@dataclass(frozen=True)
class LateStretch:
    """The last stretch of a run: its level, the level's standard error, and its slope in ln C.

    level = ybar, level_se = max(sd(y), noise) / sqrt(n), slope = beta of y = a + beta ln C with
    slope_se = max(s, noise) / sqrt(Sxx) (s: the line's residual sd, n - 2 dof), n points spanning
    log_span in ln C.
    """

    level: float
    level_sd: float
    slope: float
    slope_se: float
    n: int
    log_span: float

    @property
    def level_se(self) -> float:
        return self.level_sd / math.sqrt(self.n)

    def is_flat(self, level: float = 0.8) -> bool:
        """The slope's two-sided `level` interval reaches 0: beta - t_q(n - 2) se(beta) <= 0
        (t_q the Student-t quantile at q = (1 + level) / 2, scipy.special.stdtrit)."""
        from scipy.special import stdtrit

        return self.slope - float(stdtrit(self.n - 2, (1.0 + level) / 2.0)) * self.slope_se <= 0.0


def late_stretch(compute: ArrayLike, reward: ArrayLike, noise_sd: float = 0.0) -> LateStretch | None:
    """The last max(min_late_points, late_fraction * n) points as a LateStretch; None when there
    are fewer points or no spread in compute.

    Both sds are at least `noise_sd`, the whole fit's noise estimate: five late points leave three
    degrees of freedom for their own scatter, and a late stretch that looks quieter than the run's
    noise is more often chance than a quieter run (it made a plateau's first points look like a
    steady rise).
    """
    compute, reward = np.asarray(compute, dtype=float), np.asarray(reward, dtype=float)
    n = max(SETTINGS.min_late_points, int(np.ceil(SETTINGS.late_fraction * reward.size)))
    if reward.size < n:
        return None
    x, y = np.log(compute[-n:]), reward[-n:]
    sxx = float(np.sum((x - x.mean()) ** 2))
    if sxx <= 0:
        return None
    beta = float(np.sum((x - x.mean()) * (y - y.mean())) / sxx)
    resid = y - (y.mean() + beta * (x - x.mean()))
    s = max(float(np.sqrt(np.sum(resid**2) / (n - 2))), float(noise_sd))
    return LateStretch(
        float(y.mean()),
        max(float(np.std(y, ddof=1)), float(noise_sd)),
        beta,
        s / math.sqrt(sxx),
        n,
        float(x[-1] - x[0]),
    )


@dataclass(frozen=True)
class EndMisfit:
    """How far the run's last n evaluations lie from the fitted curve: their mean residual and its
    z-score against the fit's noise, z = mean(r_i - R(C_i)) / (sigma / sqrt(n))."""

    n: int
    mean_residual: float
    z: float


def end_misfit(reward: ArrayLike, fitted: ArrayLike, noise_sd: float) -> EndMisfit | None:
    """A posterior predictive check on the run's end: the last n = max(min_late_points,
    late_fraction * N) residuals r_i - R(C_i) of the N fitted points (R the posterior median
    curve), z = mean / (sigma / sqrt(n)). Under the model z is about standard normal; |z| >= 3
    says the sigmoid fitted to the whole run does not describe its end (a second rise above it,
    a fall below it). None when the run has fewer than 2n points (no rise left to fit it to)."""
    reward, fitted = np.asarray(reward, dtype=float), np.asarray(fitted, dtype=float)
    n = max(SETTINGS.min_late_points, int(np.ceil(SETTINGS.late_fraction * reward.size)))
    if reward.size < 2 * n or not noise_sd > 0:
        return None
    mean = float(np.mean(reward[-n:] - fitted[-n:]))
    return EndMisfit(n, mean, mean / (float(noise_sd) / math.sqrt(n)))


def at_upper_bound(value: float, upper_bound: float, r0: float) -> bool:
    """value >= upper - s |upper - R0| with s = SETTINGS.bound_share: at the top of A's range."""
    return value >= upper_bound - SETTINGS.bound_share * max(abs(upper_bound - r0), 1e-9)
