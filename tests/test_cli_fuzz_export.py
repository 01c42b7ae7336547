"""Fuzz of `scalerl export` on damaged checkpoints: any damage to any file of a checkpoint of the
built-in tiny model (flipped or cut bytes, garbage, a symlink out of the run, a missing file, a
FIFO), with or without a manifest rewritten to match. Export writes the model or says one
`error: ...` line with exit code 2, and a refused export leaves nothing behind.
"""

import pytest
from cli_fuzz_support import run_scalerl
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

# --- damaged checkpoints through `scalerl export` -------------------------------------------------

CHECKPOINT_FILES = [
    "model.safetensors",
    "config.json",
    "tokenizer.json",
    "training_state/state.json",
    "training_state/rng.safetensors",
    "training_state/optimizer.safetensors",
    "training_state/manifest.json",
]


@pytest.fixture(scope="module")
def checkpoint_template(tmp_path_factory):
    """A run folder holding one checkpoint of the built-in tiny model (copied per case)."""
    from checkpoint_support import save_with_fixed_generators

    from scalerl.models.policy import TinyModelSpec, build_tiny_model
    from scalerl.train.config.train_config import TrainConfig
    from scalerl.train.train_step import build_optimizer, build_scheduler

    model, tokenizer = build_tiny_model(
        TinyModelSpec(num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32, max_positions=32), seed=0
    )
    optimizer = build_optimizer(model, TrainConfig().optim)
    scheduler = build_scheduler(optimizer, 2)
    run_dir = tmp_path_factory.mktemp("checkpoint_fuzz") / "run"
    save_with_fixed_generators(run_dir, 3, model, optimizer, scheduler, tokenizer=tokenizer)
    return run_dir


@st.composite
def checkpoint_damages(draw):
    """(file, how, where, value, restamp): one damage to one file of the checkpoint; `restamp`
    rewrites the manifest to match, so the content checks (not the checksums) must catch it."""
    return (
        draw(st.sampled_from(CHECKPOINT_FILES)),
        draw(st.sampled_from(["flip", "truncate", "empty", "garbage", "0xff", "symlink", "delete", "fifo"])),
        draw(st.floats(0.0, 1.0)),
        draw(st.integers(0, 255)),
        draw(st.booleans()),
    )


def _damage_checkpoint(checkpoint, damage, outside):
    import os

    from scalerl.train.checkpoint.manifest import write_manifest

    name, how, where, value, restamp = damage
    path = checkpoint / name
    data = path.read_bytes()
    offset = min(int(where * len(data)), len(data) - 1)
    if how == "flip":
        path.write_bytes(data[:offset] + bytes([data[offset] ^ (value or 1)]) + data[offset + 1 :])
    elif how == "truncate":
        path.write_bytes(data[:offset])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(bytes([value]) * 64)
    elif how == "0xff":
        path.write_bytes(data[:offset] + b"\xff" + data[offset + 1 :])
    elif how == "symlink":
        path.unlink()
        path.symlink_to(outside)
    elif how == "delete":
        path.unlink()
    else:
        path.unlink()
        os.mkfifo(path)
    if restamp and how not in ("symlink", "fifo") and name != "training_state/manifest.json":
        write_manifest(checkpoint)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(damage=checkpoint_damages())
def test_fuzz_export_of_a_damaged_checkpoint(checkpoint_template, tmp_path_factory, damage):
    """Any damage to any file of a checkpoint: export writes the model or says one `error:` line,
    and a refused export leaves nothing behind."""
    import shutil

    work = tmp_path_factory.mktemp("case")
    run_dir = shutil.copytree(checkpoint_template, work / "run", symlinks=True)
    (work / "outside.txt").write_text("a file outside the run")
    _damage_checkpoint(run_dir / "checkpoints" / "step_00000003", damage, work / "outside.txt")
    argv = ["export", str(run_dir), str(work / "model")]
    exit_code, stdout, stderr = run_scalerl(argv)
    shown = f"damage={damage!r}\nexit={exit_code}\nstdout={stdout[-1000:]!r}\nstderr={stderr[-1000:]!r}"
    assert "Traceback" not in stdout + stderr, shown
    event(f"export exit code {exit_code}")
    if exit_code == 0:
        exported = {p.name for p in (work / "model").iterdir()}
        assert "outside.txt" not in exported and "training_state" not in exported, shown
        assert "a file outside the run" not in "".join(
            p.read_text(errors="replace") for p in (work / "model").iterdir()
        ), shown
        return
    assert exit_code == 2, shown
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), shown
    assert not (work / "model").exists(), shown
