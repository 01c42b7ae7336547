"""Leave-one-curve-out choice of the band constants and the coverage they give.

The library's observation band has two constants (forecast/uncertainty.py): kappa, the rate
uncertainty beyond the data (RATE_SCALE), and k, the stretch of the band about the point forecast
(BAND_SCALE). For one forecast with centre m, truth y and, for a given kappa, un-stretched band
quantiles (q_lo, q_hi) at level L, the band stretched by k is [m + k (q_lo - m), m + k (q_hi - m)]
(quantiles commute with the affine stretch), which covers y exactly when k >= k_needed with

    k_needed = (y - m) / (q_hi - m)  if y >= m,   (m - y) / (m - q_lo)  otherwise.

So the whole study needs one fit per cell. For each held-out group of curves (files of one
training run are held out together): for every kappa on KAPPA_GRID and each run status (healthy,
still rising), k_s(kappa) is the smallest k covering 80 % of the other groups' cells of that
status; kappa is the one that makes the statuses most alike (the rate term widens only bands of
curves still rising at their last point, so it is what can balance them), and k = max_s k_s.
Coverage at every level is the share of the held-out cells inside their band with that (kappa, k).
Where a cell's fitted points end flat, its band's lower edge is at most the floor of a flat
continuation (`floors`, as FitResult.interval gives it), whatever the stretch.
"""

from __future__ import annotations

import numpy as np

LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
CHOICE_LEVEL = 0.8
KAPPA_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)


def band_quantiles(samples, centre, levels=LEVELS):
    """{level: (lo, hi)} quantile band of `samples`, widened to hold `centre`."""
    out = {}
    for level in levels:
        lo, hi = np.quantile(samples, [(1 - level) / 2, (1 + level) / 2])
        out[level] = (float(min(lo, centre)), float(max(hi, centre)))
    return out


def k_needed(band, centre, truth, floor=None):
    """Smallest stretch k that puts `truth` inside `band` = (lo, hi) stretched about `centre`;
    0 when a `floor` (the band's lower edge wherever the stretched one is higher) holds it."""
    lo, hi = band
    if floor is not None and floor <= truth <= centre:
        return 0.0
    if truth >= centre:
        return 0.0 if truth == centre else (truth - centre) / max(hi - centre, 1e-12)
    return (centre - truth) / max(centre - lo, 1e-12)


def stretched(band, centre, k, floor=None):
    """The band stretched by k about `centre`, its lower edge no higher than `floor` (if any)."""
    lo, hi = band
    lo = centre + k * (lo - centre)
    return (lo if floor is None else min(lo, floor)), centre + k * (hi - centre)


def floor_of(cell, level):
    """The cell's band floor at `level` (a flat continuation of its fitted points), or None."""
    return cell.get("floors", {}).get(level)


def interval_score(band, truth, level):
    """Width + (2 / alpha) x distance outside: lower is better (a proper score of a central band)."""
    lo, hi = band
    alpha = 1.0 - level
    return (hi - lo) + (2.0 / alpha) * (max(lo - truth, 0.0) + max(truth - hi, 0.0))


def choose_constants(cells, level=CHOICE_LEVEL):
    """(kappa, k): for each kappa, k_s = the smallest k covering `level` of the cells of status s
    (healthy, still rising); kappa is the one that brings the statuses closest (min max_s k_s /
    min_s k_s; ties: the smaller kappa), k = max_s k_s, so no status is under-covered."""
    best = None
    statuses = sorted({c["status"] for c in cells})
    for kappa in KAPPA_GRID:
        per_status = []
        for status in statuses:
            needed = [k_needed(c["bands"][kappa][level], c["centre"], c["truth"], floor_of(c, level))
                      for c in cells if c["status"] == status]
            per_status.append(float(np.quantile(needed, level, method="inverted_cdf")))
        spread = max(per_status) / max(min(per_status), 1e-12)
        if best is None or spread < best[2] - 1e-9:
            best = (kappa, max(per_status), spread)
    return best[0], best[1]


def loco_coverage(cells, levels=LEVELS):
    """Adds `constants` (kappa, k chosen without the cell's group) and `covered` {level: bool}."""
    chosen = {}
    for cell in cells:
        group = cell["group"]
        if group not in chosen:
            chosen[group] = choose_constants([c for c in cells if c["group"] != group])
        kappa, k = chosen[group]
        cell["constants"] = {"kappa": kappa, "k": k}
        cell["covered"] = {}
        for level in levels:
            lo, hi = stretched(cell["bands"][kappa][level], cell["centre"], k, floor_of(cell, level))
            cell["covered"][level] = bool(lo <= cell["truth"] <= hi)
    return cells


def coverage_table(cells, statuses, levels=LEVELS):
    """({level: share covered}, number of cells) over the cells whose run status is in `statuses`."""
    chosen = [c for c in cells if c["status"] in statuses]
    table = {level: (float(np.mean([c["covered"][level] for c in chosen])) if chosen else None) for level in levels}
    return table, len(chosen)


def calibration_figure(tables, path):
    """Observed coverage against the nominal level, one line per run status; the diagonal is ideal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.2, 4.4))
    ax.plot([0, 1], [0, 1], color="0.6", linestyle="--", label="ideal")
    for (name, (table, n_cells)), marker in zip(tables.items(), "os^"):
        levels = [lv for lv, v in table.items() if v is not None]
        ax.plot(levels, [table[lv] for lv in levels], marker=marker, label=f"{name} ({n_cells} forecasts)")
    ax.set_xlabel("nominal level of the prediction band")
    ax.set_ylabel("share of forecasts whose band held the truth")
    ax.set_title("Forecast bands on real runs, leave-one-curve-out", fontsize=10)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)
