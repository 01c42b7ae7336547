"""An ablation report in words: the notes (seeds not fitted, verdicts not reached, warm starts
that differ, ceilings not identified and how much longer to run), one sentence per knob, the
design, and the markdown page that holds them with the table.
"""

from __future__ import annotations

import numpy as np

from scalerl.study.ablate_analysis import AblationReport, VariantResult, warm_start_summary
from scalerl.study.ablation_table import TABLE_COLUMNS, agreement_text, difference_text, row_cells, title
from scalerl.study.paper_expectations import expectation, sweep_expectation_line

KIND_TITLES = {"sweep": "Sweep", "recipes": "Recipe study", "from-logs": "Ablation from logs"}


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
