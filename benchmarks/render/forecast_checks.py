"""The forecaster's checks beyond the accuracy on real runs, rendered from their results JSON: the
plateau read on synthetic shapes (plateau_shapes.json), the textbook sigmoid's ceiling
(sigmoid_recovery.json), the posterior sampler (sampler_check.json) and the spread over sampler
seeds (forecast_seed_spread.json). Used by benchmarks/render/pages.py."""

from __future__ import annotations

import statistics

SAMPLER_FILE = "sampler_check.json"


def _effective_draws(results: dict) -> str:
    """The independent draws per fit, "N independent draws (fewest M)", over the fits whose
    autocorrelation time was estimated, naming how many it was not (a chain too short or too
    stuck for emcee's estimate)."""
    values = [r["effective_kept_samples"] for r in results["rows"] if "acceptance" in r]
    measured = [v for v in values if v is not None]
    text = f"{statistics.median(measured):.0f} independent draws (fewest {min(measured):.0f})"
    missing = len(values) - len(measured)
    return text + (f"; on {missing} fit{'s' if missing > 1 else ''} the time could not be estimated" if missing else "")


def sampler_line(results: dict) -> str:
    """Acceptance, autocorrelation and agreement with a long reference chain of the posterior sampler
    over the bundled curves."""
    s = results["summary"]
    line = (
        f"Over {s['fits']} fits of the bundled curves (25 %, 50 % and all of each run; "
        f"`python -m benchmarks.sampler_check`), the ensemble accepts {s['acceptance_median']:.2f} of its "
        f"proposals at the median (lowest {s['acceptance_min']:.2f}); the slowest parameter's integrated "
        f"autocorrelation time is {s['tau_max_median']:.0f} steps at the median ({s['tau_max_p90']:.0f} at the "
        f"90th percentile), so the {s['kept_steps']} kept steps of {s['walkers']} walkers hold about "
        f"{_effective_draws(results)}: enough for 80 % intervals, rough at the 95 % tails."
    )
    gap = s.get("a_quantile_gap")
    if gap is None:
        return line
    ours, before = gap["library"]["mean"], gap["previous_moves"]["mean"]
    return line + (
        f" Against a long chain of another sampler on the same posterior ({gap['reference']}), the 5 / 50 / 95 % "
        f"quantiles of A are off by {ours[0]:.4f} / {ours[1]:.4f} / {ours[2]:.4f} on average (the earlier moves, "
        f"with emcee 3.1.6's snooker move: {before[0]:.4f} / {before[1]:.4f} / {before[2]:.4f})."
    )


SHAPES_FILE = "plateau_shapes.json"
SHAPES_COMMAND = "python -m benchmarks.plateau_shapes"


