"""Renderers (benchmarks/render/pages.py BLOCKS) of the study's checks: the paired verdict on the shared
real curves (`from_logs_verdicts.json`) and the positive controls on the built-in task
(`positive_controls.json` or, when only the end-to-end check ran, `positive_controls_quick.json`)."""

from __future__ import annotations

from benchmarks.render.tables import machine_text


def _interval(item: dict | None, digits: int = 3) -> str:
    if not item or item.get("mean") is None:
        return "-"
    if item.get("lo") is None or item.get("hi") is None or item.get("source") == "none":
        return f"{item['mean']:+.{digits}f}"
    welch = " (Welch)" if item.get("source") == "Welch" else ""
    return f"{item['mean']:+.{digits}f} [{item['lo']:+.{digits}f}, {item['hi']:+.{digits}f}]{welch}"


def from_logs_verdicts(results: dict) -> str:
    """One row per compared variant (or per refused group), then the time per run fitted."""
    lines = [
        "| group | variant vs base | seeds | paired dA [90 %] | dB at shared A [90 %] | verdict | pairs agree |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, group in results["groups"].items():
        if "refused" in group:
            lines.append(f"| {name} | - | {group['runs']} runs | - | - | refused: `{group['refused']}` | - |")
            continue
        for variant in group["variants"]:
            if variant["is_base"]:
                continue
            lines.append(
                f"| {name} | {variant['variant']} vs {group['base']} | {len(variant['seeds'])} | "
                f"{_interval(variant['delta_A'])} | {_interval(variant['delta_B'], 2)} | "
                f"{variant['verdict']} | {variant['pairs_agree'] or '-'} |"
            )
    reasons = [
        f"- {name}: {variant['verdict']}: {variant['reason']}"
        for name, group in results["groups"].items()
        if "refused" not in group
        for variant in group["variants"]
        if variant.get("reason")
    ]
    summary = results["summary"]
    lines += [
        "",
        *reasons,
        "",
        f"{summary['runs_fitted']} runs fitted (each seed, its shared-A refit and the "
        f"variant's mean curve) in {summary['seconds']:.0f} s: {summary['seconds_per_run']:.1f} s per run "
        f"({machine_text(results)}).",
    ]
    return "\n".join(lines)


def positive_controls(results: dict) -> str:
    """The two controls against what they must be called, with the wall time of the runs."""
    settings, controls = results["settings"], results["controls"]
    ceiling, efficiency = controls["ceiling_mover"], controls["efficiency_mover"]
    studies = {"ceiling_mover": results["ceiling_study"], "efficiency_mover": results["efficiency_study"]}
    effects = {key: next(v["effect"] for v in study["variants"] if not v["is_base"]) for key, study in studies.items()}

    def check(passed: bool) -> str:
        return "not judged (quick run)" if settings["quick"] else ("passed" if passed else "FAILED")

    lines = [
        "| control | knob | must be called | called | paired dA [90 %] | dB at shared A [90 %] | "
        "decades of compute saved to half the gain [90 %] | pairs | check |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines.append(
        f"| ceiling mover | `{ceiling['knob']}` | moves the ceiling (down), dA within {ceiling['tolerance']} of "
        f"{ceiling['expected_delta_A']:+.3f} in >= {ceiling['pairs_needed']} pairs | {ceiling['verdict']} | "
        f"{_interval(effects['ceiling_mover']['paired_delta_A'])} | {_interval(effects['ceiling_mover']['paired_delta_B'], 2)} | "
        f"{_interval(effects['ceiling_mover'].get('paired_compute_saved_to_half_gain'))} | "
        f"{ceiling['pairs_within']} of {ceiling['pairs']} within | {check(ceiling['passed'])} |"
    )
    lines.append(
        f"| efficiency mover | `{efficiency['knob']}` | moves efficiency only (or undecided), never the ceiling | "
        f"{efficiency['verdict']} | {_interval(effects['efficiency_mover']['paired_delta_A'])} | "
        f"{_interval(effects['efficiency_mover']['paired_delta_B'], 2)} | "
        f"{_interval(effects['efficiency_mover'].get('paired_compute_saved_to_half_gain'))} | "
        f"{efficiency['ceiling_pairs']} of {len(effects['efficiency_mover']['pairs'])} pairs call "
        f"a ceiling | {check(efficiency['passed'])} |"
    )
    device = results.get("run_device_hours")
    spent = (
        f"the {device['runs']} runs' own device time {device['total']:.1f} h (summed over the sessions the "
        f"resumable design took, two runs at a time)"
        if device
        else f"training wall time {sum(v or 0 for v in results['train_seconds'].values()) / 60:.0f} min, "
        f"{results['total_seconds'] / 60:.0f} min in all"
    )
    run = (
        f"{'Quick end-to-end check only (not the design): ' if settings['quick'] else ''}{settings['seeds']} "
        f"paired seed(s) x 3 runs of {settings['steps']} steps (evaluation every {settings['eval_every']}); "
        f"{spent} ({machine_text(results)}). Task bound: "
        f"{ceiling['bound_base']:.3f} -> "
        f"{ceiling['bound_variant']:.3f}."
    )
    reason = f" Why: {efficiency['reason']}." if efficiency.get("reason") else ""
    trained = sum(v or 0 for v in results["train_seconds"].values())
    per_step = trained / (results["runs"] * settings["steps"])  # the base's runs count once (linked)
    full = (
        f" At {per_step:.0f} s per training step (warm starts included), the full design (5 seeds x 3 runs "
        f"x 200 steps) would take about {per_step * 3000 / 3600:.0f} h one run at a time."
        if settings["quick"]
        else ""
    )
    return "\n".join([*lines, "", run + reason + full + settled_text(ceiling.get("settled_by_difficulty"))])


def settled_text(settled: dict | None) -> str:
    """' Settled pass rate (...): setting all (easy / hard), ...' from the ceiling mover's
    settled_by_difficulty; empty for results written before it was recorded."""
    if not settled:
        return ""

    def rate(value):
        return "-" if value is None else f"{value:.3f}"

    parts = [
        f"`{name}` {rate(row['val_pass_rate'])} ({rate(row['val_pass_rate_easy'])} / {rate(row['val_pass_rate_hard'])})"
        for name, row in settled.items()
    ]
    return (
        " Settled pass rate of the ceiling sweep's runs, all (easy / hard prompts), mean of the last three "
        f"evaluations over the seeds: {', '.join(parts)}."
    )


def positive_controls_headline(results: dict) -> str:
    """One line: what each control was called against what it must be called."""
    ceiling, efficiency = results["controls"]["ceiling_mover"], results["controls"]["efficiency_mover"]
    effect = next(v["effect"] for v in results["ceiling_study"]["variants"] if not v["is_base"])
    verdicts = {True: "passed", False: "FAILED"}
    return (
        f"Positive controls ({results['settings']['seeds']} paired seeds, [docs/study.md](docs/study.md#positive-controls)): "
        f"`{ceiling['knob']}` is called **{ceiling['verdict']}**, dA {_interval(effect['paired_delta_A'])} "
        f"against the constructed {ceiling['expected_delta_A']:+.3f} ({ceiling['pairs_within']} of {ceiling['pairs']} "
        f"pairs within {ceiling['tolerance']}: {verdicts[ceiling['passed']]}); `{efficiency['knob']}` is called "
        f"**{efficiency['verdict']}** ({verdicts[efficiency['passed']]}: never the ceiling)."
    )


TINY_GROUP = "tiny leave-one-out study, its curves judged again"


def tiny_study_headline(results: dict) -> str:
    """The tiny study's knobs as today's engine judges their exported curves: a count per verdict."""
    group = results["groups"][TINY_GROUP]
    verdicts = [variant["verdict"] for variant in group["variants"] if not variant["is_base"]]
    counts = {label: verdicts.count(label) for label in dict.fromkeys(verdicts)}
    said = ", ".join(f"{count} {label}" for label, count in counts.items())
    seeds = max(len(variant["seeds"]) for variant in group["variants"])
    return (
        f"The tiny leave-one-out study ({len(verdicts)} knobs of the recipe flipped, {seeds} paired seeds each, "
        f"[docs/study.md](docs/study.md#the-tiny-benchmark)), judged by today's engine: {said}"
        + (
            "; none is called a ceiling or an efficiency mover."
            if not any(v.startswith("moves") for v in verdicts)
            else "."
        )
    )


def _effect(study: dict) -> dict:
    return next(v["effect"] for v in study["variants"] if not v["is_base"])


def positive_controls_ceiling_reading(results: dict) -> str:
    """What the ceiling mover was called, how many pairs hit the constructed dA, and the settled
    easy / hard pass rates that explain why the base's fitted ceiling (the seed mean of A) sits
    where it does against its bound (1 - u) + u / 10."""
    controls = results["controls"]
    ceiling, efficiency = controls["ceiling_mover"], controls["efficiency_mover"]
    effect = _effect(results["ceiling_study"])
    called = sum(
        pair["verdict"] == effect["effect"] and pair.get("direction") == effect["direction"] for pair in effect["pairs"]
    )
    base_seeds = next(v for v in results["ceiling_study"]["variants"] if v["is_base"])["seeds"]
    base_a = sum(seed["params"]["A"] for seed in base_seeds) / len(base_seeds)
    base, variant = (ceiling["settled_by_difficulty"][name] for name in ceiling["settled_by_difficulty"])
    passed = ceiling["passed"] and efficiency["passed"]
    side = "over" if base_a > ceiling["bound_base"] else "under"
    return (
        f"{'Both checks pass' if passed else 'A check FAILED'}. The ceiling mover is called "
        f'"{ceiling["verdict"]}" in {called} of {ceiling["pairs"]} pairs, and {ceiling["pairs_within"]} of '
        f"them fall within {ceiling['tolerance']} of the constructed {ceiling['expected_delta_A']:+.3f}. The "
        "construction is measured, not assumed: validation logs the pass rate on easy and hard prompts apart "
        "(`val_pass_rate_easy`, `val_pass_rate_hard`). The base's runs settle at "
        f"{base['val_pass_rate_easy']:.2f} on easy prompts and guess hard ones at {base['val_pass_rate_hard']:.2f}. "
        f"The variant's settle at {variant['val_pass_rate_easy']:.2f} on easy prompts and "
        f"{variant['val_pass_rate_hard']:.2f} on hard ones. The guesses land near 1 in 10, which is why the "
        f"base's fitted ceiling, {base_a:.3f}, sits {side} its {ceiling['bound_base']:.3f} bound."
    )


def positive_controls_efficiency_reading(results: dict) -> str:
    """What the learning-rate control was called at the design's length, and why."""
    settings, efficiency = results["settings"], results["controls"]["efficiency_mover"]
    effect = _effect(results["efficiency_study"])
    saved = effect["paired_compute_saved_to_half_gain"]["mean"]
    pace = "slower" if saved < 0 else "faster"
    pairs = (
        "No pair calls it a ceiling mover."
        if efficiency["ceiling_pairs"] == 0
        else f"{efficiency['ceiling_pairs']} pair(s) call it a ceiling mover."
    )
    reason = f" ({efficiency['reason']})" if efficiency.get("reason") else ""
    return (
        f'The learning-rate control is called "{efficiency["verdict"]}": at {settings["steps"]} steps its '
        f"paired dA is {_interval(effect['paired_delta_A'])}{reason}. The compute to half the gain says it "
        f"is {pace} ({saved:+.3f} decades). {pairs}"
    )


def study_run_cost(results: dict) -> str:
    """What one run of the study costs on this machine: the positive controls' device time per run
    (each run's own wall time, the runs going `parallel_runs` at a time), total hours / runs."""
    settings, device = results["settings"], results["run_device_hours"]
    per_run_min = 60 * device["total"] / device["runs"]
    return (
        f"On 2 CPU cores, {settings['parallel_runs']} runs of {settings['steps']} steps of the built-in model side by "
        f"side take about {per_run_min:.0f} minutes (the positive controls: {device['total']:.1f} device-hours "
        f"over {device['runs']} runs)."
    )


def positive_controls_variant_start(results: dict) -> str:
    """Where the ceiling mover's variant starts: the range over its seeds of R0, which the fit takes
    from the first evaluation (before training)."""
    variant = next(v for v in results["ceiling_study"]["variants"] if not v["is_base"])
    starts = [seed["params"]["R0"] for seed in variant["seeds"]]
    low, high = f"{min(starts):.3f}", f"{max(starts):.3f}"
    return (
        f"The run above starts the variant at a pass rate of {low if low == high else f'{low}-{high}'} "
        f"over its {len(starts)} seeds."
    )
