"""Views of an ablation report: the rich table, JSON, markdown and the figure of all curves with
their fitted A and B, with the paper's expectation for each knob or scaling axis next to them.

Paper expectations (Khatri, Madaan et al., arXiv 2510.13786, sections 3 and 5; ../shared/docs/SCALERL.md).
"""

from __future__ import annotations

from pathlib import Path

from scalerl.report.console import json_text
from scalerl.study.ablate_analysis import AblationReport, VariantResult
from scalerl.study.study_analysis import paper_axis, points_not_fitted

OUTPUT_STEMS = {"leave-one-out": "ablation", "sweep": "sweep"}

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
    "batch_prompts": "higher A, slower start", "generations_fixed_batch": "same A",
    "generations": "higher A (batch grows)", "gen_length": "higher A, slower start", "model_size": "higher A",
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
    return item.effect.label()


def seeds_text(item: VariantResult) -> str:
    return f"{len(item.fitted)}/{len(item.seeds)}"


def row_cells(report: AblationReport, item: VariantResult) -> list[str]:
    """variant, knob, seeds (fitted/trained), A, B, C_mid (each mean [interval]), dA, dB at shared A, effect, paper."""
    effect = item.effect
    delta_a = "-" if effect is None or effect.delta_a is None else f"{effect.delta_a:+.3f}"
    delta_b = "-" if effect is None or effect.delta_b is None else f"{effect.delta_b:+.2f} (+-{effect.b_margin:.2f})"
    knob = item.run.knob or "-"
    return [item.run.slug, knob, seeds_text(item), _interval_text(item, "A", ".3f"), _interval_text(item, "B", ".2f"),
            _interval_text(item, "C_mid", ".3g"), delta_a, delta_b, effect_text(item),
            expectation(report, item, short=True)]


TABLE_COLUMNS = ("variant", "knob", "seeds", "A [interval]", "B [interval]", "C_mid [interval]", "dA",
                 "dB at shared A", "effect vs base", "paper")


def title(report: AblationReport) -> str:
    what = f"sweep of {report.sweep_knob}" if report.kind == "sweep" else "leave-one-out ablation"
    return (f"{what}: {report.y_name} vs {report.x_name}, {report.seeds} seed(s), base {report.base}, "
            f"{report.margin.describe()}, {report.level:.0%} intervals")


TERMINAL_DROPPED = ("knob",)  # the variant's name says it; the markdown and JSON keep it


def ablation_table(report: AblationReport):
    """The rich table: one row per variant, base first; C_mid without its interval to fit a terminal."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(title(report)), title_justify="left")
    keep = [index for index, column in enumerate(TABLE_COLUMNS) if column not in TERMINAL_DROPPED]
    for index in keep:
        column = TABLE_COLUMNS[index].replace("C_mid [interval]", "C_mid")
        table.add_column(escape(column), no_wrap=column != "paper", overflow="fold", min_width=10 if column == "paper" else None)
    for item in report.variants:
        cells = row_cells(report, item)
        cells[TABLE_COLUMNS.index("C_mid [interval]")] = cells[TABLE_COLUMNS.index("C_mid [interval]")].split(" [")[0]
        table.add_row(*(escape(cells[index]) for index in keep))
    return table


def report_notes(report: AblationReport) -> list[str]:
    """Seeds that could not be fitted and verdicts that could not be reached, one line each."""
    notes = []
    for item in report.variants:
        for index, seed in enumerate(item.seeds):
            if seed.error is not None:
                notes.append(f"{item.run.slug} seed {index}: {seed.error}")
        if item.effect is not None and item.effect.reason:
            notes.append(f"{item.run.slug}: not classified: {item.effect.reason}")
        unidentified = sum(not fit.ceiling_identified for fit in item.fitted)
        if unidentified:
            notes.append(f"{item.run.slug}: ceiling not identified on {unidentified} of {len(item.fitted)} fitted "
                         "seeds (the run has not bent over yet: its A is uncertain)")
    return notes


def knob_sentence(report: AblationReport, item: VariantResult) -> str:
    """One line per non-base variant: what it did, with its numbers, next to the paper's finding."""
    effect, knob = item.effect, item.run.knob or item.run.slug
    paper = expectation(report, item)
    if effect.effect == "moves the ceiling":
        verb = "raised" if effect.direction == "up" else "lowered"
        said = f"{verb} the ceiling A by {abs(effect.delta_a):.3f} (margin {effect.margin:.3f})"
    elif effect.effect == "efficiency only":
        verb = "raised" if effect.direction == "up" else "lowered"
        said = (f"kept the ceiling (dA {effect.delta_a:+.3f} within {effect.margin:.3f}) and {verb} B by "
                f"{abs(effect.delta_b):.2f} at the shared A {item.shared_a:.3f} (noise +-{effect.b_margin:.2f})")
    elif effect.effect == "no measurable effect":
        said = (f"no measurable effect: dA {effect.delta_a:+.3f} within {effect.margin:.3f}, dB "
                f"{effect.delta_b:+.2f} within +-{effect.b_margin:.2f}")
    else:
        said = f"not classified ({effect.reason})"
    return f"`{knob}` {said}. Paper: {paper}."


