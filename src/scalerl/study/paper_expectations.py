"""What the paper found for each knob and scaling axis, next to an ablation's verdicts: the long
form for the markdown and JSON, the short form for a table cell.

Paper expectations (Khatri, Madaan et al., arXiv 2510.13786, sections 3 and 5; ../shared/docs/SCALERL.md).
"""

from __future__ import annotations

from scalerl.study.ablate_analysis import AblationReport, VariantResult
from scalerl.study.run_curves import paper_axis

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
