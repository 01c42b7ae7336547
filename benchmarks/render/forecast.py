"""Forecast accuracy on real runs, rendered from benchmarks/results/forecast_accuracy.json (written
by `python -m benchmarks.forecast_accuracy`, every run scored with what was learned on the other
sources): the error table, the bands on every held-out evaluation, the plateau read, the cost of a
forecast, and the one headline number. Used by benchmarks/render.py."""

from __future__ import annotations

from benchmarks.render.forecast_checks import seed_verdict

RESULTS_FILE = "forecast_accuracy.json"
COMMAND = "python -m benchmarks.forecast_accuracy"
FIGURE = "forecast_calibration.png"
UNSEEN_FILE = "forecast_accuracy_unseen.json"
UNSEEN_COMMAND = "python -m benchmarks.forecast_accuracy --shipped --data benchmarks/data/curves_unseen"
UNSEEN_FIGURE = "forecast_calibration_unseen.png"
METHOD_LABELS = {
    "scalerl": "**scalerl**",
    "paper_grid_bootstrap": "paper grid + residual bootstrap",
    "paper_grid_r0_zero": "paper grid, R0 = 0",
    "power_law": "power law",
    "least_squares": "plain least squares",
    "persistence": "persistence (last value)",
}
LEVELS = ("0.5", "0.8", "0.95")


def _fraction(key: str) -> str:
    return f"{100 * float(key):.0f}%"


def _best(rows: dict, key) -> set:
    """The methods with the lowest value of `key` (none when no method has a value)."""
    values = {method: key(row) for method, row in rows.items() if key(row) is not None}
    if not values:
        return set()
    low = min(values.values())
    return {method for method, value in values.items() if value <= low + 1e-12}


def _marked(text: str, best: bool) -> str:
    """`text` in bold when it is the lowest of its column."""
    return f"**{text}**" if best else text


def error_table(results: dict) -> str:
    """Abs error of the final level (mean of the last three evaluations) by fraction and run status;
    a refused forecast scored as the last value; the lowest of each column in bold."""
    lines = [
        "| fit on | runs | method | cells | refused | median abs err | mean abs err |",
        "|---|---|---|---|---|---|---|",
    ]
    for fraction, by_status in results["errors"].items():
        for status, rows in by_status.items():
            if not any(r["cells"] for r in rows.values()):  # no run of this status reaches the fraction
                continue
            best_median = _best(rows, lambda r: r["median_abs_error"])
            best_mean = _best(rows, lambda r: r["mean_abs_error"])
            for method, r in rows.items():
                median = _marked(f"{r['median_abs_error']:.4f}", method in best_median)
                mean = _marked(f"{r['mean_abs_error']:.4f}", method in best_mean)
                lines.append(
                    f"| {_fraction(fraction)} | {status} | {METHOD_LABELS.get(method, method)} | {r['cells']} | "
                    f"{r['failed']} | {median} | {mean} |"
                )
    return "\n".join(lines)


