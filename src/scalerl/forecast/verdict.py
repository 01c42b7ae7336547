"""The one verdict on a run, decided here and nowhere else; every view (fit's text and JSON, the
figure's title, compare, report, ablate, the live forecast, the TRL callback) prints it.

In order, the first that holds:

    collapsed    the reward fell and stayed down after rising (diagnostics.detect_collapse); a
                 collapsed run is never told to run longer
    too_few      fewer fitted points than parameters
    decreasing   no learning, and the last third of the run lies below its first third by
                 learning_noise_sds standard errors (diagnostics.net_fall)
    flat         no learning: the best 3-point mean is within learning_noise_sds noise sds of R0
    plateaued    A known to the paper's margin m: A's interval at verdict_level (80 %) lies in
                 [A - m, A + m]; where the curve is not yet within m of A (run length >= 1.1x),
                 the text says at what multiple of the compute so far it comes within, as a
                 fact, not as advice: a known A needs no longer run
    too_noisy    the fitted curve is within m of A at the last point in nearly every draw (the
                 run length's upper end at verdict_level <= AT_END, a tenth more compute) while A's
                 interval is wider than +- m: more prompts per evaluation pin A, more compute does not
    still_rising run about N x longer, N = C_within / C_last of the posterior (median and interval),
                 C_within = C_mid (|A - R0| / m - 1)^(1/B) draw by draw; where the median is at the
                 end of the data (< AT_END) but the interval reaches beyond it (a slow rise the data cannot rule out),
                 the text says the curve is probably at its ceiling and how much longer tells

Before the last three, the run's end is checked against the fitted curve (diagnostics.end_misfit,
a posterior predictive check, its standard error from end_check_noise_sd): when its late stretch
lies SETTINGS.end_misfit_z standard errors above the curve, the run is still_rising, its A and
run length those of the run before that rise (the sigmoid does not describe its end); when it lies
as far below, the verdict says the run levelled off or fell below the ceiling its rise points to.

All numbers come from the one posterior of the fit (forecast.posterior), judged at
SETTINGS.verdict_level whatever level the intervals are reported at.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from scalerl.forecast.diagnostics import CollapseReport, end_misfit, learning_gain, net_fall
from scalerl.forecast.settings import SETTINGS

KINDS = ("collapsed", "too_few", "decreasing", "flat", "plateaued", "too_noisy", "still_rising")
# A run length under a tenth more compute than the run's is "at the end of the data".
AT_END = 1.1


def factor_text(factor: float) -> str:
    """A factor to two significant digits, never in exponent notation: 1.1, 21, 250, 1200."""
    return f"{float(f'{factor:.2g}'):g}"


def upper_factor_text(factor: float) -> str:
    """The top of a run-length interval: `2.7x`, or `over 100x` past SETTINGS.far_run_length."""
    if not math.isfinite(factor) or factor > SETTINGS.far_run_length:
        return f"over {SETTINGS.far_run_length:.0f}x"
    return f"{factor_text(factor)}x"


@dataclass(frozen=True)
class Verdict:
    """What to do with a run: `kind` (one of KINDS), the sentence to print, and its numbers."""

    kind: str
    text: str
    numbers: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "numbers", MappingProxyType(dict(self.numbers)))

    @property
    def advises_longer_run(self) -> bool:
        return self.kind == "still_rising"

    @property
    def run_length_missing_because(self) -> str | None:
        """Why the fit's run length is no answer for this run (None where it is one): the fitted
        curve does not describe the run's end after a collapse, or where the end lies above it."""
        if self.kind == "collapsed":
            return "the run collapsed; the fitted curve describes the run before it"
        if self.numbers.get("end_z", 0.0) > 0:
            return "the run's end lies above the fitted curve, whose run length is not this run's"
        return None

    def to_dict(self) -> dict:
        def plain(value):
            if isinstance(value, (list, tuple)):
                return [plain(v) for v in value]
            value = float(value)
            return value if math.isfinite(value) else None

        return {"kind": self.kind, "text": self.text, "numbers": {k: plain(v) for k, v in self.numbers.items()}}


