"""Sentences of the guides that read a result rather than tabulate it: each a function of the loaded
JSON, so that the count or the names it quotes follow the result."""

from __future__ import annotations

from benchmarks.render.study_checks import TINY_GROUP
from benchmarks.render.tables import _demo_runs


def demo_band_misses(*loaded: dict) -> str:
    """How many demos' first-half 80 % band holds fewer than half of their later evaluations
    (inside / held_out < 1/2, the demo table's 'first-half 80 % band holds' column)."""
    *robustness, self_forecast = loaded
    scored = [run["rescored"] for run in _demo_runs(robustness, self_forecast) if run["rescored"]]
    misses = sum(2 * s["inside"] < s["held_out"] for s in scored)
    return (
        f"{misses} of the {len(scored)} demos hold fewer than half of their later evaluations in the "
        "first-half band (the table above)."
    )


def tiny_study_rejudged(verdicts: dict, ablation: dict) -> str:
    """The tiny study's knobs whose verdict today's engine (from_logs_verdicts, the study's exported
    curves) gives differently from the one the study recorded (ablation_tiny), with the engine's
    reason; and, when neither calls any knob a ceiling or an efficiency mover, that it is so."""
    recorded = {v["slug"]: v for v in ablation["leave_one_out"]["variants"] if not v["is_base"]}
    today = {v["variant"]: v for v in verdicts["groups"][TINY_GROUP]["variants"] if not v["is_base"]}
    changed = [
        f"`{recorded[slug]['knob']}` **{v['verdict']}**" + (f" ({v['reason']})" if v.get("reason") else "")
        for slug, v in sorted(today.items(), key=lambda item: recorded[item[0]]["knob"])
        if v["verdict"] != recorded[slug]["effect"]["label"]
    ]
    said = (
        f"call {len(changed)} of the {len(today)} knobs differently: {'; '.join(changed)}"
        if changed
        else f"give the same verdict on all {len(today)} knobs"
    )
    movers = any(
        (v["verdict"] or "").startswith("moves") or recorded[slug]["effect"]["label"].startswith("moves")
        for slug, v in today.items()
    )
    either_way = "" if movers else " No knob is called a ceiling or an efficiency mover either way."
    return (
        "The same curves judged again by today's engine (`benchmarks/data/tiny_mod10_runs`, the last rows "
        f"of the from-logs table above) {said}.{either_way}"
    )
