"""`scalerl train --tensorboard --wandb`: both trackers get every metric of metrics.jsonl under its
grouped name (train/, eval/, forecast/; W&B in offline mode, read back from its run file), and
W&B's environment variables win over scalerl's defaults."""

import json
import re

import pytest
from typer.testing import CliRunner

from scalerl.cli.app import app
from scalerl.train.records.metric_groups import grouped_metric_name


def wandb_history_items(run_file):
    """(key, value) of every history item in an offline W&B run file: each item is a protobuf
    message with the key in field 2 and its JSON value in field 16 (wandb_internal.proto)."""
    data = run_file.read_bytes()
    items = set()
    for start in (index for index, byte in enumerate(data[:-1]) if byte == 0x12):  # overlapping candidates
        size = data[start + 1]
        end = start + 2 + size
        key, rest = data[start + 2 : end], data[end : end + 2]
        if rest != b"\x82\x01" or not re.fullmatch(rb"[A-Za-z_][\w/]*", key):
            continue
        size = data[end + 2]
        try:
            value = json.loads(data[end + 3 : end + 3 + size])
        except (ValueError, UnicodeDecodeError):
            continue
        items.add((key.decode(), value))
    return items


def numeric_items(row):
    return {
        (grouped_metric_name(key), value)
        for key, value in row.items()
        if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool)
    }


@pytest.mark.slow  # a 2-step tiny run with both trackers: ~6 s
def test_tensorboard_and_offline_wandb_receive_the_metrics_under_their_grouped_names(
    tiny_set_options, tmp_path, monkeypatch
):
    pytest.importorskip("wandb")
    from tbparse import SummaryReader

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb-home"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--out",
            str(out),
            "--no-progress",
            "--tensorboard",
            "--wandb",
            "--wandb-project",
            "scalerl-test",
            "--wandb-run-name",
            "tiny",
            *tiny_set_options("max_steps=2", "eval_every=1"),
        ],
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    saved = json.loads((out / "config.json").read_text())
    assert saved["wandb"] and saved["tensorboard"] and saved["wandb_project"] == "scalerl-test"

    scalars = SummaryReader(str(out / "tensorboard")).scalars
    logged = {(tag, step): value for tag, step, value in scalars[["tag", "step", "value"]].itertuples(index=False)}
    for row in rows:
        for key, value in numeric_items(row):
            assert logged[(key, row["step"])] == pytest.approx(value, rel=1e-6), key
    assert {tag.split("/")[0] for tag, _ in logged} == {"train", "eval"}  # forecast/ once a fit exists

    run_files = list((tmp_path / "wandb-home" / "wandb").glob("offline-run-*/run-*.wandb"))  # WANDB_DIR honoured
    assert len(run_files) == 1
    items = wandb_history_items(run_files[0])
    assert {("_step", row["step"]) for row in rows} <= items
    for row in rows:
        assert numeric_items(row) <= items
    assert "tiny" in run_files[0].read_bytes().decode("latin-1")  # the run name
    run_id = (out / "wandb_run_id").read_text().strip()
    assert run_files[0].name == f"run-{run_id}.wandb"


def test_wandb_without_the_package_is_one_error_before_anything_is_written(tmp_path, monkeypatch):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real_find_spec(name, *a)
    )
    result = CliRunner().invoke(app, ["train", "--out", str(tmp_path / "run"), "--report-to", "wandb"])
    assert result.exit_code == 2 and result.stderr.startswith("error: wandb: logging to W&B needs the wandb package")
    assert not (tmp_path / "run").exists()


def test_metric_names_are_grouped_as_trl_groups_them():
    assert [grouped_metric_name(name) for name in ("loss", "flops", "val_pass_rate", "forecast_A", "val_")] == [
        "train/loss",
        "train/flops",
        "eval/pass_rate",
        "forecast/A",
        "train/val_",
    ]


def test_wandb_environment_variables_win_over_defaults_and_lose_to_set_values(tmp_path, monkeypatch):
    from scalerl.train.records.wandb_log import run_identity

    environ = {"WANDB_PROJECT": "team-rl", "WANDB_ENTITY": "lab", "WANDB_RUN_GROUP": "sweep-1", "WANDB_NAME": "try-3"}
    assert run_identity("", "", tmp_path / "run", environ) == {
        "project": "team-rl",
        "name": "try-3",
        "entity": "lab",
        "group": "sweep-1",
    }
    assert run_identity("mine", "named", tmp_path / "run", environ)["project"] == "mine"
    assert run_identity("", "", tmp_path / "run", {}) == {
        "project": "scalerl",
        "name": "run",
        "entity": None,
        "group": None,
    }


@pytest.mark.slow  # starts an offline W&B run: ~5 s
def test_an_offline_wandb_run_takes_project_group_and_name_from_the_environment(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    from scalerl.train.records.wandb_log import WandbMirror

    for name, value in {
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(tmp_path / "wandb-home"),
        "WANDB_SILENT": "true",
        "WANDB_PROJECT": "team-rl",
        "WANDB_RUN_GROUP": "sweep-1",
        "WANDB_NAME": "try-3",
    }.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "run").mkdir()
    mirror = WandbMirror(tmp_path / "run", project="", run_name="")
    try:
        run = mirror._run
        assert (run.project, run.group, run.name) == ("team-rl", "sweep-1", "try-3")
        mirror.write({"step": 1, "loss": 0.5, "val_pass_rate": 0.25})
        # W&B's own files go to WANDB_DIR, not into the run directory
        assert (tmp_path / "wandb-home" / "wandb").is_dir() and not (tmp_path / "run" / "wandb").exists()
    finally:
        mirror.close()
