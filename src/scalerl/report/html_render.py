"""Markup of the `scalerl report` page: one HTML document, inline CSS, figures as base64 PNG, no
script and no external resource, so it opens from a file or an e-mail without a server.

Tables: `runs` (each run's fit: A, B, C_mid with intervals, ceiling identified, predicted reward
at the budget, the compute extrapolated to), `comparison` (the paper's ranking, when two or more runs were fitted)
and `study-<name>` (a study directory's variants and verdicts, from its study.json, or the
seed-mean parameters and effects of an ablation.json / sweep.json). Numbers are printed with
scalerl.report.console.format_number (4 significant digits).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from scalerl.report.console import comparison_payload, decision_sentence, format_number, short_name, with_short_names
from scalerl.report.headline import fit_headline

FORMULA = "R(C) = R0 + (A &minus; R0) / (1 + (C<sub>mid</sub> / C)<sup>B</sup>)"
STYLE = """
body { font-family: system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1300px; color: #1d1d1f; line-height: 1.45; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.85em; display: block; overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; white-space: nowrap; }
th { background: #f3f3f5; } td:first-child, th:first-child { text-align: left; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
.warnings li { color: #8a4b00; } .source { color: #666; font-size: 0.85em; }
.headline { font-weight: bold; font-size: 1.05em; }
.error { color: #a00000; white-space: normal; }
"""


def number(value: Any) -> str:
    return format_number(value)


def interval(bounds: Sequence[Any]) -> str:
    return f"[{number(bounds[0])}, {number(bounds[1])}]"


def table(table_id: str, header: Sequence[str], rows: Iterable[Sequence[str]], caption: str = "") -> str:
    """A <table> of already-escaped cells."""
    head = "".join(f"<th>{cell}</th>" for cell in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    caption_html = f"<caption>{caption}</caption>" if caption else ""
    return f'<table id="{escape(table_id)}">{caption_html}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def image(png_base64: str, alt: str) -> str:
    return f'<p><img alt="{escape(alt)}" src="data:image/png;base64,{png_base64}"></p>'


RUN_HEADER = (
    "run",
    "points fitted",
    "R0",
    "A",
    "A interval",
    "B",
    "C_mid",
    "verdict",
    "budget (compute)",
    "reward at budget",
    "reward interval",
)


def run_name(name: str) -> str:
    """A run's name in a table cell: cut as short_name cuts it, the full name on hover."""
    return (
        f'<span title="{escape(name)}">{escape(short_name(name))}</span>' if short_name(name) != name else escape(name)
    )


def run_rows(report) -> list[list[str]]:
    """One row per run: the fit and its prediction at the budget, or the reason it has none."""
    rows = []
    for run in report.runs:
        if run.fit is None:
            rows.append(
                [
                    run_name(run.name),
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    f'<span class="error">{escape(run.error or "")}</span>',
                ]
            )
            continue
        fit = run.fit
        lo, hi = fit.interval(run.target_compute, report.level)
        rows.append(
            [
                run_name(run.name),
                str(fit.n_points),
                number(fit.r0),
                number(fit.a),
                interval(fit.conf_int(report.level)["A"]),
                number(fit.b),
                number(fit.c_mid),
                escape(fit.verdict.kind.replace("_", " ")),
                number(run.target_compute),
                number(float(fit.predict(run.target_compute))),
                interval((lo, hi)),
            ]
        )
    return rows


COMPARISON_HEADER = ("rank", "run", "A", "A interval", "B", "C_mid", "B with A shared")


def comparison_html(report) -> str:
    if report.comparison is None:
        return ""
    payload = comparison_payload(report.comparison, report.level)
    rows = []
    for rank, name in enumerate(payload["ranking"], start=1):
        run = payload["runs"][name]
        fixed = run["fixed_ceiling"]
        rows.append(
            [
                str(rank),
                escape(short_name(name)),
                number(run["params"]["A"]),
                interval(run["intervals"]["A"]),
                number(run["params"]["B"]),
                number(run["params"]["C_mid"]),
                "-" if fixed is None else number(fixed["B"]),
            ]
        )
    overlay = image(report.overlay_png, "every run on one axes") if report.overlay_png else ""
    headline = with_short_names(payload["headline"], payload["ranking"])
    return (
        f'<h2>Comparison</h2><p class="headline">{escape(headline)}</p>'
        + table("comparison", COMPARISON_HEADER, rows)
        + f"<p>{escape(decision_sentence(payload))}</p>"
        + overlay
    )


STUDY_HEADER = (
    "variant",
    "knob",
    "A",
    "A interval",
    "B",
    "C_mid",
    "ceiling identified",
    "verdict vs base",
    "decided by",
    "paper: moves",
)


def study_rows(payload: dict) -> list[list[str]]:
    """One row per variant of study.json (missing fields shown as '-')."""
    rows = []
    for variant in payload.get("variants") or []:
        fit = variant.get("fit") or {}
        params, intervals = fit.get("params") or {}, fit.get("intervals") or {}
        versus = variant.get("versus_base") or {}
        verdict = "base" if variant.get("is_base") else versus.get("verdict") or "-"
        if variant.get("error"):
            verdict = f"{verdict} ({variant['error'].split(':', 1)[0]})"
        identified = fit.get("ceiling_identified")
        rows.append(
            [
                escape(str(variant.get("slug", "?"))),
                escape(str(variant.get("knob") or "base")),
                number(params.get("A")),
                interval(intervals["A"]) if "A" in intervals else "-",
                number(params.get("B")),
                number(params.get("C_mid")),
                "-" if identified is None else ("yes" if identified else "no"),
                escape(verdict),
                escape(str(versus.get("decided_by") or "-")),
                escape(str(variant.get("paper_moves") or "-")),
            ]
        )
    return rows


ABLATION_HEADER = (
    "variant",
    "knob",
    "seeds fitted",
    "A",
    "A interval",
    "B",
    "B interval",
    "C_mid",
    "effect",
    "direction",
    "delta A",
    "paper",
)


def ablation_rows(payload: dict) -> list[list[str]]:
    """One row per variant of ablation.json / sweep.json: seed-mean A, B, C_mid with their
    intervals over seeds, the effect verdict vs the base and the paper's expectation."""
    rows = []
    for variant in payload.get("variants") or []:
        params = variant.get("params") or {}
        stats = {name: params.get(name) or {} for name in ("A", "B", "C_mid")}
        effect = variant.get("effect") or {}
        seeds = variant.get("seeds") or []
        fitted = sum(1 for seed in seeds if isinstance(seed, dict) and seed.get("params"))
        rows.append(
            [
                escape(str(variant.get("slug", "?"))),
                escape(str(variant.get("knob") or "base")),
                f"{fitted}/{len(seeds)}",
                number(stats["A"].get("mean")),
                interval((stats["A"].get("lo"), stats["A"].get("hi"))),
                number(stats["B"].get("mean")),
                interval((stats["B"].get("lo"), stats["B"].get("hi"))),
                number(stats["C_mid"].get("mean")),
                escape(str("base" if variant.get("is_base") else effect.get("effect") or "-")),
                escape(str(effect.get("direction") or "-")),
                number(effect.get("delta_A")),
                escape(str(variant.get("paper") or "-")),
            ]
        )
    return rows


def summary_settings(payload: dict) -> str:
    """`base scalerl, val_pass_rate vs flops, margin 0.02` (the margin may be a number or an object)."""
    margin = payload.get("margin")
    margin_text = (
        number(margin.get("value")) + f" ({escape(str(margin.get('source', '')))})"
        if isinstance(margin, dict)
        else number(margin)
    )
    sweep = f", sweep of {escape(str(payload['sweep_knob']))}" if payload.get("sweep_knob") else ""
    return (
        f"base <b>{escape(str(payload.get('base', '?')))}</b>{sweep}, {escape(str(payload.get('y', '?')))} vs "
        f"{escape(str(payload.get('x', '?')))}, margin {margin_text}"
    )


def study_html(study) -> str:
    payload = study.payload
    header, rows = (
        (STUDY_HEADER, study_rows(payload)) if study.kind == "study" else (ABLATION_HEADER, ablation_rows(payload))
    )
    figure = image(study.figure_png, f"study {study.name}") if study.figure_png else "<p>(no figure)</p>"
    return (
        f'<h2>Study: {escape(study.name)}</h2><p class="source">{escape(study.source)}</p>'
        f"<p>{summary_settings(payload)}</p>" + table(element_id("study", study.name), header, rows) + figure
    )


def element_id(prefix: str, name: str) -> str:
    """`study-loo-ablation` for ("study", "loo (ablation)"): letters, digits, _ and - only."""
    return f"{prefix}-" + re.sub(r"[^A-Za-z0-9_]+", "-", name).strip("-")


def run_html(run, level: float = 0.8) -> str:
    """A run's section: a headline sentence (ceiling, reward at the budget), its figure or its error."""
    headline = (
        ""
        if run.fit is None
        else f'<p class="headline">{escape(fit_headline(run.fit, budget=run.target_compute, level=level))}</p>'
    )
    body = (
        image(run.figure_png, f"fit of {run.name}")
        if run.figure_png
        else f'<p class="error">{escape(run.error or "")}</p>'
    )
    if run.history_png:
        body += image(run.history_png, f"live forecast history of {run.name}")
    return f'<h2>Run: {escape(run.name)}</h2><p class="source">{escape(run.source)}</p>{headline}{body}'


def warnings_html(warnings: Sequence[str]) -> str:
    if not warnings:
        return "<h2>Warnings</h2><p>none</p>"
    items = "".join(f"<li>{escape(w)}</li>" for w in warnings)
    return f'<h2>Warnings</h2><ul class="warnings">{items}</ul>'


def render_html(report) -> str:
    """The whole page."""
    parts = [
        f"<h1>{escape(report.title)}</h1>",
        f"<p>ScaleRL sigmoid {FORMULA} (Khatri, Madaan et al., arXiv 2510.13786) with Student-t evaluation "
        "noise, fitted by its posterior (emcee): every estimate is a posterior median, every interval and band "
        f"({report.level:.0%}) comes from the same draws. "
        "Solid line: fit over the data; dashed: extrapolation; shaded: band for a new evaluation.</p>",
    ]
    if report.runs:
        parts.append("<h2>Runs</h2>" + table("runs", RUN_HEADER, run_rows(report)))
    parts.append(comparison_html(report))
    parts += [study_html(study) for study in report.studies]
    parts += [run_html(run, report.level) for run in report.runs]
    parts.append(warnings_html(report.warnings))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(report.title)}</title><style>{STYLE}</style></head><body>\n"
        + "\n".join(part for part in parts if part)
        + "\n</body></html>\n"
    )
