"""User reward functions (task.reward, or callables through the Python API): called like TRL's
reward_funcs, combined with weights, and a failing one is one error naming it and the sample."""

import json
import textwrap

import pytest
from cli_invocation import assert_one_line_error, invoke

from scalerl.errors import ConfigError
from scalerl.tasks.custom_reward import RewardFunctionError, combined_rewards, reward_functions
from scalerl.tasks.rollout import Rollout
from scalerl.tasks.types import TaskExample
from scalerl.train.batch.packed_rollouts import pack_rollouts
from scalerl.train.config.train_config import TrainConfig
from scalerl.train.run_setup import build_task
from scalerl.train.step_rollouts import score_batch

MODULE = """
def correct(prompts, completions, answers, **kwargs):
    return [1.0 if c.strip().endswith(a) else 0.0 for c, a in zip(completions, answers)]

def length(completions):  # no **kwargs: gets only what it names
    return [len(c) / 10 for c in completions]

def level(completions, difficulty, **kwargs):  # a dataset column of the JSONL file
    return [float(d) for d in difficulty]

def seen(prompts, completions, answer, **kwargs):  # TRL's column name for the answers
    return [float(p == "2+2=" and a == "4") for p, a in zip(prompts, answer)]

def boom(completions, **kwargs):
    for c in completions:
        if "x" in c:
            raise ValueError("cannot score " + c)
    return [0.0] * len(completions)

def too_few(completions, **kwargs):
    return [1.0]

def fails(completions, **kwargs):
    raise RuntimeError("no scorer here")
"""

EXAMPLES = [TaskExample("2+2=", "4"), TaskExample("3+3=", "6"), TaskExample("1+1=", "2")]


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "my_rewards.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_rewards"


def test_weighted_functions_are_summed_per_sample(user_module):
    functions = reward_functions(f"{user_module}:correct, {user_module}:length", "1, 0.5")
    assert [f.weight for f in functions] == [1.0, 0.5]
    rewards = combined_rewards(functions, ["<think>x</think>4", "5", "2"], EXAMPLES)
    assert rewards == pytest.approx([1 + 0.5 * 1.7, 0.05, 1 + 0.05])
    answer_column = combined_rewards(reward_functions(f"{user_module}:seen"), ["4", "4", "4"], EXAMPLES)
    assert answer_column == [1.0, 0.0, 0.0]


def test_python_callables_and_a_dataset_column(tmp_path, user_module):
    path = tmp_path / "task.jsonl"
    lines = [{"prompt": f"{i}+{i}=", "answer": str(2 * i), "difficulty": i % 3} for i in range(10)]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    config = TrainConfig().with_overrides([f"task.name={path}", f"task.reward={user_module}:level"])
    task = build_task(config)
    rollouts = pack_rollouts(
        [
            Rollout(
                prompt_index=i,
                group_index=0,
                prompt_token_ids=(1,),
                completion_token_ids=(2,),
                generator_logprobs=(0.0,),
                token_policy_versions=(0,),
                reward=0.0,
                truncated=False,
                interrupted=False,
                completion_text="0",
            )
            for i in range(3)
        ]
    )
    difficulties = [float(dict(task.train[i].columns)["difficulty"]) for i in range(3)]
    assert score_batch(task, rollouts).reward.tolist() == difficulties
    doubled = build_task(
        TrainConfig().with_overrides([f"task.name={path}", "task.reward_weights="]),
        reward_functions=[lambda completions, **kwargs: [2.0] * len(completions)],
    )
    assert score_batch(doubled, rollouts).reward.tolist() == [2.0, 2.0, 2.0]
    assert doubled.reward("anything", task.train[0]) == 2.0


def test_a_failing_function_is_one_error_naming_it_and_the_sample(user_module):
    with pytest.raises(
        RewardFunctionError, match=r"my_rewards:boom failed on sample 1 .*'3\+3=.*ValueError: cannot score x"
    ):
        combined_rewards(reward_functions(f"{user_module}:boom"), ["4", "x", "x2"], EXAMPLES)
    with pytest.raises(RewardFunctionError, match="my_rewards:too_few failed on a batch of 3 samples"):
        combined_rewards(reward_functions(f"{user_module}:too_few"), ["4", "6", "2"], EXAMPLES)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["task.reward=no_such_module_xyz:f"], "cannot import no_such_module_xyz"),
        (["task.reward=my_rewards:missing"], "my_rewards has no function 'missing'"),
        (["task.reward=my_rewards"], "is not 'module.path:function'"),
    ],
)
def test_bad_names_are_config_errors(user_module, options, message):
    with pytest.raises(ConfigError, match=message):
        build_task(TrainConfig().with_overrides(options))


def test_weights_must_match_the_functions():
    with pytest.raises(ConfigError, match="task.reward_weights"):
        TrainConfig().with_overrides(["task.reward=a:f,b:g", "task.reward_weights=1"])
    with pytest.raises(ConfigError, match="set task.reward too"):
        TrainConfig().with_overrides(["task.reward_weights=1"])


def test_the_cli_reports_a_raising_reward_function_in_one_line(tmp_path, user_module, tiny_set_options):
    result = invoke(
        "train",
        "--out",
        tmp_path / "run",
        *tiny_set_options(
            f"task.reward={user_module}:fails", "max_steps=1", "eval_every=1", "generations_per_prompt=1"
        ),
    )
    assert_one_line_error(result, "reward function my_rewards:fails failed on sample 0", "RuntimeError: no scorer here")


def test_a_training_step_is_scored_by_the_user_function(tmp_path, user_module, tiny_set_options):
    """End to end: every rollout of a step gets the function's value (truncation: no length penalty)."""
    (tmp_path / "half_reward.py").write_text("def half(completions, **kwargs):\n    return [0.5] * len(completions)\n")
    result = invoke(
        "train",
        "--out",
        tmp_path / "run",
        *tiny_set_options(
            "task.reward=half_reward:half", "max_steps=1", "eval_every=100", "sampling.length_control=truncate"
        ),
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    step = [row for row in rows if row.get("step") == 1][-1]
    assert step["train_reward"] == pytest.approx(0.5)
