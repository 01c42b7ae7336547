"""Diagnostics of a reward curve: noise level, collapse, no learning, unidentified ceiling.

Each rule is a small function with its threshold stated; fitting calls them, never the reverse.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from scalerl.errors import FitError
from scalerl.forecast.curves import sigmoid_compute_near_ceiling
from scalerl.forecast.uncertainty import DEFAULT_NOISE_FLOOR

# Past this many times the current compute a run length is no plan (the headline and the run length say the same).
FAR_RUN_LENGTH = 100.0

# A drop counts as a collapse when it exceeds both this many noise sds and this fraction of the gain.
COLLAPSE_NOISE_SDS = 3.0
COLLAPSE_GAIN_FRACTION = 0.2
# A run has learned when its best 3-point mean exceeds R0 by this many noise sds.
LEARNING_NOISE_SDS = 3.0
# The ceiling is unidentified when the A interval is wider than this fraction of the gain A - R0
# (A known to worse than about +-1/6 of the gain). On synthetic curves cut at 1-3 x C_mid, 1/2
# let through fits whose A was off by ~0.15; 1/3 keeps the median A error of accepted fits < 0.04.
CEILING_WIDTH_FRACTION = 1.0 / 3.0
NEAR_CEILING_WITHIN = 0.02  # the run length's width: the paper's margin on A (arXiv 2510.13786, section 2)
# Points before a candidate collapse needed to measure the noise of the healthy part on its own.
MIN_POINTS_FOR_NOISE = 5
# The late stretch whose slope tests "has the run already levelled off?": the last quarter of the
# fitted points, and at least this many of them (a line through fewer says nothing about a slope).
LATE_FRACTION = 0.25
MIN_LATE_POINTS = 5


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


def trend_free_noise_sd(reward: ArrayLike, noise_floor: float = DEFAULT_NOISE_FLOOR) -> float:
    """Evaluation noise from second differences, blind to a locally straight trend:

        sigma = 1.4826 * MAD(d2) / sqrt(6),   d2_i = R_(i+1) - 2 R_i + R_(i-1),   floored at `noise_floor`

    For independent evaluations var(d2) = (1 + 4 + 1) sigma^2; a trend that is straight over three
    neighbouring evaluations cancels (difference-based variance estimation, Gasser, Sroka and
    Jennen-Steinmetz 1986, Biometrika 73:625). Successive differences (point_noise_sd) keep the
    change of the slope: a run climbing steeply between a few sparse evaluations read as noisy.
    Fewer than four evaluations leave one second difference: point_noise_sd then.
    """
    reward = np.asarray(reward, dtype=float)
    if reward.size < 4:
        return point_noise_sd(reward, noise_floor)
    d2 = reward[2:] - 2.0 * reward[1:-1] + reward[:-2]
    mad = np.median(np.abs(d2 - np.median(d2)))
    return float(max(1.4826 * mad / np.sqrt(6.0), noise_floor))


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

    def message(self) -> str:
        return (
            f"collapse: reward fell {self.drop:.3f} below the level {self.peak_reward:.3f} it had reached, from compute "
            f"{self.onset_compute:.4g} on (threshold {self.threshold:.3f}); the run left the sigmoid after compute "
            f"{self.last_good_compute:.4g}"
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
    noise of the run while it was healthy. With fewer than MIN_POINTS_FOR_NOISE points before
    `index` the whole run's sigma is used.
    """
    if index < MIN_POINTS_FOR_NOISE:
        return float(sigma_all)
    return float(min(sigma_all, point_noise_sd(np.asarray(reward, dtype=float)[:index], noise_floor)))


def first_fall(reward: np.ndarray, peaks: np.ndarray, sigmas: np.ndarray,
               stop: int | None = None) -> tuple[int, float] | None:
    """First index i < `stop` where the run is down: (i, threshold) or None.

    threshold_i = max(3 sigma_i, 0.2 (peak_i - R_first)); down at i when R_i and R_{i+1} are below
    peak_i - threshold_i (two in a row, so one noisy point never fires), the median of the points
    from i on is below it too (the run stays down), and the run rose first (peak_i - R_first >=
    3 sigma_i) or that median is below R_first - threshold_i (it fell below where it started):
    a noisy run that never rose is flat, not collapsed.
    """
    stop = reward.size - 1 if stop is None else stop
    for i in range(1, stop):
        threshold = max(COLLAPSE_NOISE_SDS * sigmas[i], COLLAPSE_GAIN_FRACTION * (peaks[i] - reward[0]))
        floor = peaks[i] - threshold
        rest = float(np.median(reward[i:]))
        rose = peaks[i] - reward[0] >= COLLAPSE_NOISE_SDS * sigmas[i] or rest < reward[0] - threshold
        if rose and reward[i] < floor and reward[i + 1] < floor and rest < floor:
            return i, float(threshold)
    return None


