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
Checkpoints written before this layout (the same files, flat) still load. A LoRA run's checkpoint
(model.lora_r > 0) holds its adapter instead of the weights (adapter_config.json,
adapter_model.safetensors: what peft's `PeftModel.from_pretrained` loads onto the starting model).
A checkpoint is assembled in a hidden temporary directory, every file fsynced, its manifest
(each file's size and SHA-256, scalerl.train.manifest) written last, then renamed into place
(os.replace), so a crash at any moment leaves either the old or the new checkpoint, never a
partial one; a failed write (disk full) removes the temporary directory and is one OutputError
naming the checkpoint. Tensors that are not finite are never written (DivergenceError). Only the
last `keep` checkpoints are kept. A checkpoint leaves the same way it came: renamed to a hidden
`.trash-` name (one atomic step) before its files are deleted, so a reader beside a live run (export)
finds under a `step_N` name a complete checkpoint or nothing, never one half deleted.
`verify_checkpoint` checks every file of a checkpoint before anything is loaded from it: the
manifest's sizes and checksums (a checkpoint without one is accepted: older scalerl), no
symbolic link anywhere in it, JSON structure and value ranges of state.json, safetensors headers
against the shapes and sizes expected (before any tensor is allocated), RNG states, weight shapes
when known, and every floating-point tensor finite; `load_checkpoint` verifies before it changes
anything, so a damaged checkpoint is one InputError naming the file and what is wrong with it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import stat
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from scalerl.errors import InputError
from scalerl.models.hf_folder import load_weights_into, weight_files, write_model_folder
from scalerl.models.lora import adapter_state, is_lora
from scalerl.train.manifest import verify_manifest, write_manifest
from scalerl.train.nonfinite import DivergenceError, nonfinite_parameter
from scalerl.train.safe_writes import fsync_path, writing

CHECKPOINTS_DIR_NAME = "checkpoints"
TRAINING_STATE_DIR = "training_state"
_PREFIX = "step_"
_RETIRED_PREFIX = ".trash-"  # a checkpoint being deleted: hidden, never listed
_STATE_FILE = "state.json"
_RNG_STATE_MAX_BYTES = 1 << 20  # a torch generator state is a few KiB (CPU) or bytes (CUDA)
_DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F16": 2, "BF16": 2, "I16": 2,
                "U16": 2, "F32": 4, "I32": 4, "U32": 4, "F64": 8, "I64": 8, "U64": 8}


def checkpoint_name(step: int) -> str:
    return f"{_PREFIX}{step:08d}"


def training_file(checkpoint: str | os.PathLike, name: str) -> Path:
    """Path of a training-state file (state.json, optimizer.safetensors, rng.safetensors) of a
    checkpoint: in its training_state/ subfolder, or beside the weights in the older flat layout."""
    checkpoint = Path(checkpoint)
    nested = checkpoint / TRAINING_STATE_DIR / name
    flat = checkpoint / name
    return flat if not nested.exists() and flat.exists() else nested


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
            _write_checkpoint_files(staging, model, tokenizer, optimizer_tensors, _rng_tensors(torch_generators),
                                    run_state)
            retired = _retire(final) if final.exists() else None  # a step written again
            os.replace(staging, final)
            fsync_path(root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if retired is not None:
        shutil.rmtree(retired, ignore_errors=True)
    prune_checkpoints(run_dir, keep)
    return final


def _write_checkpoint_files(staging: Path, model: torch.nn.Module, tokenizer: Any,
                            optimizer_tensors: Mapping[str, torch.Tensor], rng_tensors: Mapping[str, torch.Tensor],
                            run_state: Mapping[str, Any]) -> None:
    """The model folder and training_state/ of one checkpoint into `staging`, every file fsynced."""
    write_model_folder(model, tokenizer, staging)
    state_dir = staging / TRAINING_STATE_DIR
    state_dir.mkdir()
    save_file(dict(optimizer_tensors), str(state_dir / "optimizer.safetensors"))
    save_file(dict(rng_tensors), str(state_dir / "rng.safetensors"))
    (state_dir / _STATE_FILE).write_text(json.dumps(run_state, indent=1))
    for path in [*staging.iterdir(), *state_dir.iterdir()]:
        fsync_path(path)
    fsync_path(state_dir)
    write_manifest(staging)  # last: a manifest exists only for a complete checkpoint
    fsync_path(state_dir)
    fsync_path(staging)


def _require_finite_for_saving(step: int, model: torch.nn.Module,
                               optimizer_tensors: Mapping[str, torch.Tensor]) -> None:
    """DivergenceError when a weight or an optimiser tensor is not finite: such a checkpoint
    is never written, so the run keeps its last finite one."""
    problem = nonfinite_parameter(model.named_parameters())
    if problem is None:
        problem = nonfinite_parameter(((name, tensor) for name, tensor in optimizer_tensors.items()
                                       if tensor.is_floating_point()), kind="optimiser state")
    if problem is not None:
        raise DivergenceError(f"step {step}: {problem}; its checkpoint is not written (the run keeps its "
                              "last checkpoint)")


def list_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """Complete checkpoints of a run (with a state.json), oldest first."""
    return [path for path in checkpoint_folders(run_dir) if training_file(path, _STATE_FILE).is_file()]


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


def checkpoint_step(path: str | os.PathLike) -> int | None:
    """The step in a checkpoint folder's name (step_00000120 -> 120); None for another name."""
    name = Path(path).name
    return int(name[len(_PREFIX):]) if name.startswith(_PREFIX) and name[len(_PREFIX):].isdigit() else None


def checkpoint_folders(run_dir: str | os.PathLike) -> list[Path]:
    """Every step_N folder of a run, complete or not, oldest first (what a resume must account for)."""
    root = Path(run_dir) / CHECKPOINTS_DIR_NAME
    if not root.is_dir():
        return []
    return sorted((path for path in root.iterdir() if path.is_dir() and checkpoint_step(path) is not None),
                  key=checkpoint_step)


@contextlib.contextmanager
def _reading(path: Path) -> Iterator[None]:
    """Any failure to read or use `path` in the block becomes one InputError naming it."""
    try:
        yield
    except InputError:
        raise
    except FileNotFoundError:
        raise InputError(f"{path} is missing") from None
    except (OSError, SafetensorError, ValueError, TypeError, KeyError, IndexError, AttributeError,
            RuntimeError) as error:
        detail = " ".join(str(error).split()) or type(error).__name__
        raise InputError(f"{path} is damaged: {detail[:300]}") from None


def _require_intact(ok: bool, path: Path, message: str) -> None:
    if not ok:
        raise InputError(f"{path} is damaged: {message}")


def read_training_state(path: str | os.PathLike) -> dict[str, Any]:
    """The checked state.json of a checkpoint: step (that of the folder's name), optimizer
    param groups, scheduler, numpy RNG and the caller's run state."""
    state_file = training_file(path, _STATE_FILE)
    with _reading(state_file):
        run_state = json.loads(state_file.read_text())
    _require_intact(isinstance(run_state, dict), state_file, "not a JSON object")
    missing = [key for key in ("step", "optimizer", "scheduler", "numpy_rng", "run") if key not in run_state]
    _require_intact(not missing, state_file, f"no {', '.join(missing)}")
    step = run_state["step"]
    _require_intact(isinstance(step, int) and not isinstance(step, bool), state_file,
                   f"step is {step!r}, not an integer")
    _require_intact(checkpoint_step(path) in (None, step), state_file,
                   f"step {step} is not that of the folder {Path(path).name}")
    for key in ("optimizer", "scheduler", "numpy_rng", "run"):
        _require_intact(isinstance(run_state[key], dict), state_file, f"{key} is not a JSON object")
    groups, scalars = run_state["optimizer"].get("param_groups"), run_state["optimizer"].get("scalars")
    _require_intact(isinstance(groups, list) and all(isinstance(g, dict) and isinstance(g.get("params"), list)
                                                    for g in groups) and isinstance(scalars, dict),
                   state_file, "optimizer.param_groups/scalars are not what an optimiser saved")
    for group in groups:
        _check_param_group(group, state_file)
    _check_scheduler(run_state["scheduler"], state_file)
    with _reading(state_file):
        np.random.default_rng(0).bit_generator.state = run_state["numpy_rng"]
    return run_state


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_param_group(group: Mapping[str, Any], state_file: Path) -> None:
    """An optimiser param group's hyper-parameters are finite numbers in their ranges."""
    for key in ("lr", "initial_lr", "eps", "weight_decay"):
        value = group.get(key, 0.0)
        _require_intact(_is_number(value) and value >= 0, state_file,
                        f"optimizer {key} is {repr(value)[:50]}, not a finite number >= 0")
    betas = group.get("betas", [0.0, 0.0])
    _require_intact(isinstance(betas, (list, tuple)) and len(betas) == 2
                    and all(_is_number(b) and 0 <= b < 1 for b in betas), state_file,
                    f"optimizer betas are {str(betas)[:50]}, not two numbers in [0, 1)")
    _require_intact(all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in group["params"]),
                    state_file, "optimizer params are not parameter indices")


def _check_scheduler(scheduler: Mapping[str, Any], state_file: Path) -> None:
    """The LR schedule's state: step counters are integers, learning rates finite numbers >= 0."""
    for key in ("last_epoch", "_step_count"):
        if key in scheduler:
            value = scheduler[key]
            _require_intact(isinstance(value, int) and not isinstance(value, bool) and value >= -1, state_file,
                            f"scheduler {key} is {repr(value)[:50]}, not a step count")
    for key in ("base_lrs", "_last_lr"):
        if key in scheduler:
            values = scheduler[key]
            _require_intact(isinstance(values, list) and all(_is_number(v) and v >= 0 for v in values),
                            state_file, f"scheduler {key} is {str(values)[:50]}, not learning rates")


def _verify_tensor_file(path: Path, max_numel: int | None = None,
                        max_bytes: int | None = None) -> dict[str, tuple[int, ...]]:
    """Shapes of the tensors of a safetensors file, from its header (a truncated or foreign file
    fails), each at most `max_numel` elements and `max_bytes` bytes when given: nothing is allocated."""
    _require_regular(path)
    with _reading(path), safe_open(str(path), framework="pt") as handle:
        shapes = {}
        for name in handle.keys():
            view = handle.get_slice(name)
            shape = tuple(view.get_shape())
            numel = math.prod(shape)
            size = numel * _DTYPE_BYTES.get(view.get_dtype(), 8)
            _require_intact(max_numel is None or numel <= max_numel, path,
                            f"tensor {name[:100]!r} has {numel} elements, more than the model's largest weight")
            _require_intact(max_bytes is None or size <= max_bytes, path,
                            f"tensor {name[:100]!r} holds {size} bytes, more than a state of its kind ({max_bytes})")
            shapes[name] = shape
        return shapes


def _require_regular(path: Path) -> None:
    """A checkpoint file is a regular file (not a symbolic link, FIFO or device)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        raise InputError(f"{path} is missing") from None
    _require_intact(stat.S_ISREG(mode), path, "not a regular file (a symbolic link or a device)")


def _require_no_links(folder: Path) -> None:
    """No symbolic link anywhere in a checkpoint folder (scalerl never writes one; a link could
    bring in a file from outside the run)."""
    _require_intact(not folder.is_symlink(), folder, "a symbolic link (a checkpoint is a real folder)")
    for root, directories, names in os.walk(folder):
        for name in [*directories, *names]:
            _require_intact(not (Path(root) / name).is_symlink(), Path(root) / name,
                            "a symbolic link (a checkpoint holds regular files only)")


def _verify_finite(path: Path) -> None:
    """Every floating-point tensor of a safetensors file is finite (read one tensor at a time)."""
    with _reading(path), safe_open(str(path), framework="pt") as handle:
        for name in handle.keys():
            tensor = handle.get_tensor(name)
            _require_intact(not tensor.is_floating_point() or bool(torch.isfinite(tensor).all()), path,
                            f"tensor {name[:100]!r} holds a NaN or an infinity")


def _verify_rng(path: Path, generator_names: tuple[str, ...]) -> None:
    _verify_tensor_file(path, max_bytes=_RNG_STATE_MAX_BYTES)
    with _reading(path):
        rng = load_file(str(path))
        torch.Generator().set_state(rng["global_cpu"])
        for name in generator_names:
            _require_intact(f"generator/{name}" in rng, path, f"no state of the {name!r} generator")


def _verify_weights(path: Path, weight_shapes: Mapping[str, tuple[int, ...]] | None) -> None:
    """Every weight file's header, and each tensor's shape against the model's (when given)."""
    files = weight_files(path)
    shapes: dict[str, tuple[int, ...]] = {}
    for file in files:
        _require_regular(file)
        shapes.update(_verify_tensor_file(file))
    for name, shape in shapes.items():
        expected = None if weight_shapes is None else weight_shapes.get(name, "absent")
        _require_intact(expected is None or expected == shape, files[0] if len(files) == 1 else path,
                       f"tensor {name} has shape {shape}, the model "
                       f"{'has no such tensor' if expected == 'absent' else expected}")
    for file in files:
        _verify_finite(file)


def verify_checkpoint(path: str | os.PathLike, *, weight_shapes: Mapping[str, tuple[int, ...]] | None = None,
                      generator_names: tuple[str, ...] = ()) -> dict[str, Any]:
    """Check every file of a checkpoint before anything is loaded from it; return its state.json.

    Checks the manifest (when there is one: every file's size and SHA-256) and that no file is a
    symbolic link; reads state.json and rng.safetensors (small, bounded by their headers) in full;
    checks the headers of the weight and optimiser files, then their tensors one at a time for
    NaN and infinity: a truncated, empty, changed or foreign file, a missing key, a wrong type or
    a value out of its range, an RNG state that does not load, or (with `weight_shapes`, the
    model's) a tensor of another shape or size is an InputError naming the file and the problem.
    """
    path = Path(path)
    _require_no_links(path)
    verify_manifest(path)
    run_state = read_training_state(path)
    _verify_rng(training_file(path, "rng.safetensors"), generator_names)
    optimizer_file = training_file(path, "optimizer.safetensors")
    param_ids = {param_id for group in run_state["optimizer"]["param_groups"] for param_id in group["params"]}
    largest = max((math.prod(shape) for shape in weight_shapes.values()), default=0) if weight_shapes else None
    for key in _verify_tensor_file(optimizer_file, max_numel=largest):
        parts = key.split("/", 2)
        _require_intact(len(parts) == 3 and parts[0] == "state" and parts[1].isdigit() and int(parts[1]) in param_ids,
                       optimizer_file, f"tensor {key!r} belongs to no optimiser parameter")
    _verify_weights(path, weight_shapes)
    _verify_finite(optimizer_file)
    return run_state


def load_checkpoint(
    path: str | os.PathLike,
    *,
    model: torch.nn.Module | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
    torch_generators: Mapping[str, torch.Generator] | None = None,
    numpy_rng: np.random.Generator | None = None,
    weight_shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> tuple[int, dict[str, Any]]:
    """Restore in place the parts given of what `save_checkpoint` wrote; return (step, caller's state).

    The one way a checkpoint is read. A process that holds the trainer's tensors passes
    `model`, `optimizer`, `scheduler` (it also gets the global torch CPU RNG back); the run's
    bookkeeping passes `torch_generators` and `numpy_rng`. The synchronous trainer passes all
    of them; the pipeline's trainer actor and driver each pass their own part.
    The checkpoint is verified first (`weight_shapes`: the model's, when no `model` is given);
    what still fails is an InputError naming the file.
    """
    path = Path(path)
    weight_shapes = weight_shapes if model is None else weight_shapes_of(model)
    run_state = verify_checkpoint(path, weight_shapes=weight_shapes,
                                  generator_names=tuple(torch_generators or ()))
    rng_file = training_file(path, "rng.safetensors")
    with _reading(rng_file):
        rng = load_file(str(rng_file))
    if model is not None:
        load_weights_into(model, path)
        torch.set_rng_state(rng["global_cpu"])
    if optimizer is not None:
        optimizer_file = training_file(path, "optimizer.safetensors")
        with _reading(optimizer_file):
            optimizer_tensors = load_file(str(optimizer_file))
            optimizer.load_state_dict(_join_optimizer_state(optimizer_tensors, run_state["optimizer"]))
    with _reading(training_file(path, _STATE_FILE)):
        if scheduler is not None:
            scheduler.load_state_dict(run_state["scheduler"])
        if numpy_rng is not None:
            numpy_rng.bit_generator.state = run_state["numpy_rng"]
    with _reading(rng_file):
        for name, generator in (torch_generators or {}).items():
            generator.set_state(rng[f"generator/{name}"])
    return run_state["step"], run_state["run"]


def weight_shapes_of(model: torch.nn.Module) -> dict[str, tuple[int, ...]]:
    """The shape of each tensor of a model's state dict (what its checkpoint's weights must have);
    of a LoRA policy, its adapter's (what its checkpoint holds)."""
    state = adapter_state(model) if is_lora(model) else model.state_dict()
    return {name: tuple(tensor.shape) for name, tensor in state.items()}
