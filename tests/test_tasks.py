"""The built-in arithmetic task, JSONL user tasks and the answer verifiers."""

import json
from fractions import Fraction

import pytest

from scalerl.errors import ConfigError, InputError
from scalerl.tasks.arithmetic import (
    ArithmeticTask,
    arithmetic_example,
    solve_with_steps,
)
from scalerl.tasks.config import TaskConfig
from scalerl.tasks.jsonl import JsonlTask
from scalerl.tasks.loading import load_task
from scalerl.tasks.rollout import Rollout
from scalerl.tasks.types import TaskExample
from scalerl.tasks.verifiers import (
    answer_reward,
    exact_match,
    extract_final_answer,
    get_answer_check,
    math_equal,
    parse_number,
)

SMALL_TASK = TaskConfig(num_train_prompts=300, num_val_prompts=50, seed=0)


# --- built-in task ---------------------------------------------------------------------------


def test_worked_example_has_the_documented_format():
    example = arithmetic_example([12, 47, 30], ["+", "+"])
    assert example.prompt == "12+47+30="
    assert example.answer == "89"
    assert example.demonstration == "<think>12+47=59;59+30=89</think>89"


def test_steps_respect_precedence_and_left_to_right_order():
    assert solve_with_steps([3, 4, 5], ["+", "*"]) == (["4*5=20", "3+20=23"], 23)
    assert solve_with_steps([10, 4, 3], ["-", "-"]) == (["10-4=6", "6-3=3"], 3)
    assert solve_with_steps([2, 3, 4, 5], ["*", "+", "*"]) == (["2*3=6", "4*5=20", "6+20=26"], 26)


def test_every_demonstration_earns_the_reward_and_matches_python_arithmetic():
    task = ArithmeticTask(TaskConfig(num_operands=4, operations="+-*", num_train_prompts=200, num_val_prompts=20))
    for example in task.train:
        assert task.reward(example.demonstration, example) == 1.0
        assert int(example.answer) == eval(example.prompt[:-1])  # the task's own expressions


def test_reward_reads_the_text_after_think_and_is_plus_minus_one():
    task = ArithmeticTask(SMALL_TASK)
    example = TaskExample(prompt="1+2=", answer="3")
    assert task.reward("<think>1+2=3</think>3", example) == 1.0
    assert task.reward("<think>1+2=4</think>4", example) == -1.0
    assert task.reward("3", example) == 1.0  # no think section: the whole completion
    assert task.reward("<think>3</think>33", example) == -1.0
    assert task.reward("", example) == -1.0


def test_train_and_validation_prompts_are_disjoint_unique_and_seeded():
    task = ArithmeticTask(SMALL_TASK)
    train = {e.prompt for e in task.train}
    validation = {e.prompt for e in task.validation}
    assert len(train) == 300 and len(validation) == 50
    assert not train & validation
    assert [e.prompt for e in ArithmeticTask(SMALL_TASK).train] == [e.prompt for e in task.train]
    other_seed = ArithmeticTask(TaskConfig(num_train_prompts=300, num_val_prompts=50, seed=1))
    assert {e.prompt for e in other_seed.train} != train


def test_hard_share_has_the_stated_count_and_length_in_each_pool():
    settings = TaskConfig(num_train_prompts=300, num_val_prompts=50, hard_fraction=0.2, hard_num_operands=9)
    task = ArithmeticTask(settings)
    operand_counts = lambda pool: [e.prompt.count("+") + 1 for e in pool]
    assert sorted(set(operand_counts(task.validation))) == [4, 9]
    assert operand_counts(task.validation).count(9) == 10  # round(0.2 * 50)
    assert operand_counts(task.train).count(9) == 60
    hard = [e for e in task.validation if e.prompt.count("+") == 8]
    assert all(e.demonstration.count(";") == 7 for e in hard)  # 8 reductions, one per step
    assert not {e.prompt for e in task.train} & {e.prompt for e in task.validation}
    assert operand_counts(task.validation)[:10] != [4] * 10  # shuffled in, not appended


def test_prompts_are_tagged_easy_or_hard_for_the_validation_columns():
    task = ArithmeticTask(TaskConfig(num_train_prompts=40, num_val_prompts=20, hard_fraction=0.25, hard_num_operands=6))
    tags = [dict(e.columns)["difficulty"] for e in task.validation]
    lengths = [e.prompt.count("+") + e.prompt.count("-") + e.prompt.count("*") + 1 for e in task.validation]
    assert tags.count("hard") == 5 and all((tag == "hard") == (n == 6) for tag, n in zip(tags, lengths))
    plain = ArithmeticTask(TaskConfig(num_train_prompts=40, num_val_prompts=20))
    assert {dict(e.columns)["difficulty"] for e in plain.validation + plain.train} == {"easy"}


