"""The validation completions (RUN/completions.jsonl) reach TensorBoard as a text table and W&B as
a wandb.Table at the step they were validated at, each step's samples once."""

import json

import pytest

from scalerl.train.records.completions_table import CompletionsFeed, markdown_table
from scalerl.train.records.metrics_log import MetricsLog

SAMPLES = [
    {"step": 0, "prompt": "1+1=", "completion": "2", "answer": "2", "reward": 1.0, "passed": True},
    {"step": 0, "prompt": "2+2=", "completion": "a|b\nc", "answer": "4", "reward": -1.0, "passed": False},
]


def _append(path, rows):
    with path.open("a") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)


def test_the_feed_hands_each_steps_samples_once_and_waits_for_later_steps(tmp_path):
    path = tmp_path / "completions.jsonl"
    feed = CompletionsFeed(path)
    assert feed.due(0) == []  # no file yet
    _append(path, [{"step": 0, "completion": "old"}, {"step": 3, "completion": "x"}, {"step": 5, "completion": "y"}])
    with path.open("a") as handle:
        handle.write('{"step": 5, "completion": "half')  # a line still being written
    assert [row["completion"] for row in feed.due(3)] == ["x"]  # step 0's are history, step 5's wait
    assert feed.due(3) == []
    with path.open("a") as handle:
        handle.write(' written"}\n')
    assert [row["completion"] for row in feed.due(5)] == ["y", "half written"]


def test_the_markdown_table_keeps_one_sample_per_row():
    assert markdown_table(SAMPLES) == (
        "| prompt | completion | answer | reward | passed |\n"
        "|---|---|---|---|---|\n"
        "| 1+1= | 2 | 2 | 1.0 | True |\n"
        "| 2+2= | a\\|b<br>c | 4 | -1.0 | False |"
    )


def test_tensorboard_gets_the_samples_as_text_at_their_step(tmp_path):
    pytest.importorskip("tensorboard")
    from tbparse import SummaryReader

    _append(tmp_path / "completions.jsonl", SAMPLES)
    log = MetricsLog(tmp_path, tensorboard=True)
    log.append({"step": 0, "val_pass_rate": 0.5})
    log.append({"step": 1, "loss": 0.1})
    log.close()
    text = SummaryReader(str(tmp_path / "tensorboard")).text
    assert list(zip(text["tag"], text["step"])) == [("eval/completions", 0)]
    assert text["value"][0] == markdown_table(SAMPLES)


def test_offline_wandb_gets_the_samples_as_a_table_at_their_step(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    from scalerl.train.records.wandb_log import WandbMirror

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_DIR", raising=False)
    _append(tmp_path / "completions.jsonl", SAMPLES)
    log = MetricsLog(tmp_path, mirrors=(WandbMirror(tmp_path, project="scalerl-test"),))
    log.append({"step": 0, "val_pass_rate": 0.5})
    log.close()
    tables = list((tmp_path / "wandb").glob("offline-run-*/files/media/table/eval/completions_0_*.table.json"))
    assert len(tables) == 1  # "_0_": logged at step 0
    table = json.loads(tables[0].read_text())
    assert table["columns"] == ["prompt", "completion", "answer", "reward", "passed"]
    assert table["data"] == [["1+1=", "2", "2", 1.0, True], ["2+2=", "a|b\nc", "4", -1.0, False]]
