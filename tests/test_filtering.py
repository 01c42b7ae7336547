"""The zero-variance filter drops exactly the prompts whose generations all got the same reward."""

import pytest
import torch

from scalerl.errors import InputError
from scalerl.rl.advantages import count_kept_prompts, zero_variance_keep_mask


def test_drops_exactly_the_constant_groups():
    rewards = torch.tensor([1.0, 1.0, 1.0, -1.0, -1.0, -1.0, 1.0, -1.0, 1.0, 0.5])
    group_ids = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 3, 4])
    keep = zero_variance_keep_mask(rewards, group_ids)
    # group 0 all +1, group 1 all -1, groups 3 and 4 single sequences: dropped; group 2 mixed: kept.
    assert keep.tolist() == [False] * 6 + [True, True] + [False, False]
    report = count_kept_prompts(keep, group_ids)
    assert (report.kept, report.total, report.kept_sequences) == (1, 5, 2)
    assert report.kept_fraction == pytest.approx(0.2)


def test_interleaved_group_ids_and_tolerance():
    rewards = torch.tensor([0.3, 1.0, 0.1 + 0.2, -1.0])
    group_ids = torch.tensor([8, 2, 8, 2])
    assert zero_variance_keep_mask(rewards, group_ids).tolist() == [False, True, False, True]
    assert zero_variance_keep_mask(torch.tensor([0.0, 1e-3]), torch.tensor([0, 0]), reward_tolerance=1e-2).tolist() == [
        False,
        False,
    ]


def test_empty_and_bad_shapes():
    assert zero_variance_keep_mask(torch.zeros(0), torch.zeros(0, dtype=torch.long)).numel() == 0
    with pytest.raises(InputError, match="group_ids"):
        zero_variance_keep_mask(torch.zeros(3), torch.zeros(2, dtype=torch.long))
