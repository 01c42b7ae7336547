"""Compare recipes by their fitted sigmoids: ceiling first, efficiency within a margin.

Rule (Khatri, Madaan et al., arXiv 2510.13786, section on comparing recipes): ceilings A that
differ by more than `margin` (0.02: about the seed-to-seed spread) decide, the higher A wins;
ceilings within the margin count as the same, so those runs are refitted with A fixed to their
mean and ranked by B (higher B = more efficient).

For more than two runs: sort by fitted A; a cluster opens at the best A not yet placed and takes
every run within `margin` below it. Clusters are ranked by A; inside a cluster of two or more, runs
are refitted with A fixed to the cluster's mean A and ranked by B.

The uncertainty decides whether the rule's answer is supported (a flat run with A 0.985 in
[0.20, 1.00] must never be ranked first "by ceiling"). A win by ceiling needs the winner's A an
estimate, not a limit at the top of its range, and ahead of every other run's (the central
`level` interval of the difference of posterior draws above 0), known to the margin or not;
otherwise the ceiling is undecided, and the contenders
(the runs whose A is not clearly below the top run's) are refitted with A shared
and ranked by the reward of that curve at the largest compute they all reached. `decided_by`:
"ceiling" (supported), "efficiency" (ceilings within the margin, the paper's rule; or ceiling
undecided and the best B ahead of the next one's) or "undecided"
(ceiling undecided and B not separated either: the ranking is the point estimates' and
`more_compute` says how much longer to run). `efficiency_supported` says whether the best B at
the shared A is ahead of the second's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from scalerl.errors import FitError, InputError, NoForecastError
from scalerl.forecast.fitting import fit_sigmoid
from scalerl.forecast.result import FitResult
from scalerl.forecast.settings import SETTINGS


@dataclass(frozen=True)
class Comparison:
    """Ranked runs (best first) with the fits behind the ranking.

    `ceiling_undecided`: the posterior of A does not support a ranking by ceiling. `more_compute`: when
    the decision is not supported, about how many times the current compute the runs need before
    the intervals can separate (None when decided).
    """

    fits: Mapping[str, FitResult]
    fixed_ceiling_fits: Mapping[str, FitResult]
    ranking: tuple
    clusters: tuple
    decided_by: str
    margin: float
    warnings: tuple = ()
    ceiling_undecided: bool = False
    more_compute: float | None = None
    level: float = 0.8
    efficiency_supported: bool = False  # the best B (A shared) is ahead of the next one's
    # runs with nothing to forecast (flat, decreasing, too few points, collapsed before rising):
    # name -> their verdict; left out of the ranking and named in the warnings
    not_ranked: Mapping = field(default_factory=lambda: MappingProxyType({}))

    @property
    def winner(self) -> str:
        return self.ranking[0]

    def headline(self) -> str:
        """One sentence: who leads and whether the data support it."""
        if self.decided_by == "ceiling":
            return f"{self.winner} has the highest ceiling (clearly ahead)"
        undecided = "ceiling undecided; " if self.ceiling_undecided else ""
        if self.decided_by == "efficiency":
            hedge = "" if self.efficiency_supported else " (B not clearly ahead: a lead on point estimates)"
            shared = "in the top ceiling group" if len(self.clusters) > 1 and not undecided else "at a shared ceiling"
            return f"{undecided}{self.winner} is the most efficient {shared}{hedge}"
        longer = "" if self.more_compute is None else f": run ~{self.more_compute:.1f}x longer to separate them"
        return f"{undecided}efficiency undecided too, {self.winner} leads on point estimates only{longer}"

    def summary(self) -> str:
        lines = [
            f"Recipe comparison (ceiling margin {self.margin:g}): {self.headline()} (decided by {self.decided_by})"
        ]
        for rank, name in enumerate(self.ranking, start=1):
            fit = self.fits[name]
            line = f"  {rank}. {name}: A = {fit.a:.4f}, B = {fit.b:.3f}, C_mid = {fit.c_mid:.4g}"
            if name in self.fixed_ceiling_fits:
                fixed = self.fixed_ceiling_fits[name]
                line += f"   | A fixed to {fixed.a:.4f}: B = {fixed.b:.3f}"
            lines.append(line)
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def ahead(draws_first: ArrayLike, draws_second: ArrayLike, level: float) -> bool:
    """Whether the first quantity is above the second at `level`: the central `level` interval of
    the difference of their (independent) posterior draws lies above 0. Two 80 % intervals may
    overlap while their difference is clearly positive, so the difference is what is tested."""
    n = min(len(draws_first), len(draws_second))
    difference = np.asarray(draws_first, dtype=float)[:n] - np.asarray(draws_second, dtype=float)[:n]
    return bool(np.quantile(difference, (1.0 - level) / 2.0) > 0.0)


def ceiling_supported(fits: Mapping[str, FitResult], top: str, level: float) -> bool:
    """The top run wins by ceiling only when its A is an estimate (not a limit at the top of its
    range) and ahead of every other run's: the difference of their draws above 0 at `level`. Its
    ceiling need not be known to the margin: a still-rising run whose ceiling is clearly above
    another's wins by ceiling."""
    if fits[top].ceiling_at_bound:
        return False
    return all(ahead(fits[top].ceiling_draws, fit.ceiling_draws, level) for name, fit in fits.items() if name != top)