def detect_collapse(compute: ArrayLike, reward: ArrayLike, noise_floor: float = DEFAULT_NOISE_FLOOR) -> CollapseReport | None:
    """Sustained fall below the plateau reached so far (first_fall), found in two passes.

    Whether the run collapsed is judged with the noise sigma of the whole run (point_noise_sd),
    which is robust on long noisy healthy runs; where it began is then the first fall under the
    noise of the points before each candidate onset (noise_before), so an erratic fall that
    inflates the whole run's sigma is dated at its first step down, not at its deepest jumps.
    On synthetic noisy sigmoids (100-1000 prompts, 10-60 evaluations) it fires on < 1 % of healthy
    runs and on > 93 % of runs that fall back to R0; on noisy flat runs (sd 0.03) on about 3 %.
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
    )


def check_learning(reward: ArrayLike, r0: float, noise_sd: float) -> float:
    """Raise FitError for a flat run: best 3-point running mean - R0 < 3 noise sds."""
    reward = np.asarray(reward, dtype=float)
    window = min(3, reward.size)
    smoothed = np.convolve(reward, np.ones(window) / window, mode="valid")
    gain = float(np.max(smoothed) - r0)
    if gain < LEARNING_NOISE_SDS * noise_sd:
        raise FitError(
            f"flat run: no learning to fit (best gain over R0 = {gain:.4f} is within "
            f"{LEARNING_NOISE_SDS:g} noise sds = {LEARNING_NOISE_SDS * noise_sd:.4f})"
        )
    return gain


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
        """The slope's two-sided `level` interval reaches 0: beta - t_q(n - 2) se(beta) <= 0."""
        from scipy.stats import t as student_t

        return self.slope - student_t.ppf((1.0 + level) / 2.0, self.n - 2) * self.slope_se <= 0.0

    def ceiling_prior(self) -> tuple[float, float]:
        """(mean, sd) of the ceiling a flat end implies: the late level, with the level's standard
        error and the rise the slope's uncertainty allows over as much compute again as the late
        stretch spans (span = ln C_last - ln C_first of the stretch):

            sd^2 = level_se^2 + (slope_se span)^2
        """
        return self.level, math.hypot(self.level_se, self.slope_se * self.log_span)


def late_stretch(compute: ArrayLike, reward: ArrayLike, noise_sd: float = 0.0) -> LateStretch | None:
    """The last max(MIN_LATE_POINTS, LATE_FRACTION * n) points as a LateStretch; None when there
    are fewer points or no spread in compute.

    Both sds are at least `noise_sd`, the whole fit's noise estimate: five late points leave three
    degrees of freedom for their own scatter, and a late stretch that looks quieter than the run's
    noise is more often chance than a quieter run (it made a plateau's first points look like a
    steady rise).
    """
    compute, reward = np.asarray(compute, dtype=float), np.asarray(reward, dtype=float)
    n = max(MIN_LATE_POINTS, int(np.ceil(LATE_FRACTION * reward.size)))
    if reward.size < n:
        return None
    x, y = np.log(compute[-n:]), reward[-n:]
    sxx = float(np.sum((x - x.mean()) ** 2))
    if sxx <= 0:
        return None
    beta = float(np.sum((x - x.mean()) * (y - y.mean())) / sxx)
    resid = y - (y.mean() + beta * (x - x.mean()))
    s = max(float(np.sqrt(np.sum(resid**2) / (n - 2))), float(noise_sd))
    return LateStretch(float(y.mean()), max(float(np.std(y, ddof=1)), float(noise_sd)), beta, s / math.sqrt(sxx), n,
                       float(x[-1] - x[0]))


def flat_end_floor(late: LateStretch | None, level: float, n_average: float = math.inf,
                   judged_at: float | None = None) -> float | None:
    """Lower end of the late level when the data cannot exclude that the run has levelled off:

        ybar - t_q(n - 1) sd(y) sqrt(1 / n_average + 1 / n),    q = (1 + level) / 2

    when the late stretch is flat at `judged_at` (default `level`), else None. n_average infinite: the level itself
    (the floor of the ceiling A: a ceiling at the current level fits a flat end as well as the
    extrapolated one); n_average = 1: one new evaluation if the run stays there (the floor of a
    forecast band beyond the data)."""
    from scipy.stats import t as student_t

    if late is None or not late.is_flat(level if judged_at is None else judged_at):
        return None
    spread = math.sqrt(1.0 / float(n_average) + 1.0 / late.n)
    return float(late.level - student_t.ppf((1.0 + level) / 2.0, late.n - 1) * late.level_sd * spread)


