"""TRL's reward functions as they are: conversational rows give prompts and completions as chat
messages, every dataset column is a keyword (a `solution` column, no `answer` needed), and
trainer_state tells the step; the functions of `trl.rewards` run unchanged."""

import json

import pytest

from scalerl.errors import InputError
from scalerl.tasks.config import TaskConfig
from scalerl.tasks.custom_reward import RewardTrainerState, reward_arguments, with_reward_functions
from scalerl.tasks.loading import load_task
from scalerl.tasks.types import TaskExample


def render(messages):
    return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"


@pytest.fixture
def trl_task(tmp_path):
    rows = [
        {
            "prompt": [{"role": "user", "content": f"What is {i} + {i}?"}],
            "solution": f"${2 * i}$",
            "split": "train" if i <= 3 else "test",
        }
        for i in range(1, 5)
    ]
    path = tmp_path / "trl.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_rows_without_answer_need_reward_functions(trl_task):
    with pytest.raises(InputError, match="no 'answer'.*task.reward"):
        load_task(TaskConfig(name=str(trl_task)), render_chat=render)
    task = load_task(TaskConfig(name=str(trl_task)), render_chat=render, answers_required=False)
    assert [example.answer for example in task.train] == [None, None, None]


def test_conversational_rows_pass_messages_and_every_column(trl_task):
    task = load_task(TaskConfig(name=str(trl_task)), render_chat=render, answers_required=False)
    arguments = reward_arguments(["<think>1+1</think>2"], task.train[:1])
    assert arguments["prompts"] == [[{"role": "user", "content": "What is 1 + 1?"}]]
    assert arguments["completions"] == [[{"role": "assistant", "content": "<think>1+1</think>2"}]]
    assert arguments["solution"] == ["$2$"] and "answer" not in arguments
    plain = reward_arguments(["2"], [TaskExample("1+1=", "2")])
    assert plain["prompts"] == ["1+1="] and plain["completions"] == ["2"] and plain["answer"] == ["2"]


def test_trl_reward_functions_run_unchanged(trl_task):
    pytest.importorskip("trl")
    pytest.importorskip("math_verify")
    task = load_task(TaskConfig(name=str(trl_task)), render_chat=render, answers_required=False)
    scored = with_reward_functions(task, "trl.rewards:think_format_reward, trl.rewards:accuracy_reward", "0.5, 1")
    completions = [
        r"<think>1+1</think>The answer is $\boxed{2}$",
        r"no think, \boxed{4}",
        r"<think>3+3</think>$\boxed{7}$",
    ]
    # think_format: 1, 0, 1 (x 0.5); accuracy: 1, 1, 0
    assert scored.rewards(completions, list(task.train)) == [1.5, 1.0, 0.5]


def test_trainer_state_tells_the_step():
    seen = []

    def by_step(completions, trainer_state, **kwargs):
        seen.append((trainer_state.global_step, trainer_state.max_steps))
        return [float(trainer_state.global_step)] * len(completions)

    task = with_reward_functions(_Task(), [by_step], max_steps=9)
    assert task.rewards(["a"], [TaskExample("q", "1")], RewardTrainerState(3, 9)) == [3.0]
    assert seen == [(3, 9)]


class _Task:
    name = "t"
    train = (TaskExample("q", "1"),)
    validation = (TaskExample("q", "1"),)
