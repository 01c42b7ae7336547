"""Compare recipes by their fitted sigmoids: ceiling first, efficiency within a margin.

Rule (Khatri, Madaan et al., arXiv 2510.13786, section on comparing recipes): ceilings A that
differ by more than `margin` (0.02: about the seed-to-seed spread) decide, the higher A wins;
ceilings within the margin count as the same, so those runs are refitted with A fixed to their
mean and ranked by B (higher B = more efficient).

For more than two runs: sort by fitted A; a cluster opens at the best A not yet placed and takes
every run within `margin` below it. Clusters are ranked by A; inside a cluster of two or more, runs
are refitted with A fixed to the cluster's mean A and ranked by B. `decided_by` says how the
winner was picked: "ceiling" when the top cluster holds one run, else "efficiency".
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping, Sequence

import numpy as np

from scalerl.errors import FitError, InputError
from scalerl.forecast.fitting import fit_sigmoid
from scalerl.forecast.result import FitResult


@dataclass(frozen=True)
class Comparison:
    """Ranked runs (best first) with the fits behind the ranking."""

    fits: Mapping[str, FitResult]
    fixed_ceiling_fits: Mapping[str, FitResult]
    ranking: tuple
    clusters: tuple
    decided_by: str
    margin: float
    warnings: tuple = ()

    @property
    def winner(self) -> str:
        return self.ranking[0]

    def summary(self) -> str:
        lines = [f"Recipe comparison (ceiling margin {self.margin:g}): winner {self.winner}, decided by {self.decided_by}"]
        for rank, name in enumerate(self.ranking, start=1):
            fit = self.fits[name]
            line = f"  {rank}. {name}: A = {fit.a:.4f}, B = {fit.b:.3f}, C_mid = {fit.c_mid:.4g}"
            if name in self.fixed_ceiling_fits:
                fixed = self.fixed_ceiling_fits[name]
                line += f"   | A fixed to {fixed.a:.4f}: B = {fixed.b:.3f}"
            lines.append(line)
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)


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
    try:
        return fit_sigmoid(compute, reward, **options)
    except FitError as error:
        raise FitError(f"run {name!r}: {error}") from error


def compare_runs(curves: Mapping[str, object], margin: float = 0.02, **fit_options: Any) -> Comparison:
    """Rank runs by the paper's rule; `fit_options` go to every fit_sigmoid call."""
    if len(curves) < 2:
        raise InputError(f"compare_runs needs at least two runs, got {len(curves)}")
    if margin < 0:
        raise InputError(f"margin must be >= 0, got {margin}")
    data = {name: _as_arrays(name, curve) for name, curve in curves.items()}
    fits = {name: _fit_named(name, *arrays, **fit_options) for name, arrays in data.items()}
    clusters = ceiling_clusters({name: fit.a for name, fit in fits.items()}, margin)
    ranking, fixed_fits = [], {}
    for cluster in clusters:
        if len(cluster) == 1:
            ranking.append(cluster[0])
            continue
        shared_a = float(np.mean([fits[name].a for name in cluster]))
        for name in cluster:
            fixed_fits[name] = _fit_named(name, *data[name], fixed_a=shared_a, **fit_options)
        ranking += sorted(cluster, key=lambda name: -fixed_fits[name].b)
    warnings = [f"run {name!r}: ceiling not identified, so its place by A is uncertain"
                for name, fit in fits.items() if not fit.ceiling_identified]
    return Comparison(
        fits=MappingProxyType(fits), fixed_ceiling_fits=MappingProxyType(fixed_fits), ranking=tuple(ranking),
        clusters=clusters, decided_by="ceiling" if len(clusters[0]) == 1 else "efficiency", margin=float(margin),
        warnings=tuple(warnings),
    )
