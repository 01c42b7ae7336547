"""An ablation report as JSON: the settings, the margin, the paired design (seeds and the warm
start every run started from, by digest), then per variant its per-seed fits, summary and paired
verdict (the `effect` key keeps the fields `scalerl report` reads).
"""

from __future__ import annotations

from scalerl.study.ablate_analysis import AblationReport, VariantResult, warm_start_summary
from scalerl.study.paired import PairedInterval
from scalerl.study.paper_expectations import expectation
from scalerl.study.run_curves import LogSource


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
