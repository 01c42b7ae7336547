"""verl jobs as they are: examples/data_preprocess/gsm8k.py's train and test parquet files as
task.train_files / task.val_files, scoring by data_source (GSM8K `####`, MATH's last \\boxed{}),
and a verl compute_score(data_source, solution_str, ground_truth, extra_info) used unchanged."""

import json

import pytest
from cli_invocation import invoke

from scalerl.errors import ConfigError, InputError
from scalerl.tasks.config import TaskConfig
from scalerl.tasks.custom_reward import with_reward_functions
from scalerl.tasks.data_sources import gsm8k_answer, last_boxed, math_correct
from scalerl.tasks.loading import load_task
from scalerl.tasks.types import TaskExample

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")


def render(messages):
    return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"


def verl_gsm8k_rows(split, count, offset=0):
    """Rows laid out as verl's examples/data_preprocess/gsm8k.py writes them."""
    rows = []
    for index in range(count):
        a = index + offset
        question = f"{a}+1="
        rows.append(
            {
                "data_source": "openai/gsm8k",
                "prompt": [
                    {
                        "role": "user",
                        "content": question + ' Let\'s think step by step and output the final answer after "####".',
                    }
                ],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": str(a + 1)},
                "extra_info": {
                    "split": split,
                    "index": index,
                    "answer": f"{a}+1 = {a + 1}\n#### {a + 1}",
                    "question": question,
                },
            }
        )
    return rows


@pytest.fixture
def verl_files(tmp_path):
    train, test = tmp_path / "train.parquet", tmp_path / "test.parquet"
    pd.DataFrame(verl_gsm8k_rows("train", 12)).to_parquet(train)
    pd.DataFrame(verl_gsm8k_rows("test", 4, offset=100)).to_parquet(test)
    return train, test


@pytest.mark.parametrize(
    ("solution", "expected"),
    [
        ("so 7 #### 7", 7),
        ("#### 1,234.50", 2469 / 2),
        ("#### $12.", 12),
        ("#### -3", -3),
        ("The answer is 7, not 8. #### 8", 8),
        ("#### 5 and then #### 6", 6),
        ("no marker 7", None),
        ("#### x", None),
    ],
)
def test_the_gsm8k_answer_is_the_number_after_the_last_marker(solution, expected):
    assert gsm8k_answer(solution) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"\boxed{7} no, \boxed{8}", "8"),
        (r"\fbox{3}", "3"),
        (r"\boxed{1} then \fbox{2}", "2"),
        (r"\boxed{{a}", None),
        ("7", None),
    ],
)
def test_last_boxed_reads_the_last_balanced_box(text, expected):
    assert last_boxed(text) == expected


def test_math_credits_the_last_boxed_answer_only():
    assert math_correct(r"so \boxed{0.5}", r"\frac{1}{2}")
    assert not math_correct(r"The answer is \boxed{7}, not \boxed{8}", "7")
    assert not math_correct("The answer is 7", "7")


def test_verl_train_and_test_files_give_the_task_and_score_by_data_source(verl_files):
    train, test = verl_files
    task = load_task(TaskConfig(train_files=str(train), val_files=str(test)), render_chat=render)
    assert task.name == "train" and len(task.train) == 12 and len(task.validation) == 4
    example = task.validation[0]
    assert example.answer == "101" and example.prompt.startswith("<user>100+1=")
    columns = dict(example.columns)
    assert columns["extra_info"]["split"] == "test" and columns["reward_model"]["ground_truth"] == "101"
    # openai/gsm8k is scored by its #### rule, not the default exact check of the whole completion
    assert task.reward("100 plus 1 is 101\n#### 101", example) == 1.0
    assert task.reward("The answer is 101, not 102. #### 102", example) == -1.0
    assert task.reward("101", example) == -1.0
    unknown = TaskExample("q", "101", columns=(("data_source", "my/own"),))
    assert task.reward("101", unknown) == 1.0  # no verifier for it: task.answer_check (exact)


def test_several_train_files_and_a_train_only_file_without_val_files(tmp_path, verl_files):
    train, test = verl_files
    jsonl = tmp_path / "more.jsonl"
    jsonl.write_text(json.dumps({"prompt": "2+2=", "answer": "4"}) + "\n")
    task = load_task(TaskConfig(train_files=f"{train}, {jsonl}", val_files=f"{test},{test}"), render_chat=render)
    assert len(task.train) == 13 and len(task.validation) == 8
    with pytest.raises(InputError, match="no validation rows .*task.val_files"):
        load_task(TaskConfig(name=str(train)), render_chat=render)
    with pytest.raises(ConfigError, match="task.val_files: needs task.train_files"):
        TaskConfig(val_files=str(test))
    with pytest.raises(ConfigError, match="task.train_files: give task.name"):
        TaskConfig(name=str(train), train_files=str(train))


VERL_SCORE = """
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    CALLS.append((data_source, ground_truth, extra_info["index"]))
    score = 1.0 if solution_str.strip().endswith(ground_truth) else 0.0
    return {"score": score, "acc": score} if extra_info["index"] % 2 else score

CALLS = []
"""


def test_a_verl_compute_score_runs_unchanged(tmp_path, verl_files):
    train, test = verl_files
    module = tmp_path / "verl_reward.py"
    module.write_text(VERL_SCORE)
    task = load_task(TaskConfig(train_files=str(train), val_files=str(test)), render_chat=render)
    scored = with_reward_functions(task, f"{module}:compute_score")
    examples = list(task.train[:3])
    # rows 0 and 2 return a float, row 1 a dict with "score"
    assert scored.rewards(["#### 1", "#### 7", "#### 3"], examples) == [1.0, 0.0, 1.0]


def test_a_verl_compute_score_sees_data_source_ground_truth_and_extra_info(tmp_path, verl_files, monkeypatch):
    train, test = verl_files
    (tmp_path / "verl_reward_mod.py").write_text(VERL_SCORE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import verl_reward_mod

    task = load_task(TaskConfig(train_files=str(train), val_files=str(test)), render_chat=render)
    scored = with_reward_functions(task, "verl_reward_mod:compute_score")
    assert scored.rewards(["1", "x"], list(task.train[:2])) == [1.0, 0.0]
    assert verl_reward_mod.CALLS == [("openai/gsm8k", "1", 0), ("openai/gsm8k", "2", 1)]


@pytest.mark.slow  # a 2-step tiny run: ~5 s on 2 shared cores
def test_verl_gsm8k_files_train_and_validate_on_the_test_file(tiny_set_options, tmp_path, verl_files):
    train, test = verl_files
    out = tmp_path / "run"
    result = invoke(
        "train",
        "--out",
        out,
        "--no-progress",
        *tiny_set_options(
            "max_steps=2",
            "eval_every=1",
            f"task.train_files={train}",
            f"task.val_files={test}",
            "eval_prompts=4",
            "model.chat_template={% for m in messages %}{{ m.content }}{% endfor %}",
        ),
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows if "val_pass_rate" in row][-1] == 2
    assert all("val_reward_mean" in row for row in rows if "val_pass_rate" in row)
    table = [json.loads(line) for line in (out / "completions.jsonl").read_text().splitlines()]
    assert [row["step"] for row in table] == [0] * 8 + [1] * 8 + [2] * 8  # eval_logged_completions=8 each time
    assert table[0]["prompt"].startswith("100+1=") and table[0]["answer"] == "101"
    assert {row["reward"] for row in table} <= {1.0, -1.0}
    saved = json.loads((out / "config.json").read_text())["task"]
    assert saved["train_files"] == str(train) and saved["val_files"] == str(test)
