"""One forecast, one answer: properties of every fit's output over random curve shapes (Hypothesis).

Random sigmoids, power laws, take-offs, collapses, flat and decreasing curves of random length and
noise: every estimate lies inside its interval, the forecast never rises above A, "plateaued" only
when A's 80 % interval is within the margin, a collapse is never told to run longer, the verdict is
the same in the text, the JSON, the figure's title and at every level, and points added along a
plateau never turn "plateaued" into "run longer" (forecast.invariants names each rule).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalerl.errors import NoForecastError
from scalerl.forecast.curves import power_law_reward, sigmoid_reward
from scalerl.forecast.fitting import fit_sigmoid
from scalerl.forecast.invariants import contradictions
from scalerl.report.headline import fit_headline

N_DRAWS = 60
FEW = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
SHAPES = ("sigmoid", "power_law", "take_off", "collapse", "flat", "decreasing")


def shaped_reward(shape: str, compute: np.ndarray, a: float, b: float, c_mid: float, r0: float) -> np.ndarray:
    """The noise-free curve of one shape (compute > 0), rewards in [0, 1]."""
    if shape == "sigmoid":
        return sigmoid_reward(compute, a, b, c_mid, r0)
    if shape == "power_law":
        return np.maximum(power_law_reward(compute / compute[0], a, a - r0, 0.3 * b), r0)
    if shape == "take_off":  # flat at R0, then a logistic climb in linear compute
        return r0 + (a - r0) / (1.0 + np.exp(-(compute - c_mid) / (0.05 * compute[-1])))
    if shape == "collapse":  # a sigmoid that falls back to R0 over the last third
        rise = sigmoid_reward(compute, a, b, c_mid, r0)
        fall_from = int(2 * compute.size / 3)
        rise[fall_from:] = np.linspace(rise[fall_from - 1], r0, compute.size - fall_from)
        return rise
    if shape == "flat":
        return np.full(compute.size, r0)
    return np.linspace(a, r0, compute.size)  # decreasing


@st.composite
def curves(draw, shapes=SHAPES):
    shape = draw(st.sampled_from(shapes))
    n = draw(st.integers(6, 40))
    compute = np.geomspace(1.0, draw(st.floats(10.0, 1e4)), n)
    r0 = draw(st.floats(0.0, 0.4))
    a = draw(st.floats(r0 + 0.1, min(r0 + 0.6, 0.98)))
    b = draw(st.floats(0.5, 4.0))
    c_mid = float(compute[0] * (compute[-1] / compute[0]) ** draw(st.floats(0.1, 1.2)))
    noise = draw(st.sampled_from([0.002, 0.006, 0.02]))
    seed = draw(st.integers(0, 2**16))
    clean = shaped_reward(shape, compute, a, b, c_mid, r0)
    reward = np.clip(clean + np.random.default_rng(seed).normal(0.0, noise, n), 0.0, 1.0)
    return shape, compute, reward


def fitted(compute, reward, **options):
    """The fit, or None where there is nothing to fit (flat, decreasing, too few: a NoForecastError)."""
    try:
        return fit_sigmoid(compute, reward, n_draws=N_DRAWS, **options)
    except NoForecastError as error:
        assert error.verdict.kind in ("flat", "decreasing", "too_few", "collapsed")
        assert not error.verdict.advises_longer_run
        return None


@given(curve=curves())
@FEW
def test_every_fit_keeps_every_invariant(curve):
    shape, compute, reward = curve
    fit = fitted(compute, reward)
    if fit is None:
        return
    assert contradictions(fit, predict_at=(10.0 * compute[-1],)) == []
    # a run length only where the fitted curve describes the run's end, and the text says why not
    missing = fit.verdict.run_length_missing_because
    assert (fit.to_dict()["compute_near_ceiling"] is None) == (missing is not None)
    assert fit.run_length_text().startswith("none: ") == (missing is not None)
    if shape == "collapse" and fit.collapse_compute is not None:
        assert fit.verdict.kind == "collapsed"


@given(curve=curves(shapes=("sigmoid", "take_off", "collapse")), level=st.sampled_from([0.5, 0.8, 0.95]))
@FEW
def test_the_verdict_is_the_same_in_text_json_and_title_at_every_level(curve, level):
    from scalerl.report.plotting import plot_fit  # noqa: F401  (the title is fit_headline's sentence)

    _, compute, reward = curve
    fit = fitted(compute, reward, level=level)
    if fit is None:
        return
    text = fit.verdict.text
    assert fit.to_dict(level)["verdict"]["text"] == text == fit.to_dict(0.8)["verdict"]["text"]
    assert fit_headline(fit, level=level).startswith(text)
    assert text in fit.summary()
    other = fitted(compute, reward, level=0.95 if level != 0.95 else 0.5)
    assert other.verdict == fit.verdict


@given(curve=curves(shapes=("sigmoid", "power_law", "take_off")), level=st.sampled_from([0.5, 0.8, 0.95]))
@FEW
def test_a_targets_reach_agrees_with_the_ceilings_interval(curve, level):
    """A target below A is reached, one above A but inside A's interval probably not (with the
    earliest compute), one above A's interval not reachable: never "not reachable" beside an
    interval of A that holds the target."""
    from scalerl.report.headline import target_phrase

    _, compute, reward = curve
    fit = fitted(compute, reward)
    if fit is None:
        return
    ceiling = fit.ceiling_draws
    a_hi = fit.conf_int(level)["A"][1]
    tail = (1.0 - level) / 2.0
    # targets between the draws' order statistics, away from the edges: 70 % of the draws above
    # `below`, between the tail's share and half above `inside`, none above `above`
    below, inside = (float(q) for q in np.quantile(ceiling, [0.3, 0.75 - tail / 2.0]))
    above = float(np.max(ceiling)) + 1e-6
    reached = fit.compute_to_reach(below, level)
    assert reached.reachable and below <= fit.a and "reached at compute" in target_phrase(fit, below, level)
    if tail + 0.05 < np.mean(ceiling > inside) < 0.45:
        maybe = fit.compute_to_reach(inside, level)
        assert maybe.within_ceiling_interval and fit.a <= inside <= a_hi
        assert "probably not reached" in target_phrase(fit, inside, level) and "probably not" in maybe.message()
    gone = fit.compute_to_reach(above, level)
    assert not gone.reachable and not gone.within_ceiling_interval and above >= a_hi
    assert "not reachable" in target_phrase(fit, above, level) and "not reachable" in gone.message()


@given(
    a=st.floats(0.3, 0.9),
    noise=st.sampled_from([0.002, 0.005, 0.01]),
    extra=st.integers(4, 20),
    seed=st.integers(0, 2**16),
)
@FEW
def test_points_added_along_a_plateau_never_turn_plateaued_into_run_longer(a, noise, extra, seed):
    rng = np.random.default_rng(seed)
    compute = np.geomspace(1.0, 1e3, 24)  # C_mid = 10: the run ends at 100 x C_mid, on its plateau
    reward = sigmoid_reward(compute, a, 1.8, 10.0, 0.1 * a) + rng.normal(0.0, noise, compute.size)
    fit = fitted(compute, reward)
    more_compute = compute[-1] * np.geomspace(1.2, 10.0, extra)
    longer = np.concatenate([reward, a + rng.normal(0.0, noise, extra)])
    fit_longer = fitted(np.concatenate([compute, more_compute]), longer)
    if fit.verdict.kind == "plateaued":
        assert not fit_longer.verdict.advises_longer_run


@pytest.mark.parametrize("seed", range(3))
def test_a_known_sigmoid_is_recovered_and_plateaued(seed):
    compute = np.geomspace(1.0, 1e3, 30)
    reward = sigmoid_reward(compute, 0.62, 1.7, 20.0, 0.15) + np.random.default_rng(seed).normal(0.0, 0.005, 30)
    fit = fit_sigmoid(compute, reward, n_draws=N_DRAWS)
    assert abs(fit.a - 0.62) < 0.01 and abs(fit.b - 1.7) < 0.3 and abs(np.log(fit.c_mid / 20.0)) < 0.2
    assert fit.verdict.kind == "plateaued" and contradictions(fit) == []
