"""benchmarks/gain_ahead_choice.py: kappa_1 chosen calibrated first, then sharp, leaving each source out."""

import pytest

from benchmarks.gain_ahead_choice import CALIBRATION_FLOOR, calibrated_choice, gain_ahead_choices, pooled_coverage


def cell(source, fraction, by_log_sd, unit=1.0):
    """A forecast_accuracy cell: {log_sd: (covered flags, interval scores)} of its 80 % band."""
    return {
        "source": source,
        "fraction": fraction,
        "unit": unit,
        "scalerl_by_log_sd": {
            str(log_sd): {"bands": {"0.8": {"covered": covered, "score": score}}}
            for log_sd, (covered, score) in by_log_sd.items()
        },
    }


def test_pooled_coverage_is_the_share_inside_per_fraction():
    cells = [
        cell("a", 0.25, {0.5: ([True, False], [0.1, 0.3])}),
        cell("b", 0.25, {0.5: ([True, True], [0.1, 0.1])}),
        cell("b", 0.5, {0.5: ([False], [0.4])}),
    ]
    assert pooled_coverage(cells, 0.5) == {0.25: pytest.approx(3 / 4), 0.5: 0.0}


def test_the_sharpest_calibrated_value_wins_over_a_sharper_uncalibrated_one():
    """0.25 scores best but holds 0.5 at a quarter of a run (below the floor); 0.75 and 1.0 hold
    enough everywhere, and 0.75 is the sharper of the two (mean score 0.2 against 0.3)."""
    under, over = [True, False], [True, True]
    cells = [
        cell("a", 0.25, {0.25: (under, [0.1, 0.1]), 0.75: (over, [0.2, 0.2]), 1.0: (over, [0.3, 0.3])}),
        cell("a", 0.5, {0.25: (over, [0.1, 0.1]), 0.75: (over, [0.2, 0.2]), 1.0: (over, [0.3, 0.3])}),
    ]
    assert 0.5 < CALIBRATION_FLOOR
    assert calibrated_choice(cells) == 0.75


def test_without_a_calibrated_value_the_best_covering_one_is_taken():
    cells = [cell("a", 0.25, {0.5: ([True, False, False], [0.1] * 3), 1.5: ([True, True, False], [0.5] * 3)})]
    assert calibrated_choice(cells) == 1.5


def test_each_source_is_chosen_on_the_others_only():
    """Source "b" alone needs the wide value; left out, the others choose the narrow one, and "a"
    (chosen on "b") gets the wide one; on every cell the wide one is needed (b's misses pool in)."""
    cells = [
        cell("a", 0.25, {0.25: ([True] * 4, [0.1] * 4), 1.0: ([True] * 4, [0.4] * 4)}),
        cell("b", 0.25, {0.25: ([False] * 4, [0.9] * 4), 1.0: ([True] * 4, [0.4] * 4)}),
    ]
    assert gain_ahead_choices(cells) == {"a": 1.0, "b": 0.25, "all": 1.0}


def test_a_held_out_set_is_scored_with_the_shipped_value_whatever_its_cells_favour():
    """--shipped learns nothing on the runs it scores: every source gets the package's kappa_1, even
    where another grid value would score these cells better."""
    from benchmarks.forecast_accuracy import shipped_choices
    from benchmarks.forecast_accuracy_text import HELD_OUT_SHIPPED, gain_ahead_sentence
    from scalerl.forecast.settings import SETTINGS

    cells = [cell("a", 0.25, {0.0: ([True], [0.01])}), cell("b", 0.5, {1.5: ([True], [0.02])})]
    shipped = SETTINGS.gain_ahead_log_sd_at_decade
    assert shipped not in (0.0, 1.5)
    assert shipped_choices(cells) == {"a": shipped, "b": shipped, "all": shipped}
    report = {"held_out": HELD_OUT_SHIPPED, "gain_ahead_log_sd": {"by_source": {}, "all_sources": shipped}}
    assert gain_ahead_sentence(report) == f"Gain factor's log-sd at one decade: the shipped {shipped:g} on every run."


def test_mid_run_plateaued_calls_are_checked_against_the_final_level():
    """Three plateaued fits and one still rising at a half: the final level is within the margin
    (0.02 of the unit) of A on two (one of them a composite reward of unit 2: 0.03 off, within
    0.04), inside A's interval on one; the still-rising fit and a refused one are not counted."""
    from benchmarks.forecast_accuracy import plateaued_calls
    from benchmarks.render.forecast import plateaued_calls_line

    def fitted(truth, a, interval, verdict="plateaued", unit=1.0):
        return {
            "fraction": 0.5,
            "truth": truth,
            "unit": unit,
            "scalerl": {"verdict": verdict, "A": a, "A_interval": interval},
        }

    cells = [
        fitted(0.60, 0.61, [0.59, 0.62]),
        fitted(1.50, 1.53, [1.52, 1.55], unit=2.0),
        fitted(0.40, 0.45, [0.44, 0.46]),
        fitted(0.40, 0.41, [0.30, 0.50], verdict="still_rising"),
        {"fraction": 0.5, "truth": 0.5, "scalerl": {"error": "fit refused"}},
    ]
    calls = plateaued_calls(cells)
    assert calls["0.5"] == {"calls": 3, "final_within_margin": 2, "final_in_interval": 1}
    assert calls["0.25"]["calls"] == 0
    line = plateaued_calls_line({"plateaued_calls": calls})
    assert (
        "25 / 50 / 75 % of a run: 0 / 3 / 0;" in line
        and "of A on 0 / 2 / 0, inside A's 80 % interval on 0 / 1 / 0." in line
    )
