"""Verification of a checkpoint folder before anything is loaded from it.

A checkpoint is read back by resume (`--resume`), the pipeline's trainer actor and driver, and
`scalerl export`, possibly long after it was written and beside a live run: a file may have been
truncated by a full disk, changed by a flipped bit, replaced by a link to a file outside the run,
or hand-edited. `verify_checkpoint`, the one check every reader calls, checks every file of a
checkpoint first: the manifest's sizes and checksums (a checkpoint without one: damage when the
caller requires one, else accepted as older scalerl's), no symbolic link anywhere in it, JSON
structure and value ranges of state.json (step that of the folder's name, optimiser lr/eps/weight
decay finite and >= 0, betas in [0, 1), LR-schedule counters integers and rates finite), every
JSON file of the model folder parsed, safetensors headers against the shapes and sizes expected
before any file is hashed or any tensor allocated (weights against the model's shapes, or the
largest weight its config.json describes; optimiser state against the largest weight's size; RNG states at most
1 MiB: a header claiming 20 GiB is refused at once), RNG states that load, and every
floating-point tensor finite. Whatever fails, a MemoryError included, is one InputError naming
the file and what is wrong with it, so a caller (resume, export) treats the checkpoint as damaged
and nothing of it has been loaded.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

from scalerl.errors import InputError
from scalerl.models.hf_folder import weight_files
from scalerl.train.checkpoint.layout import STATE_FILE, checkpoint_step, training_file
from scalerl.train.checkpoint.manifest import manifest_path, verify_manifest

_RNG_STATE_MAX_BYTES = 1 << 20  # a torch generator state is a few KiB (CPU) or bytes (CUDA)
_JSON_MAX_BYTES = 256 << 20  # a model folder's largest JSON file, tokenizer.json, is ~10 MiB
_DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F64": 8,
    "I64": 8,
    "U64": 8,
}


@contextlib.contextmanager
def reading(path: Path) -> Iterator[None]:
    """Any failure to read or use `path` in the block becomes one InputError naming it."""
    try:
        yield
    except InputError:
        raise
    except FileNotFoundError:
        raise InputError(f"{path} is missing") from None
    except MemoryError:
        raise InputError(f"{path} is damaged: reading it needs more memory than there is") from None
    except (
        OSError,
        SafetensorError,
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
        RuntimeError,
    ) as error:
        detail = " ".join(str(error).split()) or type(error).__name__
        raise InputError(f"{path} is damaged: {detail[:300]}") from None


def _require_intact(ok: bool, path: Path, message: str) -> None:
    if not ok:
        raise InputError(f"{path} is damaged: {message}")


def read_training_state(path: str | os.PathLike) -> dict[str, Any]:
    """The checked state.json of a checkpoint: step (that of the folder's name), optimizer
    param groups, scheduler, numpy RNG and the caller's run state."""
    state_file = training_file(path, STATE_FILE)
    with reading(state_file):
        run_state = json.loads(state_file.read_text())
    _require_intact(isinstance(run_state, dict), state_file, "not a JSON object")
    missing = [key for key in ("step", "optimizer", "scheduler", "numpy_rng", "run") if key not in run_state]
    _require_intact(not missing, state_file, f"no {', '.join(missing)}")
    step = run_state["step"]
    _require_intact(
        isinstance(step, int) and not isinstance(step, bool), state_file, f"step is {step!r}, not an integer"
    )
    _require_intact(
        checkpoint_step(path) in (None, step), state_file, f"step {step} is not that of the folder {Path(path).name}"
    )
    for key in ("optimizer", "scheduler", "numpy_rng", "run"):
        _require_intact(isinstance(run_state[key], dict), state_file, f"{key} is not a JSON object")
    groups, scalars = run_state["optimizer"].get("param_groups"), run_state["optimizer"].get("scalars")
    _require_intact(
        isinstance(groups, list)
        and all(isinstance(g, dict) and isinstance(g.get("params"), list) for g in groups)
        and isinstance(scalars, dict),
        state_file,
        "optimizer.param_groups/scalars are not what an optimiser saved",
    )
    for group in groups:
        _check_param_group(group, state_file)
    _check_scheduler(run_state["scheduler"], state_file)
    with reading(state_file):
        np.random.default_rng(0).bit_generator.state = run_state["numpy_rng"]
    return run_state


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_param_group(group: Mapping[str, Any], state_file: Path) -> None:
    """An optimiser param group's hyper-parameters are finite numbers in their ranges."""
    for key in ("lr", "initial_lr", "eps", "weight_decay"):
        value = group.get(key, 0.0)
        _require_intact(
            _is_number(value) and value >= 0,
            state_file,
            f"optimizer {key} is {repr(value)[:50]}, not a finite number >= 0",
        )
    betas = group.get("betas", [0.0, 0.0])
    _require_intact(
        isinstance(betas, (list, tuple)) and len(betas) == 2 and all(_is_number(b) and 0 <= b < 1 for b in betas),
        state_file,
        f"optimizer betas are {str(betas)[:50]}, not two numbers in [0, 1)",
    )
    _require_intact(
        all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in group["params"]),
        state_file,
        "optimizer params are not parameter indices",
    )


