"""`scalerl export`: a run's checkpoint as a standalone Hugging Face model folder.

A checkpoint is already a model folder (scalerl.train.checkpoint.save_load); export copies its model and
tokenizer files without the training state, so the result is what `from_pretrained`, vLLM or
`push_to_hub` expect. A checkpoint of the older flat layout (weights only) is rebuilt from the
run's config.json: the policy is built as the run built it and the weights loaded into it.
The folder is assembled beside `out` and renamed into place, so it appears complete or not at all.

The checkpoint is verified first by the checks resume makes (scalerl.train.checkpoint.verify.verify_checkpoint:
manifest checksums, no symbolic link, headers against the model's config, JSON files parsed,
finite tensors), and a checkpoint without a manifest is damage unless the user accepts older
checkpoints; a damaged one is refused, never copied. The newest checkpoint is the one exported
unless the user names a step: a damaged or incomplete newest one is an error saying so, never a
silent older one. Its manifest
is read once, before anything else: only the files it lists are copied (older checkpoints without
one: its regular files, with a warning), each copy checked against that manifest's size and
SHA-256, so the folder written is exactly the checkpoint first read or nothing.
Beside a live run: the trainer removes a checkpoint by renaming it out of sight, then deleting it
(scalerl.train.checkpoint.save_load), so the one being exported can vanish, whole, mid-read. Export tells
that apart from damage by the folder's identity (device, inode): when the folder it read is no
longer the one under that name, it starts again on the newest (at most `_ATTEMPTS` times); an
error of a checkpoint still in place is never retried.
The exported folder takes the checkpoint folder's permissions; `dtype` casts its weights
(scalerl.train.export_dtype), with a note when the head then computes in another precision.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from scalerl.errors import InputError, ScaleRLError
from scalerl.models.hf_folder import is_model_folder, load_weights_into
from scalerl.models.lora import is_adapter_folder
from scalerl.train.checkpoint.layout import TRAINING_STATE_DIR, checkpoint_name, checkpoint_step
from scalerl.train.checkpoint.manifest import file_sha256, read_manifest
from scalerl.train.checkpoint.save_load import checkpoint_folders
from scalerl.train.checkpoint.verify import verify_checkpoint

_TRAINING_FILES = ("optimizer.safetensors", "rng.safetensors", "state.json")
_ATTEMPTS = 5  # a run keeping one checkpoint replaces it every checkpoint_every steps


def find_checkpoint(run_dir: str | os.PathLike, step: int | None = None) -> Path:
    """The checkpoint of `step`, default the newest step_N folder, complete or not (an incomplete or
    damaged newest one is refused by the checks, never passed over for an older one); InputError
    lists the steps there are."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError(f"run directory {run_dir} does not exist")
    checkpoints = checkpoint_folders(run_dir)
    if not checkpoints:
        raise InputError(f"{run_dir} holds no checkpoint (no {run_dir / 'checkpoints'}/step_*)")
    if step is None:
        return checkpoints[-1]
    for checkpoint in checkpoints:
        if checkpoint.name == checkpoint_name(step):
            return checkpoint
    steps = ", ".join(str(int(c.name.split("_")[-1])) for c in checkpoints)
    raise InputError(f"{run_dir} has no checkpoint of step {step}; kept steps: {steps}")


def model_file_names(checkpoint: Path, manifest: dict[str, dict] | None) -> list[str]:
    """Relative paths of a checkpoint's model and tokenizer files: those its manifest lists, or (no
    manifest) its regular files, outside training_state/ and the training files of the flat layout."""
    if manifest is not None:
        names = list(manifest)
    else:
        names = [
            path.relative_to(checkpoint).as_posix()
            for path in checkpoint.rglob("*")
            if path.is_file() and not path.is_symlink()
        ]
    return sorted(name for name in names if name.split("/")[0] != TRAINING_STATE_DIR and name not in _TRAINING_FILES)


def _copy_model_files(checkpoint: Path, manifest: dict[str, dict] | None, staging: Path) -> None:
    """Copy the model files (regular files only, never a link's target), each checked against
    `manifest` (the one read before the checkpoint was verified) after the copy."""
    for name in model_file_names(checkpoint, manifest):
        target = staging / name
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(checkpoint / name, target, follow_symlinks=False)
        except FileNotFoundError:
            raise InputError(f"{checkpoint / name} is missing") from None
        entry = (manifest or {}).get(name)
        if entry is not None and (target.stat().st_size != entry["size"] or file_sha256(target) != entry["sha256"]):
            raise InputError(f"{checkpoint / name} differs from the checkpoint's manifest after the copy")


def _folder_identity(folder: Path) -> tuple[int, int] | None:
    """(device, inode) of the folder under that name now; None when there is none. A checkpoint
    renamed away, or replaced by another of the same step, changes it."""
    try:
        status = os.stat(folder)
    except FileNotFoundError:
        return None
    return status.st_dev, status.st_ino


