"""Render forecasting results for people (rich tables) and for programs (one JSON object).

The JSON of `scalerl fit --json` is FitResult.to_dict (the CLI contract) plus optional extras;
`json_text` guarantees strict JSON: NaN and infinity become null, numpy numbers plain floats.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence

import numpy as np
from rich.console import Console
from rich.table import Table

from scalerl.escaping import for_rich, plain
from scalerl.report.headline import fit_headline

PARAMETERS = ("A", "B", "C_mid")
PIPED_OUTPUT_WIDTH = 120
SHORT_NAME_WIDTH = 32  # run names longer than this are cut in the middle in tables, sentences and figures


def stdout_console() -> Console:
    """Console for results: the terminal's width, or 120 columns when piped (rich assumes 80)."""
    console = Console()
    return console if console.is_terminal else Console(width=PIPED_OUTPUT_WIDTH)


def plain_json_value(value):
    """Recursively turn numpy numbers/arrays, tuples and non-finite floats into strict JSON values."""
    if isinstance(value, Mapping):
        return {str(key): plain_json_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [plain_json_value(item) for item in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


def json_text(payload) -> str:
    """One line of strict JSON (no NaN / Infinity tokens)."""
    return json.dumps(plain_json_value(payload), allow_nan=False)


def format_number(value, digits: int = 4) -> str:
    """4 significant digits (whole numbers from 1e3 to 1e7); `n/a` for missing, `inf` spelled out."""
    if value is None:
        return "n/a"
    value = float(value)
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if 1e3 <= abs(value) < 1e7:
        return f"{value:.0f}"  # 20000, not 2e+04
    return f"{value:.{digits}g}"


def format_interval(bounds, digits: int = 4) -> str:
    lo, hi = bounds
    return f"[{format_number(lo, digits)}, {format_number(hi, digits)}]"


def estimate_with_interval(value, bounds, digits: int = 3) -> str:
    """`0.849 [0.845, 0.852]`."""
    return f"{format_number(value, digits)} {format_interval(bounds, digits)}"


def power_law_payload(power_law_result, predict_at: Sequence[float], level: float) -> dict:
    """JSON view of the power-law comparison fit: parameters, intervals and point predictions.

    The interval of the ceiling A is clipped to the reward range (the delta method knows no bounds;
    a reward cannot leave its range); B's is clipped at 0.
    """
    predictions = []
    for x in predict_at:
        lo, hi = power_law_result.interval(float(x), level)
        predictions.append({"x": float(x), "reward": float(power_law_result.predict(float(x))), "lo": lo, "hi": hi})
    intervals = {name: list(bounds) for name, bounds in power_law_result.conf_int(level).items()}
    reward_range = getattr(power_law_result, "reward_range", None)
    if reward_range is not None:
        intervals["A"] = [min(max(v, reward_range[0]), reward_range[1]) for v in intervals["A"]]
    intervals["B"] = [max(v, 0.0) for v in intervals["B"]]
    return plain_json_value(
        {
            "params": power_law_result.params(),
            "intervals": intervals,
            "n_points": power_law_result.n_points,
            "predictions": predictions,
        }
    )


def render_fit(console: Console, result, payload: dict, *, title: str, target=None, power_law=None) -> None:
    """Readable summary of one fit: parameters, predictions, target compute, warnings."""
    level = payload["level"]
    console.print(f"[bold]{for_rich(title)}[/bold]", soft_wrap=True, highlight=False)
    budget = max((row["x"] for row in payload["predictions"] if row["x"] is not None), default=None)
    console.print(
        f"[bold]{for_rich(fit_headline(result, budget=budget, target=target, level=level))}[/bold]",
        soft_wrap=True,
        highlight=False,
    )
    console.print(parameter_table(payload, result.stderr))
    colour = "green" if payload["verdict"]["kind"] == "plateaued" else "yellow"
    console.print(
        f"verdict: [{colour}]{payload['verdict']['kind']}[/{colour}]   points fitted: {payload['n_points']}   "
        f"evaluation noise sd: {format_number(getattr(result, 'noise_sd', None))}"
    )
    run_length_text = getattr(result, "run_length_text", None)
    if run_length_text is not None:
        console.print(f"run length: {for_rich(run_length_text(level=level))}", soft_wrap=True, highlight=False)
    if payload["predictions"]:
        console.print(prediction_table(payload["predictions"], level))
    if target is not None:
        of_curve = bool(getattr(getattr(result, "verdict", None), "run_length_missing_because", None))
        console.print(f"target: {result.compute_to_reach(target, level).message(of_curve)}")
    if power_law is not None:
        console.print(power_law_table(power_law, payload))
    for warning in payload["warnings"]:
        console.print(f"[yellow]warning: {for_rich(warning)}[/yellow]", highlight=False, soft_wrap=True)


def parameter_table(payload: dict, stderr: Mapping | None = None) -> Table:
    level = payload["level"]
    table = Table(title="ScaleRL sigmoid R(C) = R0 + (A-R0) / (1 + (C_mid/C)^B)", title_justify="left", min_width=56)
    table.add_column("parameter")
    table.add_column("estimate", justify="right")
    table.add_column(f"{level:.0%} interval", justify="right")
    table.add_column("std. error", justify="right")
    for name in PARAMETERS:
        error = None if stderr is None else stderr.get(name)
        table.add_row(
            name,
            format_number(payload["params"][name]),
            format_interval(payload["intervals"][name]),
            format_number(error),
        )
    table.add_row("R0", format_number(payload["params"]["R0"]), "fixed", "")
    return table


def prediction_table(predictions: Sequence[Mapping], level: float) -> Table:
    table = Table(title="Predictions (band for a new evaluation)", title_justify="left")
    for column in ("x", "reward", f"{level:.0%} low", f"{level:.0%} high"):
        table.add_column(column, justify="right")
    for row in predictions:
        table.add_row(*(format_number(row[key]) for key in ("x", "reward", "lo", "hi")))
    return table


def power_law_table(power_law: Mapping, payload: Mapping) -> Table:
    """The power law R = A - D * C^(-B) beside the sigmoid, quantity by quantity, with intervals
    (the paper prefers the sigmoid: the power law's ceiling runs to the top of the range)."""
    level = f"{payload['level']:.0%}"
    table = Table(
        title=f"Power law R(C) = A - D * C^(-B) beside the sigmoid ({level} intervals)",
        title_justify="left",
        min_width=56,
    )
    table.add_column("quantity")
    table.add_column("power law", justify="right", no_wrap=True)
    table.add_column("sigmoid", justify="right", no_wrap=True)
    law, sig = power_law, payload
    table.add_row(
        "ceiling A",
        estimate_with_interval(law["params"]["A"], law["intervals"]["A"]),
        estimate_with_interval(sig["params"]["A"], sig["intervals"]["A"]),
    )
    table.add_row(
        "exponent B",
        estimate_with_interval(law["params"]["B"], law["intervals"]["B"]),
        estimate_with_interval(sig["params"]["B"], sig["intervals"]["B"]),
    )
    table.add_row(
        "scale",
        f"D = {format_number(law['params']['D'], 3)}",
        f"C_mid = {estimate_with_interval(sig['params']['C_mid'], sig['intervals']['C_mid'])}",
    )
    for law_row, sigmoid_row in zip(law["predictions"], sig["predictions"]):
        table.add_row(
            f"reward at x = {format_number(law_row['x'])}",
            estimate_with_interval(law_row["reward"], (law_row["lo"], law_row["hi"])),
            estimate_with_interval(sigmoid_row["reward"], (sigmoid_row["lo"], sigmoid_row["hi"])),
        )
    return table


def comparison_payload(comparison, level: float) -> dict:
    """JSON view of a recipe comparison: the rule that decided, the ranking, each run's fits."""
    runs = {}
    for name, result in comparison.fits.items():
        fixed = comparison.fixed_ceiling_fits.get(name)
        runs[name] = {
            "params": result.params(),
            "intervals": {key: list(bounds) for key, bounds in result.conf_int(level).items() if key in PARAMETERS},
            "ceiling_identified": bool(result.ceiling_identified),
            "verdict": result.verdict.to_dict(),
            "n_points": int(result.n_points),
            "warnings": list(result.warnings),
            "fixed_ceiling": None
            if fixed is None
            else {
                "A": fixed.a,
                "B": fixed.b,
                "B_interval": list(fixed.conf_int(level)["B"]),
                "C_mid": fixed.c_mid,
            },
        }
    return plain_json_value(
        {
            "winner": comparison.ranking[0],
            "decided_by": comparison.decided_by,
            "ceiling_undecided": bool(comparison.ceiling_undecided),
            "efficiency_supported": bool(comparison.efficiency_supported),
            "more_compute": comparison.more_compute,
            "headline": comparison.headline(),
            "ranking": list(comparison.ranking),
            "clusters": [list(cluster) for cluster in comparison.clusters],
            "margin": comparison.margin,
            "level": level,
            "runs": runs,
            "not_ranked": {name: verdict.to_dict() for name, verdict in comparison.not_ranked.items()},
            "warnings": list(comparison.warnings),
        }
    )


def render_comparison(console: Console, payload: dict) -> None:
    """Table of A, B, C_mid per run with intervals, then the ranking and the rule that decided it."""
    level = payload["level"]
    labels = run_labels(payload["ranking"])
    prefix, suffix = shared_affixes(payload["ranking"])
    shared = " + ".join(f"'{text}'" for text in (prefix, suffix) if text)
    names = f"; names without the shared {for_rich(shared)}" if shared else ""
    table = Table(title=f"Runs compared, best first ({level:.0%} intervals{names})", title_justify="left")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("run", overflow="fold")  # a long name folds onto a second line, never cut
    for column in ("A", "B", "C_mid", "B with A shared"):
        table.add_column(column, justify="right", no_wrap=True)
    any_unidentified = False
    for rank, name in enumerate(payload["ranking"], start=1):
        run = payload["runs"][name]
        cells = [estimate_with_interval(run["params"][key], run["intervals"][key]) for key in PARAMETERS]
        if not run["ceiling_identified"]:
            cells[0] += " *"
            any_unidentified = True
        fixed = run["fixed_ceiling"]
        fixed_cell = "" if fixed is None else estimate_with_interval(fixed["B"], fixed["B_interval"])
        table.add_row(f"{rank}", for_rich(labels[name]), *cells, fixed_cell)
    console.print(table)
    if any_unidentified:
        console.print("* ceiling not known to the margin (verdict not plateaued):", highlight=False)
        for name in payload["ranking"]:
            verdict = payload["runs"][name]["verdict"]
            if verdict["kind"] != "plateaued":
                console.print(
                    f"  {plain(labels[name])}: {plain(verdict['text'])}",
                    highlight=False,
                    soft_wrap=True,
                    markup=False,
                )
    console.print(
        f"ranking: {' > '.join(labels[name] for name in payload['ranking'])}",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )
    console.print(plain(decision_sentence(payload)), highlight=False, soft_wrap=True, markup=False)
    for warning in payload["warnings"]:
        console.print(f"[yellow]warning: {for_rich(warning)}[/yellow]", highlight=False, soft_wrap=True)
    for name in payload["ranking"]:
        for warning in payload["runs"][name]["warnings"]:
            console.print(
                f"[yellow]warning ({for_rich(labels[name])}): {for_rich(warning)}[/yellow]",
                highlight=False,
                soft_wrap=True,
            )


def ceiling_groups_text(payload: Mapping) -> str:
    """The payload's ceiling groups, best first, each with the span of its fitted A:
    `ceiling groups: {a, b} (A 0.84-0.83) > {c, d} (A 0.80-0.79)` (names as run_labels shows them)."""
    labels = run_labels(payload["ranking"])

    def group(names) -> str:
        ceilings = [payload["runs"][name]["params"]["A"] for name in names]
        span = (
            format_number(ceilings[0], 3)
            if len(set(ceilings)) == 1
            else f"{format_number(max(ceilings), 3)}-{format_number(min(ceilings), 3)}"
        )
        return "{" + ", ".join(labels[name] for name in names) + f"}} (A {span})"

    return "ceiling groups: " + " > ".join(group(names) for names in payload["clusters"])


def decision_sentence(payload: Mapping) -> str:
    """Why the winner won, in the paper's terms, and whether the intervals support it; with three
    or more runs, the ceiling groups (the payload's clusters) first."""
    winner = run_labels(payload["ranking"])[payload["winner"]]
    margin = format_number(payload["margin"])
    level = f"{payload['level']:.0%}"
    several_groups = len(payload["clusters"]) > 1
    groups = f"{ceiling_groups_text(payload)}; " if len(payload["ranking"]) >= 3 else ""
    if payload["decided_by"] == "ceiling":
        return (
            f"{groups}decided by: ceiling (A differs by more than {margin} and is ahead at the {level} level): "
            f"{winner} has the highest ceiling"
        )
    shared = payload["runs"][payload["winner"]]["fixed_ceiling"]
    shared_text = "" if shared is None else f" = {format_number(shared['A'])}"
    top_group = "the top group's " if several_groups else ""
    why = (
        f"ceiling undecided: no A ahead at the {level} level"
        if payload.get("ceiling_undecided")
        else f"{top_group}ceilings within {margin}"
    )
    if payload["decided_by"] == "efficiency":
        return f"{groups}decided by: efficiency ({why}, refit with A fixed{shared_text}): {winner} has the highest B"
    more = payload.get("more_compute")
    longer = "" if more is None else f"; run ~{format_number(more, 2)}x longer to separate them"
    return (
        f"{groups}undecided ({why}; nor B at the shared A{shared_text}): {winner} leads on point estimates only{longer}"
    )


def short_name(name: str, width: int = SHORT_NAME_WIDTH) -> str:
    """`name` cut to `width` characters for tables, sentences and figures, its start and end kept
    (`grpo_qwen3_1.7b…seed_3`); the JSON keeps the full name."""
    name = plain(name)
    if len(name) <= width:
        return name
    head = (width - 1) * 2 // 3
    return f"{name[:head]}…{name[len(name) - (width - 1 - head) :]}"


NAME_SEPARATORS = "_/: "  # word boundaries in run names ("-" and "." also sit inside numbers: 1e-6, 1.7b)


def shared_affixes(names: Sequence[str]) -> tuple[str, str]:
    """The prefix and the suffix every name shares, each cut back to end (start) at a separator of
    NAME_SEPARATORS so that no word is split; ("", "") for fewer than two names. Names that are
    all equal share nothing (a label must not be empty)."""
    names = [plain(name) for name in names]
    if len(names) < 2 or len(set(names)) < 2:
        return "", ""
    prefix = os.path.commonprefix(names)
    prefix = prefix[: max((i + 1 for i, ch in enumerate(prefix) if ch in NAME_SEPARATORS), default=0)]
    rest = [name[len(prefix) :] for name in names]
    suffix = os.path.commonprefix([name[::-1] for name in rest])[::-1]
    starts = [i for i, ch in enumerate(suffix) if ch in NAME_SEPARATORS]
    suffix = suffix[starts[0] :] if starts else ""
    if any(len(name) <= len(suffix) for name in rest):
        suffix = ""
    return prefix, suffix


def run_labels(names: Sequence[str], width: int = SHORT_NAME_WIDTH) -> dict[str, str]:
    """Each run's label where several runs are shown together (a comparison's table, sentences and
    figure): its name without the prefix and suffix all the runs share (shared_affixes), cut by
    short_name; `verl__q7b_fsdp_base`, `verl__q3b_fsdp_base` -> `q7b_fsdp_base`, `q3b_fsdp_base`.
    Labels that would collide fall back to short_name of the whole names; the JSON keeps the names."""
    prefix, suffix = shared_affixes(names)
    labels = {name: short_name(plain(name)[len(prefix) : len(plain(name)) - len(suffix)], width) for name in names}
    if len(set(labels.values())) < len(set(names)):
        labels = {name: short_name(name, width) for name in names}
    return labels


def with_short_names(text: str, names: Sequence[str]) -> str:
    """`text` with each run name in it replaced by its label (run_labels; longest names first)."""
    labels = run_labels(names)
    for name in sorted(names, key=len, reverse=True):
        text = text.replace(name, labels[name])
    return text
