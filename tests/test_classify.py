"""The paper's two-tier classification of a knob (scalerl.study.classify): margins from the seed
spread, and verdicts on numbers with known answers; then end to end on synthetic seeded curves with
known A and B through scalerl.study.ablate_analysis."""

import numpy as np
import pytest

from scalerl.errors import ConfigError
from scalerl.study.classify import (
    CEILING,
    EFFICIENCY,
    NO_EFFECT,
    NOT_CLASSIFIED,
    b_noise_margin,
    ceiling_effect,
    efficiency_effect,
    pooled_seed_sd,
    seed_spread_margin,
    shared_ceiling,
)
from scalerl.forecast.curves import sigmoid_reward
from scalerl.study.ablate_analysis import build_ablation_report, summarise
from scalerl.train.metrics_log import append_row
from scalerl.study.study_analysis import ReportRun

# ------------------------------------------------------------------------------- margins from spread


def test_pooled_seed_sd_pools_within_groups_only():
    # group x: deviations -1, 0, +1 (SS 2, dof 2); group y: -2, +2 (SS 8, dof 1); z has one value
    spread = pooled_seed_sd({"x": [0.5, 0.6, 0.7], "y": [0.0, 0.4], "z": [9.0]})
    assert spread.dof == 3
    assert spread.sd == pytest.approx(np.sqrt((0.02 + 0.08) / 3))
    assert pooled_seed_sd({"x": [0.5], "y": [0.7]}) is None  # no group has two seeds


def test_seed_spread_margin_is_two_standard_errors_of_a_difference_with_a_floor():
    margin = seed_spread_margin({"base": [0.60, 0.62, 0.64], "v": [0.50, 0.52, 0.54]}, seeds=3)
    assert margin.source == "seed spread" and margin.pooled_sd == pytest.approx(0.02) and margin.dof == 4
    assert margin.value == pytest.approx(2 * 0.02 * np.sqrt(2 / 3))
    tight = seed_spread_margin({"base": [0.600, 0.6001], "v": [0.5, 0.5001]}, seeds=2)
    assert tight.source == "floor" and tight.value == 0.005
    single = seed_spread_margin({"base": [0.6], "v": [0.5]}, seeds=1)
    assert single.source == "paper default" and single.value == 0.02
    assert "paper" in single.describe() and "2 x SD" in margin.describe()
    with pytest.raises(ConfigError):
        seed_spread_margin({}, seeds=0)


def test_b_noise_margin_from_seeds_or_from_intervals():
    assert b_noise_margin([1.0, 1.2], [2.0, 2.2]) == pytest.approx(2 * np.sqrt(0.02) * 1.0)
    assert b_noise_margin([1.0], [2.0], interval_halfwidths=(0.3, 0.4)) == pytest.approx(0.5)
    assert b_noise_margin([1.0], [2.0]) is None


# --------------------------------------------------------------------------------------- verdicts


def test_a_lower_by_more_than_the_margin_moves_the_ceiling_down():
    effect = ceiling_effect([0.60, 0.61, 0.59], [0.50, 0.51, 0.49], margin=0.02)
    assert (effect.effect, effect.direction) == (CEILING, "down")
    assert effect.delta_a == pytest.approx(-0.10) and effect.label() == "moves the ceiling (down)"
    assert ceiling_effect([0.5], [0.53], margin=0.02).direction == "up"


def test_a_within_the_margin_goes_to_tier_two():
    assert ceiling_effect([0.60], [0.61], margin=0.02) is None
    assert shared_ceiling([0.60, 0.62], [0.60]) == pytest.approx(0.605)


def test_equal_a_higher_b_is_efficiency_only_and_equal_b_is_no_effect():
    effect = efficiency_effect(0.005, 0.02, base_b=[1.5, 1.6, 1.4], variant_b=[3.0, 3.1, 2.9])
    assert (effect.effect, effect.direction) == (EFFICIENCY, "up")
    assert effect.delta_b == pytest.approx(1.5)
    lower = efficiency_effect(0.0, 0.02, base_b=[1.5, 1.6, 1.4], variant_b=[1.0, 1.1, 0.9])
    assert (lower.effect, lower.direction) == (EFFICIENCY, "down")
    same = efficiency_effect(0.0, 0.02, base_b=[1.5, 1.6, 1.4], variant_b=[1.55, 1.45, 1.5])
    assert (same.effect, same.direction) == (NO_EFFECT, None)
    single = efficiency_effect(0.0, 0.02, base_b=[1.5], variant_b=[1.8], interval_halfwidths=(0.3, 0.3))
    assert single.effect == NO_EFFECT  # 0.3 apart, intervals +-0.42 combined


def test_missing_fits_are_not_classified():
    assert ceiling_effect([], [0.5], margin=0.02).effect == NOT_CLASSIFIED
    assert "base" in ceiling_effect([], [0.5], margin=0.02).reason
    assert efficiency_effect(0.0, 0.02, [], [1.0]).effect == NOT_CLASSIFIED
    assert efficiency_effect(0.0, 0.02, [1.0], [2.0]).effect == NOT_CLASSIFIED  # no spread, no interval
    with pytest.raises(ConfigError):
        ceiling_effect([0.5], [0.5], margin=-1)


