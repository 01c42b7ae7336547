"""Views of an ablation report: the rich table, JSON, markdown and the figure of all curves with
their fitted A and B, with the paper's expectation for each knob or scaling axis next to them.

Paper expectations (Khatri, Madaan et al., arXiv 2510.13786, sections 3 and 5; ../shared/docs/SCALERL.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from scalerl.report.console import json_text
from scalerl.study.ablate_analysis import AblationReport, VariantResult, warm_start_summary
from scalerl.study.paired import PairedInterval
from scalerl.study.run_curves import LogSource, paper_axis, points_not_fitted

OUTPUT_STEMS = {"leave-one-out": "ablation", "recipes": "ablation", "sweep": "sweep", "from-logs": "ablation"}
KIND_TITLES = {"sweep": "Sweep", "recipes": "Recipe study", "from-logs": "Ablation from logs"}

SWEEP_EXPECTATIONS = {
    "batch_prompts": "larger batch: slower start (larger C_mid) and a higher ceiling A "
    "(batch 512 -> 2048 prompts: A 0.605 -> 0.645)",
    "generations_fixed_batch": "more generations per prompt at a fixed total batch: about the same A "
    "(8 / 24 / 32 generations: A 0.585 / 0.590 / 0.595); efficiency may differ",
    "generations": "the paper varies generations per prompt at a fixed total batch (A unchanged); here "
    "the batch grows with them, so expect the larger-batch pattern (slower start, higher A)",
    "gen_length": "longer generation budget: slower start (C_mid 2542 -> 11272 GPU-h) and a higher "
    "ceiling (14k -> 32k tokens: A 0.610 -> 0.645)",
    "model_size": "larger model: higher ceiling (8B dense A 0.610 vs 17Bx16 MoE A 0.710)",
}
SWEEP_EXPECTATIONS_SHORT = {
    "batch_prompts": "higher A, slower start",
    "generations_fixed_batch": "same A",
    "generations": "higher A (batch grows)",
    "gen_length": "higher A, slower start",
    "model_size": "higher A",
}
KNOB_EXPECTATIONS = {"A": "moves the ceiling A", "B": "mainly moves the efficiency B"}
KNOB_EXPECTATIONS_SHORT = {"A": "moves A", "B": "moves B"}


def expectation(report: AblationReport, item: VariantResult, short: bool = False) -> str:
    """What the paper found for this variant's knob (leave-one-out) or the swept axis (sweep)."""
    if item.run.is_base:
        return "-"
    if report.kind == "sweep":
        table = SWEEP_EXPECTATIONS_SHORT if short else SWEEP_EXPECTATIONS
        return table.get(report.sweep_knob or "", "not studied")
    axis = paper_axis(item.run.knob)
    table = KNOB_EXPECTATIONS_SHORT if short else KNOB_EXPECTATIONS
    return table.get(axis, "not studied") if axis else "not studied"


def sweep_expectation_line(report: AblationReport) -> str | None:
    """`paper: <the finding for the swept axis>` for a sweep; None for a leave-one-out ablation."""
    if report.kind != "sweep":
        return None
    return f"paper (arXiv 2510.13786): {SWEEP_EXPECTATIONS.get(report.sweep_knob or '', 'this axis is not studied')}"


def _interval_text(item: VariantResult, name: str, fmt: str) -> str:
    summary = item.params.get(name)
    if summary is None:
        return "-"
    return f"{summary.mean:{fmt}} [{summary.lo:{fmt}}, {summary.hi:{fmt}}]"


def effect_text(item: VariantResult) -> str:
    if item.run.is_base:
        return "base" if item.params else "base (no fit)"
    return item.verdict.label


def seeds_text(item: VariantResult) -> str:
    return f"{len(item.fitted)}/{len(item.seeds)}"


def difference_text(interval: PairedInterval | None, fmt: str) -> str:
    """`-0.102 [-0.110, -0.094]` (the paired interval), the mean alone without one, `-` for none."""
    if interval is None or interval.n == 0:
        return "-"
    if interval.source == "none":
        return f"{interval.mean:+{fmt}}"
    unpaired = " (Welch, unpaired)" if interval.source == "Welch" else ""
    return f"{interval.mean:+{fmt}} [{interval.lo:+{fmt}}, {interval.hi:+{fmt}}]{unpaired}"


def agreement_text(item: VariantResult) -> str:
    """`2/3`: seed pairs whose own verdict is the knob's."""
    if item.verdict is None or item.verdict.agreement.pairs == 0:
        return "-"
    return f"{item.verdict.agreement.agreeing}/{item.verdict.agreement.pairs}"


