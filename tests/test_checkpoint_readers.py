"""Readers beside a live run: a checkpoint being deleted is never seen half deleted, and an export
whose checkpoint is pruned mid-copy starts again on the newest, writing exactly what a manifest
lists; a checkpoint that is damaged (still in place) is refused at once, never retried."""

import shutil
from pathlib import Path

import pytest
import torch
from checkpoint_support import save_with_fixed_generators

import scalerl.train.export as export_module
from scalerl.errors import InputError
from scalerl.models.policy import TinyModelSpec, build_tiny_model
from scalerl.train.checkpoint.layout import CHECKPOINTS_DIR_NAME, TRAINING_STATE_DIR
from scalerl.train.checkpoint.manifest import file_sha256, read_manifest
from scalerl.train.checkpoint.save_load import list_checkpoints
from scalerl.train.checkpoint.verify import verify_checkpoint
from scalerl.train.config.train_config import TrainConfig
from scalerl.train.export import export_model
from scalerl.train.train_step import build_optimizer, build_scheduler

SPEC = TinyModelSpec(num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32, max_positions=32)


@pytest.fixture
def trainer():
    """save(run_dir, step): a checkpoint of `step` (keep=1: the one before is pruned), each step's
    weights different from the last one's."""
    model, tokenizer = build_tiny_model(SPEC, seed=0)
    optimizer = build_optimizer(model, TrainConfig().optim)
    scheduler = build_scheduler(optimizer, 2)

    def save(run_dir, step):
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(0.01)
        return save_with_fixed_generators(
            run_dir, step, model, optimizer, scheduler, torch_generators={}, keep=1, tokenizer=tokenizer
        )

    return save


def _what_a_reader_finds(run_dir):
    """Each listed checkpoint's name and 'complete', or what is wrong with it."""
    found = []
    for checkpoint in list_checkpoints(run_dir):
        try:
            verify_checkpoint(checkpoint)
            found.append((checkpoint.name, "complete" if read_manifest(checkpoint) is not None else "no manifest"))
        except InputError as error:
            found.append((checkpoint.name, str(error)))
    return found


def test_a_reader_between_any_two_deletions_sees_only_complete_checkpoints(trainer, tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    seen = []

    def rmtree_one_file_at_a_time(path, ignore_errors=False, onerror=None):
        """shutil.rmtree's work (files one at a time, in name order here) with a reader looking
        after every file removed."""
        path = Path(path)
        if not path.exists():
            if ignore_errors:
                return
            raise FileNotFoundError(path)
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            file.unlink()
            seen.append(_what_a_reader_finds(run_dir))
        for folder in sorted((p for p in path.rglob("*") if p.is_dir()), reverse=True):
            folder.rmdir()
        path.rmdir()

    monkeypatch.setattr(shutil, "rmtree", rmtree_one_file_at_a_time)
    for step in (2, 4, 4, 6):  # each save prunes the one before; step 4 is written twice (a resume)
        trainer(run_dir, step)
    files_per_checkpoint = len(read_manifest(run_dir / CHECKPOINTS_DIR_NAME / "step_00000006")) + 1
    assert len(seen) == 3 * files_per_checkpoint  # step 2, the first step 4 and the second step 4 removed
    assert all(found and all(state == "complete" for _, state in found) for found in seen), [
        found for found in seen if not found or any(state != "complete" for _, state in found)
    ][:2]
    assert [name for name, _ in seen[0]] == ["step_00000004"] and [name for name, _ in seen[-1]] == ["step_00000006"]
    assert sorted(p.name for p in (run_dir / CHECKPOINTS_DIR_NAME).iterdir()) == ["step_00000006"]


def test_a_leftover_retired_checkpoint_is_never_listed_and_the_next_save_removes_it(trainer, tmp_path):
    run_dir = tmp_path / "run"
    kept = trainer(run_dir, 2)
    leftover = kept.parent / ".trash-step_00000001-999999"  # a prune that crashed mid-deletion
    shutil.copytree(kept, leftover)
    (leftover / "model.safetensors").unlink()
    assert list_checkpoints(run_dir) == [kept]
    trainer(run_dir, 4)
    assert sorted(p.name for p in kept.parent.iterdir()) == ["step_00000004"]


def _model_files_of(folder):
    return {p.relative_to(folder).as_posix(): file_sha256(p) for p in folder.rglob("*") if p.is_file()}


def _listed_model_files(checkpoint):
    return {
        name: entry["sha256"]
        for name, entry in read_manifest(checkpoint).items()
        if not name.startswith(f"{TRAINING_STATE_DIR}/")
    }


def test_an_export_whose_checkpoint_is_pruned_mid_copy_starts_again_on_the_newest(trainer, tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    first = _listed_model_files(trainer(run_dir, 2))
    attempts, copies_checked = [], []
    real_export, real_sha256 = export_module._export_checkpoint, export_module.file_sha256

    def export_counted(run, checkpoint, *rest):
        attempts.append(checkpoint.name)
        return real_export(run, checkpoint, *rest)

    def the_trainer_saves_after_the_first_copy(path):
        copies_checked.append(path.name)
        if len(copies_checked) == 1:  # config.json is copied; the rest of step 2 is pruned away
            trainer(run_dir, 4)
        return real_sha256(path)

    monkeypatch.setattr(export_module, "_export_checkpoint", export_counted)
    monkeypatch.setattr(export_module, "file_sha256", the_trainer_saves_after_the_first_copy)
    out = export_model(run_dir, tmp_path / "model")
    assert attempts == ["step_00000002", "step_00000004"]
    newest = _listed_model_files(run_dir / CHECKPOINTS_DIR_NAME / "step_00000004")
    assert _model_files_of(out) == newest and newest["model.safetensors"] != first["model.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "run"]  # no staging folder left


def test_an_export_outrun_by_every_save_stops_after_its_tries_with_one_error(trainer, tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    trainer(run_dir, 2)
    steps = iter(range(4, 100, 2))
    real_sha256 = export_module.file_sha256

    def the_trainer_saves_at_every_copy(path):
        trainer(run_dir, next(steps))
        return real_sha256(path)

    monkeypatch.setattr(export_module, "file_sha256", the_trainer_saves_at_every_copy)
    with pytest.raises(InputError, match=r"removed each newest checkpoint while it was read \(5 tries\)"):
        export_model(run_dir, tmp_path / "model")
    assert next(steps) == 14  # five tries, five saves
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_a_damaged_checkpoint_still_in_place_is_refused_without_a_retry(trainer, tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    weights = trainer(run_dir, 2) / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01
    weights.write_bytes(bytes(data))
    attempts = []
    real_export = export_module._export_checkpoint
    monkeypatch.setattr(
        export_module, "_export_checkpoint", lambda *arguments: attempts.append(1) or real_export(*arguments)
    )
    with pytest.raises(InputError, match="cannot export step_00000002: .*model.safetensors is damaged"):
        export_model(run_dir, tmp_path / "model")
    assert attempts == [1] and not (tmp_path / "model").exists()
