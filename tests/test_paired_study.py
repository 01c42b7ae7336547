"""The paired verdict end to end on synthetic seeded curves with known effects
(scalerl.study.ablate_analysis): seed i of every variant shares seed i's luck (its own A and its
evaluation noise, as common random numbers give), which pairing cancels."""

import subprocess
import sys
import zlib

import numpy as np
import pytest

from scalerl.forecast.curves import sigmoid_reward
from scalerl.study.ablate_analysis import build_ablation_report
from scalerl.study.paired import CEILING, EFFICIENCY, NO_EFFECT
from scalerl.study.run_curves import WARM_START_RECORD, ReportRun
from scalerl.study.seed_fits import summarise
from scalerl.train.records.metrics_log import append_row

FLOPS = np.concatenate([[0.0], np.geomspace(1e12, 3e14, 24)])
BASE = {"a": 0.6, "b": 1.5, "c_mid": 1e13, "r0": 0.1}
SEED_LUCK_A = (-0.06, 0.0, 0.07)  # seed i's ceiling luck, shared by every variant's seed i


def write_seed(path, seed_index, replicate, own_noise, **changes):
    """A curve with seed i's luck: A + SEED_LUCK_A[i] and seed i's evaluation noise (shared), plus
    a little noise of its own (`own_noise`: the part common random numbers cannot share)."""
    params = {**BASE, **changes}
    rewards = sigmoid_reward(FLOPS, params["a"] + SEED_LUCK_A[seed_index], params["b"], params["c_mid"], params["r0"])
    shared = np.random.default_rng([replicate, seed_index]).normal(0.0, 0.006, FLOPS.size)
    own = np.random.default_rng([zlib.crc32(str(path.parent.parent.name).encode()), seed_index, replicate]).normal(
        0.0, own_noise, FLOPS.size
    )
    noise = shared + own
    noise[0] = 0.0
    path.parent.mkdir(parents=True, exist_ok=True)
    for step, (flops, reward) in enumerate(zip(FLOPS, rewards + noise)):
        append_row(path, {"step": step, "flops": float(flops), "val_pass_rate": float(reward)})
    (path.parent / WARM_START_RECORD).write_text('{"key": "k", "weights_sha256": "abc123"}')
    return path


def synthetic_runs(root, specs, replicate=0, seeds=3, own_noise=0.002):
    runs = []
    for slug, changes in specs.items():
        paths = tuple(
            write_seed(root / slug / f"seed-{k}" / "metrics.jsonl", k, replicate, own_noise, **changes)
            for k in range(seeds)
        )
        runs.append(ReportRun(slug, slug, None if slug == "base" else f"knob={slug}", slug == "base", paths))
    return runs


# "later": the base's curve shifted 0.2 decades along log compute (a lower learning rate): same
# ceiling, same B, half the gain reached at 1.58x the compute
SPECS = {"base": {}, "a-up": {"a": 0.7}, "b-only": {"b": 3.0}, "same": {}, "later": {"c_mid": 10**13.2}}


@pytest.fixture(scope="module")
def paired_report(tmp_path_factory):
    return build_ablation_report(synthetic_runs(tmp_path_factory.mktemp("paired"), SPECS), seeds=3, margin=0.02)


def test_each_known_effect_gets_its_verdict_with_the_pairs_agreeing(paired_report):
    by_slug = {item.run.slug: item for item in paired_report.variants}
    assert by_slug["base"].verdict is None
    a_up = by_slug["a-up"].verdict
    assert (a_up.verdict, a_up.direction) == (CEILING, "up")
    assert a_up.delta_a.mean == pytest.approx(0.1, abs=0.02) and a_up.delta_a.lo > 0.02
    assert a_up.delta_a.source == "paired t" and a_up.delta_a.n == 3
    assert (a_up.agreement.agreeing, a_up.agreement.pairs) == (3, 3)
    b_only = by_slug["b-only"].verdict
    assert (b_only.verdict, b_only.direction) == (EFFICIENCY, "up")
    assert -0.02 <= b_only.delta_a.lo and b_only.delta_a.hi <= 0.02
    assert b_only.delta_b.mean == pytest.approx(1.5, rel=0.3) and b_only.agreement.agreeing >= 2
    same = by_slug["same"].verdict
    assert same.verdict == NO_EFFECT and same.label == "no measurable effect at margin 0.02"
    assert same.delta_speed.lo <= 0.0 <= same.delta_speed.hi