def row_cells(report: AblationReport, item: VariantResult) -> list[str]:
    """variant, knob, seeds (fitted/trained), A, B, C_mid (each mean [interval]), paired dA and dB at
    the shared A (mean [interval]), verdict, seed pairs agreeing, paper."""
    verdict = item.verdict
    delta_a = "-" if verdict is None else difference_text(verdict.delta_a, ".3f")
    delta_b = "-" if verdict is None else difference_text(verdict.delta_b, ".2f")
    knob = item.run.knob or "-"
    return [
        item.run.slug,
        knob,
        seeds_text(item),
        _interval_text(item, "A", ".3f"),
        _interval_text(item, "B", ".2f"),
        _interval_text(item, "C_mid", ".3g"),
        delta_a,
        delta_b,
        effect_text(item),
        agreement_text(item),
        expectation(report, item, short=True),
    ]


TABLE_COLUMNS = (
    "variant",
    "knob",
    "seeds",
    "A [interval]",
    "B [interval]",
    "C_mid [interval]",
    "paired dA",
    "paired dB at shared A",
    "verdict vs base",
    "pairs agree",
    "paper",
)


def margin_text(report: AblationReport) -> str:
    source = "given" if report.margin_source == "given" else "the paper's"
    return f"margin on A {report.margin:.3g} ({source})"


def title(report: AblationReport) -> str:
    what = {"sweep": f"sweep of {report.sweep_knob}", "recipes": "recipe study", "from-logs": "ablation from logs"}.get(
        report.kind, "leave-one-out ablation"
    )
    pairing = "paired by seed label" if report.kind == "from-logs" else "paired by index"
    return (
        f"{what}: {report.y_name} vs {report.x_name}, {report.seeds} seed(s) {pairing}, base {report.base}, "
        f"{margin_text(report)}, {report.verdict_level:.0%} paired intervals"
    )


TERMINAL_DROPPED = ("knob",)  # the variant's name says it; the markdown and JSON keep it


def ablation_table(report: AblationReport):
    """The rich table: one row per variant, base first; C_mid without its interval to fit a terminal."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(title(report)), title_justify="left")
    keep = [index for index, column in enumerate(TABLE_COLUMNS) if column not in TERMINAL_DROPPED]
    for index in keep:
        column = TABLE_COLUMNS[index].replace("C_mid [interval]", "C_mid")
        table.add_column(
            escape(column), no_wrap=column != "paper", overflow="fold", min_width=10 if column == "paper" else None
        )
    for item in report.variants:
        cells = row_cells(report, item)
        cells[TABLE_COLUMNS.index("C_mid [interval]")] = cells[TABLE_COLUMNS.index("C_mid [interval]")].split(" [")[0]
        table.add_row(*(escape(cells[index]) for index in keep))
    return table


def report_notes(report: AblationReport) -> list[str]:
    """Seeds that could not be fitted, verdicts that could not be reached, runs that did not start
    from the base's warm start, and unidentified ceilings, one line each."""
    notes = []
    base_digests = {
        (seed.warm_start or {}).get("weights_sha256")
        for item in report.variants
        if item.run.is_base
        for seed in item.seeds
    } - {None}
    for item in report.variants:
        for index, seed in enumerate(item.seeds):
            if seed.error is not None:
                notes.append(f"{item.run.slug} seed {index}: {seed.error}")
        digests = {(seed.warm_start or {}).get("weights_sha256") for seed in item.seeds} - {None}
        if base_digests and digests and digests != base_digests:
            notes.append(
                f"{item.run.slug}: starts from other warm-started weights than the base (its knob changes "
                "the model or the warm start): its pairs share the RL seeds only"
            )
        if item.verdict is not None and item.verdict.reason:
            notes.append(f"{item.run.slug}: {item.verdict.verdict}: {item.verdict.reason}")
        unidentified = [fit for fit in item.fitted if not fit.ceiling_identified]
        if unidentified:
            kinds = ", ".join(sorted({fit.verdict.kind.replace("_", " ") for fit in unidentified}))
            notes.append(
                f"{item.run.slug}: ceiling not identified on {len(unidentified)} of {len(item.fitted)} fitted "
                f"seeds (verdict: {kinds}; A not known to the margin); "
                f"{run_length_advice(unidentified, report.margin)}"
            )
    return notes


def run_length_advice(fits, margin: float) -> str:
    """How much longer the unidentified seeds must run: the median over them of the compute at which
    each fitted curve comes within the margin of its own ceiling (FitResult.compute_near_ceiling),
    as a multiple of the compute they reached."""
    times = float(np.median([fit.compute_near_ceiling(margin).times_current for fit in fits]))
    if times <= 1.0:
        return f"their fitted curves are already within {margin:.3g} of their ceilings"
    return (
        f"their fitted curves come within {margin:.3g} of their ceilings at about {times:.1f} times "
        "the compute they reached (median): run that much longer to pin A at the margin"
    )


