"""Damaged run folders, impossible settings, failed writes and Ctrl-C: each ends as one clear error
naming the file or field, or as the documented recovery (resume from the newest intact checkpoint,
with a warning), never a traceback or silently lost steps."""

import errno
import json
import os
import shutil
import signal
import subprocess
import sys

import pytest
import torch
from cli_invocation import assert_one_line_error as _assert_one_error_line
from cli_invocation import invoke as _cli
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from scalerl.errors import ConfigError, InputError, OutputError
from scalerl.train.checkpoint.manifest import write_manifest
from scalerl.train.config.train_config import load_config
from scalerl.train.records.metrics_log import append_row, read_rows
from scalerl.train.trainer import open_run, train

RUN_SETTINGS = ("eval_every=2", "checkpoint_every=2", "keep_checkpoints=2")


@pytest.fixture(scope="module")
def run_config(tiny_config):
    """run_config(*overrides): the tiny run validated and checkpointed every 2 steps (2 kept)."""
    return lambda *overrides: tiny_config(*RUN_SETTINGS, *overrides)


def _comparable(rows):
    return [{k: v for k, v in row.items() if k != "device_hours"} for row in rows]


@pytest.fixture(scope="module")
def runs(run_config, tmp_path_factory):
    """A 4-step run with checkpoints of steps 2 and 4, and the same run trained to step 6."""
    root = tmp_path_factory.mktemp("runs")
    train(run_config("max_steps=4"), root / "four", show_progress=False)
    train(run_config("max_steps=6"), root / "six", show_progress=False)
    return root


@pytest.fixture
def run(runs, tmp_path):
    """A copy of the 4-step run to damage."""
    return shutil.copytree(runs / "four", tmp_path / "run")


def _newest(run_dir):
    return run_dir / "checkpoints" / "step_00000004"


def _edit_state(checkpoint, edit):
    path = checkpoint / "training_state" / "state.json"
    state = json.loads(path.read_text())
    edit(state)
    path.write_text(json.dumps(state))


def _damaged(checkpoint, damage):
    """`damage` applied, the manifest then rewritten to match (as a buggy writer would leave it), so
    that the checks of the files' contents, not the checksums, must find it."""
    DAMAGES[damage][0](checkpoint)
    write_manifest(checkpoint)


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _wrong_shape(checkpoint):
    path = checkpoint / "model.safetensors"
    tensors = load_file(str(path))
    name = next(name for name, tensor in tensors.items() if tensor.dim() == 2)
    tensors[name] = tensors[name].reshape(-1)[:-1].clone()
    save_file(tensors, str(path))


