"""Checkpoint integrity: the manifest's sizes and SHA-256 find any changed byte, state.json values
are range-checked, tensors must be finite, headers are bounded before anything is allocated, no
symbolic link is followed, and a non-finite model is never checkpointed. Each damage is built here
and must be refused naming the file (resume falls back to the older checkpoint; export refuses)."""

import json
import os
import shutil
import struct

import pytest
import torch
from checkpoint_support import adamw_trained, save_with_fixed_generators
from cli_invocation import assert_one_line_error, invoke
from safetensors.torch import load_file, save_file

from scalerl.errors import InputError
from scalerl.models.policy import TinyModelSpec, build_tiny_model
from scalerl.train.checkpoint.manifest import manifest_path, read_manifest, write_manifest
from scalerl.train.checkpoint.resume import newest_intact
from scalerl.train.checkpoint.save_load import list_checkpoints
from scalerl.train.checkpoint.verify import verify_checkpoint
from scalerl.train.guards.divergence_guard import DivergenceError

SPEC = TinyModelSpec(num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32, max_positions=32)


def _setup():
    model, tokenizer = build_tiny_model(SPEC, seed=0)
    ids = torch.randint(0, 20, (2, 8), generator=torch.Generator().manual_seed(0))
    optimizer, scheduler = adamw_trained(model, ids, steps=1)
    return model, tokenizer, optimizer, scheduler


