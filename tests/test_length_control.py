"""Length control: interruption budgets, the DAPO overlong penalty, the interruption phrase."""

import numpy as np
import pytest
import torch

from scalerl.errors import ConfigError, InputError
from scalerl.tasks.rollout import INTERRUPTION_PHRASE
from scalerl.train.generation import sample_interruption_budget
from scalerl.train.step_rollouts import overlong_length_penalty


@pytest.mark.parametrize("make_rng", [lambda: np.random.default_rng(0), lambda: torch.Generator().manual_seed(0)])
def test_budget_is_uniform_over_the_inclusive_range(make_rng):
    rng = make_rng()
    budgets = [sample_interruption_budget(10, 13, rng) for _ in range(400)]
    assert set(budgets) == {10, 11, 12, 13}
    counts = np.bincount(budgets)[10:]
    assert counts.min() > 60  # each of 4 values expected 100 times
    assert sample_interruption_budget(7, 7, make_rng()) == 7


def test_budget_is_deterministic_for_a_seeded_generator():
    first = [sample_interruption_budget(10_000, 12_000, torch.Generator().manual_seed(5)) for _ in range(2)]
    assert first[0] == first[1]
    assert 10_000 <= first[0] <= 12_000


def test_bad_budgets_raise():
    with pytest.raises(ConfigError, match="min_tokens"):
        sample_interruption_budget(12, 10, np.random.default_rng(0))
    with pytest.raises(InputError, match="rng"):
        sample_interruption_budget(1, 2, 42)


def test_overlong_penalty_piecewise_values():
    # max_len 20, cache 4: free up to 16, linear ramp to -1 at 20, -1 beyond.
    lengths = [0, 16, 17, 18, 20, 21, 100]
    penalty = overlong_length_penalty(lengths, max_len=20, cache_len=4)
    assert penalty.tolist() == pytest.approx([0.0, 0.0, -0.25, -0.5, -1.0, -1.0, -1.0])
    assert penalty.dtype == torch.float32
    with pytest.raises(ConfigError, match="cache_len"):
        overlong_length_penalty(lengths, max_len=20, cache_len=0)


def test_interruption_phrase():
    assert INTERRUPTION_PHRASE.endswith("</think>") and INTERRUPTION_PHRASE.startswith("Okay, time is up.")