def _check_scheduler(scheduler: Mapping[str, Any], state_file: Path) -> None:
    """The LR schedule's state: step counters are integers, learning rates finite numbers >= 0."""
    for key in ("last_epoch", "_step_count"):
        if key in scheduler:
            value = scheduler[key]
            _require_intact(
                isinstance(value, int) and not isinstance(value, bool) and value >= -1,
                state_file,
                f"scheduler {key} is {repr(value)[:50]}, not a step count",
            )
    for key in ("base_lrs", "_last_lr"):
        if key in scheduler:
            values = scheduler[key]
            _require_intact(
                isinstance(values, list) and all(_is_number(v) and v >= 0 for v in values),
                state_file,
                f"scheduler {key} is {str(values)[:50]}, not learning rates",
            )


def _verify_tensor_file(
    path: Path, max_numel: int | None = None, max_bytes: int | None = None
) -> dict[str, tuple[int, ...]]:
    """Shapes of the tensors of a safetensors file, from its header (a truncated or foreign file
    fails), each at most `max_numel` elements and `max_bytes` bytes when given: nothing is allocated."""
    _require_regular(path)
    with reading(path), safe_open(str(path), framework="pt") as handle:
        shapes = {}
        for name in handle.keys():
            view = handle.get_slice(name)
            shape = tuple(view.get_shape())
            numel = math.prod(shape)
            size = numel * _DTYPE_BYTES.get(view.get_dtype(), 8)
            _require_intact(
                max_numel is None or numel <= max_numel,
                path,
                f"tensor {name[:100]!r} has {numel} elements, more than the model's largest weight",
            )
            _require_intact(
                max_bytes is None or size <= max_bytes,
                path,
                f"tensor {name[:100]!r} holds {size} bytes, more than a state of its kind ({max_bytes})",
            )
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
            _require_intact(
                not (Path(root) / name).is_symlink(),
                Path(root) / name,
                "a symbolic link (a checkpoint holds regular files only)",
            )


def _verify_finite(path: Path) -> None:
    """Every floating-point tensor of a safetensors file is finite (read one tensor at a time)."""
    with reading(path), safe_open(str(path), framework="pt") as handle:
        for name in handle.keys():
            tensor = handle.get_tensor(name)
            _require_intact(
                not tensor.is_floating_point() or bool(torch.isfinite(tensor).all()),
                path,
                f"tensor {name[:100]!r} holds a NaN or an infinity",
            )


def _verify_rng(path: Path, generator_names: tuple[str, ...]) -> None:
    """The RNG states load (their header was checked against `_RNG_STATE_MAX_BYTES` first)."""
    with reading(path):
        rng = load_file(str(path))
        torch.Generator().set_state(rng["global_cpu"])
        for name in generator_names:
            _require_intact(f"generator/{name}" in rng, path, f"no state of the {name!r} generator")


def _verify_weight_headers(
    path: Path, weight_shapes: Mapping[str, tuple[int, ...]] | None, max_numel: int | None = None
) -> list[Path]:
    """Every weight file's header, each tensor at most `max_numel` elements (when given) and of the
    model's shape (when `weight_shapes` are given); returns the weight files."""
    files = weight_files(path)
    shapes: dict[str, tuple[int, ...]] = {}
    for file in files:
        _require_regular(file)
        shapes.update(_verify_tensor_file(file, max_numel=max_numel))
    for name, shape in shapes.items():
        expected = None if weight_shapes is None else weight_shapes.get(name, "absent")
        _require_intact(
            expected is None or expected == shape,
            files[0] if len(files) == 1 else path,
            f"tensor {name} has shape {shape}, the model {'has no such tensor' if expected == 'absent' else expected}",
        )
    return files