def test_no_hard_share_keeps_the_prompts_of_the_plain_task():
    plain = ArithmeticTask(SMALL_TASK)
    assert plain.validation[0].prompt == "6+6+0+4="  # the seed-0 task, prompt for prompt
    assert ArithmeticTask(TaskConfig(num_train_prompts=300, num_val_prompts=50, hard_fraction=0.0)).train == plain.train


def test_hard_share_bad_values_are_config_errors():
    with pytest.raises(ConfigError, match="task.hard_fraction"):
        TaskConfig(hard_fraction=1.0)
    with pytest.raises(ConfigError, match="task.hard_num_operands"):
        TaskConfig(hard_num_operands=1)
    with pytest.raises(ConfigError, match="with 2 operands"):
        ArithmeticTask(TaskConfig(num_train_prompts=300, num_val_prompts=50, hard_fraction=0.5, hard_num_operands=2))


def test_validation_set_does_not_depend_on_the_training_pool_size():
    small = ArithmeticTask(SMALL_TASK)
    large = ArithmeticTask(TaskConfig(num_train_prompts=900, num_val_prompts=50, seed=0))
    assert small.validation == large.validation


def test_difficulty_knobs_shape_the_prompts():
    task = ArithmeticTask(
        TaskConfig(num_operands=5, max_digits=1, operations="-", num_train_prompts=100, num_val_prompts=10)
    )
    for example in task.train:
        operands = example.prompt[:-1].split("-")
        assert len(operands) == 5 and all(len(op) == 1 for op in operands)
        assert example.demonstration.count(";") == 3  # four reductions


def test_bad_difficulty_settings_raise_config_error():
    with pytest.raises(ConfigError, match="num_operands"):
        TaskConfig(num_operands=1)
    with pytest.raises(ConfigError, match="operations"):
        TaskConfig(operations="+/")
    with pytest.raises(ConfigError, match="distinct prompts"):
        ArithmeticTask(TaskConfig(num_operands=2, max_digits=1, num_train_prompts=100, num_val_prompts=1))


def test_score_batch_rewards_each_rollout_against_its_train_prompt():
    from scalerl.train.batch.packed_rollouts import pack_rollouts
    from scalerl.train.step_rollouts import score_batch

    task = ArithmeticTask(SMALL_TASK)

    def rollout(index, text):
        return Rollout(
            prompt_index=index,
            group_index=0,
            prompt_token_ids=(1,),
            completion_token_ids=(),
            generator_logprobs=(),
            token_policy_versions=(),
            reward=0.0,
            truncated=False,
            interrupted=False,
            completion_text=text,
        )

    rollouts = [rollout(3, task.train[3].demonstration), rollout(4, task.train[3].demonstration)]
    assert score_batch(task, pack_rollouts(rollouts)).reward.tolist() == [1.0, -1.0]
    assert len(score_batch(task, pack_rollouts([]))) == 0


# --- verifiers -------------------------------------------------------------------------------


def test_extract_final_answer():
    assert extract_final_answer("<think>a</think> 42 ") == "42"
    assert extract_final_answer("<think>a</think>1</think>2") == "2"
    assert extract_final_answer(" 7\n") == "7"


@pytest.mark.parametrize(
    "predicted, reference",
    [
        ("1/2", "0.5"),
        ("\\frac{1}{2}", "0.5"),
        ("$\\boxed{\\dfrac{1}{2}}$", "1/2"),
        ("1,000", "1000"),
        ("-\\frac{3}{4}", "-0.75"),
        ("2.0", "2"),
        ("x + 1", "x+1"),
        ("50\\%", "50"),
    ],
)
def test_math_equal_accepts_equivalent_forms(predicted, reference):
    assert math_equal(predicted, reference)


@pytest.mark.parametrize("predicted, reference", [("0.33", "1/3"), ("1/0", "1"), ("2", "3"), ("x", "y")])
def test_math_equal_rejects_different_values(predicted, reference):
    assert not math_equal(predicted, reference)


def test_parse_number_is_exact():
    assert parse_number("\\frac{2}{6}") == Fraction(1, 3)
    assert parse_number("-0.125") == Fraction(-1, 8)
    assert parse_number("abc") is None


def test_exact_match_and_answer_checks():
    assert exact_match(" 12", "12") and not exact_match("12.0", "12")
    assert answer_reward("<think>x</think>0.5", "1/2", check="math") == 1.0
    assert answer_reward("<think>x</think>0.5", "1/2", check="exact") == -1.0
    with pytest.raises(ConfigError, match="exact, math"):
        get_answer_check("fuzzy")


# --- JSONL tasks -----------------------------------------------------------------------------


def _write(path, lines):
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return path


def test_jsonl_task_with_split_field(tmp_path):
    path = _write(
        tmp_path / "qa.jsonl",
        [
            {"prompt": "1/2 as decimal?", "answer": "0.5", "split": "train"},
            {"prompt": "2+2?", "answer": 4},
            "",
            {"prompt": "half of 3?", "answer": "3/2", "split": "validation"},
        ],
    )
    task = JsonlTask.from_file(path)
    assert [e.prompt for e in task.train] == ["1/2 as decimal?", "2+2?"]
    assert [e.answer for e in task.validation] == ["3/2"]
    assert task.reward("<think>..</think>1.5", task.validation[0]) == 1.0
    assert task.reward("\\frac{1}{2}", task.train[0]) == 1.0
    assert task.name == "qa"