def _save(run_dir, step, model, tokenizer, optimizer, scheduler):
    return save_with_fixed_generators(run_dir, step, model, optimizer, scheduler, keep=2, tokenizer=tokenizer)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A run folder with checkpoints of steps 2 and 4 (read-only template)."""
    run_dir = tmp_path_factory.mktemp("template") / "run"
    setup = _setup()
    for step in (2, 4):
        _save(run_dir, step, *setup)
    return run_dir


@pytest.fixture
def run(saved, tmp_path):
    return shutil.copytree(saved, tmp_path / "run", symlinks=True)


def _newest(run_dir):
    return run_dir / "checkpoints" / "step_00000004"


def _state_file(checkpoint):
    return checkpoint / "training_state" / "state.json"


def _edit_state(checkpoint, edit):
    state = json.loads(_state_file(checkpoint).read_text())
    edit(state)
    _state_file(checkpoint).write_text(json.dumps(state))


def _flip_bit(path, offset=-5):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def _set_tensor_value(path, value):
    tensors = load_file(str(path))
    name = next(name for name, tensor in tensors.items() if tensor.is_floating_point() and tensor.numel() > 1)
    tensors[name].view(-1)[0] = value
    save_file(tensors, str(path), metadata={"format": "pt"})


def _fallback_warning(run_dir):
    """The warning resuming gives: the newest checkpoint is skipped for step 2."""
    chosen = newest_intact(run_dir, verify_checkpoint)
    assert chosen is not None and chosen[0].name == "step_00000002"
    (warning,) = chosen[2]
    assert warning.startswith("warning: ") and "step_00000004" in warning
    return warning


def test_the_manifest_lists_every_file_with_its_size_and_sha256(run):
    checkpoint = _newest(run)
    files = read_manifest(checkpoint)
    on_disk = sorted(
        p.relative_to(checkpoint).as_posix()
        for p in checkpoint.rglob("*")
        if p.is_file() and p != manifest_path(checkpoint)
    )
    assert sorted(files) == on_disk and "model.safetensors" in files
    assert files["model.safetensors"]["size"] == (checkpoint / "model.safetensors").stat().st_size
    assert len(files["training_state/rng.safetensors"]["sha256"]) == 64
    assert verify_checkpoint(checkpoint)["step"] == 4


def test_a_crash_before_the_manifest_leaves_no_checkpoint(tmp_path, monkeypatch):
    import scalerl.train.checkpoint.save_load as checkpoint_module

    def crash(_folder):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint_module, "write_manifest", crash)
    with pytest.raises(Exception, match="No space left"):
        _save(tmp_path, 1, *_setup())
    assert list_checkpoints(tmp_path) == [] and not any((tmp_path / "checkpoints").iterdir())


CHECKSUM_DAMAGES = {  # one changed byte the headers and JSON checks alone would miss
    "flipped weight bit": ("model.safetensors", lambda c: _flip_bit(c / "model.safetensors")),
    "flipped rng byte": ("rng.safetensors", lambda c: _flip_bit(c / "training_state" / "rng.safetensors")),
    "flipped optimiser bit": (
        "optimizer.safetensors",
        lambda c: _flip_bit(c / "training_state" / "optimizer.safetensors"),
    ),
    "lr=inf": ("state.json", lambda c: _edit_state(c, lambda s: s["optimizer"]["param_groups"][0].update(lr=1e999))),
}


@pytest.mark.parametrize("damage", sorted(CHECKSUM_DAMAGES))
def test_a_changed_byte_fails_the_checksum_and_resume_falls_back(run, damage):
    named, apply = CHECKSUM_DAMAGES[damage]
    apply(_newest(run))
    warning = _fallback_warning(run)
    assert named in warning and ("SHA-256" in warning or "bytes, the manifest says" in warning)


CONTENT_DAMAGES = {  # damage with a manifest rewritten to match: the content checks must find it
    "NaN weight": ("holds a NaN or an infinity", lambda c: _set_tensor_value(c / "model.safetensors", float("nan"))),
    "inf optimiser state": (
        "holds a NaN or an infinity",
        lambda c: _set_tensor_value(c / "training_state" / "optimizer.safetensors", float("inf")),
    ),
    "lr=inf": (
        "optimizer lr is inf",
        lambda c: _edit_state(c, lambda s: s["optimizer"]["param_groups"][0].update(lr=float("inf"))),
    ),
    "betas out of range": (
        "betas",
        lambda c: _edit_state(c, lambda s: s["optimizer"]["param_groups"][0].update(betas=[1.5, 0.9])),
    ),
    "non-numeric scheduler": (
        "scheduler base_lrs",
        lambda c: _edit_state(c, lambda s: s["scheduler"].update(base_lrs=["fast"])),
    ),
    "scheduler step a string": (
        "scheduler last_epoch",
        lambda c: _edit_state(c, lambda s: s["scheduler"].update(last_epoch="four")),
    ),
}


@pytest.mark.parametrize("damage", sorted(CONTENT_DAMAGES))
def test_values_out_of_range_or_not_finite_are_damage_even_with_a_matching_manifest(run, damage):
    named, apply = CONTENT_DAMAGES[damage]
    apply(_newest(run))
    write_manifest(_newest(run))
    assert named in _fallback_warning(run)


def _huge_safetensors(path, declared_bytes):
    """A safetensors file whose header declares one uint8 tensor of `declared_bytes`, made the
    matching size as a sparse file (nothing is written but the header)."""
    header = json.dumps(
        {"global_cpu": {"dtype": "U8", "shape": [declared_bytes], "data_offsets": [0, declared_bytes]}}
    ).encode()
    header += b" " * (-len(header) % 8)
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(header)) + header)
    os.truncate(path, 8 + len(header) + declared_bytes)


def test_a_20_gib_sparse_rng_file_is_refused_from_its_header(run):
    checkpoint = _newest(run)
    _huge_safetensors(checkpoint / "training_state" / "rng.safetensors", 20 * 2**30)
    manifest_path(checkpoint).unlink()  # an older checkpoint: only the header check stands
    with pytest.raises(InputError, match="rng.safetensors is damaged: tensor 'global_cpu' holds 21474836480 bytes"):
        verify_checkpoint(checkpoint)
    assert "rng.safetensors" in _fallback_warning(run)


def test_a_checkpoint_without_a_manifest_is_damage_unless_old_checkpoints_are_accepted(run, tmp_path):
    manifest_path(_newest(run)).unlink()
    _flip_bit(_newest(run) / "model.safetensors")  # what deleting the manifest would hide
    assert verify_checkpoint(_newest(run))["step"] == 4  # resume's policy: an older scalerl's, warned
    with pytest.raises(InputError, match="manifest.json is missing, so no file's checksum can be checked"):
        verify_checkpoint(_newest(run), require_manifest=True)
    refused = invoke("export", run, tmp_path / "model")
    assert_one_line_error(
        refused,
        "cannot export step_00000004",
        "manifest.json is missing",
        "--accept-old-checkpoints",
        "to export an older one, name it with --step (kept: 2)",
    )
    result = invoke("export", run, tmp_path / "model", "--accept-old-checkpoints")
    assert result.exit_code == 0, result.output
    assert "warning: " in result.stderr and "no manifest" in result.stderr


def test_export_never_passes_over_an_incomplete_newest_checkpoint(run, tmp_path):
    _state_file(_newest(run)).unlink()
    result = invoke("export", run, tmp_path / "model")
    assert_one_line_error(
        result, "cannot export step_00000004", "state.json is missing", "name it with --step (kept: 2)"
    )
    assert not (tmp_path / "model").exists()
    older = invoke("export", run, tmp_path / "model", "--step", "2")
    assert older.exit_code == 0, older.output


@pytest.mark.parametrize("name", ["config.json", "tokenizer.json", "generation_config.json"])
def test_a_half_cut_json_file_is_damage_even_with_its_manifest_recomputed(run, tmp_path, name):
    path = _newest(run) / name
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    write_manifest(_newest(run))  # the checksums agree: only parsing finds it
    assert "step_00000004" in _fallback_warning(run) and name in _fallback_warning(run)
    result = invoke("export", run, tmp_path / "model")
    assert_one_line_error(result, "cannot export step_00000004", f"{name} is damaged")
    assert not (tmp_path / "model").exists()


def test_a_checkpoints_folder_that_is_a_link_is_refused_by_resume_and_export(run, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    shutil.move(run / "checkpoints", elsewhere)
    (run / "checkpoints").symlink_to(elsewhere)
    with pytest.raises(InputError, match="checkpoints is a symbolic link"):
        newest_intact(run, verify_checkpoint)
    result = invoke("export", run, tmp_path / "model")
    assert_one_line_error(result, "checkpoints is a symbolic link")
    assert not (tmp_path / "model").exists()


def test_a_weights_header_claiming_20_gib_is_refused_before_any_file_is_hashed(run, monkeypatch):
    """The header is checked against the model config.json describes: the sparse 20 GiB file is
    never read (hashing it would take minutes; loading it, 20 GiB of memory)."""
    from scalerl.train.checkpoint import manifest

    checkpoint = _newest(run)
    weights = checkpoint / "model.safetensors"
    _huge_safetensors(weights, 20 * 2**30)
    entries = read_manifest(checkpoint)
    entries["model.safetensors"] = {"size": weights.stat().st_size, "sha256": "0" * 64}
    manifest_path(checkpoint).write_text(json.dumps({"format": 1, "files": entries}))
    monkeypatch.setattr(manifest, "file_sha256", lambda path: pytest.fail(f"{path} was hashed"))
    with pytest.raises(
        InputError,
        match="model.safetensors is damaged: tensor 'global_cpu' has 21474836480 elements, "
        "more than the model's largest weight",
    ):
        verify_checkpoint(checkpoint)


def test_a_memory_error_while_reading_is_damage_naming_the_file(run, monkeypatch):
    from scalerl.train.checkpoint import verify as checkpoint_checks

    def no_memory(*_args, **_kwargs):
        raise MemoryError

    monkeypatch.setattr(checkpoint_checks, "load_file", no_memory)
    with pytest.raises(InputError, match="rng.safetensors is damaged: reading it needs more memory than there is"):
        verify_checkpoint(_newest(run))


def test_a_symlink_to_a_file_outside_the_run_is_refused_by_resume_and_export(run, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("do not publish")
    (_newest(run) / "notes.txt").symlink_to(secret)
    assert "a symbolic link" in _fallback_warning(run)
    result = invoke("export", run, tmp_path / "model")
    assert_one_line_error(result, "cannot export step_00000004", "notes.txt", "symbolic link")
    assert not (tmp_path / "model").exists()


def test_a_symlinked_weights_file_is_refused(run, tmp_path):
    weights = _newest(run) / "model.safetensors"
    outside = tmp_path / "elsewhere.safetensors"
    shutil.move(weights, outside)
    weights.symlink_to(outside)
    assert "model.safetensors" in _fallback_warning(run)


def test_export_copies_exactly_the_model_files(run, tmp_path):
    (_newest(run) / "stray.bin").write_bytes(b"not listed in the manifest")
    result = invoke("export", run, tmp_path / "model")
    assert result.exit_code == 0, result.output
    exported = sorted(p.relative_to(tmp_path / "model").as_posix() for p in (tmp_path / "model").rglob("*"))
    listed = sorted(name for name in read_manifest(_newest(run)) if not name.startswith("training_state/"))
    assert exported == listed and "model.safetensors" in exported and "stray.bin" not in exported


@pytest.mark.parametrize("damage", ["truncated weights", "flipped weight bit"])
def test_export_refuses_a_damaged_checkpoint(run, tmp_path, damage):
    weights = _newest(run) / "model.safetensors"
    if damage == "truncated weights":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    else:
        _flip_bit(weights)
    result = invoke("export", run, tmp_path / "model")
    assert_one_line_error(result, "cannot export step_00000004", "model.safetensors is damaged")
    assert not (tmp_path / "model").exists() and not list(tmp_path.glob(".model.*"))


def test_a_non_finite_model_is_never_checkpointed(run):
    model, tokenizer, optimizer, scheduler = _setup()
    with torch.no_grad():
        next(model.parameters()).view(-1)[0] = float("nan")
    with pytest.raises(DivergenceError, match="step 6: weight .* is not finite; its checkpoint is not written"):
        _save(run, 6, model, tokenizer, optimizer, scheduler)
    assert [c.name for c in list_checkpoints(run)] == ["step_00000002", "step_00000004"]


def test_a_memory_error_anywhere_in_a_command_is_one_line_exit_2(run, tmp_path, monkeypatch):
    from scalerl.models import hf_folder
    from scalerl.train import export

    monkeypatch.setattr(hf_folder, "load_file", lambda *_args: (_ for _ in ()).throw(MemoryError()))
    with pytest.raises(InputError, match="model.safetensors is damaged or too large: reading it needs more memory"):
        hf_folder.read_weights(_newest(run))

    def out_of_memory(*_args, **_kwargs):
        raise MemoryError

    monkeypatch.setattr(export, "export_model", out_of_memory)
    assert_one_line_error(invoke("export", run, tmp_path / "model"), "out of memory: the command needed more memory")


def test_a_small_weights_file_whose_header_claims_20_gib_is_refused_at_once_by_export(run, tmp_path):
    weights = _newest(run) / "model.safetensors"
    _huge_safetensors(weights, 20 * 2**30)
    os.truncate(weights, 4096)  # the header, then far fewer bytes than it claims
    write_manifest(_newest(run))  # the checksums agree: only the header's claim is wrong
    result = invoke("export", run, tmp_path / "model")
    assert_one_line_error(
        result, "cannot export step_00000004", "model.safetensors is damaged", "file not fully covered"
    )
    assert not (tmp_path / "model").exists()


def test_a_config_transformers_cannot_build_leaves_only_the_files_own_checks(run):
    from scalerl.train.checkpoint.verify import config_weight_shapes

    checkpoint = _newest(run)
    assert max(map(len, config_weight_shapes(checkpoint).values())) == 2  # the tiny model's matrices
    config = json.loads((checkpoint / "config.json").read_text())
    (checkpoint / "config.json").write_text(json.dumps({**config, "model_type": "an_architecture_of_its_own"}))
    write_manifest(checkpoint)
    assert config_weight_shapes(checkpoint) is None
    assert verify_checkpoint(checkpoint)["step"] == 4