def test_a_curve_shifted_along_compute_moves_efficiency_not_the_ceiling(paired_report):
    """Same A and B, C_mid 0.2 decades later: B at the shared A cannot tell, the compute to half
    the shared gain can (the variant saves -0.2 decades of it)."""
    later = next(item for item in paired_report.variants if item.run.slug == "later").verdict
    assert (later.verdict, later.direction) == (EFFICIENCY, "down")
    assert later.b_call == "none" and later.speed_call == "down"
    assert later.delta_speed.mean == pytest.approx(-0.2, abs=0.03) and later.delta_speed.hi < 0
    assert all(pair.verdict == (EFFICIENCY, "down") for pair in later.pairs)
    assert "compute to half the shared gain" in later.reason


def test_the_half_gain_compute_decides_only_when_b_cannot():
    from scalerl.study.paired import knob_verdict, pair_verdict

    assert knob_verdict("within", "none", "down") == (EFFICIENCY, "down")
    assert knob_verdict("within", "up", "down") == (EFFICIENCY, "up")  # B decides when it can
    assert knob_verdict("within", "none", "none") == (NO_EFFECT, None)
    assert knob_verdict("down", "none", "up") == (CEILING, "down")
    # one pair: |dS| beyond its noise decides, within it does not
    assert pair_verdict(0.005, 0.1, 0.02, 0.5, -0.15, 0.08) == (EFFICIENCY, "down")
    assert pair_verdict(0.005, 0.1, 0.02, 0.5, -0.05, 0.08) == (NO_EFFECT, None)


def test_the_seed_luck_is_far_larger_than_the_margin_yet_cancels_in_the_pairs(paired_report):
    base = next(item for item in paired_report.variants if item.run.is_base)
    assert np.std([fit.a for fit in base.fitted], ddof=1) > 0.05  # an unpaired rule would see only noise
    a_up = next(item for item in paired_report.variants if item.run.slug == "a-up").verdict
    assert a_up.delta_a.sd < 0.01


@pytest.mark.slow
@pytest.mark.parametrize("replicate", [1, 2, 3])
def test_moving_only_b_is_never_a_ceiling_and_moving_a_by_0_1_always_is(tmp_path, replicate):
    specs = {"base": {}, "a-up": {"a": 0.7}, "b-only": {"b": 3.0}}
    report = build_ablation_report(
        synthetic_runs(tmp_path, specs, replicate=replicate, own_noise=0.003), seeds=3, margin=0.02
    )
    by_slug = {item.run.slug: item.verdict for item in report.variants}
    assert by_slug["b-only"].verdict != CEILING
    assert all(pair.verdict[0] != CEILING for pair in by_slug["b-only"].pairs)
    assert (by_slug["a-up"].verdict, by_slug["a-up"].direction) == (CEILING, "up")


def test_one_seed_uses_the_fits_own_intervals(paired_report):
    single = [
        ReportRun(item.run.slug, item.run.name, item.run.knob, item.run.is_base, item.run.metrics_paths[:1])
        for item in paired_report.variants
        if item.run.slug in ("base", "a-up")
    ]
    report = build_ablation_report(single, seeds=1)
    assert (report.margin, report.margin_source) == (0.02, "paper default")
    verdict = report.variants[1].verdict
    assert verdict.delta_a.source == "fit intervals" and verdict.verdict == CEILING
    base_a = report.variants[0].params["A"]
    assert base_a.n == 1 and (base_a.lo, base_a.hi) == report.variants[0].fitted[0].conf_int(0.8)["A"]


def test_json_records_the_design_the_pairs_and_the_shared_warm_start(paired_report, tmp_path):
    from scalerl.study.ablation_markdown import markdown_text
    from scalerl.study.ablation_payload import report_payload

    payload = report_payload(paired_report, {"study_seed": 0, "rl_seeds": [0, 1, 2]})
    assert payload["design"]["rl_seeds"] == [0, 1, 2]
    assert payload["design"]["warm_start"]["shared_by_all"] is True
    assert list(payload["design"]["warm_start"]["digests"]) == ["abc123"]
    a_up = next(v for v in payload["variants"] if v["slug"] == "a-up")["effect"]
    assert a_up["effect"] == CEILING and a_up["direction"] == "up" and len(a_up["pairs"]) == 3
    assert a_up["paired_delta_A"]["source"] == "paired t" and a_up["agreement"]["pairs"] == 3
    text = markdown_text(paired_report, design={"rl_seeds": [0, 1, 2]})
    assert "every run started from one warm start" in text and "RL seeds 0, 1, 2" in text


