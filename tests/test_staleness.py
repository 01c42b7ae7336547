"""The bounded-staleness rule: admit / wait / drop with known lags, and the lag statistics."""

import pytest

from scalerl.distributed.staleness import (
    Admission,
    admit_batch,
    batch_lag_stats,
    latest_consumer_version,
    oldest_version,
    policy_lag,
)
from scalerl.errors import ConfigError, InputError


@pytest.mark.parametrize(
    "oldest, trainer, max_lag, expected",
    [
        (5, 5, 0, Admission.ADMIT),  # fully on-policy
        (4, 5, 0, Admission.WAIT),  # k = 0 accepts no lag at all
        (2, 10, 8, Admission.ADMIT),  # lag 8 == k: the bound is inclusive
        (1, 10, 8, Admission.WAIT),  # lag 9 > k
        (0, 3, 1, Admission.WAIT),
    ],
)
def test_wait_policy_with_known_lags(oldest, trainer, max_lag, expected):
    assert admit_batch(oldest, trainer, max_lag, "wait") is expected


def test_drop_policy_drops_only_stale_batches():
    assert admit_batch(2, 10, 8, "drop") is Admission.ADMIT
    assert admit_batch(1, 10, 8, "drop") is Admission.DROP
    assert admit_batch(7, 7, 0, "drop") is Admission.ADMIT
    assert admit_batch(6, 7, 0, "drop") is Admission.DROP


def test_bad_arguments_raise_named_errors():
    with pytest.raises(ConfigError, match="on_stale"):
        admit_batch(0, 0, 1, "skip")
    with pytest.raises(ConfigError, match="max_lag"):
        admit_batch(0, 0, -1)
    with pytest.raises(InputError, match="newer"):
        admit_batch(3, 2, 1)


def test_dispatch_gate_with_k_zero_allows_one_batch_at_a_time():
    # k = 0: a generator may start only once every committed step is published and nothing
    # else is outstanding; this is what makes the k = 0 pipeline synchronous.
    assert admit_batch(3, latest_consumer_version(3, 0), 0) is Admission.ADMIT
    assert admit_batch(3, latest_consumer_version(3, 1), 0) is Admission.WAIT
    assert admit_batch(2, latest_consumer_version(3, 0), 0) is Admission.WAIT
    # k = 2: two batches may be in flight ahead of a third generated from the latest weights
    assert admit_batch(3, latest_consumer_version(3, 2), 2) is Admission.ADMIT
    assert admit_batch(3, latest_consumer_version(3, 3), 2) is Admission.WAIT


def test_batch_lag_stats_by_hand():
    versions = [(3, 3, 4), (5,), ()]  # 4 tokens; one empty completion counts for nothing
    stats = batch_lag_stats(versions, trainer_version=6)
    assert stats.max == 3 and stats.oldest_policy_version == 3
    assert stats.mean == pytest.approx((3 + 3 + 2 + 1) / 4)
    assert policy_lag(6, 3) == 3
    with pytest.raises(InputError):
        batch_lag_stats([(), ()], trainer_version=1)


def test_oldest_version_falls_back_to_the_start_version():
    assert oldest_version([(4, 5), (2,)], fallback=9) == 2
    assert oldest_version([()], fallback=9) == 9


def test_idle_fraction_by_hand():
    from scalerl.distributed.observability import BusyInterval, BusyLedger, idle_fraction

    # window [10, 20] with 2 workers: busy 3 s (one interval partly outside) + 5 s = 8 of 20 s
    intervals = [BusyInterval(8.0, 13.0), BusyInterval(15.0, 20.0)]
    assert idle_fraction(intervals, 10.0, 20.0, num_workers=2) == pytest.approx(1 - 8 / 20)
    assert idle_fraction([], 10.0, 20.0, num_workers=1) == 1.0
    assert idle_fraction([BusyInterval(0.0, 30.0)], 10.0, 20.0, num_workers=1) == 0.0
    ledger = BusyLedger(num_workers=1)
    ledger.add(10.0, 12.0)
    # work still running since t = 18 counts as busy up to the end of the window
    assert ledger.idle_fraction(10.0, 20.0, in_progress_since=[18.0]) == pytest.approx(0.6)
    assert ledger.idle_fraction(20.0, 30.0) == 1.0  # the old interval was pruned


