"""The analytic overlap bounds of the pipeline modes, with hand-computed answers."""

import pytest

from benchmarks import overlap_bounds as ob
from scalerl.errors import InputError


def test_sync_is_generation_plus_training():
    assert ob.sync_step_seconds(0.3, 0.1) == pytest.approx(0.4)


@pytest.mark.parametrize(
    "gen, train, n, expected",
    [
        (0.1, 0.1, 1, 0.1),  # 1:1, one generator: both sides busy, 2x the synchronous rate
        (0.3, 0.1, 1, 0.3),  # 3:1, one generator: generation-bound
        (0.3, 0.1, 2, 0.15),  # 3:1, two generators: still generation-bound
        (0.3, 0.1, 4, 0.1),  # 3:1, four generators: the trainer is saturated
        (0.8, 0.1, 8, 0.1),  # 8:1, eight generators: exactly saturated
    ],
)
def test_async_bound_is_the_slower_side(gen, train, n, expected):
    assert ob.async_step_seconds(gen, train, n) == pytest.approx(expected)


def test_speedup_over_sync_at_one_to_one_is_two():
    assert ob.sync_step_seconds(0.2, 0.2) / ob.async_step_seconds(0.2, 0.2, 1) == pytest.approx(2.0)


def test_lag_bound_k0_is_sync_and_large_k_stops_binding():
    assert ob.lag_limited_step_seconds(0.3, 0.1, 0) == pytest.approx(0.4)
    assert ob.lag_limited_step_seconds(0.3, 0.1, 3) == pytest.approx(0.1)
    # 8:1 with 8 generators needs k >= 8 to keep the trainer busy: (0.8 + 0.1) / (k + 1)
    assert ob.async_lag_step_seconds(0.8, 0.1, 8, 8) == pytest.approx(0.1)
    assert ob.async_lag_step_seconds(0.8, 0.1, 8, 2) == pytest.approx(0.3)
    assert ob.async_lag_step_seconds(0.8, 0.1, 8, 0) == pytest.approx(0.9)


def test_offpolicy_does_not_overlap_phases():
    assert ob.offpolicy_step_seconds(0.3, 0.1, 1, 4) == pytest.approx(0.4)
    assert ob.offpolicy_step_seconds(0.8, 0.1, 4, 8) == pytest.approx(0.3)


def test_saturation_point():
    assert ob.generators_to_saturate(0.8, 0.1) == 8
    assert ob.generators_to_saturate(0.3, 0.1) == 3
    assert ob.generators_to_saturate(0.1, 0.3) == 1
    assert ob.trainer_saturated(0.3, 0.1, 3) and not ob.trainer_saturated(0.3, 0.1, 2)


def test_efficiency_is_bound_over_measured_time():
    assert ob.efficiency(0.125, 0.1) == pytest.approx(0.8)


def test_weight_bytes_one_put_and_one_fetch_per_generator():
    sizes = ob.weight_bytes_per_step(1_000_000_000, 2, 4)
    assert sizes == {"put": 2_000_000_000, "fetched": 8_000_000_000, "total": 10_000_000_000}


@pytest.mark.parametrize(
    "call",
    [
        lambda: ob.sync_step_seconds(0.0, 0.1),
        lambda: ob.async_step_seconds(0.1, 0.1, 0),
        lambda: ob.lag_limited_step_seconds(0.1, 0.1, -1),
        lambda: ob.offpolicy_step_seconds(0.1, 0.1, 1, 0),
        lambda: ob.weight_bytes_per_step(0, 2, 1),
    ],
)
def test_bad_input_is_an_input_error(call):
    with pytest.raises(InputError):
        call()