def stop_now_floor(reward: ArrayLike, noise_sd: float, level: float, n_last: int = 3) -> float:
    """Lower end of one new evaluation if the run stops improving now: the mean of the last
    `n_last` fitted evaluations minus z_q noise sqrt(1 + 1 / n_last), q = (1 + level) / 2.

    A run whose fitted points end flat within their noise may stay there (the built-in task's hard
    prompts cap it where the fitted climb does not bend): beyond such a flat end the band reaches
    down to this persistence forecast's lower end. (Before a flat end the band's spread below the
    forecast grows with the gain still ahead instead: band_calibration.lower_spread.)
    """
    from scipy.stats import norm

    reward = np.asarray(reward, dtype=float)
    last = reward[-min(int(n_last), reward.size):]
    return float(last.mean() - norm.ppf((1.0 + level) / 2.0) * noise_sd * math.sqrt(1.0 + 1.0 / last.size))


def plateau_reached(late: LateStretch, a: float, within: float = NEAR_CEILING_WITHIN) -> bool:
    """A flat end the fit sits on: |A - late level| <= within (the paper's margin, 0.02 of a pass
    rate; in the reward's unit). The run has levelled off where the fitted ceiling says it would."""
    return abs(a - late.level) <= within


def at_upper_bound(value: float, upper_bound: float, r0: float) -> bool:
    """value >= upper - 1e-3 * |upper - R0|: at the top of A's range, up to a thousandth of the room."""
    return value >= upper_bound - 1e-3 * max(abs(upper_bound - r0), 1e-9)


def ceiling_identifiability(a: float, r0: float, c_mid: float, a_interval: tuple[float, float], a_upper_bound: float,
                            max_compute: float, *, residual_dof: int = 1,
                            b_at_bound: bool = False, b: float | None = None,
                            within: float = NEAR_CEILING_WITHIN) -> tuple[bool, str | None]:
    """Rule: the ceiling A is identified unless the data cannot pin it down.

    Unidentified when (1) the last point is below the fitted C_mid (still before the inflection),
    or (2) A sits at its upper bound, or (3) the A interval is wider than a third of the gain A - R0,
    or (4) there are no residual degrees of freedom (n <= p: an exact fit cannot test the shape),
    or (5) B sits at a bound (a step or a straight line: the bend is not resolved by the data).
    Returns (identified, warning or None); when the fitted curve is already within the paper's
    margin of A at the last point, the warning says that noise, not compute, is what is missing;
    otherwise it says how far to run: before the inflection to at least 2 x C_mid, where the curve
    has passed it, and, given the fitted B, to C_mid (|A - R0| / w - 1)^(1/B), where the fitted
    curve is within the paper's margin w = `within` of A (0.02 for a pass rate; in the reward's
    unit; curves.sigmoid_compute_near_ceiling, the fit's "run length"); past the inflection the run
    length alone.
    """
    lo, hi = a_interval
    gain = max(a - r0, 1e-12)
    reasons = []
    if max_compute < c_mid:
        reasons.append(f"the last point (compute {max_compute:.4g}) is before the fitted inflection C_mid = {c_mid:.4g}")
    if at_upper_bound(a, a_upper_bound, r0):
        reasons.append(f"A sits at its upper bound {a_upper_bound:g}")
    if hi - lo > CEILING_WIDTH_FRACTION * gain:
        reasons.append(f"the A interval [{lo:.3f}, {hi:.3f}] is wider than a third of the gain A - R0 = {gain:.3f}")
    if residual_dof <= 0:
        reasons.append("there are no more points than parameters, so nothing tests the fitted shape")
    if b_at_bound:
        reasons.append("B sits at a bound of its range (the bend of the curve is not resolved by the data)")
    if not reasons:
        return True, None
    if b is not None and float(sigmoid_compute_near_ceiling(within, a, b, c_mid, r0)) <= max_compute:
        return False, ("ceiling not identified: " + "; ".join(reasons) + f". The fitted curve is already within "
                       f"{within:.3g} of A at the last point: running longer will not pin A, less noisy "
                       "evaluations (more prompts per evaluation) will.")
    times = None if b is None else float(sigmoid_compute_near_ceiling(within, a, b, c_mid, r0)) / max_compute
    near = "" if times is None else (
        f" Reading A to +-{within:.3g} needs ~{times:.3g} times the current max (the run length).")
    if max_compute >= c_mid:
        slow = times is not None and times > FAR_RUN_LENGTH
        return False, ("ceiling not identified: " + "; ".join(reasons) + ". The last point is past the fitted "
                       "inflection, " + ("and the curve rises too slowly for any run to pin A." if slow
                                         else "so only a longer run pins A.") + near)
    advised = 2.0 * c_mid
    return False, (
        "ceiling not identified: " + "; ".join(reasons) + f". Run to at least ~{advised:.3g} compute "
        f"({advised / max_compute:.1f} times the current max) to pass the inflection." + near
    )