class _FakeTrainerMethod:
    def __init__(self):
        self.calls = []

    def remote(self, rollouts):
        self.calls.append(rollouts)
        return f"train-ref-{len(self.calls)}"


def _fake_session(*, max_lag, on_stale, committed, published, max_steps=100):
    from types import SimpleNamespace

    trainer = SimpleNamespace(train=_FakeTrainerMethod())
    return SimpleNamespace(
        pipeline=SimpleNamespace(max_lag=max_lag, on_stale=on_stale),
        config=SimpleNamespace(max_steps=max_steps),
        run_state=SimpleNamespace(
            step=committed, pool=SimpleNamespace(active_count=10), update_pool=lambda rollouts: None
        ),
        generators=[object(), object()],
        alive=[True, True],
        steps_committed=committed,
        published_version=published,
        dropped_batches=0,
        trainer=trainer,
        train=trainer.train.remote,
        log=lambda message: None,
        checkpoint_pending=lambda: False,
    )


def _batch(oldest_version):
    from types import SimpleNamespace

    return SimpleNamespace(
        oldest_policy_version=oldest_version,
        packed=SimpleNamespace(columns=lambda: ("columns", oldest_version)),
    )


def test_async_loop_dispatch_gate_asks_with_the_latest_consumer_version():
    from scalerl.distributed.pipeline import _AsyncLoop

    loop = _AsyncLoop(_fake_session(max_lag=0, on_stale="wait", committed=3, published=3), None)
    assert loop.may_dispatch()  # nothing in flight, weights of every committed step published
    loop.generating["ref"] = (0, None, 0.0)
    assert not loop.may_dispatch()  # k = 0: one batch at a time
    loop = _AsyncLoop(_fake_session(max_lag=2, on_stale="wait", committed=4, published=3), None)
    loop.generating["ref"] = (0, None, 0.0)
    assert loop.may_dispatch()  # consumed at version <= 4 + 1 = 5, lag <= 2
    loop.ready[7] = _batch(3)
    assert not loop.may_dispatch()  # would be consumed at version <= 6: lag 3 > 2


def test_a_request_queued_behind_a_running_batch_must_leave_room_for_one_more():
    from scalerl.distributed.pipeline import _AsyncLoop

    # k = 2, both generators running: a free generator could start a third batch, but queued
    # behind a running one it would hold the last of the k + 1 places while generating nothing
    loop = _AsyncLoop(_fake_session(max_lag=2, on_stale="wait", committed=3, published=3), None)
    loop.generating.update({"a": (0, None, 0.0), "b": (1, None, 0.0)})
    assert loop.would_queue(0) and loop.would_queue(1)
    assert loop.may_dispatch() and not loop.may_dispatch(queued=True)
    assert loop.generator_slots() == [0, 1]  # both slots would queue: the run loop sends none
    # k = 8: places for the queued requests too
    loop = _AsyncLoop(_fake_session(max_lag=8, on_stale="wait", committed=3, published=3), None)
    loop.generating.update({"a": (0, None, 0.0), "b": (1, None, 0.0)})
    assert loop.may_dispatch(queued=True)
    # one live generator: its queued request takes no other generator's place
    session = _fake_session(max_lag=1, on_stale="wait", committed=3, published=3)
    session.alive = [True, False]
    loop = _AsyncLoop(session, None)
    loop.generating["a"] = (0, None, 0.0)
    assert not loop.would_queue(0) and loop.may_dispatch()


def test_async_loop_drops_stale_batches_under_drop_and_trains_fresh_ones():
    from scalerl.distributed.pipeline import _AsyncLoop

    session = _fake_session(max_lag=2, on_stale="drop", committed=5, published=5)
    loop = _AsyncLoop(session, None)
    loop.ready.update({8: _batch(3), 7: _batch(2)})  # lag 3 (dropped), lag 2 (trained)
    loop.order.extend([7, 8])  # dispatch order, not arrival order
    loop.feed_trainer()
    loop.feed_trainer()  # one optimiser step at a time: nothing more is queued
    assert session.dropped_batches == 1 and len(session.trainer.train.calls) == 1
    assert session.steps_committed == 6 and not loop.ready


def test_the_config_offers_exactly_the_policies_admit_batch_knows():
    from scalerl.distributed.staleness import STALENESS_POLICIES
    from scalerl.train.config.pipeline_config import STALE_BATCH_POLICIES

    assert tuple(STALE_BATCH_POLICIES) == tuple(STALENESS_POLICIES)