def _g(value: float) -> str:
    return f"{value:.3g}"


def collapse_verdict(collapse: CollapseReport, fitted_before: bool = True) -> Verdict:
    """collapsed at the onset's compute; the forecast (when there is one) describes the run before it."""
    tail = "the forecast describes the run before it" if fitted_before else "too little rise before it to fit a curve"
    return Verdict(
        "collapsed",
        f"collapsed at compute {_g(collapse.onset_compute)}: the reward fell {collapse.drop:.3g} below "
        f"the level {collapse.peak_reward:.3g} it had reached; {tail}",
        {"collapse_compute": collapse.onset_compute, "peak_reward": collapse.peak_reward, "drop": collapse.drop},
    )


def too_few_verdict(n_points: int, n_params: int, collapse: CollapseReport | None = None) -> Verdict:
    where = f" before the collapse at compute {_g(collapse.onset_compute)}" if collapse is not None else ""
    return Verdict(
        "too_few",
        f"too few points: {n_points} usable{where} after excluding R0 and warm-up, need at "
        f"least {n_params} for {n_params} parameters",
        {"n_points": n_points, "n_params": n_params},
    )


def learning_verdict(
    reward: np.ndarray, r0: float, noise_sd: float, collapse: CollapseReport | None = None
) -> Verdict | None:
    """None when the run learned (best 3-point mean - R0 >= learning_noise_sds sigma); else the
    verdict on why there is nothing to fit: collapsed (a rise, too small to fit, then a fall),
    decreasing, or flat. `reward` holds the points to fit (before a collapse), `noise_sd` sigma."""
    gain = learning_gain(reward, r0)
    bar = SETTINGS.learning_noise_sds * noise_sd
    if gain >= bar:
        return None
    if collapse is not None and collapse.rose:
        return collapse_verdict(collapse, fitted_before=False)
    everything = np.concatenate([[r0], np.asarray(reward, dtype=float)])
    fall = net_fall(everything, noise_sd)
    if fall >= SETTINGS.learning_noise_sds:
        third = everything.size // 3
        first, last = float(np.mean(everything[:third])), float(np.mean(everything[-third:]))
        return Verdict(
            "decreasing",
            f"decreasing: the reward fell from ~{_g(first)} to ~{_g(last)} "
            f"({fall:.1f} standard errors); no rising curve to fit",
            {"first_level": first, "last_level": last},
        )
    return Verdict(
        "flat",
        f"flat: no learning (best gain over R0 = {gain:.4f} is within "
        f"{SETTINGS.learning_noise_sds:g} noise sds = {bar:.4f})",
        {"gain": gain, "noise_sd": noise_sd},
    )


def run_length_draws(result, within: float) -> np.ndarray:
    """C_within / C_last per posterior draw (FitResult.near_ceiling_draws)."""
    return np.asarray(result.near_ceiling_draws(within), dtype=float) / result.last_compute


def end_check_noise_sd(result) -> float:
    """The noise the end check measures the late residuals against: the smaller of the residuals'
    noise and the successive-difference noise. Residuals overstate it where the sigmoid cannot
    follow the run (the structured misfit the check looks for widens sigma and hides itself);
    differences overstate it on a steep curve sampled sparsely. The same yardstick as "no learning"."""
    difference = result.difference_noise_sd
    return float(result.noise_sd if difference is None else min(result.noise_sd, difference))