def test_jsonl_task_without_split_uses_a_seeded_disjoint_hold_out(tmp_path):
    path = _write(tmp_path / "qa.jsonl", [{"prompt": f"q{i}", "answer": str(i)} for i in range(40)])
    task = JsonlTask.from_file(path, val_fraction=0.25, seed=3)
    train = {e.prompt for e in task.train}
    validation = {e.prompt for e in task.validation}
    assert len(validation) == 10 and len(train) == 30 and not train & validation
    assert JsonlTask.from_file(path, val_fraction=0.25, seed=3).validation == task.validation
    assert JsonlTask.from_file(path, val_fraction=0.25, seed=4).validation != task.validation


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ("{not json", "line 2: not valid JSON"),
        ('["a", "b"]', "line 2: expected a JSON object"),
        ('{"prompt": "q"}', "have no 'answer' .* prompt 'q'"),
        ('{"answer": "1"}', "line 2: missing field 'prompt'"),
        ('{"prompt": "", "answer": "1"}', "line 2: 'prompt' must be a non-empty string"),
        ('{"prompt": "q", "answer": null}', "line 2: 'answer' must be a string or a number"),
        ('{"prompt": "q", "answer": "1", "split": "dev"}', "line 2: unknown split 'dev'"),
    ],
)
def test_bad_jsonl_lines_raise_input_error_naming_the_line(tmp_path, bad_line, message):
    path = _write(tmp_path / "bad.jsonl", [{"prompt": "q", "answer": "1"}, bad_line])
    with pytest.raises(InputError, match=message):
        JsonlTask.from_file(path)


def test_missing_or_empty_jsonl_files(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        JsonlTask.from_file(tmp_path / "none.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(InputError, match="no examples"):
        JsonlTask.from_file(tmp_path / "empty.jsonl")


def test_load_task_dispatches_on_the_name(tmp_path):
    assert isinstance(load_task(SMALL_TASK), ArithmeticTask)
    path = _write(tmp_path / "t.jsonl", [{"prompt": "q", "answer": "1"}, {"prompt": "r", "answer": "2"}])
    task = load_task(TaskConfig(name=str(path), answer_check="exact"))
    assert isinstance(task, JsonlTask) and task.answer_check == "exact"
    assert len(task.train) == 1 and len(task.validation) == 1


def test_the_demo_task_caps_its_validation_pass_rate_at_three_quarters():
    """The demo's ceiling by construction: a quarter of its held-out prompts need a worked solution
    longer than any thinking budget, so even their reference completion cannot be produced in time."""
    from scalerl.train.demo import demo_config

    config = demo_config()
    task = ArithmeticTask(config.task)
    held_out = task.validation[: config.eval_prompts]
    too_long = [e for e in held_out if len(e.demonstration.split("</think>")[0]) > config.sampling.thinking_budget_max]
    assert len(held_out) == 512 and len(too_long) == 128
    assert all(
        len(e.demonstration.split("</think>")[0]) <= config.sampling.thinking_budget_min
        for e in held_out
        if e not in too_long
    )
    assert config.eval_greedy and config.eval_samples_per_prompt == 1


def test_modulus_keeps_every_reduction_modulo_m():
    assert solve_with_steps([7, 5, 9, 3], "+++", modulus=10) == (["7+5=2", "2+9=1", "1+3=4"], 4)
    assert solve_with_steps([3, 4, 5], "+*", modulus=10) == (["4*5=0", "3+0=3"], 3)
    assert solve_with_steps([3, 8], "-", modulus=10) == (["3-8=5"], 5)  # (3 - 8) mod 10, never negative
    assert solve_with_steps([7, 5, 9, 3], "+++") == (["7+5=12", "12+9=21", "21+3=24"], 24)
    task = ArithmeticTask(TaskConfig(num_train_prompts=200, num_val_prompts=20, modulus=10))
    assert task.name == "arithmetic-4x1d-+-mod10"
    for example in task.train + task.validation:
        assert task.reward(example.demonstration, example) == 1.0
        operands = [int(v) for v in example.prompt[:-1].split("+")]
        assert example.answer == str(sum(operands) % 10)
        # every step is `a+b=c` with one-digit a, b, c: the same layout in every prompt
        assert [len(step) for step in example.demonstration[7:].split("</think>")[0].split(";")] == [5, 5, 5]


@pytest.mark.parametrize("modulus", [1, -10])
def test_bad_modulus_is_a_config_error(modulus):
    with pytest.raises(ConfigError, match="task.modulus"):
        TaskConfig(modulus=modulus)
