"""Forecast accuracy by source: fit the first 25 / 50 / 75 % of a run, forecast the rest.

Every `healthy` and `pre_plateau` (still rising) run of the data folder is fitted on the points
with compute <= f x max compute (never the last three). Everything a method learns from data is
learned on the OTHER sources only (all runs of one repository held out together). scalerl's
forecast is its posterior (forecast.posterior); the one number it learns across runs, the log-sd
at one decade of data of the factor on the gain beyond the data (SETTINGS.gain_ahead_log_sd_at_decade,
fitting.gain_ahead_log_sd), is chosen from GAIN_AHEAD_GRID for each source on the other sources' cells:
calibrated first, then sharp (Gneiting et al. 2007): among the values whose 80 % band holds at least
gain_ahead_choice.CALIBRATION_FLOOR of the other sources' later evaluations at every fraction, the lowest mean 80 %
interval score (each run weighted equally, in reward units); the value chosen on all sources is
printed: it is the one the package ships. With --shipped (a held-out set of repositories the
project never tuned on, e.g. benchmarks/data/curves_unseen) nothing is learned: every run is scored
with the shipped value, and the results go to forecast_accuracy_unseen.json.

Reported per method, fraction and run status:
- the final level (mean of the last three evaluations): median and mean abs error, a refused
  forecast scored as the last value (what a user falls back to);
- every held-out evaluation after the cut: coverage of the 50 / 80 / 95 % bands, mean width and
  mean interval score (Gneiting & Raftery 2007, eq. 43: width + (2 / alpha) x miss distance;
  lower is better), pooled over evaluations and with each run weighted equally; a refused
  forecast's evaluations are scored on persistence's band, as for the error;
- the plateau read on complete healthy runs (fit on all points): verdict "plateaued", A within
  0.03 of the level the run settled at (mean of its last quarter, at least three evaluations),
  the 80 % interval of A holding it; and how many plateaued runs are told to run longer;
- the "plateaued" verdicts part-way through a run (at 25 / 50 / 75 %): on how many the run's final
  level lies within the paper's margin of A and inside A's 80 % interval;
- contradictions: fits at 25 / 50 / 75 / 100 % of every run that break an invariant of the
  output (an estimate outside its interval, the forecast above A, "plateaued" with A's 80 %
  interval wider than the margin, a collapse told to run longer, a verdict that changes with the
  level). The target is 0.
Baselines with bands: the paper's grid fit with a residual bootstrap, persistence (the last
value, a random walk's noise growing with the evaluations ahead) and the power law.

    python -m benchmarks.forecast_accuracy [--data DIR] [--out DIR] [--figure PNG]   # ~8 min on 2 cores
    python -m benchmarks.forecast_accuracy --shipped --data benchmarks/data/curves_unseen   # held-out repositories
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from benchmarks.baselines import curve_fit_default, last_value_fit, paper_grid_bootstrap, paper_grid_fit
from benchmarks.bundled_runs import FORECAST_STATUSES, N_HELD_OUT, ROOT, collect_fits, cut_mask, load_runs, quick_runs
from benchmarks.common import command_line, interval_score, write_result, write_text
from benchmarks.forecast_accuracy_text import HELD_OUT_BY_SOURCE, HELD_OUT_SHIPPED, coverage_figure, markdown
from benchmarks.gain_ahead_choice import GAIN_AHEAD_GRID, gain_ahead_by_source, gain_ahead_choices
from scalerl.errors import ScaleRLError
from scalerl.forecast.diagnostics import detect_collapse, late_stretch, point_noise_sd
from scalerl.forecast.fitting import fit_sigmoid, gain_ahead_log_sd, with_gain_ahead_log_sd
from scalerl.forecast.invariants import contradictions
from scalerl.forecast.power_law import fit_power_law
from scalerl.forecast.settings import SETTINGS

HERE = Path(__file__).resolve().parent
FRACTIONS = (0.25, 0.5, 0.75)
LEVELS = (0.5, 0.8, 0.95)
STATUS_NAMES = {"healthy": "healthy", "pre_plateau": "still rising"}
PLATEAU_WITHIN = 0.03
PLATEAU_LEVEL = 0.8
BAND_METHODS = ("scalerl", "paper_grid_bootstrap", "power_law", "persistence")


def _positive(c, r):
    keep = c[1:] > 0
    return c[1:][keep], r[1:][keep], float(r[0])


POINT_BASELINES = {
    "paper_grid_bootstrap": lambda c, r: paper_grid_bootstrap(*_positive(c, r)),
    "paper_grid_r0_zero": lambda c, r: paper_grid_fit(c[c > 0], r[c > 0], 0.0),
    "power_law": lambda c, r: fit_power_law(c, r),
    "least_squares": lambda c, r: curve_fit_default(*_positive(c, r)),
    "persistence": lambda c, r: last_value_fit(c, r, float(r[0])),
}
METHODS = ("scalerl",) + tuple(POINT_BASELINES)


def band_record(model, compute, reward):
    """Per held-out evaluation: {level: {covered, width, score}} lists, or None without a band."""
    if not hasattr(model, "interval"):
        return None
    out = {}
    for level in LEVELS:
        with np.errstate(all="ignore"):
            lo, hi = (np.asarray(v, dtype=float) for v in model.interval(compute, level))
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            return None
        out[str(level)] = {
            "covered": ((lo <= reward) & (reward <= hi)).tolist(),
            "width": (hi - lo).tolist(),
            "score": interval_score(lo, hi, reward, level).tolist(),
        }
    return out


def score_model(model, compute, reward, final_compute, truth, with_band=True):
    with np.errstate(all="ignore"):
        forecast = float(np.mean(model.predict(final_compute)))
    if not np.isfinite(forecast):
        return {"error": "non-finite forecast"}
    record = {"forecast": forecast, "abs_error": abs(forecast - truth)}
    if with_band:
        record["bands"] = band_record(model, compute, reward)
    return record


def forecast_cells(runs, fits, baselines=None, shipped=False):
    """One cell per (forecastable run, fraction): every method's final-level error and bands;
    `baselines`: {name: fitter} (default POINT_BASELINES; persistence is always needed, as the
    fallback of a refused forecast); `shipped`: score the package as shipped (kappa_1 =
    SETTINGS.gain_ahead_log_sd_at_decade on every run, nothing learned on these runs) instead of
    choosing kappa_1 for each source on the other sources."""
    baselines = POINT_BASELINES if baselines is None else baselines
    grid = (SETTINGS.gain_ahead_log_sd_at_decade,) if shipped else GAIN_AHEAD_GRID
    cells = []
    for run in runs:
        if run.status not in FORECAST_STATUSES:
            continue
        final_compute, truth = run.compute[-N_HELD_OUT:], float(np.mean(run.reward[-N_HELD_OUT:]))
        for fraction in FRACTIONS:
            train = cut_mask(run.compute, fraction)
            cell = {
                "run": run.name,
                "source": run.source,
                "status": run.status,
                "fraction": fraction,
                "n_train": int(train.sum()),
                "truth": truth,
            }
            if train.sum() < 4:
                cell["skipped"] = "fewer than 4 points (R0 + 3)"
                cells.append(cell)
                continue
            later = run.compute > run.compute[train].max()
            test_c, test_r = run.compute[later], run.reward[later]
            entry = fits[(run.name, fraction)]
            if entry is None:
                cell["scalerl"] = {"error": "fit refused"}
            else:
                fit = entry[0]
                started = time.perf_counter()
                fit.interval(test_c, 0.8)
                band_seconds = time.perf_counter() - started
                cell["unit"] = fit.reward_unit
                cell["scalerl_by_log_sd"] = {}
                for log_sd in grid:
                    variant = with_gain_ahead_log_sd(fit, gain_ahead_log_sd(fit.compute, log_sd))
                    record = score_model(variant, test_c, test_r, final_compute, truth)
                    record.update(
                        band_seconds=band_seconds,
                        verdict=variant.verdict.kind,
                        gain_ahead_log_sd=log_sd,
                        A=variant.a,
                        A_interval=list(variant.conf_int(PLATEAU_LEVEL)["A"]),
                    )
                    cell["scalerl_by_log_sd"][str(log_sd)] = record
            for method, fitter in baselines.items():
                try:
                    with np.errstate(all="ignore"):
                        model = fitter(run.compute[train], run.reward[train])
                    if model is None:
                        raise ValueError("no fit")
                    cell[method] = score_model(model, test_c, test_r, final_compute, truth, method in BAND_METHODS)
                except (ScaleRLError, ValueError, RuntimeError, np.linalg.LinAlgError) as error:
                    cell[method] = {"error": f"{type(error).__name__}: {error}"}
            cells.append(cell)
    choices = shipped_choices(cells) if shipped else gain_ahead_choices(cells)
    for cell in cells:
        cell["gain_ahead_log_sd"] = choices.get(cell["source"], choices["all"])
        cell["gain_ahead_log_sd_all"] = choices["all"]
        if "scalerl_by_log_sd" in cell:
            cell["scalerl"] = cell.pop("scalerl_by_log_sd")[str(cell["gain_ahead_log_sd"])]
    return cells


def shipped_choices(cells) -> dict:
    """{source: the shipped kappa_1} for every source, and under "all" (gain_ahead_choices' layout)."""
    sources = {c["source"] for c in cells} | {"all"}
    return {source: SETTINGS.gain_ahead_log_sd_at_decade for source in sources}


def _fallback_error(cell, method):
    """The method's abs error, or persistence's where the method refused (a user's fallback)."""
    return cell[method]["abs_error"] if "abs_error" in cell[method] else cell["persistence"]["abs_error"]


def error_table(cells, methods=METHODS):
    """{fraction: {status: {method: {cells, failed, median, mean}}}} of the final-level error."""
    table = {}
    for fraction in FRACTIONS:
        table[str(fraction)] = {}
        for status in ("all",) + FORECAST_STATUSES:
            chosen = [
                c for c in cells if c["fraction"] == fraction and "skipped" not in c and status in ("all", c["status"])
            ]
            rows = {}
            for method in methods:
                errors = [_fallback_error(c, method) for c in chosen]
                rows[method] = {
                    "cells": len(chosen),
                    "failed": sum("abs_error" not in c[method] for c in chosen),
                    "median_abs_error": float(np.median(errors)) if errors else None,
                    "mean_abs_error": float(np.mean(errors)) if errors else None,
                }
            table[str(fraction)][STATUS_NAMES.get(status, status)] = rows
    return table


def _fallback_bands(cell, method):
    """The method's band record, or persistence's where the method refused: a refused forecast is
    scored as what a user falls back to, as in the error table (a method must not win by refusing
    the hard runs)."""
    return (cell.get(method) or {}).get("bands") or cell["persistence"]["bands"]


def band_table_summary(cells, methods=BAND_METHODS):
    """{fraction: {status: {method: {level: coverage, width, interval score (pooled and per run)}}}};
    `forecasts` counts the method's own bands, `of` the cells scored (refusals as persistence)."""
    table = {}
    for fraction in FRACTIONS:
        table[str(fraction)] = {}
        for status in FORECAST_STATUSES:
            chosen = [c for c in cells if c["fraction"] == fraction and "skipped" not in c and c["status"] == status]
            rows = {}
            for method in methods:
                own = [c for c in chosen if (c.get(method) or {}).get("bands")]
                if not own:
                    continue
                bands = [_fallback_bands(c, method) for c in chosen]
                row = {
                    "forecasts": len(own),
                    "of": len(chosen),
                    "evaluations": int(sum(len(b["0.8"]["covered"]) for b in bands)),
                }
                for level in LEVELS:
                    key = str(level)
                    pooled = {
                        name: np.concatenate([np.asarray(b[key][name], float) for b in bands])
                        for name in ("covered", "width", "score")
                    }
                    per_run = {
                        name: np.mean([np.mean(b[key][name]) for b in bands if b[key][name]])
                        for name in ("covered", "width", "score")
                    }
                    row[key] = {
                        "coverage": float(pooled["covered"].mean()),
                        "width": float(pooled["width"].mean()),
                        "interval_score": float(pooled["score"].mean()),
                        "coverage_per_run": float(per_run["covered"]),
                        "interval_score_per_run": float(per_run["score"]),
                    }
                rows[method] = row
            table[str(fraction)][STATUS_NAMES[status]] = rows
    return table


def settled_level(reward):
    """Mean of the last quarter of the evaluations (at least three): where the run levelled off."""
    n = max(N_HELD_OUT, int(np.ceil(0.25 * reward.size)))
    return float(np.mean(reward[-n:]))


def plateaued_calls(cells) -> dict:
    """{fraction: {calls, final_within_margin, final_in_interval}}: the fits at a fraction of a run
    (forecastable runs, both statuses) whose verdict is "plateaued", and on how many of them the
    run's final level (the mean of its last three evaluations, never fitted) lies within the
    paper's margin of A (SETTINGS.margin of the reward's unit) and inside A's PLATEAU_LEVEL interval:
    what a user told "plateaued" part-way through a run would have found at its end."""
    out = {}
    for fraction in FRACTIONS:
        chosen = [
            c
            for c in cells
            if c["fraction"] == fraction and c.get("scalerl", {}).get("verdict") == "plateaued" and "A" in c["scalerl"]
        ]
        out[str(fraction)] = {
            "calls": len(chosen),
            "final_within_margin": sum(
                abs(c["truth"] - c["scalerl"]["A"]) <= SETTINGS.margin * c["unit"] + 1e-12 for c in chosen
            ),
            "final_in_interval": sum(
                c["scalerl"]["A_interval"][0] <= c["truth"] <= c["scalerl"]["A_interval"][1] for c in chosen
            ),
        }
    return out


def plateau_verdict(fit, settled):
    """The plateau read of one fit on a complete run: plateaued, A within PLATEAU_WITHIN of the
    settled level and A's PLATEAU_LEVEL interval holding it; and whether the verdict says to run longer."""
    lo, hi = fit.conf_int(PLATEAU_LEVEL)["A"]
    return {
        "A": fit.a,
        "A_interval": [lo, hi],
        "identified": bool(fit.ceiling_identified),
        "read": bool(fit.ceiling_identified and abs(fit.a - settled) <= PLATEAU_WITHIN and lo <= settled <= hi),
        "headline": fit.verdict.text,
        "verdict": fit.verdict.kind,
        "told_to_run_longer": fit.verdict.advises_longer_run,
    }


def plateau_read(runs, seed=0, log_sd_by_source=None):
    """Fit every complete run; on healthy runs: identified, A near the settled level, interval holding it
    (`seed`: the sampler's; `log_sd_by_source`: the gain factor's log-sd per source, else the shipped one)."""
    rows = []
    for run in runs:
        if run.status not in FORECAST_STATUSES:
            continue
        settled = settled_level(run.reward)
        row = {"run": run.name, "source": run.source, "status": run.status, "settled": settled}
        try:
            fit = fit_sigmoid(run.compute, run.reward, seed=seed, reward_range=run.reward_range)
        except ScaleRLError as error:
            rows.append({**row, "error": str(error)})
            continue
        if log_sd_by_source and run.source in log_sd_by_source:
            fit = with_gain_ahead_log_sd(fit, gain_ahead_log_sd(fit.compute, log_sd_by_source[run.source]), seed)
        late = late_stretch(run.compute, run.reward, point_noise_sd(run.reward))
        rows.append(
            {
                **row,
                **plateau_verdict(fit, settled),
                # the run's own last stretch (not the fit) still rises beyond its noise at 95 %
                "end_still_rising": bool(late is not None and not late.is_flat(0.95)),
            }
        )
    healthy = [r for r in rows if r["status"] == "healthy"]
    summary = {
        "healthy_runs": len(healthy),
        "read": sum(r.get("read", False) for r in healthy),
        "identified": sum(r.get("identified", False) for r in healthy),
        "told_to_run_longer": sum(r.get("told_to_run_longer", False) for r in healthy),
        "told_to_run_longer_end_still_rising": sum(
            r.get("told_to_run_longer", False) and r.get("end_still_rising", False) for r in healthy
        ),
        "still_rising_runs": sum(r["status"] == "pre_plateau" for r in rows),
        "still_rising_identified": sum(r.get("identified", False) for r in rows if r["status"] == "pre_plateau"),
    }
    return summary, rows


def contradiction_count(runs, fits, full_fractions=(0.25, 0.5, 0.75, 1.0), log_sd_by_source=None):
    """Fits at each fraction of every run (1.0: all points) whose output breaks an invariant
    (forecast.invariants.contradictions): {"fits", "contradictions", "by_rule", "examples"}."""
    checked, broken, examples = 0, {}, []
    for run in runs:
        for fraction in full_fractions:
            entry = fits.get((run.name, fraction))
            if fraction == 1.0:
                try:
                    fit = fit_sigmoid(run.compute, run.reward, reward_range=run.reward_range)
                except ScaleRLError:
                    continue
            elif entry is None:
                continue
            else:
                fit = entry[0]
            if log_sd_by_source and run.source in log_sd_by_source:
                fit = with_gain_ahead_log_sd(fit, gain_ahead_log_sd(fit.compute, log_sd_by_source[run.source]))
            checked += 1
            found = contradictions(fit, predict_at=(10.0 * float(np.max(fit.compute)),))
            for rule in found:
                broken[rule] = broken.get(rule, 0) + 1
            if found and len(examples) < 10:
                examples.append({"run": run.name, "fraction": fraction, "broken": found})
    return {"fits": checked, "contradictions": sum(broken.values()), "by_rule": broken, "examples": examples}


def collapse_rule(runs):
    """The collapse rule on every run: "fired / runs" per status (collapsed ones must fire)."""
    out = {}
    for status in ("collapsed", "healthy", "pre_plateau"):
        chosen = [run for run in runs if run.status == status]
        fired = sum(detect_collapse(run.compute, run.reward) is not None for run in chosen)
        out[status] = f"{fired}/{len(chosen)}"
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=HERE / "data" / "curves")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--figure", type=Path, default=None, help="default docs/forecast_calibration[_unseen].png")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run on a few runs (bundled_runs.quick_runs); pair with --out and --figure",
    )
    parser.add_argument(
        "--shipped",
        action="store_true",
        help="a held-out set: score the package as shipped, learning nothing on these runs "
        "(writes NAME_unseen.json unless --name is given)",
    )
    parser.add_argument("--name", default=None, help="results file stem (default forecast_accuracy)")
    args = parser.parse_args(argv)
    name = args.name or ("forecast_accuracy_unseen" if args.shipped else "forecast_accuracy")
    load_before = os.getloadavg()
    runs = quick_runs(load_runs(args.data)) if args.quick else load_runs(args.data)
    fit_seconds = []
    fits = collect_fits(runs, FRACTIONS, seconds=fit_seconds)
    sources = sorted({run.source for run in runs})
    cells = forecast_cells(runs, fits, shipped=args.shipped)
    band_seconds = [c["scalerl"]["band_seconds"] for c in cells if "band_seconds" in c.get("scalerl", {})]
    log_sd_by_source = gain_ahead_by_source(cells)
    plateau_summary, plateau_rows = plateau_read(runs, log_sd_by_source=log_sd_by_source)
    report = {
        "data": str(args.data.relative_to(ROOT)) if args.data.is_relative_to(ROOT) else str(args.data),
        "runs": len(runs),
        "sources": sources,
        "fractions": FRACTIONS,
        "levels": LEVELS,
        "held_out": HELD_OUT_SHIPPED if args.shipped else HELD_OUT_BY_SOURCE,
        "errors": error_table(cells),
        "bands": band_table_summary(cells),
        "plateau_read": plateau_summary,
        "plateau_rows": plateau_rows,
        "plateaued_calls": plateaued_calls(cells),
        "seconds": {
            "median": float(np.median(fit_seconds) + np.median(band_seconds)),
            "max": float(np.max(fit_seconds) + np.max(band_seconds)),
        },
        "collapse_rule": collapse_rule(runs),
        "contradictions": contradiction_count(runs, fits, log_sd_by_source=log_sd_by_source),
        "gain_ahead_log_sd": {"by_source": log_sd_by_source, "all_sources": cells[0]["gain_ahead_log_sd_all"]},
        "cells": cells,
    }
    text = markdown(report)
    write_result(args.out / f"{name}.json", report, command_line("forecast_accuracy", argv), load_before)
    write_text(args.out / f"{name}.md", f"# Forecast accuracy on {len(runs)} runs\n\n{text}\n")
    default_figure = "forecast_calibration_unseen.png" if args.shipped else "forecast_calibration.png"
    figure = args.figure or ROOT / "docs" / default_figure
    coverage_figure(report, figure)
    print(text)


if __name__ == "__main__":
    main()
