import numpy as np
import pytest

from scalerl.errors import FitError, InputError
from scalerl.forecast.compare import ceiling_clusters, compare_runs
from scalerl.forecast.curves import sigmoid_reward

COMPUTE = np.concatenate([[0.0], np.linspace(500.0, 40000.0, 16)])


def run(a, b, c_mid=4000.0, r0=0.2):
    return COMPUTE, sigmoid_reward(COMPUTE, a, b, c_mid, r0)


def test_higher_ceiling_wins_when_beyond_margin():
    # FP32 head ablation from the paper: A 0.52 -> 0.61; the low-A run is even more efficient.
    result = compare_runs({"bf16_head": run(0.52, 2.5), "fp32_head": run(0.61, 1.6)}, n_draws=30)
    assert result.winner == "fp32_head" and result.decided_by == "ceiling"
    assert result.fixed_ceiling_fits == {}


def test_same_ceiling_ranked_by_efficiency_after_refit_with_shared_a():
    # Leave-one-out CISPO vs DAPO: same ceiling, B 2.01 vs 1.77.
    result = compare_runs({"dapo": run(0.61, 1.77), "cispo": run(0.605, 2.01)}, n_draws=30)
    assert result.decided_by == "efficiency" and result.ranking == ("cispo", "dapo")
    shared = {fit.a for fit in result.fixed_ceiling_fits.values()}
    assert len(shared) == 1 and shared.pop() == pytest.approx(0.6075, abs=1e-3)
    assert "cispo" in result.summary() and "efficiency" in result.summary()


def test_within_margin_higher_a_but_lower_b_loses():
    result = compare_runs({"high_a": run(0.615, 1.5), "efficient": run(0.60, 2.2)}, n_draws=30)
    assert result.winner == "efficient" and result.decided_by == "efficiency"


def test_three_runs_rank_clusters_by_a_then_b():
    curves = {"low": run(0.49, 3.0), "ref": run(0.61, 1.9), "minimax": run(0.605, 1.5)}
    result = compare_runs(curves, n_draws=30)
    assert result.ranking == ("ref", "minimax", "low")
    assert result.clusters == (("ref", "minimax"), ("low",))


def test_cluster_rule_is_anchored_at_the_best_a():
    clusters = ceiling_clusters({"a": 0.63, "b": 0.615, "c": 0.60}, 0.02)
    assert clusters == (("a", "b"), ("c",))


def test_errors_name_the_run():
    flat = (np.arange(10) * 100.0, np.full(10, 0.3))
    with pytest.raises(FitError, match="two runs with a forecast, 1 of 2 .*'flat': flat: no learning"):
        compare_runs({"ok": run(0.6, 2.0), "flat": flat}, n_draws=30)
    with pytest.raises(InputError, match="two runs"):
        compare_runs({"only": run(0.6, 2.0)})


def test_a_run_with_nothing_to_forecast_is_left_out_of_the_ranking_and_named():
    """Three runs, one flat (no learning): the other two are ranked by the paper's rule as if it
    were not there, and the flat one is named with its verdict, never ranked or silently dropped."""
    flat = (np.arange(10) * 100.0, np.full(10, 0.3))
    curves = {"bf16_head": run(0.52, 2.5), "flat": flat, "fp32_head": run(0.61, 1.6)}
    result = compare_runs(curves, n_draws=30)
    assert result.ranking == ("fp32_head", "bf16_head") and result.decided_by == "ceiling"
    assert set(result.fits) == {"fp32_head", "bf16_head"} and set(result.not_ranked) == {"flat"}
    assert result.not_ranked["flat"].kind == "flat"
    assert any(w.startswith("run 'flat' not ranked: flat: no learning") for w in result.warnings)


def test_flat_run_is_never_the_winner_by_ceiling():
    # a flat run (A 0.985 in [0.20, 1.00], not identified) must not outrank a rising one "by ceiling"
    rng = np.random.default_rng(3)
    flat = COMPUTE, np.clip(0.30 + np.concatenate([[0.0], np.linspace(0.0, 0.06, 16)]) + rng.normal(0, 0.01, 17), 0, 1)
    rising = run(0.7, 2.0, c_mid=8000.0)
    result = compare_runs({"flat": flat, "rising": rising}, n_draws=40)
    assert not result.fits["flat"].ceiling_identified
    assert result.winner == "rising" and result.decided_by != "ceiling" and result.ceiling_undecided


def test_unidentified_ceiling_is_undecided_and_says_how_much_longer():
    early = COMPUTE <= 6000.0  # both runs cut before their inflection (C_mid 12000)
    a = COMPUTE[early], sigmoid_reward(COMPUTE[early], 0.8, 1.8, 12000.0, 0.2)
    b = COMPUTE[early], sigmoid_reward(COMPUTE[early], 0.7, 1.8, 12000.0, 0.2)
    result = compare_runs({"a": a, "b": b}, n_draws=40)
    assert result.ceiling_undecided and result.decided_by != "ceiling"
    if result.decided_by == "undecided":
        assert result.more_compute is not None and result.more_compute > 1.0
        assert "longer" in result.headline()
    assert "ceiling undecided" in result.summary()


def test_identified_ceilings_with_apart_intervals_decide_by_ceiling():
    result = compare_runs({"low": run(0.5, 2.0), "high": run(0.7, 2.0)}, n_draws=40)
    assert result.decided_by == "ceiling" and result.winner == "high" and not result.ceiling_undecided
