"""Checkpoints without pickle: tensors in safetensors, everything else in JSON, written atomically.

Every checkpoint is a Hugging Face model folder (`AutoModelForCausalLM.from_pretrained` and
`AutoTokenizer.from_pretrained` load it, and so does vLLM); the training state sits in a
subfolder where model loaders do not look. Layout of `RUN/checkpoints/step_00000120/`:
    config.json, generation_config.json, model.safetensors (or shards + index),
    tokenizer files         the policy, written by save_pretrained
    training_state/
      optimizer.safetensors optimiser state tensors, keyed "state/<param id>/<name>"
      rng.safetensors       torch RNG states (global CPU state and the run's generators)
      state.json            step, optimiser param groups and scalar state, LR-scheduler state,
                            numpy RNG state, curriculum pool state, cumulative counters
Checkpoints written before this layout (the same files, flat) still load.
A checkpoint is assembled in a hidden temporary directory, every file fsynced, then renamed into
place (os.replace), so a crash at any moment leaves either the old or the new checkpoint, never a
partial one. Only the last `keep` checkpoints are kept.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from scalerl.errors import InputError
from scalerl.models.hf_folder import load_weights_into, write_model_folder

CHECKPOINTS_DIR_NAME = "checkpoints"
TRAINING_STATE_DIR = "training_state"
_PREFIX = "step_"
_STATE_FILE = "state.json"


def checkpoint_name(step: int) -> str:
    return f"{_PREFIX}{step:08d}"


def training_file(checkpoint: str | os.PathLike, name: str) -> Path:
    """Path of a training-state file (state.json, optimizer.safetensors, rng.safetensors) of a
    checkpoint: in its training_state/ subfolder, or beside the weights in the older flat layout."""
    checkpoint = Path(checkpoint)
    nested = checkpoint / TRAINING_STATE_DIR / name
    flat = checkpoint / name
    return flat if not nested.exists() and flat.exists() else nested


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _split_optimizer_state(state_dict: Mapping[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Optimiser state_dict -> (tensors for safetensors, JSON-serialisable rest)."""
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for param_id, param_state in state_dict["state"].items():
        for name, value in param_state.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state/{param_id}/{name}"] = value.detach().contiguous().cpu()
            else:
                scalars.setdefault(str(param_id), {})[name] = value
    return tensors, {"param_groups": state_dict["param_groups"], "scalars": scalars}


def _join_optimizer_state(tensors: Mapping[str, torch.Tensor], rest: Mapping[str, Any]) -> dict[str, Any]:
    """Inverse of `_split_optimizer_state`."""
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        _, param_id, name = key.split("/", 2)
        state.setdefault(int(param_id), {})[name] = value
    for param_id, values in rest["scalars"].items():
        state.setdefault(int(param_id), {}).update(values)
    groups = []
    for group in rest["param_groups"]:
        group = dict(group)
        if isinstance(group.get("betas"), list):
            group["betas"] = tuple(group["betas"])
        groups.append(group)
    return {"state": state, "param_groups": groups}


def _rng_tensors(torch_generators: Mapping[str, torch.Generator]) -> dict[str, torch.Tensor]:
    tensors = {"global_cpu": torch.get_rng_state()}
    for name, generator in torch_generators.items():
        tensors[f"generator/{name}"] = generator.get_state()
    return tensors