def plateau_shapes(results: dict) -> str:
    """The plateau read on synthetic runs of known shape: a table per (shape, noise kind) and a total line."""
    lines = [
        "| shape | noise | runs | read | told to run longer | refused | median abs(A - settled) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, cell in results["cells"].items():
        shape, kind = name.split("/")
        s = cell["summary"]
        gap = "-" if s["median_abs_gap"] is None else f"{s['median_abs_gap']:.3f}"
        noise = "independent" if kind == "iid" else f"AR(1), coefficient {results['ar_coefficient']:g}"
        lines.append(
            f"| {shape.replace('_', ' ')} | {noise} | {s['runs']} | {s['read']} | "
            f"{s['told_to_run_longer']} | {s['refused']} | {gap} |"
        )
    total = results["total"]
    sds = " / ".join(f"{sd:g}" for sd in results["noise_sds"])
    lines += [
        "",
        f"Read on {total['read']} of {total['runs']} synthetic runs (noise sd {sds}, "
        f"{results['runs_per_cell']} runs per cell, seed {results['seed']}); told to run longer: "
        f"{total['told_to_run_longer']}; refused: {total['refused']}.",
    ]
    return "\n".join(lines)


RECOVERY_FILE = "sigmoid_recovery.json"
RECOVERY_COMMAND = "python -m benchmarks.sigmoid_recovery"


def sigmoid_recovery(results: dict) -> str:
    """The textbook sigmoid's ceiling over run length and noise: a row per cell and the target line."""
    truth = results["truth"]
    lines = [
        "| run to | noise sd | runs | identified | A's 95 % interval within 0.03 | 95 % holds A | "
        "80 % holds A | median abs(A_hat - A) | told to run longer |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for cell in results["cells"]:
        s = cell["summary"]
        error = "-" if s["median_abs_error"] is None else f"{s['median_abs_error']:.3f}"
        lines.append(
            f"| {cell['length']:g} C_mid | {cell['noise_sd']:g} | {s['runs']} | {s['identified']} | "
            f"{s['within']} | {s['holds_95']} | {s['holds_80']} | {error} | {s['run_longer']} |"
        )
    t = results["target"]
    lines += [
        "",
        f"A = {truth['A']:g}, B = {truth['B']:g}, C_mid = {truth['C_mid']:g}, R0 = {truth['R0']:g}, "
        f"{results['evaluations']} evenly spaced evaluations, {results['runs_per_cell']} noise draws "
        f"per cell (seed {results['seed']}). Runs past {t['length_from']} C_mid with noise <= "
        f"{t['noise_up_to']:g}: identified on {t['identified']} of {t['runs']}, A's 95 % interval "
        f"within {results['within']:g} of the truth on {t['within']}, holding it on {t['holds_95']} "
        f"(80 % interval: {t['holds_80']}).",
    ]
    return "\n".join(lines)


SEED_SPREAD_FILE = "forecast_seed_spread.json"
SEED_SPREAD_COMMAND = "python -m benchmarks.forecast_seed_spread"
SEED_METRIC_NAMES = {
    "median_error": "median abs error, all runs",
    "mean_error": "mean abs error, all runs",
    "coverage80": "80 % coverage",
    "interval_score80": "80 % interval score",
}
COVERAGE_TARGETS = {"healthy": (0.72, 0.88), "still rising": (0.65, 1.0)}


def seed_verdict(low: float, high: float, baseline: float | None) -> str:
    """Lower is better: "better" when every seed beats the baseline, "worse" when none does, else "tie"."""
    if baseline is None:
        return ""
    return "better" if high < baseline else "worse" if low > baseline else "tie"


def seed_spread(results: dict) -> str:
    """scalerl's headline cells over sampler seeds against the best baseline: a row per cell."""
    first_seed = results["per_seed"][0]["seed"]
    lines = [
        f"| measure | fit on | runs | seed {first_seed} | over seeds | best baseline | scalerl |",
        "|---|---|---|---|---|---|---|",
    ]
    first = results["per_seed"][0]["metrics"]
    for key, span in results["spread"].items():
        if key.startswith("plateau"):
            continue
        name, where = key.split("@")
        fraction, _, status = where.partition("/")
        baseline = results["baselines"].get(key)
        if name == "coverage80":
            low_ok, high_ok = COVERAGE_TARGETS[status]
            met = all(low_ok <= s["metrics"][key] <= high_ok for s in results["per_seed"])
            base_text = f"target {low_ok:g}-{high_ok:g}" if high_ok < 1 else f"target >= {low_ok:g}"
            verdict = "met on every seed" if met else "missed on some seeds"
            spec = ".2f"
        else:
            base_text = "-" if baseline is None else f"{baseline[1]:.4f} ({baseline[0].replace('_', ' ')})"
            verdict = seed_verdict(span["min"], span["max"], None if baseline is None else baseline[1])
            spec = ".4f"
        lines.append(
            f"| {SEED_METRIC_NAMES[name]} | {float(fraction):.0%} | {status or 'all'} | "
            f"{format(first[key], spec)} | {format(span['min'], spec)}-{format(span['max'], spec)} | "
            f"{base_text} | {verdict} |"
        )
    plateau = results["spread"]["plateau_read"]
    seeds = ", ".join(str(s) for s in results["seeds"])
    lines += [
        "",
        f"Seeds {seeds}; {results['runs']} runs. Plateau read: {first['plateau_read']} of "
        f"{first['plateau_runs']} with seed {first_seed}, {plateau['min']:g}-{plateau['max']:g} over the seeds. "
        "\"tie\": the baseline's value lies inside scalerl's range over the seeds.",
    ]
    return "\n".join(lines)