DAMAGES = {  # name: (damage to the newest checkpoint, what the warning or error names)
    "truncated weights": (lambda c: _truncate(c / "model.safetensors"), "model.safetensors"),
    "random weights": (lambda c: (c / "model.safetensors").write_bytes(os.urandom(4096)), "model.safetensors"),
    "wrong tensor shape": (_wrong_shape, "has shape"),
    "truncated optimizer": (
        lambda c: _truncate(c / "training_state" / "optimizer.safetensors"),
        "optimizer.safetensors",
    ),
    "empty rng": (lambda c: (c / "training_state" / "rng.safetensors").write_bytes(b""), "rng.safetensors"),
    "no run.pool": (lambda c: _edit_state(c, lambda s: s["run"].pop("pool")), "run.pool"),
    "step six": (lambda c: _edit_state(c, lambda s: s.update(step="six")), "'six'"),
    "bad numpy rng": (
        lambda c: _edit_state(c, lambda s: s.update(numpy_rng={"bit_generator": "PCG64", "state": 7})),
        "state.json",
    ),
    "broken state.json": (lambda c: (c / "training_state" / "state.json").write_text("{broken"), "state.json"),
    "state.json deleted": (lambda c: (c / "training_state" / "state.json").unlink(), "state.json is missing"),
    "bad counters": (lambda c: _edit_state(c, lambda s: s["run"].update(counters={"flops": "x"})), "run.counters"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_newest_checkpoint_is_skipped_with_a_warning_naming_it(run_config, run, damage):
    _damaged(_newest(run), damage)
    named = DAMAGES[damage][1]
    opened = open_run(run_config("max_steps=4"), run, resume=True)
    opened.state.close()
    assert opened.state.resumed_from.name == "step_00000002" and opened.step == 2
    warning = opened.state.notes[0]
    assert warning.startswith("warning: ") and "step_00000004" in warning and named in warning
    assert "resuming from the older checkpoint step_00000002" in warning
    assert "steps 3-4" in opened.state.notes[1]  # the rows after step 2 are said to be dropped
    assert [row["step"] for row in read_rows(run / "metrics.jsonl")] == [0, 1, 2]


def test_resuming_from_the_older_checkpoint_reproduces_the_undamaged_run(run_config, runs, run):
    _truncate(_newest(run) / "model.safetensors")
    train(run_config("max_steps=6"), run, resume=True, show_progress=False)
    assert _comparable(read_rows(run / "metrics.jsonl")) == _comparable(read_rows(runs / "six" / "metrics.jsonl"))


@pytest.mark.parametrize("damage", ["truncated weights", "empty rng", "step six"])
def test_when_no_checkpoint_is_intact_resume_is_one_error_naming_the_file(run, damage):
    named = DAMAGES[damage][1]
    for checkpoint in (run / "checkpoints").iterdir():
        _damaged(checkpoint, damage)
    config_before = (run / "config.json").read_bytes()
    result = _cli("train", "--out", run, "--resume", "--no-progress")
    _assert_one_error_line(result, "cannot resume", "step_00000004", named, "every older checkpoint is damaged")
    assert (run / "config.json").read_bytes() == config_before
    assert len(read_rows(run / "metrics.jsonl")) == 5  # nothing dropped


def test_a_checkpoint_without_a_manifest_is_resumed_only_when_old_checkpoints_are_accepted(run_config, run):
    from scalerl.train.checkpoint.manifest import manifest_path

    manifest_path(_newest(run)).unlink()
    accepted = open_run(run_config("max_steps=4"), run, resume=True, accept_old_checkpoints=True)
    accepted.state.close()
    assert accepted.state.resumed_from.name == "step_00000004" and accepted.step == 4
    assert "has no manifest (written by an older scalerl)" in accepted.state.notes[0]
    opened = open_run(run_config("max_steps=4"), run, resume=True)
    opened.state.close()
    assert opened.state.resumed_from.name == "step_00000002"
    assert "manifest.json is missing" in opened.state.notes[0] and "--accept-old-checkpoints" in opened.state.notes[0]
    manifest_path(run / "checkpoints" / "step_00000002").unlink()
    _assert_one_error_line(
        _cli("train", "--out", run, "--resume", "--no-progress"),
        "cannot resume",
        "manifest.json is missing",
        "--accept-old-checkpoints",
    )


def test_a_bad_line_in_the_middle_of_metrics_is_an_error_naming_the_line(run):
    lines = (run / "metrics.jsonl").read_text().splitlines(keepends=True)
    lines[2] = '{"step": 2, "flops": \n'
    (run / "metrics.jsonl").write_text("".join(lines))
    _assert_one_error_line(_cli("train", "--out", run, "--resume"), "metrics.jsonl", "line 3")
    lines[2] = '["not", "a", "row"]\n'
    (run / "metrics.jsonl").write_text("".join(lines))
    _assert_one_error_line(_cli("train", "--out", run, "--resume"), "metrics.jsonl", "line 3", "integer step")


def test_a_torn_last_line_from_a_crash_is_dropped_on_resume(run_config, run):
    with open(run / "metrics.jsonl", "ab") as handle:
        handle.write(b'{"step": 5, "sampl')
    opened = open_run(run_config("max_steps=4"), run, resume=True)
    opened.state.close()
    assert opened.step == 4 and [row["step"] for row in read_rows(run / "metrics.jsonl")] == [0, 1, 2, 3, 4]
    assert (run / "metrics.jsonl").read_bytes().endswith(b"}\n")


def test_missing_metrics_rows_are_an_error_not_a_silent_loss(run_config, run):
    rows_path = run / "metrics.jsonl"
    lines = rows_path.read_text().splitlines(keepends=True)
    rows_path.unlink()
    with pytest.raises(InputError, match="metrics.jsonl is missing .* steps 0-4"):
        open_run(run_config("max_steps=6"), run, resume=True)
    rows_path.write_text("".join(lines[:1] + lines[3:]))  # steps 1 and 2 cut out by hand
    with pytest.raises(InputError, match="no rows for steps 1-2"):
        open_run(run_config("max_steps=6"), run, resume=True)
    assert load_config(run).max_steps == 4  # config.json untouched


def test_a_nan_or_a_repeated_step_in_metrics_is_an_error_naming_the_lines_never_carried_on(run_config, run):
    rows_path = run / "metrics.jsonl"
    lines = rows_path.read_text().splitlines(keepends=True)
    config_before = (run / "config.json").read_bytes()
    nan_row = json.loads(lines[3])
    nan_row["train_reward"] = "NaN-placeholder"
    lines_with_nan = [*lines[:3], json.dumps(nan_row).replace('"NaN-placeholder"', "NaN") + "\n", *lines[4:]]
    rows_path.write_text("".join(lines_with_nan))
    _assert_one_error_line(
        _cli("train", "--out", run, "--resume", "--no-progress"),
        "metrics.jsonl",
        "line 4 (step 3): train_reward",
        "not finite",
    )
    rows_path.write_text("".join([*lines[:5], lines[4]]))  # steps 0, 1, 2, 3, 4, 4
    _assert_one_error_line(
        _cli("train", "--out", run, "--resume", "--no-progress"), "metrics.jsonl", "lines 5 and 6 both hold step 4"
    )
    rows_path.write_text("".join([lines[0], lines[2], lines[1], *lines[3:]]))  # steps 0, 2, 1, 3, 4
    with pytest.raises(InputError, match="line 3 holds step 1 after step 2"):
        open_run(run_config("max_steps=6"), run, resume=True)
    assert (run / "config.json").read_bytes() == config_before
    after_checkpoint = json.loads(lines[4])  # a damaged row after the checkpoint is dropped, as any such row
    nan_after = json.dumps({**after_checkpoint, "step": 5, "loss": "X"}).replace('"X"', "NaN")
    rows_path.write_text("".join([*lines, nan_after + "\n"]))
    opened = open_run(run_config("max_steps=6"), run, resume=True)
    opened.state.close()
    assert [row["step"] for row in read_rows(rows_path)] == [0, 1, 2, 3, 4]


def test_resume_with_max_steps_below_the_reached_step_is_refused(run):
    config_before = (run / "config.json").read_bytes()
    result = _cli("train", "--out", run, "--resume", "--max-steps", "3")
    _assert_one_error_line(result, "max_steps: 3 is below step 4", "--max-steps 4")
    assert (run / "config.json").read_bytes() == config_before


def test_a_hand_edited_config_is_refused_naming_the_keys_but_max_steps_may_grow(run):
    saved = json.loads((run / "config.json").read_text())
    edited = {**saved, "optim": {**saved["optim"], "lr": 0.5}}
    (run / "config.json").write_text(json.dumps(edited))
    result = _cli("train", "--out", run, "--resume")
    _assert_one_error_line(result, "optim.lr: 0.01 -> 0.5", "checkpoint", "step_00000004", "only max_steps may change")
    (run / "config.json").write_text(json.dumps({**saved, "max_steps": 5}))
    opened = open_run(load_config(run), run, resume=True)
    opened.state.close()
    assert opened.step == 4


@pytest.mark.parametrize(
    ("assignment", "field"),
    [
        ("seed=-1", "seed"),
        ("seed=4294967296", "seed"),
        ("optim.lr=inf", "optim.lr"),
        ("weight_decay=inf", "optim.weight_decay"),
        ("temperature=inf", "sampling.temperature"),
        ("cispo_eps_max=inf", "rl.cispo_eps_max"),
        ("optim.lr=nan", "optim.lr"),
        ("max_steps=1e999", "max_steps"),
        ("device=cuda:x", "device"),
        ("device=gpu", "device"),
    ],
)
def test_impossible_settings_are_config_errors_naming_the_field(run_config, assignment, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        run_config(assignment)


@pytest.mark.parametrize(
    ("assignments", "message"),
    [
        (
            ["sampling.prompts_per_step=1000000000000", "task.num_train_prompts=4000"],
            (
                "sampling.prompts_per_step: 1000000000000 exceeds the built-in task's training prompts "
                "(task.num_train_prompts=4000)"
            ),
        ),
        (
            ["task.name=tasks.jsonl", "sampling.prompts_per_step=1000000000000"],  # a task file: bounded by memory
            "sampling.prompts_per_step: 1000000000000 prompts x 3 completions is more than 1048576",
        ),
        (
            ["task.num_train_prompts=4000", "prompts_per_step=4000", "generations_per_prompt=1000"],
            "sampling.prompts_per_step: 4000 prompts x 1000 completions is more than 1048576 completions at once",
        ),
        (
            ["eval_prompts=8", "eval_samples_per_prompt=1000000"],
            "eval_prompts: 8 prompts x 1000000 completions is more than 1048576",
        ),
    ],
)
def test_sampling_and_evaluation_sizes_are_bounded_at_config_time(tiny_set_options, tmp_path, assignments, message):
    result = _cli("train", "--out", tmp_path / "run", *tiny_set_options(*assignments), "--no-progress")
    _assert_one_error_line(result, message)
    assert not (tmp_path / "run").exists()


def test_a_device_the_machine_lacks_is_refused_before_anything_is_written(tiny_set_options, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    sets = tiny_set_options("max_steps=1", "device=cuda")
    result = _cli("train", "--out", tmp_path / "run", *sets)
    _assert_one_error_line(result, "device: 'cuda' is not available", "device=cpu")
    assert not (tmp_path / "run").exists()


def _disk_full(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _safetensors_disk_full(*_args, **_kwargs):
    raise SafetensorError("Error while serializing: IoError(Os { code: 28, kind: StorageFull })")


@pytest.mark.parametrize(
    ("target", "failure"),
    [
        ("scalerl.train.checkpoint.save_load.save_file", _safetensors_disk_full),
        ("scalerl.train.checkpoint.save_load.save_file", _disk_full),
        ("os.replace", _disk_full),
    ],
)
def test_a_failed_checkpoint_write_names_it_and_leaves_no_partial_checkpoint(
    run_config, run, monkeypatch, target, failure
):
    opened = open_run(run_config("max_steps=6"), run, resume=True)
    from scalerl.train.trainer import _checkpoint

    opened.state.step = 6
    monkeypatch.setattr(target, failure)
    with pytest.raises(OutputError, match=r"cannot write .*step_00000006: "):
        _checkpoint(opened)
    monkeypatch.undo()
    opened.state.close()
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step_00000002", "step_00000004"]


def test_failed_json_writes_name_their_path(tiny_set_options, tmp_path, monkeypatch):
    (tmp_path / "blocker").write_text("a file where a directory should be")
    with pytest.raises(OutputError, match="cannot write .*blocker/metrics.jsonl"):
        append_row(tmp_path / "blocker" / "metrics.jsonl", {"step": 0})
    monkeypatch.setattr(os, "replace", _disk_full)
    sets = tiny_set_options("max_steps=1")
    result = _cli("train", "--out", tmp_path / "run", *sets)
    _assert_one_error_line(result, "cannot write", "config.json", "No space left on device")
    assert not (tmp_path / "run").exists()  # nothing left behind: no temporary file, not even the folder


# ---------------------------------------------------------------- Ctrl-C


def test_ctrl_c_stops_after_the_step_with_a_checkpoint_and_resume_reproduces_the_run(run_config, runs, tmp_path):
    def interrupt_at_step_3(row):
        if row["step"] == 3:
            os.kill(os.getpid(), signal.SIGINT)

    config = run_config("max_steps=6")
    result = train(config, tmp_path / "run", show_progress=False, on_row=interrupt_at_step_3)
    assert result.interrupted and result.last_step == 3
    assert (tmp_path / "run" / "checkpoints" / "step_00000003").is_dir()  # not a checkpoint_every step
    resumed = train(config, tmp_path / "run", resume=True, show_progress=False)
    assert not resumed.interrupted and resumed.last_step == 6
    assert _comparable(read_rows(tmp_path / "run" / "metrics.jsonl")) == _comparable(
        read_rows(runs / "six" / "metrics.jsonl")
    )


def test_an_interrupted_run_exits_130_in_sync_and_async_mode(tmp_path, monkeypatch):
    import scalerl.distributed.pipeline as pipeline_module
    from scalerl.cli.errors import exits_on_user_error
    from scalerl.train.trainer import RunResult

    def interrupted_pipeline(config, pipeline, run_dir, **kwargs):
        assert kwargs["show_progress"] is False
        return pipeline_module.PipelineResult(
            run_dir=run_dir,
            steps_done=3,
            rows=[],
            dropped_batches=0,
            generator_failures=0,
            wall_seconds=1.0,
            interrupted=True,
        )

    monkeypatch.setattr(pipeline_module, "run_pipeline", interrupted_pipeline)
    result = _cli("train", "--out", tmp_path / "a", "--pipeline", "async", "--no-progress", "--max-steps", "5")
    assert result.exit_code == 130 and "interrupted at step 3" in result.stdout and "--resume" in result.stdout
    monkeypatch.setattr("scalerl.train.trainer.train", lambda *a, **k: RunResult(tmp_path, 2, (), (), (), True))
    result = _cli("train", "--out", tmp_path / "s", "--no-progress", "--max-steps", "5")
    assert result.exit_code == 130 and "interrupted at step 2" in result.stdout

    @exits_on_user_error
    def interrupted_command():
        raise KeyboardInterrupt

    with pytest.raises(Exception) as stopped:
        interrupted_command()
    assert getattr(stopped.value, "exit_code", None) == 130


@pytest.mark.slow  # a real process: starts torch, trains until Ctrl-C, resumes (~10 s on 2 shared cores)
def test_sigint_to_a_real_training_process_exits_130_and_resume_completes(tiny_set_options, tmp_path):
    import time

    out = tmp_path / "run"
    sets = tiny_set_options("eval_every=2", "checkpoint_every=2")
    command = [sys.executable, "-c", "from scalerl.cli.app import main; main()", "train", "--out", str(out)]
    process = subprocess.Popen(
        [*command, "--max-steps", "500", *sets], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None and not (out / "checkpoints").is_dir():
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 130, stderr
    assert "interrupted at step" in stdout and "Traceback" not in stderr
    steps = [row["step"] for row in read_rows(out / "metrics.jsonl")]
    assert steps == list(range(len(steps))) and steps[-1] < 500
    resumed = subprocess.run(
        [*command, "--resume", "--max-steps", str(steps[-1] + 2)], capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr
    assert [row["step"] for row in read_rows(out / "metrics.jsonl")] == list(range(steps[-1] + 3))


def test_the_pipeline_checks_paths_and_device_before_starting_anything(run_config, tmp_path, monkeypatch):
    from scalerl.distributed.session import PipelineSession
    from scalerl.distributed.settings import PipelineConfig

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="device: 'cuda' is not available"):
        PipelineSession(run_config("device=cuda"), PipelineConfig(mode="async"), tmp_path / "run")
    with pytest.raises(ConfigError, match="task.name"):
        PipelineSession(run_config("task.name=/no/such.jsonl"), PipelineConfig(mode="async"), tmp_path / "run")
    assert not (tmp_path / "run").exists()
