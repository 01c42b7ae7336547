"""Group-centred advantages and their batch / prompt / no normalisation give known numbers."""

import math

import pytest
import torch

from scalerl.errors import ConfigError, InputError
from scalerl.rl.advantages import compute_advantages, group_centered_advantages
from scalerl.rl.registry import get_advantage_normalisation

# Group 0: one pass of four; group 1: two passes of four (rewards +1 / -1).
REWARDS = torch.tensor([1.0, -1.0, -1.0, -1.0, 1.0, 1.0, -1.0, -1.0])
GROUP_IDS = torch.tensor([0, 0, 0, 0, 5, 5, 5, 5])
CENTRED = [1.5, -0.5, -0.5, -0.5, 1.0, 1.0, -1.0, -1.0]


def test_group_centering_subtracts_each_groups_mean():
    assert group_centered_advantages(REWARDS, GROUP_IDS).tolist() == pytest.approx(CENTRED)


def test_batch_normalisation_divides_by_the_std_over_the_whole_batch():
    # population std of CENTRED: mean 0, mean of squares (3 + 4) / 8
    batch_std = math.sqrt(7 / 8)
    advantages = compute_advantages(REWARDS, GROUP_IDS, "batch")
    assert advantages.tolist() == pytest.approx([value / batch_std for value in CENTRED], rel=1e-5)


def test_prompt_normalisation_divides_by_each_groups_std():
    # group 0 std sqrt(3/4), group 1 std 1
    group_std = [math.sqrt(0.75)] * 4 + [1.0] * 4
    advantages = compute_advantages(REWARDS, GROUP_IDS, "prompt")
    assert advantages.tolist() == pytest.approx([c / s for c, s in zip(CENTRED, group_std)], rel=1e-5)
    assert compute_advantages(REWARDS, GROUP_IDS, "none").tolist() == pytest.approx(CENTRED)


def test_constant_group_stays_at_zero_thanks_to_eps():
    rewards = torch.tensor([1.0, 1.0, -1.0, 1.0])
    advantages = compute_advantages(rewards, torch.tensor([0, 0, 1, 1]), "prompt")
    assert torch.isfinite(advantages).all()
    assert advantages[:2].tolist() == [0.0, 0.0]
    assert advantages[2:].tolist() == pytest.approx([-1.0, 1.0], rel=1e-5)
    all_same = compute_advantages(torch.ones(4), torch.tensor([0, 0, 1, 1]), "batch")
    assert all_same.tolist() == [0.0] * 4


def test_keep_mask_excludes_dropped_prompts_from_the_batch_std():
    rewards = torch.cat([REWARDS, torch.ones(4)])
    group_ids = torch.cat([GROUP_IDS, torch.full((4,), 9)])
    keep = torch.tensor([True] * 8 + [False] * 4)
    with_keep = compute_advantages(rewards, group_ids, "batch", keep_mask=keep)
    assert torch.allclose(with_keep[:8], compute_advantages(REWARDS, GROUP_IDS, "batch"))
    assert with_keep[8:].tolist() == [0.0] * 4
    # Without the mask the constant group's zeros shrink the std and inflate the advantages.
    diluted = compute_advantages(rewards, group_ids, "batch")
    nothing_kept = compute_advantages(rewards, group_ids, "batch", keep_mask=torch.zeros(12, dtype=torch.bool))
    assert nothing_kept.tolist() == [0.0] * 12
    assert diluted[0].item() == pytest.approx(with_keep[0].item() * math.sqrt(12 / 8), rel=1e-5)


def test_integer_rewards_and_unknown_names():
    assert compute_advantages(torch.tensor([1, -1]), torch.tensor([0, 0]), "none").tolist() == [1.0, -1.0]
    with pytest.raises(ConfigError, match="batch"):
        compute_advantages(REWARDS, GROUP_IDS, "global")
    with pytest.raises(ConfigError, match="batch, none, prompt"):
        get_advantage_normalisation("global")
    with pytest.raises(InputError, match="group_ids"):
        compute_advantages(REWARDS, GROUP_IDS[:3])


def test_the_resolved_normalisation_gives_what_its_name_gives():
    from scalerl.rl.advantages import normalise_by_batch_std, normalised_advantages

    keep = torch.tensor([True] * 4 + [False] * 4)
    by_function = normalised_advantages(REWARDS, GROUP_IDS, normalise_by_batch_std, keep_mask=keep)
    std = math.sqrt((1.5**2 + 3 * 0.5**2) / 4)  # of group 0's centred rewards, the only kept group
    expected = [1.5 / std, -0.5 / std, -0.5 / std, -0.5 / std] + [0.0] * 4  # float32, eps 1e-6
    assert by_function.tolist() == pytest.approx(expected, abs=1e-5)
    assert torch.equal(by_function, compute_advantages(REWARDS, GROUP_IDS, "batch", keep_mask=keep))