def ceiling_contenders(fits: Mapping[str, FitResult], top: str, level: float) -> tuple:
    """The top run and every run whose A is not clearly below the top run's (their order by A is open)."""
    return (top,) + tuple(
        name
        for name, fit in fits.items()
        if name != top and not ahead(fits[top].ceiling_draws, fit.ceiling_draws, level)
    )


def compute_to_separate(fits: Mapping[str, FitResult], names: Sequence[str], level: float = 0.8) -> float | None:
    """Times the current compute after which the runs' ceilings can be told apart (rough).

    An unidentified ceiling needs the run to pass its inflection: 2 x max(C_mid, C_last) / C_last
    (the point past which a sigmoid bends). Identified but overlapping ceilings: interval widths shrink
    about as 1 / sqrt(evaluations), so ((h_1 + h_2) / |A_1 - A_2|)^2 times the evaluations at the
    same spacing, i.e. about that many times the compute.
    """
    factors = []
    for name in names:
        fit = fits[name]
        last = float(np.max(fit.compute))
        if not fit.ceiling_identified:
            factors.append(2.0 * max(fit.c_mid, last) / last)
    if factors:
        return float(max(factors))
    if len(names) < 2:
        return None
    first, second = names[0], names[1]
    (lo1, hi1), (lo2, hi2) = fits[first].conf_int(level)["A"], fits[second].conf_int(level)["A"]
    gap = abs(fits[first].a - fits[second].a)
    if gap <= 0:
        return None
    return float(min(((hi1 - lo1) / 2 + (hi2 - lo2) / 2) ** 2 / gap**2, 1e6))


def ceiling_clusters(ceilings: Mapping[str, float], margin: float) -> tuple[tuple[str, ...], ...]:
    """Groups of runs whose A lie within `margin` below the group's best A, best group first."""
    remaining = sorted(ceilings, key=lambda name: -ceilings[name])
    clusters = []
    while remaining:
        top = ceilings[remaining[0]]
        members = [name for name in remaining if top - ceilings[name] <= margin]
        clusters.append(tuple(members))
        remaining = [name for name in remaining if name not in members]
    return tuple(clusters)


def _as_arrays(name, curve):
    if hasattr(curve, "compute") and hasattr(curve, "reward"):
        return np.asarray(curve.compute, dtype=float), np.asarray(curve.reward, dtype=float)
    try:
        compute, reward = curve
    except (TypeError, ValueError) as error:
        raise InputError(f"run {name!r}: expected (compute, reward), got {type(curve).__name__}") from error
    return np.asarray(compute, dtype=float), np.asarray(reward, dtype=float)


def _fit_named(name, compute, reward, **options):
    """The run's fit; a NoForecastError (nothing to forecast) passes through as it is, for the
    caller to leave the run out of the ranking; any other FitError names the run."""
    try:
        return fit_sigmoid(compute, reward, **options)
    except NoForecastError:
        raise
    except FitError as error:
        raise FitError(f"run {name!r}: {error}") from error


def fit_rankable(data: Mapping[str, tuple], **fit_options: Any) -> tuple[dict, dict]:
    """(fits, not ranked): every run's fit, and the verdict of each run with nothing to forecast
    (flat, decreasing, too few points, collapsed before rising). At least two runs must have a fit:
    a ranking of one is none."""
    fits, not_ranked = {}, {}
    for name, arrays in data.items():
        try:
            fits[name] = _fit_named(name, *arrays, **fit_options)
        except NoForecastError as error:
            not_ranked[name] = error.verdict
    if len(fits) < 2:
        reasons = "; ".join(f"run {name!r}: {verdict.text}" for name, verdict in not_ranked.items())
        raise FitError(f"a comparison needs two runs with a forecast, {len(fits)} of {len(data)} have one ({reasons})")
    return fits, not_ranked