def test_a_variant_on_other_weights_is_noted(tmp_path):
    from scalerl.study.ablation_markdown import report_notes

    runs = synthetic_runs(tmp_path, {"base": {}, "other": {}}, seeds=2)
    for path in runs[1].metrics_paths:
        (path.parent / WARM_START_RECORD).write_text('{"key": "k2", "weights_sha256": "def456"}')
    report = build_ablation_report(runs, seeds=2)
    assert any("other warm-started weights" in note for note in report_notes(report))


def test_summarise_is_the_t_interval_of_the_mean_or_the_single_fit_interval():
    summary = summarise([0.5, 0.6, 0.7], level=0.8, single_interval=None)
    half = 1.8856180831641267 * 0.1 / np.sqrt(3)  # t_{0.9, 2} * s / sqrt(n)
    assert (summary.mean, summary.n) == (pytest.approx(0.6), 3)
    assert (summary.lo, summary.hi) == (pytest.approx(0.6 - half), pytest.approx(0.6 + half))
    assert summarise([1e10, 1e12], 0.8, None, log_scale=True).mean == pytest.approx(1e11)


def test_the_rule_and_the_report_import_without_torch_or_ray():
    code = (
        "import sys; import scalerl.study.paired, scalerl.study.ablate_analysis, scalerl.study.ablation_views, "
        "scalerl.study.ablate_plan, scalerl.cli.app; print('torch' in sys.modules, 'ray' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "False"]


def test_the_json_passes_the_report_schema(paired_report):
    import json

    from scalerl.report.console import json_text
    from scalerl.report.schemas import AblationSummary
    from scalerl.study.ablation_payload import report_payload

    runs = [
        ReportRun(item.run.slug, item.run.name, item.run.knob, item.run.is_base, item.run.metrics_paths[:1])
        for item in paired_report.variants[:2]
    ]
    single = build_ablation_report(runs, seeds=1)  # one pair: no spread (NaN -> null)
    for report in (paired_report, single):
        summary = AblationSummary.model_validate(json.loads(json_text(report_payload(report))))
        assert summary.variants[1].effect.effect is not None


def test_ceilings_that_are_both_limits_are_never_called_equal(tmp_path):
    # R = R0 + (1 - R0) C / (C + C_mid): the ceiling is the top of the pass-rate range, so both fits
    # put A at its bound (a limit). dA = 0 there measures nothing: no "no measurable effect" and
    # no "efficiency only" (both say A is within the margin), even with B clearly different.
    steps = np.arange(0.0, 301.0, 10.0)
    runs = []
    for slug, c_mid in (("base", 180.0), ("faster", 60.0)):
        paths = []
        for k in range(3):
            path = tmp_path / slug / f"seed-{k}" / "metrics.jsonl"
            path.parent.mkdir(parents=True)
            seed_c_mid = c_mid * (0.9, 1.0, 1.1)[k]  # seed i's luck, shared by both variants
            for step, reward in zip(steps, 0.28 + 0.72 * steps / (steps + seed_c_mid)):
                append_row(path, {"step": int(step), "flops": float(step) * 1e11, "val_pass_rate": float(reward)})
            paths.append(path)
        runs.append(ReportRun(slug, slug, None if slug == "base" else "knob=faster", slug == "base", tuple(paths)))
    report = build_ablation_report(runs, seeds=3, margin=0.02)
    base, faster = report.variants
    assert all(fit.ceiling_at_bound for fit in base.fitted + faster.fitted)
    verdict = faster.verdict
    assert verdict.verdict == "undecided" and verdict.a_call == "unclear"
    assert all(pair.ceilings_at_bound and pair.verdict == ("undecided", None) for pair in verdict.pairs)
    assert "top of their range" in verdict.reason and "dB at the shared A" in verdict.reason


def test_unidentified_seeds_get_the_run_length_that_would_pin_their_ceilings(tmp_path):
    # Noise-free sigmoids (A 0.6, B 1.5, R0 0.2) stopped at 1.5 C_mid: the curve is within the
    # margin 0.02 of A at C_mid (0.4 / 0.02 - 1)^(1 / 1.5) = 7.12 C_mid, 4.7 times the last point.
    from scalerl.forecast.fitting import fit_sigmoid
    from scalerl.study.ablation_markdown import run_length_advice

    compute = np.concatenate([[0.0], np.geomspace(100.0, 1500.0, 14)])
    fits = [
        fit_sigmoid(compute, sigmoid_reward(compute, 0.6, 1.5, 1000.0, 0.2) + shift * (compute > 0), n_draws=60)
        for shift in (0.0, 0.001, -0.001)
    ]
    advice = run_length_advice(fits, 0.02)
    times = float(advice.split("at about ")[1].split(" times")[0])
    assert times == pytest.approx(7.12 / 1.5, rel=0.1)
    assert "within 0.02 of their ceilings" in advice


def test_a_run_that_has_not_bent_over_never_moves_the_ceiling(tmp_path):
    # The base (C_mid 1e15) stops at a third of its midpoint: its A is an extrapolation, whatever
    # the fit says; the variant (C_mid 1e13) bends over by 1e14. The per-seed dA differ (the base's
    # extrapolated A is off), yet they compare no ceilings: the knob is undecided, and says why.
    specs = {"base": {"c_mid": 1e15, "a": 0.8}, "early": {"c_mid": 1e13}}
    report = build_ablation_report(synthetic_runs(tmp_path, specs), seeds=3, margin=0.02)
    base, early = report.variants
    assert not any(fit.ceiling_identified for fit in base.fitted)
    assert all(fit.ceiling_identified for fit in early.fitted)
    verdict = early.verdict
    assert all(pair.delta_a > 0.02 for pair in verdict.pairs)  # read as ceilings: "moves the ceiling up"
    assert all(pair.ceiling_unidentified and not pair.measures_a for pair in verdict.pairs)
    assert all(pair.verdict == ("undecided", None) for pair in verdict.pairs)
    assert verdict.verdict == "undecided" and "not bent over" in verdict.reason
    from scalerl.study.ablation_markdown import knob_sentence

    assert "paired dA not measured" in knob_sentence(report, early)


def test_pairs_with_a_run_not_bent_over_are_left_out_of_da(tmp_path):
    # Seeds 0-2 of both runs bend over (dA = +0.1 by construction, every pair); seed 3 of the base
    # is cut at a tenth of the compute (not bent over). The ceiling is judged on the three
    # measurable pairs alone, and the fourth pair says undecided.
    runs = synthetic_runs(tmp_path, {"base": {}, "a-up": {"a": 0.7}}, seeds=3)
    for slug, run_index in (("base", 0), ("a-up", 1)):
        path = tmp_path / slug / "seed-3" / "metrics.jsonl"
        cut = FLOPS <= (3e12 if slug == "base" else FLOPS[-1])
        rewards = sigmoid_reward(
            FLOPS, BASE["a"] + (0.1 if slug == "a-up" else 0.0), BASE["b"], BASE["c_mid"], BASE["r0"]
        )
        path.parent.mkdir(parents=True)
        for step, (flops, reward) in enumerate(zip(FLOPS[cut], rewards[cut])):
            append_row(path, {"step": step, "flops": float(flops), "val_pass_rate": float(reward)})
        runs[run_index] = ReportRun(
            slug, slug, runs[run_index].knob, slug == "base", runs[run_index].metrics_paths + (path,)
        )
    report = build_ablation_report(runs, seeds=4, margin=0.02)
    base, a_up = report.variants
    assert not base.seeds[3].fit.ceiling_identified
    verdict = a_up.verdict
    assert [pair.measures_a for pair in verdict.pairs] == [True, True, True, False]
    assert verdict.delta_a.n == 3 and verdict.delta_a.mean == pytest.approx(0.1, abs=0.01)
    assert (verdict.verdict, verdict.direction) == (CEILING, "up")
    assert verdict.pairs[3].verdict == ("undecided", None)
    assert "1 of 4 seed pairs left out of dA" in verdict.reason and "judged on the other 3" in verdict.reason
