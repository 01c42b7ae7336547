"""What validation counts as a pass (task.pass_threshold, or the verifier with
task.pass_by_verifier), scored one batch per reward-function call, with each function's values."""

import pytest

from scalerl.errors import ConfigError
from scalerl.tasks.config import TaskConfig
from scalerl.tasks.custom_reward import with_reward_functions
from scalerl.tasks.jsonl import JsonlTask
from scalerl.tasks.passing import score_samples
from scalerl.tasks.types import TaskExample

EXAMPLES = [TaskExample("1+1=", "2"), TaskExample("2+2=", "4"), TaskExample("3+3=", "6")]
TEXTS = ["<think>x</think>2", "<think>x</think>5", "6"]
CALLS = []


def tags(completions, **kwargs):
    CALLS.append(len(completions))
    return [0.5 if c.startswith("<think>") else 0.0 for c in completions]


def correct(completions, answer, **kwargs):
    return [1.0 if c.endswith(a) else -1.0 for c, a in zip(completions, answer)]


def _task():
    return with_reward_functions(JsonlTask("t", EXAMPLES, EXAMPLES, "exact"), [tags, correct])


def test_a_format_bonus_passes_at_threshold_zero_but_not_above_it():
    CALLS.clear()
    scores = score_samples(_task(), TEXTS, EXAMPLES)
    assert scores.rewards == [1.5, -0.5, 1.0] and scores.passed == [True, False, True]
    assert scores.function_values == {"tags": [0.5, 0.5, 0.0], "correct": [1.0, -1.0, 1.0]}
    assert CALLS == [3]  # one call for the batch
    assert score_samples(_task(), TEXTS, EXAMPLES, pass_threshold=1.2).passed == [True, False, False]


def test_the_verifier_verdict_ignores_shaping_rewards():
    def always_negative(completions, **kwargs):
        return [-1.0] * len(completions)

    task = with_reward_functions(JsonlTask("t", EXAMPLES, EXAMPLES, "exact"), [always_negative])
    assert score_samples(task, ["2", "5", "6"], EXAMPLES).passed == [False, False, False]
    assert score_samples(task, ["2", "5", "6"], EXAMPLES, by_verifier=True).passed == [True, False, True]


def test_a_task_without_functions_passes_by_its_reward():
    scores = score_samples(JsonlTask("t", EXAMPLES, EXAMPLES, "exact"), ["2", "5", "6"], EXAMPLES)
    assert scores.rewards == [1.0, -1.0, 1.0] and scores.passed == [True, False, True]


def test_pass_settings_are_checked():
    with pytest.raises(ConfigError, match="task.pass_by_verifier"):
        TaskConfig(pass_by_verifier=True)
    with pytest.raises(ConfigError, match="task.pass_threshold"):
        TaskConfig(pass_threshold=float("nan"))