def decide(result) -> Verdict:
    """The verdict on a fitted run (a FitResult): collapsed, then the end check, then plateaued,
    too_noisy or still_rising (module docstring)."""
    if result.collapse_compute is not None:
        numbers = {"collapse_compute": result.collapse_compute}
        return Verdict(
            "collapsed",
            f"collapsed at compute {_g(result.collapse_compute)}: the forecast describes the run before it",
            numbers,
        )
    margin = SETTINGS.margin * result.reward_unit
    tail = (1.0 - SETTINGS.verdict_level) / 2.0
    a_lo, a_hi = (float(v) for v in np.quantile(result.ceiling_draws, [tail, 1.0 - tail]))
    a = float(result.a)
    ceiling = f"A {_g(a)} [{_g(a_lo)}, {_g(a_hi)}]"
    numbers = {"A": a, "A_interval": (a_lo, a_hi), "margin": margin, "level": SETTINGS.verdict_level}
    end = end_misfit(result.reward, result.predict(result.compute), end_check_noise_sd(result))
    if end is not None and abs(end.z) >= SETTINGS.end_misfit_z:
        numbers.update({"end_points": end.n, "end_residual": end.mean_residual, "end_z": end.z})
        if end.z > 0:
            return Verdict(
                "still_rising",
                f"still rising above the fitted curve: its last {end.n} evaluations lie {_g(end.mean_residual)} "
                f"above it ({end.z:.1f} standard errors): the sigmoid describes the run before that rise, "
                f"not its end, so its {ceiling} and run length are no ceiling for this run",
                numbers,
            )
    verdict = _ceiling_verdict(result, ceiling, margin, tail, numbers)
    if end is not None and end.z <= -SETTINGS.end_misfit_z:
        text = (
            f"{verdict.text}; but its last {end.n} evaluations lie {_g(-end.mean_residual)} below the fitted "
            f"curve ({-end.z:.1f} standard errors): the run levelled off or fell below the ceiling its rise points to"
        )
        return Verdict(verdict.kind, text, verdict.numbers)
    return verdict


def _ceiling_verdict(result, ceiling: str, margin: float, tail: float, numbers: dict) -> Verdict:
    """plateaued, too_noisy or still_rising from A's interval and the run length's draws."""
    a = numbers["A"]
    a_lo, a_hi = numbers["A_interval"]
    times = run_length_draws(result, margin)
    median = float(np.quantile(times, 0.5, method="inverted_cdf"))
    lo, hi = (float(v) for v in np.quantile(times, [tail, 1.0 - tail], method="inverted_cdf"))
    if a_lo >= a - margin and a_hi <= a + margin:
        text = f"plateaued: ceiling {ceiling}, known to +-{margin:.3g}"
        if median >= AT_END:  # at the end of the data: said by the run length alone
            numbers.update({"times_longer": median, "times_longer_interval": (lo, hi)})
            text += f" (the curve comes within {margin:.3g} of it at ~{median:.3g}x the compute so far)"
        return Verdict("plateaued", text, numbers)
    numbers.update({"times_longer": median, "times_longer_interval": (lo, hi)})
    if hi <= AT_END:
        return Verdict(
            "too_noisy",
            f"too noisy: the fitted curve is at its ceiling but {ceiling} is wider than "
            f"+-{margin:.3g}; less noisy evaluations (more prompts) pin A, a longer run "
            "does not",
            numbers,
        )
    if median < AT_END:
        # Most draws are at their ceiling already (or within a tenth more compute), but not nearly
        # all: a slow rise beyond the run keeps A's interval open, and only a longer run rules it out.
        high = upper_factor_text(hi)
        longer = high if high.startswith("over") else f"~{high}"
        return Verdict(
            "still_rising",
            f"still rising (or at its ceiling): the curve is probably at its ceiling, but {ceiling} is "
            f"wider than +-{margin:.3g}, and the data do not rule out a slow rise beyond the run: "
            f"run up to {longer} longer to tell",
            numbers,
        )
    if median > SETTINGS.far_run_length:
        return Verdict(
            "still_rising",
            f"still rising: no ceiling in reach ({ceiling}; reading A to +-{margin:.3g} "
            f"would take over {SETTINGS.far_run_length:.0f}x the compute so far)",
            numbers,
        )
    high = upper_factor_text(hi)
    spread = f"up to {high}" if lo < 1.0 else f"{factor_text(lo)}x{' to ' if high.startswith('over') else '-'}{high}"
    return Verdict(
        "still_rising",
        f"still rising: run ~{factor_text(median)}x longer ({spread}) to read A to +-{margin:.3g} ({ceiling})",
        numbers,
    )
