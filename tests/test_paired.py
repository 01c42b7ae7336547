"""The paired statistics of `scalerl ablate` (scalerl.study.paired): known answers."""

import math

import numpy as np
import pytest

from scalerl.errors import ConfigError
from scalerl.study.paired import (
    CEILING,
    EFFICIENCY,
    NO_EFFECT,
    UNDECIDED,
    PairedInterval,
    ceiling_call,
    efficiency_call,
    knob_verdict,
    pair_verdict,
    paired_differences,
    paired_t_interval,
    single_pair_interval,
    verdict_agreement,
    verdict_label,
)


def interval(lo, hi):
    return PairedInterval((lo + hi) / 2, lo, hi, 0.01, 3, "paired t")


def test_paired_differences_pair_by_seed_index_and_drop_unfitted_pairs():
    assert paired_differences([0.7, 0.72, None, 0.69], [0.6, 0.61, 0.6, float("nan")]).tolist() == pytest.approx(
        [0.1, 0.11]
    )
    with pytest.raises(ConfigError, match="one per seed"):
        paired_differences([0.1, 0.2], [0.1])


def test_paired_t_interval_known_answer():
    # d = 0.08, 0.10, 0.12: mean 0.1, s_d 0.02, t_{0.95, 2} = 2.919986 -> half 2.919986 * 0.02 / sqrt(3)
    result = paired_t_interval([0.08, 0.10, 0.12], level=0.9)
    half = 2.919986 * 0.02 / math.sqrt(3)
    assert (result.mean, result.sd, result.n, result.source) == (pytest.approx(0.1), pytest.approx(0.02), 3, "paired t")
    assert (result.lo, result.hi) == (pytest.approx(0.1 - half, abs=1e-6), pytest.approx(0.1 + half, abs=1e-6))
    one = paired_t_interval([0.05])
    assert one.mean == 0.05 and math.isnan(one.lo) and one.source == "none"
    with pytest.raises(ConfigError, match="level"):
        paired_t_interval([0.1, 0.2], level=1.0)


def test_pairing_removes_the_noise_shared_by_the_pair():
    # seed effects of +-0.15 shared by base and variant: unpaired spread is large, paired spread tiny
    seed_effect = np.array([-0.15, 0.0, 0.15])
    base, variant = 0.6 + seed_effect, 0.65 + seed_effect + np.array([0.001, -0.001, 0.0])
    paired = paired_t_interval(paired_differences(variant.tolist(), base.tolist()))
    assert paired.lo > 0.02 and ceiling_call(paired, 0.02) == "up"
    assert np.std(base, ddof=1) > 0.1  # what an unpaired rule would have had to beat


def test_single_pair_interval_combines_the_fit_intervals():
    result = single_pair_interval(0.1, (0.03, 0.04))
    assert (result.lo, result.hi, result.n, result.source) == (
        pytest.approx(0.05),
        pytest.approx(0.15),
        1,
        "fit intervals",
    )


@pytest.mark.parametrize(
    "lo, hi, call",
    [
        (0.03, 0.09, "up"),
        (-0.09, -0.03, "down"),
        (-0.01, 0.015, "within"),
        (-0.02, 0.02, "within"),
        (0.01, 0.04, "unclear"),
        (-0.05, 0.05, "unclear"),
        (float("nan"), float("nan"), "unclear"),
    ],
)
def test_ceiling_call_reads_the_interval_against_the_margin(lo, hi, call):
    assert ceiling_call(interval(lo, hi), 0.02) == call


def test_efficiency_call_and_knob_verdict():
    assert efficiency_call(interval(0.2, 0.9)) == "up"
    assert efficiency_call(interval(-0.9, -0.1)) == "down"
    assert efficiency_call(interval(-0.1, 0.3)) == "none"
    assert efficiency_call(interval(float("nan"), float("nan"))) == "unclear"
    assert knob_verdict("down", "up") == (CEILING, "down")
    assert knob_verdict("within", "up") == (EFFICIENCY, "up")
    assert knob_verdict("within", "none") == (NO_EFFECT, None)
    assert knob_verdict("within", "unclear") == (UNDECIDED, None)
    assert knob_verdict("unclear", "up") == (UNDECIDED, None)


def test_pair_verdict_is_the_papers_rule_on_one_pair():
    assert pair_verdict(0.05, None, 0.02, None) == (CEILING, "up")
    assert pair_verdict(-0.05, 1.0, 0.02, 0.1) == (CEILING, "down")
    assert pair_verdict(0.01, 1.0, 0.02, 0.1) == (EFFICIENCY, "up")
    assert pair_verdict(0.01, 0.05, 0.02, 0.1) == (NO_EFFECT, None)
    assert pair_verdict(0.01, None, 0.02, None) == (UNDECIDED, None)
    assert pair_verdict(None, 1.0, 0.02, 0.1) == (UNDECIDED, None)


def test_verdict_agreement_and_labels():
    pairs = [(CEILING, "up"), (CEILING, "up"), (NO_EFFECT, None)]
    agreement = verdict_agreement(pairs, (CEILING, "up"))
    assert (agreement.agreeing, agreement.pairs, agreement.modal, agreement.modal_count) == (2, 3, (CEILING, "up"), 2)
    assert verdict_agreement([], (UNDECIDED, None)).pairs == 0
    assert verdict_label(NO_EFFECT, None, 0.02) == "no measurable effect at margin 0.02"
    assert verdict_label(CEILING, "down", 0.02) == "moves the ceiling (down)"
