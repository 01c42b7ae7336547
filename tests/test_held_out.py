"""The held-out pass rate (train/held_out.py): the mean of rewarded samples, counted per example
in prompt order and split by difficulty group."""

import math

import pytest
import torch
from fixed_logits import SMALL

from scalerl.models.policy import build_tiny_model
from scalerl.tasks.rollout import LengthControl, SamplingSettings
from scalerl.tasks.types import TaskExample
from scalerl.train.held_out import evaluate_pass_rate
from scalerl.train.step_rollouts import generate_rollouts

PROMPTS = ["12+47+30=", "5+6=", "123+4+56+7="]
TRUNCATE = LengthControl(mode="truncate")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def policy():
    return build_tiny_model(SMALL, seed=1)


class _EvenLengthTask:
    """Reward +1 when the completion text has an even number of characters."""

    name = "even"
    train = ()
    validation = ()

    def reward(self, completion_text, example):
        return 1.0 if len(completion_text) % 2 == 0 else -1.0


def test_evaluate_pass_rate_is_the_mean_of_positive_rewards(policy):
    model, tokenizer = policy
    examples = [TaskExample(prompt=p, answer="") for p in PROMPTS]
    sampling = SamplingSettings(max_new_tokens=9)
    rate = evaluate_pass_rate(
        model,
        tokenizer,
        _EvenLengthTask(),
        examples,
        4,
        sampling=sampling,
        length_control=TRUNCATE,
        torch_generator=torch.Generator().manual_seed(9),
        prompts_per_batch=2,
    )
    generator = torch.Generator().manual_seed(9)
    rollouts = []
    for batch in (PROMPTS[:2], PROMPTS[2:]):
        rollouts += generate_rollouts(
            model,
            tokenizer,
            batch,
            list(range(len(batch))),
            num_generations=4,
            sampling=sampling,
            length_control=TRUNCATE,
            torch_generator=generator,
        )
    expected = sum(len(r.completion_text) % 2 == 0 for r in rollouts) / 12
    assert math.isclose(rate, expected)
    assert 0 < rate < 1


def test_correct_counts_per_example_sum_to_the_pass_rate_and_split_by_difficulty(policy):
    """evaluate_correct_counts counts each example's rewarded samples in prompt order; the
    validation columns are the total and each difficulty group's mean of those counts."""
    from scalerl.train.held_out import difficulty_groups, evaluate_correct_counts, pass_rate_columns

    model, tokenizer = policy
    tags = ("easy", "hard", "easy")
    examples = [TaskExample(prompt=p, answer="", columns=(("difficulty", tag),)) for p, tag in zip(PROMPTS, tags)]
    options = dict(sampling=SamplingSettings(max_new_tokens=9), length_control=TRUNCATE, prompts_per_batch=2)
    counts = evaluate_correct_counts(
        model, tokenizer, _EvenLengthTask(), examples, 4, torch_generator=torch.Generator().manual_seed(9), **options
    )
    rate = evaluate_pass_rate(
        model, tokenizer, _EvenLengthTask(), examples, 4, torch_generator=torch.Generator().manual_seed(9), **options
    )
    assert len(counts) == 3 and all(0 <= c <= 4 for c in counts) and math.isclose(sum(counts) / 12, rate)
    columns = pass_rate_columns(counts, 4, difficulty_groups(tuple(examples)))
    assert columns == {
        "val_pass_rate": sum(counts) / 12,
        "val_pass_rate_easy": (counts[0] + counts[2]) / 8,
        "val_pass_rate_hard": counts[1] / 4,
    }


def test_difficulty_groups_need_a_column_on_every_example_and_two_to_eight_values():
    from scalerl.train.held_out import difficulty_groups, pass_rate_columns

    def tagged(*values):
        return tuple(
            TaskExample(prompt=str(i), answer="", columns=() if v is None else (("difficulty", v),))
            for i, v in enumerate(values)
        )

    assert difficulty_groups(tagged("Level 1", 2, "Level 1")) == {"Level_1": [0, 2], "2": [1]}
    assert difficulty_groups(tagged("easy", "easy")) is None  # one group: the total says it all
    assert difficulty_groups(tagged("easy", None)) is None
    assert difficulty_groups(tagged(*range(9))) is None  # a continuous score is no grouping
    assert pass_rate_columns([1, 0, 2], 2, None) == {"val_pass_rate": 0.5}