def knob_sentence(report: AblationReport, item: VariantResult) -> str:
    """One line per non-base variant: its verdict with the paired numbers, next to the paper's finding."""
    verdict, knob = item.verdict, item.run.knob or item.run.slug
    a_text = (
        f"paired dA {difference_text(verdict.delta_a, '.3f')} against the margin +-{verdict.margin:.3g}"
        if verdict.delta_a.n
        else "paired dA not measured"
    )
    said = (
        f"{verdict.label}: {a_text}, dB at the shared A {difference_text(verdict.delta_b, '.2f')}; "
        f"{agreement_text(item)} seed pairs agree"
    )
    if verdict.reason:
        said += f" ({verdict.reason})"
    return f"`{knob}` {said}. Paper: {expectation(report, item)}."


def _interval_payload(interval: PairedInterval | None) -> dict | None:
    if interval is None:
        return None
    return {
        "mean": interval.mean,
        "lo": interval.lo,
        "hi": interval.hi,
        "sd": interval.sd,
        "n": interval.n,
        "source": interval.source,
    }


def verdict_payload(item: VariantResult) -> dict | None:
    """The paired verdict as JSON (the `effect` key keeps the fields `scalerl report` reads)."""
    verdict = item.verdict
    if verdict is None:
        return None
    return {
        "effect": verdict.verdict,
        "direction": verdict.direction,
        "label": verdict.label,
        "delta_A": verdict.delta_a.mean,
        "margin": verdict.margin,
        "reason": verdict.reason,
        "paired_delta_A": _interval_payload(verdict.delta_a),
        "paired_delta_B": _interval_payload(verdict.delta_b),
        "paired_compute_saved_to_half_gain": _interval_payload(verdict.delta_speed),
        "A_call": verdict.a_call,
        "B_call": verdict.b_call,
        "speed_call": verdict.speed_call,
        "pairs": [
            {
                "seed": pair.seed_index,
                "delta_A": pair.delta_a,
                "shared_A": pair.shared_a,
                "delta_B": pair.delta_b,
                "B_noise": pair.b_halfwidth,
                "compute_saved_to_half_gain": pair.delta_speed,
                "compute_saved_noise": pair.speed_halfwidth,
                "verdict": pair.verdict[0],
                "direction": pair.verdict[1],
                "measures_A": pair.measures_a,
            }
            for pair in verdict.pairs
        ],
        "agreement": {
            "agreeing": verdict.agreement.agreeing,
            "pairs": verdict.agreement.pairs,
            "modal": None if verdict.agreement.modal is None else list(verdict.agreement.modal),
            "modal_count": verdict.agreement.modal_count,
        },
    }


def source_text(source) -> str:
    """A seed's log as text: its path, with the run / segment / group selectors of a LogSource."""
    if not isinstance(source, LogSource):
        return str(source)
    selectors = [
        f"{name}={value}"
        for name, value in (("run", source.run), ("segment", source.segment), ("group", source.group))
        if value is not None
    ]
    return str(source.path) + (f" [{', '.join(selectors)}]" if selectors else "")


def report_payload(report: AblationReport, design: dict | None = None) -> dict:
    """JSON view: settings, margin, the paired design (seeds and the warm start every run started
    from, by digest), then per variant its per-seed fits, summary and paired verdict."""
    variants = []
    for item in report.variants:
        variants.append(
            {
                "slug": item.run.slug,
                "name": item.run.name,
                "knob": item.run.knob,
                "is_base": item.run.is_base,
                "seeds": [
                    {
                        "metrics": source_text(seed.metrics_path),
                        "label": seed.label,
                        "params": None if seed.fit is None else seed.fit.params(),
                        "ceiling_identified": None if seed.fit is None else bool(seed.fit.ceiling_identified),
                        "error": seed.error,
                        "warm_start": seed.warm_start,
                    }
                    for seed in item.seeds
                ],
                "params": {name: {"mean": s.mean, "lo": s.lo, "hi": s.hi, "n": s.n} for name, s in item.params.items()},
                "effect": verdict_payload(item),
                "paper": expectation(report, item),
            }
        )
    return {
        "kind": report.kind,
        "sweep_knob": report.sweep_knob,
        "base": report.base,
        "x": report.x_name,
        "y": report.y_name,
        "level": report.level,
        "verdict_level": report.verdict_level,
        "seeds": report.seeds,
        "margin": {"value": report.margin, "source": report.margin_source},
        "design": {**(design or {}), "warm_start": warm_start_summary(report)},
        "variants": variants,
    }


