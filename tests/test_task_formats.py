"""Tasks as TRL and verl hand them over: TRL's conversational `prompt` lists and prompt-completion
rows, a verl parquet file written by pandas, and a dataset id resolved in a local Hugging Face
cache (nothing downloaded); hostile task files end in one InputError."""

import json

import pytest
from cli_invocation import assert_one_line_error, invoke

from scalerl.errors import InputError
from scalerl.tasks.config import TaskConfig
from scalerl.tasks.loading import load_task
from scalerl.tasks.types import TaskExample


def render(messages):
    return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def test_trl_conversational_prompts_and_prompt_completion_rows(tmp_path):
    path = write_jsonl(
        tmp_path / "trl.jsonl",
        [
            {
                "prompt": [{"role": "system", "content": "Add."}, {"role": "user", "content": "1+2="}],
                "answer": "3",
                "split": "train",
            },
            {"prompt": "2+2=", "completion": "<think>2+2</think>4", "split": "train"},
            {
                "prompt": [{"role": "user", "content": "3+3="}],
                "completion": [{"role": "assistant", "content": "<think>3+3</think>6"}],
                "split": "test",
            },
        ],
    )
    task = load_task(TaskConfig(name=str(path)), render_chat=render)
    assert [(e.prompt, e.answer, e.demonstration) for e in task.train] == [
        ("<system>Add.<user>1+2=<assistant>", "3", None),
        ("2+2=", "4", "<think>2+2</think>4"),
    ]
    assert [(e.prompt, e.answer) for e in task.validation] == [("<user>3+3=<assistant>", "6")]


def test_a_verl_parquet_file_written_by_pandas(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    rows = [
        {
            "data_source": "openai/gsm8k",
            "prompt": [{"role": "user", "content": f"{i}+1="}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(i + 1)},
            "extra_info": {"split": "train" if i < 6 else "test", "index": i},
        }
        for i in range(8)
    ]
    pd.DataFrame(rows).to_parquet(tmp_path / "gsm8k.parquet")
    task = load_task(TaskConfig(name=str(tmp_path / "gsm8k.parquet")), render_chat=render)
    assert task.name == "gsm8k" and len(task.train) == 6
    assert [(e.prompt, e.answer) for e in task.validation] == [
        ("<user>6+1=<assistant>", "7"),
        ("<user>7+1=<assistant>", "8"),
    ]
    assert dict(task.train[0].columns)["data_source"] == "openai/gsm8k"


def fake_hub_cache(home, repo, files):
    """A Hugging Face hub cache as huggingface_hub lays it out: refs/main -> snapshots/<commit>/..."""
    commit = "0" * 40
    folder = home / "hub" / f"datasets--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(commit)
    for name, write in files.items():
        target = folder / "snapshots" / commit / name
        target.parent.mkdir(parents=True, exist_ok=True)
        write(target)


def test_a_hub_dataset_id_is_read_from_the_local_cache_only(tmp_path, monkeypatch):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("huggingface_hub")
    home = tmp_path / "hf"
    fake_hub_cache(
        home,
        "org/tiny-math",
        {
            "data/train-00000-of-00001.jsonl": lambda p: write_jsonl(
                p, [{"prompt": f"{i}*2=", "answer": str(2 * i)} for i in range(5)]
            ),
            "data/test-00000-of-00001.parquet": lambda p: pd.DataFrame([{"prompt": "9-1=", "answer": "8"}]).to_parquet(
                p
            ),
        },
    )
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    task = load_task(TaskConfig(name="org/tiny-math"))
    assert task.name == "tiny-math" and len(task.train) == 5
    assert task.validation == (TaskExample("9-1=", "8"),)
    with pytest.raises(InputError, match="neither a local path nor a dataset in the local Hugging Face cache"):
        load_task(TaskConfig(name="org/not-cached"))


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (json.dumps({"prompt": "x" * 1_000_000, "answer": "1"}) + "\n", "1000000 characters"),
        ("[" * 100_000 + "]" * 100_000 + "\n", "nested deeper than 64 levels"),
        ('{"prompt": "1+1=", "answer": ' + "9" * 5000 + "}\n", "integer of 5000 digits"),
        ('{"prompt": [{"role": "user"}], "answer": "1"}\n', "message 1 must be an object"),
        ('{"prompt": "1+1=", "completion": [{"role": "assistant", "content": " "}]}\n', "'completion' must be"),
    ],
)
def test_hostile_task_lines_are_one_input_error(tmp_path, content, fragment):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(InputError, match=fragment):
        load_task(TaskConfig(name=str(path)), render_chat=render)


def test_a_parquet_task_named_jsonl_or_garbage_parquet_is_one_error_line(tmp_path):
    pd = pytest.importorskip("pandas")
    pd.DataFrame([{"prompt": "1+1=", "answer": "2"}]).to_parquet(tmp_path / "data.jsonl")
    result = invoke("train", "--out", tmp_path / "run", "--task", tmp_path / "data.jsonl", "--max-steps", 1)
    assert_one_line_error(result, "is not UTF-8 JSON lines", ".parquet")
    (tmp_path / "junk.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match="not a readable parquet file"):
        load_task(TaskConfig(name=str(tmp_path / "junk.parquet")))


def test_a_model_hub_id_becomes_its_cached_snapshot_folder(tmp_path, monkeypatch):
    pytest.importorskip("huggingface_hub")
    from tiny_hf import build_tiny_hf_model

    from scalerl.cli.train import build_train_config

    commit = "1" * 40
    folder = tmp_path / "hf" / "hub" / "models--org--tiny-llama"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(commit)
    model, tokenizer = build_tiny_hf_model("llama")
    model.save_pretrained(folder / "snapshots" / commit)
    tokenizer.save_pretrained(folder / "snapshots" / commit)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    config = build_train_config(None, [], "org/tiny-llama", None, None)
    assert config.model.path == str(folder / "snapshots" / commit)
    with pytest.raises(InputError, match="neither a local path nor a model in the local Hugging Face cache"):
        build_train_config(None, [], "org/absent", None, None)


@pytest.mark.slow  # one tiny training step: ~4 s
def test_scalerl_train_takes_a_hub_dataset_id_from_the_local_cache(tmp_path, monkeypatch, tiny_set_options):
    pytest.importorskip("huggingface_hub")
    home = tmp_path / "hf"
    fake_hub_cache(
        home,
        "myorg/gsm8k-verl",
        {
            "data/train-00000-of-00001.jsonl": lambda p: write_jsonl(
                p, [{"prompt": f"{i}+1=", "answer": str(i + 1)} for i in range(8)]
            ),
            "data/test-00000-of-00001.jsonl": lambda p: write_jsonl(
                p, [{"prompt": f"{i}+2=", "answer": str(i + 2)} for i in range(4)]
            ),
        },
    )
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    result = invoke(
        "train",
        "--task",
        "myorg/gsm8k-verl",
        "--out",
        out,
        "--no-progress",
        *tiny_set_options("max_steps=1", "eval_prompts=4"),
    )
    assert result.exit_code == 0, result.output
    assert json.loads((out / "config.json").read_text())["task"]["name"] == "myorg/gsm8k-verl"
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows if "val_pass_rate" in row] == [0, 1]