def compare_runs(curves: Mapping[str, object], margin: float | None = None, **fit_options: Any) -> Comparison:
    """Rank runs by the paper's rule, kept only where the intervals support it (module docstring);
    `fit_options` go to every fit_sigmoid call (`level` sets the interval level too). `margin`
    None: the paper's 0.02 of the reward's unit (forecast.reward_unit; 0.02 for pass rates, 2 for
    percentages with reward_range (0, 100)), the largest unit of the runs."""
    if len(curves) < 2:
        raise InputError(f"compare_runs needs at least two runs, got {len(curves)}")
    if margin is not None and margin < 0:
        raise InputError(f"margin must be >= 0, got {margin}")
    level = float(fit_options.get("level", 0.8))
    data = {name: _as_arrays(name, curve) for name, curve in curves.items()}
    fits, not_ranked = fit_rankable(data, **fit_options)
    data = {name: data[name] for name in fits}
    if margin is None:
        margin = SETTINGS.margin * max(fit.reward_unit for fit in fits.values())
    clusters = ceiling_clusters({name: fit.a for name, fit in fits.items()}, margin)
    ranking, fixed_fits = _rank_within_clusters(clusters, fits, data, fit_options)
    top = ranking[0]
    warnings = [f"run {name!r} not ranked: {verdict.text}" for name, verdict in not_ranked.items()]
    warnings += [
        f"run {name!r}: ceiling not identified, so its place by A is uncertain"
        for name, fit in fits.items()
        if not fit.ceiling_identified
    ]
    by_ceiling = len(clusters[0]) == 1
    undecided = by_ceiling and not ceiling_supported(fits, top, level)
    if undecided:
        contenders = ceiling_contenders(fits, top, level)
        ranked, shared_fits = _rank_by_shared_ceiling(
            contenders, fits, data, fit_options, by_reward_at_common_compute=True
        )
        fixed_fits.update(shared_fits)
        ranking = list(ranked) + [name for name in ranking if name not in ranked]
        clusters = (tuple(ranked),) + tuple(
            tuple(n for n in c if n not in ranked) for c in clusters if set(c) - set(ranked)
        )
    decided_by = "ceiling" if by_ceiling and not undecided else "efficiency"
    leaders = [name for name in ranking if name in fixed_fits][:2]
    efficiency_supported = _efficiency_supported(leaders, fixed_fits, level)
    if undecided and not efficiency_supported:
        decided_by = "undecided"
    more = None if decided_by != "undecided" else compute_to_separate(fits, leaders or ranking[:2], level)
    return Comparison(
        fits=MappingProxyType(fits),
        fixed_ceiling_fits=MappingProxyType(fixed_fits),
        ranking=tuple(ranking),
        clusters=clusters,
        decided_by=decided_by,
        margin=float(margin),
        warnings=tuple(warnings),
        ceiling_undecided=bool(undecided),
        more_compute=more,
        level=level,
        efficiency_supported=bool(efficiency_supported),
        not_ranked=MappingProxyType(not_ranked),
    )


def _rank_within_clusters(clusters, fits, data, fit_options):
    """The paper's ranking: clusters by A, runs inside a cluster by B at the cluster's mean A."""
    ranking, fixed_fits = [], {}
    for cluster in clusters:
        if len(cluster) == 1:
            ranking.append(cluster[0])
            continue
        ranked, shared_fits = _rank_by_shared_ceiling(cluster, fits, data, fit_options)
        fixed_fits.update(shared_fits)
        ranking += ranked
    return ranking, fixed_fits


def _shared_ceiling(names, fits):
    """Mean A of the runs whose ceiling is identified (all runs' when none is)."""
    identified = [fits[name].a for name in names if fits[name].ceiling_identified]
    return float(np.mean(identified or [fits[name].a for name in names]))


def _rank_by_shared_ceiling(names, fits, data, fit_options, by_reward_at_common_compute=False):
    """Refit `names` with A fixed to the shared ceiling, ranked by B (higher first).

    `by_reward_at_common_compute`: ranked instead by the shared-A curve's reward at the largest
    compute every run reached (the undecided path: B alone would rank a run that never rose,
    refitted to a ceiling far above its data, by the steepness of a rise it has not made).
    """
    shared_a = _shared_ceiling(names, fits)
    options = {key: value for key, value in fit_options.items() if key != "fixed_a"}
    shared_fits = {}
    for name in names:
        try:
            shared_fits[name] = fit_sigmoid(*data[name], fixed_a=shared_a, **options)
        except FitError:
            continue  # the shared A is outside what this run allows: it keeps its place by A
    common = min(float(np.max(data[name][0])) for name in names)
    if by_reward_at_common_compute:
        ranked = sorted(shared_fits, key=lambda name: -float(shared_fits[name].predict(common)))
    else:
        ranked = sorted(shared_fits, key=lambda name: -shared_fits[name].b)
    return ranked + [name for name in names if name not in shared_fits], shared_fits


def _efficiency_supported(leaders, fixed_fits, level) -> bool:
    """The best B at the shared ceiling is supported when it is ahead of the next one's (ahead)."""
    if len(leaders) < 2:
        return False
    best, second = (fixed_fits[name].param_draws[:, 1] for name in leaders)
    return ahead(best, second, level)