def design_sentence(report: AblationReport, design: dict | None) -> str:
    """RL seeds of the pairs and whether every run started from one warm start (by digest)."""
    seeds = (design or {}).get("rl_seeds")
    seeds_text = (
        f"RL seeds {', '.join(str(seed) for seed in seeds)} (seed i of every variant)"
        if seeds
        else "RL seeds not recorded"
    )
    starts = warm_start_summary(report)
    if starts["shared_by_all"]:
        start_text = f"every run started from one warm start (weights sha256 {next(iter(starts['digests']))[:12]})"
    elif starts["digests"]:
        start_text = f"the runs started from {len(starts['digests'])} different warm starts (see the notes)"
    else:
        start_text = "no warm start recorded"
    return f"Design: {seeds_text}; {start_text}."


PAIRING_TEXT = {
    None: "seed i of a variant is paired with seed i of the base (same warm start, same RL seed).",
    "from-logs": (
        "seed s of a variant is paired with the base's seed of the same label; a variant whose "
        "labels are not the base's is judged unpaired, with Welch's interval over the seeds."
    ),
}


def markdown_text(report: AblationReport, command: str | None = None, design: dict | None = None) -> str:
    """The table, one sentence per knob, and the notes; `command` (how it was made) on top if given."""
    heading = KIND_TITLES.get(report.kind, "Leave-one-out ablation")
    lines = [f"# {heading}: {report.y_name} vs {report.x_name}", ""]
    if command:
        lines += ["Produced by:", "", f"    {command}", ""]
    lines += [
        f"{title(report)}.",
        "",
        design_sentence(report, design),
        "",
        "Rule (paired, after arXiv 2510.13786): "
        + PAIRING_TEXT.get(report.kind, PAIRING_TEXT[None])
        + " If the interval of the paired differences dA_i lies beyond "
        "the margin, the knob moves the ceiling; if it lies within the margin, both seeds of each pair "
        "are refitted with A fixed to the pair's mean and the interval of dB_i decides (moves efficiency "
        "only) unless it holds 0 or its mean is within the refits' own B noise (no measurable effect at "
        "the margin); an interval of dA that crosses the margin is undecided.",
        "",
        "| " + " | ".join(TABLE_COLUMNS) + " |",
        "|" + "---|" * len(TABLE_COLUMNS),
    ]
    for item in report.variants:
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in row_cells(report, item)) + " |")
    lines += [] if sweep_expectation_line(report) is None else ["", sweep_expectation_line(report) + "."]
    lines += ["", "## What each setting did", ""]
    lines += [f"- {knob_sentence(report, item)}" for item in report.variants if not item.run.is_base]
    notes = report_notes(report)
    if notes:
        lines += ["", "## Notes", "", *[f"- {note}" for note in notes]]
    return "\n".join(lines) + "\n"


def write_figure(report: AblationReport, path: Path) -> Path | None:
    """Every seed-mean curve on one compute axis with its fit (A and B in the legend) and, for a
    sweep, the paper's expectation under the axes; None when no curve could be fitted."""
    from scalerl.report.plotting import RunPoints, comparison_figure, save_figure

    fitted = {item.run.slug: item.fit for item in report.mean_curve_fits if item.fit is not None}
    if not fitted:
        return None
    points = {
        item.run.slug: RunPoints(not_fitted=points_not_fitted(item))
        for item in report.mean_curve_fits
        if item.fit is not None
    }
    what = f"sweep of {report.sweep_knob}" if report.kind == "sweep" else f"{report.kind} vs {report.base}"
    figure = comparison_figure(
        fitted,
        points=points,
        level=report.level,
        x_label=report.x_name,
        y_label=report.y_name,
        title=f"{what} (seed-mean curves, {report.seeds} seed(s))",
    )
    if report.kind == "sweep":
        figure.text(
            0.01, 0.005, f"paper: {SWEEP_EXPECTATIONS.get(report.sweep_knob or '', '-')}", fontsize=7, wrap=True
        )
    return save_figure(figure, path)


def atomic_write_text(path: Path, text: str) -> Path:
    temp_path = path.with_name(path.name + ".tmp")
    temp_path.write_text(text)
    temp_path.replace(path)
    return path


def write_ablation_outputs(
    report: AblationReport, out_dir, command: str | None = None, design: dict | None = None
) -> list[Path]:
    """DIR/ablation.{json,md,png} (leave-one-out, recipes) or DIR/sweep.{json,md,png}, written
    atomically; `design` (the plan's seeds) goes into the JSON."""
    out_dir = Path(out_dir)
    stem = OUTPUT_STEMS.get(report.kind, "ablation")
    written = [
        atomic_write_text(out_dir / f"{stem}.json", json_text(report_payload(report, design)) + "\n"),
        atomic_write_text(out_dir / f"{stem}.md", markdown_text(report, command, design)),
    ]
    temp_figure = out_dir / f".{stem}.tmp.png"
    if write_figure(report, temp_figure) is not None:
        written.append(temp_figure.replace(out_dir / f"{stem}.png"))
    return written