def save_checkpoint(
    run_dir: str | os.PathLike,
    step: int,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    torch_generators: Mapping[str, torch.Generator],
    numpy_rng: np.random.Generator,
    state: Mapping[str, Any],
    keep: int = 1,
    tokenizer: Any = None,
) -> Path:
    """Write checkpoint `step` atomically, prune to the last `keep`, return its directory.

    `state` holds the caller's JSON-serialisable run state (pool, counters, ...); `tokenizer`,
    when given, is saved with the model so the folder loads on its own.
    """
    root = Path(run_dir) / CHECKPOINTS_DIR_NAME
    root.mkdir(parents=True, exist_ok=True)
    final = root / checkpoint_name(step)
    staging = root / f".tmp-{checkpoint_name(step)}-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    write_model_folder(model, tokenizer, staging)
    state_dir = staging / TRAINING_STATE_DIR
    state_dir.mkdir()
    optimizer_tensors, optimizer_rest = _split_optimizer_state(optimizer.state_dict())
    save_file(optimizer_tensors, str(state_dir / "optimizer.safetensors"))
    save_file(_rng_tensors(torch_generators), str(state_dir / "rng.safetensors"))
    run_state = {
        "step": int(step),
        "optimizer": optimizer_rest,
        "scheduler": scheduler.state_dict(),
        "numpy_rng": numpy_rng.bit_generator.state,
        "run": dict(state),
    }
    (state_dir / _STATE_FILE).write_text(json.dumps(run_state, indent=1))
    for path in [*staging.iterdir(), *state_dir.iterdir()]:
        _fsync_path(path)
    _fsync_path(state_dir)
    _fsync_path(staging)
    if final.exists():
        shutil.rmtree(final)
    os.replace(staging, final)
    _fsync_path(root)
    prune_checkpoints(run_dir, keep)
    return final


def list_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    root = Path(run_dir) / CHECKPOINTS_DIR_NAME
    if not root.is_dir():
        return []
    found = [path for path in root.iterdir()
             if path.is_dir() and path.name.startswith(_PREFIX) and training_file(path, _STATE_FILE).is_file()]
    return sorted(found, key=lambda path: int(path.name[len(_PREFIX):]))


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    checkpoints = list_checkpoints(run_dir)
    return checkpoints[-1] if checkpoints else None


def prune_checkpoints(run_dir: str | os.PathLike, keep: int) -> None:
    """Delete all but the last `keep` checkpoints and any leftover temporary directory."""
    for path in list_checkpoints(run_dir)[:-keep]:
        shutil.rmtree(path)
    root = Path(run_dir) / CHECKPOINTS_DIR_NAME
    for leftover in root.glob(".tmp-*"):
        if not leftover.name.endswith(f"-{os.getpid()}"):
            shutil.rmtree(leftover, ignore_errors=True)


def load_checkpoint(
    path: str | os.PathLike,
    *,
    model: torch.nn.Module | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
    torch_generators: Mapping[str, torch.Generator] | None = None,
    numpy_rng: np.random.Generator | None = None,
) -> tuple[int, dict[str, Any]]:
    """Restore in place the parts given of what `save_checkpoint` wrote; return (step, caller's state).

    The one way a checkpoint is read. A process that holds the trainer's tensors passes
    `model`, `optimizer`, `scheduler` (it also gets the global torch CPU RNG back); the run's
    bookkeeping passes `torch_generators` and `numpy_rng`. The synchronous trainer passes all
    of them; the pipeline's trainer actor and driver each pass their own part.
    """
    path = Path(path)
    try:
        run_state = json.loads(training_file(path, _STATE_FILE).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise InputError(f"checkpoint {path} is unreadable: {error}") from None
    rng = load_file(str(training_file(path, "rng.safetensors")))
    if model is not None:
        load_weights_into(model, path)
        torch.set_rng_state(rng["global_cpu"])
    if optimizer is not None:
        optimizer_tensors = load_file(str(training_file(path, "optimizer.safetensors")))
        optimizer.load_state_dict(_join_optimizer_state(optimizer_tensors, run_state["optimizer"]))
    if scheduler is not None:
        scheduler.load_state_dict(run_state["scheduler"])
    for name, generator in (torch_generators or {}).items():
        generator.set_state(rng[f"generator/{name}"])
    if numpy_rng is not None:
        numpy_rng.bit_generator.state = run_state["numpy_rng"]
    return int(run_state["step"]), run_state["run"]