def report_payload(report: AblationReport) -> dict:
    """JSON view: settings and margin, then per variant its per-seed fits, summary and verdict."""
    variants = []
    for item in report.variants:
        effect = item.effect
        variants.append({
            "slug": item.run.slug, "name": item.run.name, "knob": item.run.knob, "is_base": item.run.is_base,
            "seeds": [{"metrics": str(seed.metrics_path), "params": None if seed.fit is None else seed.fit.params(),
                       "ceiling_identified": None if seed.fit is None else bool(seed.fit.ceiling_identified),
                       "error": seed.error} for seed in item.seeds],
            "params": {name: {"mean": s.mean, "lo": s.lo, "hi": s.hi, "n": s.n} for name, s in item.params.items()},
            "effect": None if effect is None else {
                "effect": effect.effect, "direction": effect.direction, "delta_A": effect.delta_a,
                "margin": effect.margin, "delta_B": effect.delta_b, "B_margin": effect.b_margin,
                "reason": effect.reason},
            "shared_A": item.shared_a,
            "B_at_shared_A": None if item.b_at_shared_a is None else {
                "variant": list(item.b_at_shared_a[0]), "base": list(item.b_at_shared_a[1])},
            "paper": expectation(report, item),
        })
    margin = report.margin
    return {"kind": report.kind, "sweep_knob": report.sweep_knob, "base": report.base, "x": report.x_name,
            "y": report.y_name, "level": report.level, "seeds": report.seeds,
            "margin": {"value": margin.value, "source": margin.source, "pooled_seed_sd_A": margin.pooled_sd,
                       "dof": margin.dof},
            "variants": variants}


def markdown_text(report: AblationReport, command: str | None = None) -> str:
    """The table, one sentence per knob, and the notes; `command` (how it was made) on top if given."""
    heading = "Sweep" if report.kind == "sweep" else "Leave-one-out ablation"
    lines = [f"# {heading}: {report.y_name} vs {report.x_name}", ""]
    if command:
        lines += ["Produced by:", "", f"    {command}", ""]
    lines += [f"{title(report)}.", "",
              "Rule (arXiv 2510.13786): a variant whose seed-mean A differs from the base's by more than the "
              "margin moves the ceiling; otherwise both are refitted with A fixed to the pair's mean and B "
              "decides (efficiency only), unless the B difference is within its seed noise (no measurable "
              "effect).", "",
              "| " + " | ".join(TABLE_COLUMNS) + " |", "|" + "---|" * len(TABLE_COLUMNS)]
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
    points = {item.run.slug: RunPoints(not_fitted=points_not_fitted(item)) for item in report.mean_curve_fits
              if item.fit is not None}
    what = f"sweep of {report.sweep_knob}" if report.kind == "sweep" else f"leave-one-out vs {report.base}"
    figure = comparison_figure(fitted, points=points, level=report.level, x_label=report.x_name,
                               y_label=report.y_name, title=f"{what} (seed-mean curves, {report.seeds} seed(s))")
    if report.kind == "sweep":
        figure.text(0.01, 0.005, f"paper: {SWEEP_EXPECTATIONS.get(report.sweep_knob or '', '-')}", fontsize=7,
                    wrap=True)
    return save_figure(figure, path)


def atomic_write_text(path: Path, text: str) -> Path:
    temp_path = path.with_name(path.name + ".tmp")
    temp_path.write_text(text)
    temp_path.replace(path)
    return path


def write_ablation_outputs(report: AblationReport, out_dir, command: str | None = None) -> list[Path]:
    """DIR/ablation.{json,md,png} (leave-one-out) or DIR/sweep.{json,md,png}, written atomically."""
    out_dir = Path(out_dir)
    stem = OUTPUT_STEMS.get(report.kind, "ablation")
    written = [atomic_write_text(out_dir / f"{stem}.json", json_text(report_payload(report)) + "\n"),
               atomic_write_text(out_dir / f"{stem}.md", markdown_text(report, command))]
    temp_figure = out_dir / f".{stem}.tmp.png"
    if write_figure(report, temp_figure) is not None:
        written.append(temp_figure.replace(out_dir / f"{stem}.png"))
    return written
