"""An ablation report as a table: one row of cells per variant (seeds fitted, A, B, C_mid with
their intervals, the paired dA and dB, the verdict, the pairs that agree, the paper's finding),
its title, and the rich table the terminal shows.
"""

from __future__ import annotations

from scalerl.study.ablate_analysis import AblationReport, VariantResult
from scalerl.study.paired import PairedInterval
from scalerl.study.paper_expectations import expectation


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
