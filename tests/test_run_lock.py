"""One writer per run folder (an fcntl lock held by the training process), readers alongside, and
a run that cannot start leaves no folder behind."""

import os
import signal
import subprocess
import sys
import time

import pytest
from cli_invocation import assert_one_line_error, invoke

from scalerl.errors import ConfigError
from scalerl.train.checkpoint.run_lock import LOCK_FILE_NAME, acquire_run_lock
from scalerl.train.records.metrics_log import read_rows

HOLD_LOCK = (
    "import sys, time; from scalerl.train.checkpoint.run_lock import acquire_run_lock; "
    "acquire_run_lock(sys.argv[1]); print('locked', flush=True); time.sleep(60)"
)


def test_a_second_process_is_refused_naming_the_holders_pid(tmp_path):
    run_dir = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(run_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(ConfigError, match=f"is being trained by process {holder.pid} "):
            acquire_run_lock(run_dir)
    finally:
        holder.kill()
        holder.wait()
    lock = acquire_run_lock(run_dir)  # the OS dropped the dead holder's lock
    assert (run_dir / LOCK_FILE_NAME).read_text().strip() == str(os.getpid())
    lock.release()


def test_a_lock_that_made_the_folder_removes_it_when_nothing_else_is_there(tmp_path):
    lock = acquire_run_lock(tmp_path / "new")
    lock.release(remove_empty_dir=True)
    assert not (tmp_path / "new").exists()
    (tmp_path / "kept").mkdir()
    acquire_run_lock(tmp_path / "kept").release(remove_empty_dir=True)
    assert (tmp_path / "kept").is_dir()  # it was there before


def _truncated_model_folder(path):
    from tiny_hf import build_tiny_hf_model

    model, tokenizer = build_tiny_hf_model("qwen2", seed=0)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    weights = path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])


def test_a_model_folder_that_does_not_load_is_one_error_and_leaves_no_out(tiny_set_options, tmp_path):
    _truncated_model_folder(tmp_path / "model")
    for _ in range(2):  # the retry is not blocked by a half-made folder
        result = invoke(
            "train",
            "--out",
            tmp_path / "out",
            "--model",
            tmp_path / "model",
            *tiny_set_options(),
            "--max-steps",
            "2",
            "--no-progress",
        )
        assert_one_line_error(result, "model.path", "cannot be loaded", "incomplete metadata")
        assert not (tmp_path / "out").exists()


def _assert_a_whole_model_folder(folder, reference):
    """`folder` holds exactly the model files of the checkpoint `reference` (another step of the same
    run): the same names, the same bytes for every file but the weights, weights of the same size
    whose tensors have the same names and shapes and are finite; and it loads."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from scalerl.train.checkpoint.manifest import file_sha256, read_manifest
    from scalerl.train.export import model_file_names

    listed = read_manifest(reference)
    names = model_file_names(reference, listed)
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == names
    for name in names:
        assert (folder / name).stat().st_size == listed[name]["size"], name
        if name != "model.safetensors":
            assert file_sha256(folder / name) == listed[name]["sha256"], name
    weights, expected = load_file(folder / "model.safetensors"), load_file(reference / "model.safetensors")
    assert {k: t.shape for k, t in weights.items()} == {k: t.shape for k, t in expected.items()}
    assert all(bool(t.isfinite().all()) for t in weights.values())
    AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)


@pytest.mark.slow  # two real training processes and five exports on one folder (~1-3 min on 2 shared cores)
def test_two_processes_on_one_run_folder_one_trains_the_other_is_refused(tiny_set_options, tmp_path):
    from scalerl.train.checkpoint.layout import checkpoint_step
    from scalerl.train.checkpoint.save_load import latest_checkpoint

    out = tmp_path / "run"
    command = [sys.executable, "-c", "from scalerl.cli.app import main; main()"]
    sets = tiny_set_options("eval_every=2", "checkpoint_every=2")  # keep_checkpoints=1: each save prunes
    writer = subprocess.Popen(
        [*command, "train", "--out", str(out), "--max-steps", "100000", "--no-progress", *sets],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    exports = [tmp_path / f"model_{i}" for i in range(5)]
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and writer.poll() is None and latest_checkpoint(out) is None:
            time.sleep(0.05)
        assert writer.poll() is None, writer.communicate()
        second = subprocess.run(
            [*command, "train", "--out", str(out), "--resume", "--no-progress"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert second.returncode == 2, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and f"process {writer.pid} " in lines[0]
        first_step = checkpoint_step(latest_checkpoint(out))
        for folder in exports:  # a reader works alongside the writer: every export, first time
            exported = subprocess.run(
                [*command, "export", str(out), str(folder)], capture_output=True, text=True, timeout=300
            )
            assert exported.returncode == 0, exported.stderr
        assert writer.poll() is None  # the run was live for every export ...
        assert checkpoint_step(latest_checkpoint(out)) > first_step  # ... and replaced its checkpoint meanwhile
    finally:
        writer.send_signal(signal.SIGINT)
        writer.communicate(timeout=300)
    assert writer.returncode == 130
    for folder in exports:
        _assert_a_whole_model_folder(folder, latest_checkpoint(out))
    steps = [row["step"] for row in read_rows(out / "metrics.jsonl")]
    assert steps == list(range(len(steps)))  # one writer: no row twice, none lost


def test_a_prompt_longer_than_the_context_is_refused_at_setup_leaving_no_out(tiny_set_options, tmp_path):
    import json

    lines = [{"prompt": f"{i}+1=", "answer": str(i + 1), "split": "train"} for i in range(6)]
    lines += [{"prompt": "7+" * 200 + "1=", "answer": "1401", "split": "validation"}]  # 402 characters
    task = tmp_path / "task.jsonl"
    task.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = invoke(
        "train",
        "--out",
        tmp_path / "out",
        "--task",
        task,
        *tiny_set_options("eval_prompts=1", "num_train_prompts=6"),
        "--max-steps",
        "1",
        "--no-progress",
    )
    assert_one_line_error(
        result, "validation prompt 0 has 403 tokens", "does not fit the model's context of 256 positions"
    )
    assert not (tmp_path / "out").exists()


def test_deleting_the_lock_file_under_a_live_writer_lets_no_second_writer_in(tmp_path):
    """The folder's own lock outlives its lock file: a second process is refused, then admitted
    once the first is gone."""
    run_dir = tmp_path / "run"
    delete_and_hold = HOLD_LOCK.replace(
        "acquire_run_lock(sys.argv[1]);",
        f"acquire_run_lock(sys.argv[1]); import os; os.unlink(sys.argv[1] + '/{LOCK_FILE_NAME}');",
    )
    holder = subprocess.Popen([sys.executable, "-c", delete_and_hold, str(run_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert not (run_dir / LOCK_FILE_NAME).exists()
        second = subprocess.run(
            [sys.executable, "-c", HOLD_LOCK.replace("time.sleep(60)", "pass"), str(run_dir)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert second.returncode != 0 and "locked" not in second.stdout
        assert "ConfigError" in second.stderr and "is being trained by another process" in second.stderr
    finally:
        holder.kill()
        holder.wait()
    lock = acquire_run_lock(run_dir)
    assert (run_dir / LOCK_FILE_NAME).read_text().strip() == str(os.getpid())
    lock.release()