def band_table(results: dict) -> str:
    """Coverage of the 50 / 80 / 95 % bands on every held-out evaluation, 80 % width and interval score;
    a refused forecast scored on persistence's band ("own bands" counts the method's own)."""
    lines = [
        "| fit on | runs | method | own bands | evaluations | 50 % | 80 % | 95 % | 80 % width | 80 % interval score |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for fraction, by_status in results["bands"].items():
        for status, rows in by_status.items():
            if not rows:  # no run of this status reaches the fraction
                continue
            best = _best(rows, lambda r: r["0.8"]["interval_score"])
            for method, r in rows.items():
                cover = " | ".join(f"{r[level]['coverage']:.2f}" for level in LEVELS)
                score = _marked(f"{r['0.8']['interval_score']:.4f}", method in best)
                lines.append(
                    f"| {_fraction(fraction)} | {status} | {METHOD_LABELS.get(method, method)} | "
                    f"{r['forecasts']}/{r['of']} | {r['evaluations']} | {cover} | {r['0.8']['width']:.3f} | {score} |"
                )
    return "\n".join(lines)


def _still_rising_note(plateau: dict) -> str:
    """How many runs told to run longer still rise at their end (older results lack the count)."""
    rising = plateau.get("told_to_run_longer_end_still_rising")
    if rising is None or not plateau["told_to_run_longer"]:
        return ""
    if plateau["told_to_run_longer"] == 1:
        return " (its own last stretch still rises, beyond its noise at 95 %)" if rising else ""
    return f" ({rising} of them still rising over their own last stretch, beyond its noise at 95 %)"


def _levelled_off_note(results: dict) -> str:
    """The read among healthy runs whose own last stretch is flat within its noise at 95 % (rows
    with `end_still_rising`; older results lack it)."""
    rows = [row for row in results.get("plateau_rows", []) if row["status"] == "healthy" and "end_still_rising" in row]
    if not rows:
        return ""
    flat = [row for row in rows if not row["end_still_rising"]]
    return (
        f" Of the {len(flat)} healthy runs whose own last stretch is flat within its noise (95 %), "
        f"{sum(row['read'] for row in flat)} are read; the other {len(rows) - len(flat)} still rise at their end."
    )


def _plateaued_note(results: dict) -> str:
    """Where the misses of the plateaued runs lie: A within the paper's margin (0.02 of a pass rate)
    of the settled level, and A's 80 % interval wholly above that level (the sigmoid's asymptote
    beyond a run that still creeps or has declined from its peak)."""
    rows = [
        row
        for row in results.get("plateau_rows", [])
        if row["status"] == "healthy" and row.get("identified") and "A_interval" in row
    ]
    if not rows:
        return ""
    near = sum(abs(row["A"] - row["settled"]) <= 0.02 for row in rows)
    above = [row["A_interval"][0] - row["settled"] for row in rows if row["A_interval"][0] > row["settled"]]
    slightly = sum(gap < 0.005 for gap in above)
    return (
        f" Of the {len(rows)} plateaued, A lies within 0.02 of the settled level on {near}; on {len(above)} "
        f"A's 80 % interval lies wholly above it ({slightly} by less than 0.005: the asymptote of a curve "
        "that still creeps, or that fell from its peak, above the mean of the run's last quarter)."
    )


def plateau_line(results: dict) -> str:
    p = results["plateau_read"]
    return (
        f"Plateau read (each complete run fitted on all its points): on {p['read']} of {p['healthy_runs']} "
        f"healthy runs the verdict is plateaued, A within 0.03 of the level the run settled at, with an 80 % "
        f"interval holding it; {p['told_to_run_longer']} of them {'is' if p['told_to_run_longer'] == 1 else 'are'} "
        "told to run longer"
        f"{_still_rising_note(p)}.{_plateaued_note(results)}{_levelled_off_note(results)} Still-rising runs "
        f"called plateaued: {p['still_rising_identified']} of {p['still_rising_runs']}."
    )


def plateaued_calls_line(results: dict) -> str:
    """The mid-run "plateaued" verdicts (plateaued_calls) against the run's final level."""
    calls = results.get("plateaued_calls")
    if not calls:
        return ""

    def counts(key):
        return " / ".join(str(calls[f][key]) for f in calls)

    return (
        f'Mid-run "plateaued" verdicts, fitted on 25 / 50 / 75 % of a run: {counts("calls")}; the run\'s final level '
        f"(the mean of its last three evaluations, never fitted) lies within the paper's margin (0.02 of the reward's "
        f"unit) of A on {counts('final_within_margin')}, inside A's 80 % interval on {counts('final_in_interval')}."
    )


def contradictions_line(results: dict) -> str:
    """The invariant check (forecast.invariants) over fits at 25 / 50 / 75 / 100 % of every run."""
    found = results.get("contradictions")
    if found is None:
        return ""
    rules = ", ".join(f"{rule} {count}" for rule, count in sorted(found["by_rule"].items()))
    return (
        f"Contradictions (fits at 25 / 50 / 75 / 100 % of every run whose output breaks a promise of "
        f"`forecast.invariants`): {found['contradictions']} in {found['fits']} fits"
        + (f" ({rules})." if rules else ".")
    )


def cost_line(results: dict) -> str:
    seconds = results["seconds"]
    collapse = "; ".join(f"{key} {value}" for key, value in results["collapse_rule"].items())
    return (
        f"A fit with its band takes {seconds['median']:.2f} s wall clock at the median, {seconds['max']:.2f} s "
        f"at the slowest (2 shared cores). Collapse rule fired on: {collapse}."
    )


def losses_line(results: dict) -> str:
    """Where scalerl is not the best: the cells of either table where another method is lower."""
    lost = []
    for fraction, by_status in results["errors"].items():
        for status, rows in by_status.items():
            runs = "" if status == "all" else f" on {status} runs"
            for key, name in (("median_abs_error", "median error"), ("mean_abs_error", "mean error")):
                best = _best(rows, lambda r, key=key: r[key])
                if best and "scalerl" not in best:
                    winner = ", ".join(METHOD_LABELS.get(m, m) for m in sorted(best))
                    lost.append(
                        f"{name}{runs} at {_fraction(fraction)} ({winner} {rows[sorted(best)[0]][key]:.4f} "
                        f"against {rows['scalerl'][key]:.4f})"
                    )
    for fraction, by_status in results["bands"].items():
        for status, rows in by_status.items():
            if not rows:  # no run of this status reaches the fraction
                continue
            best = _best(rows, lambda r: r["0.8"]["interval_score"])
            if "scalerl" not in best:
                winner = ", ".join(METHOD_LABELS.get(m, m) for m in sorted(best))
                lost.append(
                    f"interval score on {status} runs at {_fraction(fraction)} ({winner} "
                    f"{rows[sorted(best)[0]]['0.8']['interval_score']:.4f} against "
                    f"{rows['scalerl']['0.8']['interval_score']:.4f})"
                )
    if not lost:
        return "scalerl is the best method in every cell of both tables."
    return "Where scalerl still loses: " + "; ".join(lost) + "."


def table(results: dict, figure: str = FIGURE) -> str:
    """The whole forecast-accuracy section: errors, bands, plateau read, cost, where it loses."""
    return "\n\n".join(
        [
            f"{results['runs']} runs from {len(results['sources'])} sources; {results['held_out']}.",
            "Final level:",
            error_table(results),
            "Bands, scored on every evaluation after the cut (Gneiting & Raftery's interval score: lower is better); "
            "a refused forecast is scored on persistence's band, what a user falls back to, as in the error table:",
            band_table(results),
            plateau_line(results),
            plateaued_calls_line(results),
            contradictions_line(results),
            losses_line(results),
            cost_line(results),
            f"![coverage of the bands by nominal level]({figure})",
        ]
    )


def _healthy_coverage(results: dict) -> str:
    return " / ".join(f"{results['bands'][f]['healthy']['scalerl']['0.8']['coverage']:.2f}" for f in results["bands"])


def unseen_headline(results: dict, development: dict) -> str:
    """One sentence on the held-out repositories (forecast_accuracy_unseen.json): error at half the
    compute against the paper's grid fit, and the 80 % band's coverage of healthy runs by fraction
    beside the development runs' (forecast_accuracy.json)."""
    half = results["errors"]["0.5"]["all"]
    ours, paper = half["scalerl"], half["paper_grid_bootstrap"]
    return (
        f"On {results['runs']} runs from {len(results['sources'])} repositories the project never tuned on, with "
        f"the package as shipped: median / mean error at half of each run **{ours['median_abs_error']:.4f} / "
        f"{ours['mean_abs_error']:.4f}** (paper's grid fit {paper['median_abs_error']:.4f} / "
        f"{paper['mean_abs_error']:.4f}); the 80 % band holds {_healthy_coverage(results)} of healthy runs' later "
        f"evaluations at 25 / 50 / 75 % ({_healthy_coverage(development)} on the development runs): too narrow "
        f"early, mostly on runs that jump and then creep, read as levelled off too soon."
    )


UNSEEN_NOTE = (
    "The runs and how each was read: `benchmarks/data/curves_unseen/README.md` (status set by inspection "
    "before any fit). Every number below is the package as shipped; one change followed from a run of this "
    "set (the end check's yardstick, `verdict.end_check_noise_sd`: verdicts only, not forecasts or bands), "
    "and these tables were measured after it."
)


def unseen_table(results: dict) -> str:
    """The same section on the held-out repositories (forecast_accuracy_unseen.json), scored with the
    package as shipped."""
    return UNSEEN_NOTE + "\n\n" + table(results, UNSEEN_FIGURE)


def headline(results: dict, seeds: dict | None = None) -> str:
    """One sentence: scalerl's median and mean error at half the compute against the paper's grid fit, by source;
    with `seeds` (forecast_seed_spread.json) the median's range over the sampler's seeds as well."""
    half = results["errors"]["0.5"]["all"]
    ours, paper = half["scalerl"], half["paper_grid_bootstrap"]
    healthy = results["bands"]["0.5"]["healthy"]["scalerl"]["0.8"]["coverage"]
    spread = ""
    if seeds is not None and seeds.get("runs") == results["runs"]:  # a spread measured on other runs is stale
        span = seeds["spread"]["median_error@0.5"]
        verdict = seed_verdict(span["min"], span["max"], paper["median_abs_error"])
        spread = f"; the median is {span['min']:.4f}-{span['max']:.4f} over {len(seeds['seeds'])} sampler seeds" + (
            ", a tie" if verdict == "tie" else ""
        )
    return (
        f"Fitted on the first half of {ours['cells']} real RL runs, each scored with what was learned on the "
        f"other sources only, scalerl forecasts the final reward with a median / mean absolute error of "
        f"**{ours['median_abs_error']:.4f} / {ours['mean_abs_error']:.4f}** (the paper's grid fit: "
        f"{paper['median_abs_error']:.4f} / {paper['mean_abs_error']:.4f}{spread}); its 80 % band "
        f"holds {healthy:.2f} of the later evaluations of healthy runs."
    )


def gain_ahead_line(results: dict) -> str:
    """The adopted gain factor by source: its chosen kappa_1 and what scalerl's bands, plateau read
    and invariants measure with it (forecast_accuracy.json)."""
    chosen = results["gain_ahead_log_sd"]
    by_source = sorted(set(chosen["by_source"].values()))
    bands = results["bands"]

    def per_fraction(status, key):
        return " / ".join(f"{bands[f][status]['scalerl']['0.8'][key]:.{2 if key == 'coverage' else 4}f}" for f in bands)

    p, found = results["plateau_read"], results["contradictions"]
    return (
        f"Measured by source on {results['runs']} runs (kappa_1 chosen leaving each source out: "
        f"{' / '.join(f'{v:g}' for v in by_source)}; on all sources {chosen['all_sources']:g}): 80 % coverage at "
        f"25 / 50 / 75 % healthy {per_fraction('healthy', 'coverage')}, still rising "
        f"{per_fraction('still rising', 'coverage')}; 80 % interval score healthy "
        f"{per_fraction('healthy', 'interval_score')}, still rising {per_fraction('still rising', 'interval_score')}; "
        f"plateau read {p['read']} of {p['healthy_runs']} (identified {p['identified']}); "
        f"{found['contradictions']} contradictions in {found['fits']} fits."
    )
