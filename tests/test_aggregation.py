"""Aggregations on a hand-built ragged batch give the hand-computed numbers."""

import pytest
import torch

from scalerl.errors import ConfigError, InputError
from scalerl.rl.aggregation import prompt_mean, sample_mean, token_mean
from scalerl.rl.registry import AGGREGATIONS, get_aggregation

# Three sequences: group 7 holds seq 0 (1 token) and seq 1 (3 tokens); group 3 holds seq 2 (2 tokens).
TOKEN_LOSS = torch.tensor([[4.0, 99.0, 99.0], [1.0, 2.0, 3.0], [10.0, 20.0, 99.0]])
MASK = torch.tensor([[1, 0, 0], [1, 1, 1], [1, 1, 0]])
GROUP_IDS = torch.tensor([7, 7, 3])
_FUNCTIONS = {name: get_aggregation(name) for name in AGGREGATIONS}


def test_token_mean_weighs_every_token_equally():
    assert token_mean(TOKEN_LOSS, MASK).item() == pytest.approx((4 + 1 + 2 + 3 + 10 + 20) / 6)


def test_sample_mean_averages_sequences():
    assert sample_mean(TOKEN_LOSS, MASK).item() == pytest.approx((4.0 + 2.0 + 15.0) / 3)


def test_prompt_mean_averages_tokens_within_groups_then_groups():
    group_7 = (4 + 1 + 2 + 3) / 4
    group_3 = (10 + 20) / 2
    assert prompt_mean(TOKEN_LOSS, MASK, GROUP_IDS).item() == pytest.approx((group_7 + group_3) / 2)


def test_the_three_aggregations_differ_on_a_ragged_batch_and_agree_on_a_uniform_one():
    ragged = {name: fn(TOKEN_LOSS, MASK, GROUP_IDS).item() for name, fn in _FUNCTIONS.items()}
    assert len({round(value, 6) for value in ragged.values()}) == 3
    uniform_mask = torch.ones(3, 3)
    uniform = {name: fn(TOKEN_LOSS, uniform_mask, torch.tensor([0, 0, 1])).item() for name, fn in _FUNCTIONS.items()}
    # Equal lengths and equal group sizes: all three are the plain mean.
    assert uniform["token"] == pytest.approx(uniform["sample"])
    assert uniform["sample"] != pytest.approx(uniform["prompt"])  # groups of 2 and 1 sequences
    equal_groups = {
        name: fn(TOKEN_LOSS[:2], torch.ones(2, 3), torch.tensor([0, 1])).item() for name, fn in _FUNCTIONS.items()
    }
    assert len({round(value, 6) for value in equal_groups.values()}) == 1


def test_fully_masked_sequences_and_groups_are_left_out_not_counted_as_zero():
    mask = MASK.clone()
    mask[2] = 0  # group 3 dropped (e.g. zero-variance filter)
    assert prompt_mean(TOKEN_LOSS, mask, GROUP_IDS).item() == pytest.approx(10 / 4)
    assert sample_mean(TOKEN_LOSS, mask).item() == pytest.approx((4.0 + 2.0) / 2)
    # Same numbers as physically removing the dropped rows.
    assert prompt_mean(TOKEN_LOSS[:2], MASK[:2], GROUP_IDS[:2]).item() == pytest.approx(10 / 4)


def test_gradients_follow_the_weights_of_each_aggregation():
    token_loss = TOKEN_LOSS.clone().requires_grad_(True)
    (gradient,) = torch.autograd.grad(prompt_mean(token_loss, MASK, GROUP_IDS), token_loss)
    expected = torch.tensor([[1 / 8, 0, 0], [1 / 8, 1 / 8, 1 / 8], [1 / 4, 1 / 4, 0]])
    assert torch.allclose(gradient, expected)


def test_empty_batch_gives_a_zero_that_backpropagates():
    token_loss = torch.ones(2, 2, requires_grad=True)
    for name, fn in _FUNCTIONS.items():
        loss = fn(token_loss, torch.zeros(2, 2), torch.tensor([0, 1]))
        loss.backward()
        assert loss.item() == 0.0, name
        assert torch.all(token_loss.grad == 0.0), name


def test_registry_and_errors():
    assert get_aggregation("prompt") is prompt_mean
    with pytest.raises(ConfigError, match="prompt, sample, token"):
        get_aggregation("sequence")
    with pytest.raises(InputError, match="group_ids"):
        prompt_mean(TOKEN_LOSS, MASK, None)