def _verify_json_files(folder: Path) -> None:
    """Every JSON file of the model folder (config.json, tokenizer.json, generation_config.json,
    ...) is a regular file of at most `_JSON_MAX_BYTES` holding one JSON object: a half-cut
    file would be copied by export and fail `from_pretrained` later."""
    for file in sorted(folder.glob("*.json")):
        _require_regular(file)
        _require_intact(
            file.stat().st_size <= _JSON_MAX_BYTES,
            file,
            f"{file.stat().st_size} bytes, more than a model folder's JSON file holds",
        )
        with reading(file):
            parsed = json.loads(file.read_bytes().decode("utf-8"))
        _require_intact(isinstance(parsed, dict), file, "not a JSON object")


def config_weight_shapes(folder: str | os.PathLike) -> dict[str, tuple[int, ...]] | None:
    """The weight shapes the folder's config.json describes: the model transformers builds from
    it on the meta device (no memory allocated). None when the folder holds no config.json or an
    adapter (its shapes depend on the starting model), or transformers cannot build a model from
    it (an unknown architecture; a config.json that does not parse is refused by the JSON check)."""
    from scalerl.models.lora import ADAPTER_CONFIG_FILE

    folder = Path(folder)
    config_file = folder / "config.json"
    if not config_file.is_file() or (folder / ADAPTER_CONFIG_FILE).exists():
        return None
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RuntimeError, ImportError):
        return None  # a config transformers cannot build: the JSON and the files' own checks still apply
    return {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}


def verify_checkpoint(
    path: str | os.PathLike,
    *,
    weight_shapes: Mapping[str, tuple[int, ...]] | None = None,
    generator_names: tuple[str, ...] = (),
    require_manifest: bool = False,
) -> dict[str, Any]:
    """Check every file of a checkpoint before anything is loaded from it; return its state.json.

    In order, so that nothing is read beyond what a header bounds: no file is a symbolic link;
    the manifest's files have its sizes (no manifest: damage with `require_manifest`, else
    accepted as an older scalerl's); state.json is read and checked; the headers of the RNG,
    optimiser and weight files are checked against the shapes and sizes expected (`weight_shapes`,
    the model's: each weight of its shape; without them, no tensor larger than the largest weight
    config.json describes); every JSON file of the model folder
    parses; then the manifest's SHA-256s, the RNG states and every tensor (one at a time, for NaN
    and infinity). A truncated, empty, changed or foreign file, a missing key, a wrong type or a
    value out of its range, an RNG state that does not load, or a tensor of another shape or
    size is an InputError naming the file and the problem.
    """
    path = Path(path)
    _require_no_links(path)
    has_manifest = verify_manifest(path, checksums=False)
    if require_manifest and not has_manifest:
        raise InputError(
            f"{manifest_path(path)} is missing, so no file's checksum can be checked (a checkpoint "
            "of an older scalerl is accepted only when asked: --accept-old-checkpoints)"
        )
    run_state = read_training_state(path)
    rng_file = training_file(path, "rng.safetensors")
    _verify_tensor_file(rng_file, max_bytes=_RNG_STATE_MAX_BYTES)
    bounding_shapes = weight_shapes if weight_shapes is not None else config_weight_shapes(path)
    optimizer_file = training_file(path, "optimizer.safetensors")
    param_ids = {param_id for group in run_state["optimizer"]["param_groups"] for param_id in group["params"]}
    largest = max((math.prod(shape) for shape in bounding_shapes.values()), default=0) if bounding_shapes else None
    for key in _verify_tensor_file(optimizer_file, max_numel=largest):
        parts = key.split("/", 2)
        _require_intact(
            len(parts) == 3 and parts[0] == "state" and parts[1].isdigit() and int(parts[1]) in param_ids,
            optimizer_file,
            f"tensor {key!r} belongs to no optimiser parameter",
        )
    files = _verify_weight_headers(path, weight_shapes, largest)
    _verify_json_files(path)
    if has_manifest:
        verify_manifest(path)
    _verify_rng(rng_file, generator_names)
    for file in files:
        _verify_finite(file)
    _verify_finite(optimizer_file)
    return run_state