def test_summarise_is_the_t_interval_of_the_mean_or_the_single_fit_interval():
    summary = summarise([0.5, 0.6, 0.7], level=0.8, single_interval=None)
    half = 1.8856180831641267 * 0.1 / np.sqrt(3)  # t_{0.9, 2} * s / sqrt(n)
    assert (summary.mean, summary.n) == (pytest.approx(0.6), 3)
    assert (summary.lo, summary.hi) == (pytest.approx(0.6 - half), pytest.approx(0.6 + half))
    assert summarise([0.5], 0.8, (0.4, 0.55)) == type(summary)(0.5, 0.4, 0.55, 1)
    geometric = summarise([1e10, 1e12], 0.8, None, log_scale=True)
    assert geometric.mean == pytest.approx(1e11)


# ------------------------------------------------------------- synthetic seeded curves, end to end

FLOPS = np.concatenate([[0.0], np.geomspace(1e12, 3e14, 24)])
BASE = {"a": 0.6, "b": 1.5, "c_mid": 1e13, "r0": 0.1}


def _write_seed(path, seed, **changes):
    params = {**BASE, **changes}
    rewards = sigmoid_reward(FLOPS, params["a"], params["b"], params["c_mid"], params["r0"])
    noise = np.random.default_rng(seed).normal(0.0, 0.004, FLOPS.size)
    noise[0] = 0.0
    path.parent.mkdir(parents=True, exist_ok=True)
    for step, (flops, reward) in enumerate(zip(FLOPS, rewards + noise)):
        append_row(path, {"step": step, "flops": float(flops), "val_pass_rate": float(reward)})
    return path


@pytest.fixture(scope="module")
def synthetic_report(tmp_path_factory):
    """Three seeds each: base (A .6, B 1.5); low-ceiling (A .5); faster (B 3); same (base again)."""
    out = tmp_path_factory.mktemp("ablate")
    specs = {"base": {}, "low-ceiling": {"a": 0.5}, "faster": {"b": 3.0}, "same": {}}
    runs = []
    for index, (slug, changes) in enumerate(specs.items()):
        paths = tuple(_write_seed(out / slug / f"seed-{k}" / "metrics.jsonl", 10 * index + k, **changes)
                      for k in range(3))
        runs.append(ReportRun(slug, slug, None if slug == "base" else f"knob={slug}", slug == "base", paths))
    return build_ablation_report(runs, seeds=3)


def test_synthetic_ablation_classifies_each_known_knob(synthetic_report):
    report = synthetic_report
    by_slug = {item.run.slug: item for item in report.variants}
    assert report.margin.source in ("seed spread", "floor") and report.margin.value < 0.03
    assert by_slug["base"].effect is None
    assert by_slug["base"].params["A"].mean == pytest.approx(0.6, abs=0.01)
    assert by_slug["base"].params["A"].n == 3
    low = by_slug["low-ceiling"].effect
    assert (low.effect, low.direction) == (CEILING, "down") and low.delta_a == pytest.approx(-0.1, abs=0.015)
    faster = by_slug["faster"].effect
    assert (faster.effect, faster.direction) == (EFFICIENCY, "up")
    assert by_slug["faster"].shared_a == pytest.approx(0.6, abs=0.01)
    variant_b, base_b = by_slug["faster"].b_at_shared_a
    assert np.mean(variant_b) == pytest.approx(3.0, rel=0.2) and np.mean(base_b) == pytest.approx(1.5, rel=0.15)
    assert by_slug["same"].effect.effect == NO_EFFECT


def test_a_given_margin_overrides_the_seed_spread(synthetic_report):
    runs = [item.run for item in synthetic_report.variants if item.run.slug in ("base", "low-ceiling")]
    report = build_ablation_report(runs, seeds=3, margin=0.2)
    assert report.margin.source == "given" and report.margin.value == 0.2
    low = report.variants[1].effect
    assert low.effect != CEILING  # 0.1 apart is inside a 0.2 margin: tier 2 decides


def test_one_seed_uses_the_papers_margin_and_the_fits_own_intervals(synthetic_report):
    runs = [item.run for item in synthetic_report.variants]
    single = [type(run)(run.slug, run.name, run.knob, run.is_base, run.metrics_paths[:1]) for run in runs]
    report = build_ablation_report(single, seeds=1)
    assert (report.margin.source, report.margin.value) == ("paper default", 0.02)
    by_slug = {item.run.slug: item for item in report.variants}
    assert by_slug["low-ceiling"].effect.label() == "moves the ceiling (down)"
    assert by_slug["faster"].effect.label() == "efficiency only (up)"
    base_a = by_slug["base"].params["A"]
    assert base_a.n == 1 and (base_a.lo, base_a.hi) == by_slug["base"].fitted[0].conf_int(0.8)["A"]


def test_the_rule_and_the_ablation_report_import_without_torch_or_ray():
    import subprocess
    import sys

    code = ("import sys; import scalerl.study.classify, scalerl.study.ablate_analysis, scalerl.study.ablation_views, "
            "scalerl.study.ablate_plan, scalerl.cli.app; print('torch' in sys.modules, 'ray' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "False"]
