"""No-positive-resampling pool: removal at >= threshold only, sampling rules, JSON state."""

import json

import numpy as np
import pytest

from scalerl.errors import ConfigError, InputError, ScaleRLError
from scalerl.rl.curriculum import PromptPool, PromptPoolExhaustedError, pass_rates_by_prompt


def test_removes_at_threshold_and_not_below():
    pool = PromptPool(4, threshold=0.9)
    assert pool.update(0, 0.875) is False
    assert pool.update(1, 0.9) is True
    assert pool.update(2, 1.0) is True
    assert pool.update(1, 1.0) is False  # already gone
    assert pool.active_count == 2
    assert pool.active_indices().tolist() == [0, 3]
    # Removal is for good: a later low pass rate does not bring a prompt back.
    pool.update(1, 0.0)
    assert pool.removed == frozenset({1, 2})


def test_threshold_is_configurable_and_disabled_pool_never_removes():
    pool = PromptPool(3, threshold=0.5)
    assert pool.update_many({0: 0.5, 1: 0.25, 2: 0.75}) == [0, 2]
    disabled = PromptPool(3, enabled=False)
    assert disabled.update_many({0: 1.0, 1: 1.0}) == []
    assert disabled.active_count == 3


def test_sample_without_replacement_and_never_removed_prompts():
    pool = PromptPool(10)
    pool.update_many({3: 1.0, 7: 0.95})
    rng = np.random.default_rng(0)
    for _ in range(20):
        chosen = pool.sample(5, rng)
        assert len(chosen) == len(set(chosen)) == 5
        assert not {3, 7} & set(chosen)
        assert all(isinstance(index, int) for index in chosen)
    assert pool.sample(4, np.random.default_rng(1)) == pool.sample(4, np.random.default_rng(1))


def test_fewer_active_than_requested_returns_all_active_and_empty_pool_raises():
    pool = PromptPool(3)
    pool.update(1, 1.0)
    assert sorted(pool.sample(5, np.random.default_rng(0))) == [0, 2]
    pool.update_many({0: 1.0, 2: 0.9})
    with pytest.raises(PromptPoolExhaustedError, match="all 3 prompts"):
        pool.sample(1, np.random.default_rng(0))
    assert issubclass(PromptPoolExhaustedError, ScaleRLError)


def test_state_round_trips_through_json():
    pool = PromptPool(6, threshold=0.8, enabled=True)
    pool.update_many({5: 0.9, 2: 0.8, 1: 0.1})
    restored = PromptPool.from_state_dict(json.loads(json.dumps(pool.state_dict())))
    assert restored.state_dict() == pool.state_dict()
    assert (restored.removed, restored.threshold, restored.enabled) == (frozenset({2, 5}), 0.8, True)
    assert restored.sample(6, np.random.default_rng(3)) == pool.sample(6, np.random.default_rng(3))


def test_bad_values_and_states_are_rejected():
    with pytest.raises(ConfigError, match="threshold"):
        PromptPool(3, threshold=1.5)
    with pytest.raises(ConfigError, match="num_prompts"):
        PromptPool(0)
    pool = PromptPool(3)
    with pytest.raises(InputError, match="prompt_index"):
        pool.update(3, 1.0)
    with pytest.raises(InputError, match="pass_rate"):
        pool.update(0, 1.5)
    state = pool.state_dict()
    with pytest.raises(InputError, match="removed"):
        PromptPool.from_state_dict({key: value for key, value in state.items() if key != "removed"})
    with pytest.raises(InputError, match="outside"):
        PromptPool.from_state_dict({**state, "removed": [7]})


def test_pass_rates_by_prompt_counts_positive_rewards():
    rates = pass_rates_by_prompt([4, 4, 4, 4, 9, 9], [1.0, -1.0, 1.0, 1.0, -1.0, -1.0])
    assert rates == {4: 0.75, 9: 0.0}
