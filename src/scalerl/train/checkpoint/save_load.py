"""Checkpoints without pickle: tensors in safetensors, everything else in JSON, written atomically.

Every checkpoint is a Hugging Face model folder with its training state in a training_state/
subfolder (layout and names: scalerl.train.checkpoint.layout).
A checkpoint is assembled in a hidden temporary directory, every file fsynced, its manifest
(each file's size and SHA-256, scalerl.train.checkpoint.manifest) written last, then renamed into place
(os.replace), so a crash at any moment leaves either the old or the new checkpoint, never a
partial one; a failed write (disk full) removes the temporary directory and is one OutputError
naming the checkpoint. Tensors that are not finite are never written (DivergenceError). Only the
last `keep` checkpoints are kept. A checkpoint leaves the same way it came: renamed to a hidden
`.trash-` name (one atomic step) before its files are deleted, so a reader beside a live run (export)
finds under a `step_N` name a complete checkpoint or nothing, never one half deleted.
`load_checkpoint` verifies every file first (scalerl.train.checkpoint.verify.verify_checkpoint)
before it changes anything, so a damaged checkpoint is one InputError naming the file and what is
wrong with it.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from scalerl.errors import InputError
from scalerl.models.forward import is_lora
from scalerl.models.hf_folder import load_weights_into, write_model_folder
from scalerl.models.lora import adapter_state
from scalerl.train.checkpoint.layout import (
    CHECKPOINTS_DIR_NAME,
    STATE_FILE,
    TRAINING_STATE_DIR,
    checkpoint_name,
    checkpoint_step,
    training_file,
)
from scalerl.train.checkpoint.manifest import write_manifest
from scalerl.train.checkpoint.verify import reading, verify_checkpoint
from scalerl.train.guards.divergence_guard import DivergenceError, nonfinite_parameter
from scalerl.train.records.safe_writes import fsync_path, writing

_RETIRED_PREFIX = ".trash-"  # a checkpoint being deleted: hidden, never listed


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
    final = root / checkpoint_name(step)
    staging = root / f".tmp-{checkpoint_name(step)}-{os.getpid()}"
    optimizer_tensors, optimizer_rest = _split_optimizer_state(optimizer.state_dict())
    _require_finite_for_saving(step, model, optimizer_tensors)
    run_state = {
        "step": int(step),
        "optimizer": optimizer_rest,
        "scheduler": scheduler.state_dict(),
        "numpy_rng": numpy_rng.bit_generator.state,
        "run": dict(state),
    }
    retired = None
    try:
        with writing(final):
            root.mkdir(parents=True, exist_ok=True)
            if staging.exists():
                shutil.rmtree(staging)
            staging.mkdir()
            _write_checkpoint_files(
                staging, model, tokenizer, optimizer_tensors, _rng_tensors(torch_generators), run_state
            )
            retired = _retire(final) if final.exists() else None  # a step written again
            os.replace(staging, final)
            fsync_path(root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if retired is not None:
        shutil.rmtree(retired, ignore_errors=True)
    prune_checkpoints(run_dir, keep)
    return final


def _write_checkpoint_files(
    staging: Path,
    model: torch.nn.Module,
    tokenizer: Any,
    optimizer_tensors: Mapping[str, torch.Tensor],
    rng_tensors: Mapping[str, torch.Tensor],
    run_state: Mapping[str, Any],
) -> None:
    """The model folder and training_state/ of one checkpoint into `staging`, every file fsynced."""
    write_model_folder(model, tokenizer, staging)
    state_dir = staging / TRAINING_STATE_DIR
    state_dir.mkdir()
    save_file(dict(optimizer_tensors), str(state_dir / "optimizer.safetensors"))
    save_file(dict(rng_tensors), str(state_dir / "rng.safetensors"))
    (state_dir / STATE_FILE).write_text(json.dumps(run_state, indent=1))
    for path in [*staging.iterdir(), *state_dir.iterdir()]:
        fsync_path(path)
    fsync_path(state_dir)
    write_manifest(staging)  # last: a manifest exists only for a complete checkpoint
    fsync_path(state_dir)
    fsync_path(staging)


def _require_finite_for_saving(
    step: int, model: torch.nn.Module, optimizer_tensors: Mapping[str, torch.Tensor]
) -> None:
    """DivergenceError when a weight or an optimiser tensor is not finite: such a checkpoint
    is never written, so the run keeps its last finite one."""
    problem = nonfinite_parameter(model.named_parameters())
    if problem is None:
        problem = nonfinite_parameter(
            ((name, tensor) for name, tensor in optimizer_tensors.items() if tensor.is_floating_point()),
            kind="optimiser state",
        )
    if problem is not None:
        raise DivergenceError(
            f"step {step}: {problem}; its checkpoint is not written (the run keeps its last checkpoint)"
        )


def list_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """Complete checkpoints of a run (with a state.json), oldest first."""
    return [path for path in checkpoint_folders(run_dir) if training_file(path, STATE_FILE).is_file()]


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    checkpoints = list_checkpoints(run_dir)
    return checkpoints[-1] if checkpoints else None


def prune_checkpoints(run_dir: str | os.PathLike, keep: int) -> None:
    """Delete all but the last `keep` checkpoints (each renamed out of sight first) and any leftover
    temporary or retired directory."""
    for path in list_checkpoints(run_dir)[:-keep]:
        shutil.rmtree(_retire(path), ignore_errors=True)
    root = Path(run_dir) / CHECKPOINTS_DIR_NAME
    for leftover in [*root.glob(".tmp-*"), *root.glob(f"{_RETIRED_PREFIX}*")]:
        if not leftover.name.endswith(f"-{os.getpid()}"):
            shutil.rmtree(leftover, ignore_errors=True)


def _retire(checkpoint: Path) -> Path:
    """Rename a checkpoint to a hidden name no reader lists (one atomic step) and return that name.

    shutil.rmtree removes a folder's files one at a time: done in place, a reader could list the
    folder while its weights or its manifest are already gone. Renamed first, the folder is whole
    under its step_N name until the instant it has none.
    """
    retired = checkpoint.with_name(f"{_RETIRED_PREFIX}{checkpoint.name}-{os.getpid()}")
    if retired.exists():
        shutil.rmtree(retired)
    os.rename(checkpoint, retired)
    return retired


def checkpoint_folders(run_dir: str | os.PathLike) -> list[Path]:
    """Every step_N folder of a run, complete or not, oldest first (what a resume or an export must
    account for). A checkpoints folder that is a symbolic link is an InputError: it would bring in
    checkpoints from outside the run."""
    root = Path(run_dir) / CHECKPOINTS_DIR_NAME
    if root.is_symlink():
        raise InputError(
            f"{root} is a symbolic link (a run's checkpoints folder is a real folder inside it); "
            "refusing to read checkpoints through it"
        )
    if not root.is_dir():
        return []
    return sorted(
        (path for path in root.iterdir() if path.is_dir() and checkpoint_step(path) is not None), key=checkpoint_step
    )


def load_checkpoint(
    path: str | os.PathLike,
    *,
    model: torch.nn.Module | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
    torch_generators: Mapping[str, torch.Generator] | None = None,
    numpy_rng: np.random.Generator | None = None,
    weight_shapes: Mapping[str, tuple[int, ...]] | None = None,
    require_manifest: bool = False,
) -> tuple[int, dict[str, Any]]:
    """Restore in place the parts given of what `save_checkpoint` wrote; return (step, caller's state).

    The one way a checkpoint is read. A process that holds the trainer's tensors passes
    `model`, `optimizer`, `scheduler` (it also gets the global torch CPU RNG back); the run's
    bookkeeping passes `torch_generators` and `numpy_rng`. The synchronous trainer passes all
    of them; the pipeline's trainer actor and driver each pass their own part.
    The checkpoint is verified first (`weight_shapes`: the model's, when no `model` is given;
    `require_manifest`: a checkpoint without a manifest is damage); what still fails is an
    InputError naming the file.
    """
    path = Path(path)
    weight_shapes = weight_shapes if model is None else weight_shapes_of(model)
    run_state = verify_checkpoint(
        path,
        weight_shapes=weight_shapes,
        generator_names=tuple(torch_generators or ()),
        require_manifest=require_manifest,
    )
    rng_file = training_file(path, "rng.safetensors")
    with reading(rng_file):
        rng = load_file(str(rng_file))
    if model is not None:
        load_weights_into(model, path)
        torch.set_rng_state(rng["global_cpu"])
    if optimizer is not None:
        optimizer_file = training_file(path, "optimizer.safetensors")
        with reading(optimizer_file):
            optimizer_tensors = load_file(str(optimizer_file))
            optimizer.load_state_dict(_join_optimizer_state(optimizer_tensors, run_state["optimizer"]))
    with reading(training_file(path, STATE_FILE)):
        if scheduler is not None:
            scheduler.load_state_dict(run_state["scheduler"])
        if numpy_rng is not None:
            numpy_rng.bit_generator.state = run_state["numpy_rng"]
    with reading(rng_file):
        for name, generator in (torch_generators or {}).items():
            generator.set_state(rng[f"generator/{name}"])
    return run_state["step"], run_state["run"]


def weight_shapes_of(model: torch.nn.Module) -> dict[str, tuple[int, ...]]:
    """The shape of each tensor of a model's state dict (what its checkpoint's weights must have);
    of a LoRA policy, its adapter's (what its checkpoint holds)."""
    state = adapter_state(model) if is_lora(model) else model.state_dict()
    return {name: tuple(tensor.shape) for name, tensor in state.items()}
