"""`scalerl export`: a run's checkpoint as a standalone Hugging Face model folder.

A checkpoint is already a model folder (scalerl.train.checkpoint); export copies its model and
tokenizer files without the training state, so the result is what `from_pretrained`, vLLM or
`push_to_hub` expect. A checkpoint of the older flat layout (weights only) is rebuilt from the
run's config.json: the policy is built as the run built it and the weights loaded into it.
The folder is assembled beside `out` and renamed into place, so it appears complete or not at all.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from scalerl.errors import InputError
from scalerl.models.hf_folder import is_model_folder, load_weights_into
from scalerl.train.checkpoint import TRAINING_STATE_DIR, checkpoint_name, list_checkpoints

_TRAINING_FILES = ("optimizer.safetensors", "rng.safetensors", "state.json")


def find_checkpoint(run_dir: str | os.PathLike, step: int | None = None) -> Path:
    """The checkpoint of `step` (default: the newest); InputError lists the steps there are."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError(f"run directory {run_dir} does not exist")
    checkpoints = list_checkpoints(run_dir)
    if not checkpoints:
        raise InputError(f"{run_dir} holds no checkpoint (no {run_dir / 'checkpoints'}/step_*)")
    if step is None:
        return checkpoints[-1]
    for checkpoint in checkpoints:
        if checkpoint.name == checkpoint_name(step):
            return checkpoint
    steps = ", ".join(str(int(c.name.split("_")[-1])) for c in checkpoints)
    raise InputError(f"{run_dir} has no checkpoint of step {step}; kept steps: {steps}")


def _copy_model_files(checkpoint: Path, staging: Path) -> None:
    for path in checkpoint.iterdir():
        if path.name == TRAINING_STATE_DIR or path.name in _TRAINING_FILES:
            continue
        if path.is_dir():
            shutil.copytree(path, staging / path.name)
        else:
            shutil.copy2(path, staging / path.name)


def _rebuild_model_folder(run_dir: Path, checkpoint: Path, staging: Path) -> None:
    """Older flat checkpoints: build the run's policy, load the weights, save_pretrained."""
    from scalerl.models.hf_folder import write_model_folder
    from scalerl.train.config import load_config
    from scalerl.train.run_setup import fresh_policy

    model, tokenizer = fresh_policy(load_config(run_dir))
    load_weights_into(model, checkpoint)
    write_model_folder(model, tokenizer, staging)


def export_model(run_dir: str | os.PathLike, out: str | os.PathLike, *, step: int | None = None) -> Path:
    """Write the checkpoint of `step` (default: newest) of the run as a model folder at `out`."""
    run_dir, out = Path(run_dir), Path(out)
    checkpoint = find_checkpoint(run_dir, step)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"{out} already exists and is not an empty directory; choose another output")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        if is_model_folder(checkpoint):
            _copy_model_files(checkpoint, staging)
        else:
            _rebuild_model_folder(run_dir, checkpoint, staging)
        if out.exists():
            out.rmdir()
        os.replace(staging, out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return out