def _rebuild_model_folder(run_dir: Path, checkpoint: Path, staging: Path) -> None:
    """Older flat checkpoints: build the run's policy, load the weights, save_pretrained."""
    from scalerl.models.hf_folder import write_model_folder
    from scalerl.train.config.train_config import load_config
    from scalerl.train.run_setup import fresh_policy

    model, tokenizer = fresh_policy(load_config(run_dir))
    load_weights_into(model, checkpoint)
    write_model_folder(model, tokenizer, staging)


def _merged_model_folder(run_dir: Path, checkpoint: Path, staging: Path) -> None:
    """A LoRA checkpoint: the run's starting weights rebuilt as the run built them (its warm start
    read from the cache), the adapter loaded onto them and merged in (peft's merge_and_unload)."""
    from scalerl.models.hf_folder import write_model_folder
    from scalerl.models.lora import merged_model
    from scalerl.train.config.train_config import load_config
    from scalerl.train.lora_policy import run_policy
    from scalerl.train.run_setup import build_task

    config = load_config(run_dir)
    model, tokenizer = run_policy(config, build_task(config), resuming=True)
    load_weights_into(model, checkpoint)
    write_model_folder(merged_model(model), tokenizer, staging)


def export_model(
    run_dir: str | os.PathLike,
    out: str | os.PathLike,
    *,
    step: int | None = None,
    on_note: Callable[[str], None] | None = None,
    dtype: str | None = None,
    merge: bool = False,
    accept_old: bool = False,
) -> Path:
    """Write the checkpoint of `step` (default: newest) of the run as a model folder at `out`,
    its weights cast to `dtype` when given; `on_note` hears the warning about a checkpoint without
    a manifest (accepted only with `accept_old`: otherwise damage) and the note about the head's
    precision. A LoRA run's checkpoint is written as its adapter folder, or with `merge` as a plain
    model folder with the adapter merged in (`merge` changes nothing for a run that trained every
    weight)."""
    from scalerl.train.export_dtype import EXPORT_DTYPES

    if dtype is not None and dtype not in EXPORT_DTYPES:
        raise InputError(f"--dtype must be one of {', '.join(EXPORT_DTYPES)}, got {dtype!r}")
    run_dir, out = Path(run_dir), Path(out)
    for _ in range(_ATTEMPTS):
        checkpoint = find_checkpoint(run_dir, step)  # a pinned step that is gone: its own clear error
        identity = _folder_identity(checkpoint)
        try:
            notes = _export_checkpoint(run_dir, checkpoint, out, dtype, merge, accept_old, step is not None)
            break
        except (ScaleRLError, OSError):
            if identity is not None and _folder_identity(checkpoint) == identity:
                raise  # the checkpoint read is still in place: its error is its own
    else:
        raise InputError(
            f"cannot export {checkpoint.name}: the run's training process removed each newest "
            f"checkpoint while it was read ({_ATTEMPTS} tries); export again, or keep more "
            "checkpoints (keep_checkpoints)"
        )
    for note in notes:
        if on_note is not None:
            on_note(note)
    return out


def _export_checkpoint(
    run_dir: Path, checkpoint: Path, out: Path, dtype: str | None, merge: bool, accept_old: bool, pinned: bool
) -> list[str]:
    """Write `checkpoint` as a model folder at `out` (staged, then renamed); the notes to show.
    The checks are resume's (verify_checkpoint); a refusal of the newest checkpoint says how to
    export an older one explicitly (`pinned`: the user named this step)."""
    from scalerl.train.export_dtype import cast_model_folder, head_precision_note, trained_head_dtype

    notes = []
    try:
        manifest = read_manifest(checkpoint)  # read once: what the copies are checked against
        verify_checkpoint(checkpoint, require_manifest=not accept_old)
    except InputError as error:
        older = [
            checkpoint_step(folder)
            for folder in checkpoint_folders(run_dir)
            if checkpoint_step(folder) < checkpoint_step(checkpoint)
        ]
        hint = (
            f"; it is the newest checkpoint: to export an older one, name it with --step "
            f"(kept: {', '.join(map(str, older[-5:]))})"
            if older and not pinned
            else ""
        )
        raise InputError(f"cannot export {checkpoint.name}: {error}{hint}") from None
    folder_mode = stat.S_IMODE(checkpoint.stat().st_mode)  # mkdtemp's 0700 would shut out other users
    if manifest is None:
        notes.append(
            f"warning: {checkpoint} has no manifest (written by an older scalerl): its files' "
            "checksums cannot be checked"
        )
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"{out} already exists and is not an empty directory; choose another output")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        if merge and is_adapter_folder(checkpoint):
            _merged_model_folder(run_dir, checkpoint, staging)
        elif is_model_folder(checkpoint) or is_adapter_folder(checkpoint):
            _copy_model_files(checkpoint, manifest, staging)
        else:
            _rebuild_model_folder(run_dir, checkpoint, staging)
        if dtype is not None:
            cast_model_folder(staging, dtype)
        trained_head = trained_head_dtype(run_dir)
        note = head_precision_note(trained_head, staging) if trained_head is not None else None
        os.chmod(staging, folder_mode)
        if out.exists():
            out.rmdir()
        os.replace(staging, out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return notes + ([note] if note is not None else [])
