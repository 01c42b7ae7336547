"""Checkpoints are Hugging Face model folders; `scalerl export` writes one for any run."""

import json
import shutil

import numpy as np
import pytest
import torch
from checkpoint_support import adamw_trained, save_with_fixed_generators
from tiny_hf import build_tiny_hf_model
from transformers import AutoModelForCausalLM, AutoTokenizer
from typer.testing import CliRunner

from scalerl.cli.app import app
from scalerl.errors import InputError
from scalerl.train.checkpoint.layout import TRAINING_STATE_DIR
from scalerl.train.checkpoint.save_load import latest_checkpoint, load_checkpoint
from scalerl.train.config.train_config import TrainConfig, save_config
from scalerl.train.export import export_model
from scalerl.train.train_step import build_optimizer, build_scheduler

PROMPTS = ["3+4=", "12+7=9"]


def _trained(kind, seed=0):
    model, tokenizer = build_tiny_hf_model(kind, seed=seed)
    optimizer, scheduler = adamw_trained(model, tokenizer(PROMPTS[1], return_tensors="pt").input_ids, steps=2)
    return model, tokenizer, optimizer, scheduler


def _save(run_dir, step, model, tokenizer, optimizer, scheduler, keep=1):
    return save_with_fixed_generators(
        run_dir, step, model, optimizer, scheduler, state={"pool": {}}, keep=keep, tokenizer=tokenizer
    )


def _logits(model, tokenizer):
    batch = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    model.eval()
    with torch.no_grad():
        return model(**batch).logits


def _greedy(model, tokenizer):
    batch = tokenizer(PROMPTS[:1], return_tensors="pt")
    with torch.no_grad():
        return model.generate(**batch, max_new_tokens=5, do_sample=False).tolist()


@pytest.mark.parametrize("kind", ["qwen2", "llama", "gpt2"])
def test_checkpoint_is_a_model_folder_from_pretrained_loads(tmp_path, kind):
    model, tokenizer, optimizer, scheduler = _trained(kind)
    checkpoint = _save(tmp_path, 3, model, tokenizer, optimizer, scheduler)
    loaded = AutoModelForCausalLM.from_pretrained(checkpoint, local_files_only=True)
    loaded_tokenizer = AutoTokenizer.from_pretrained(checkpoint, local_files_only=True)
    assert type(loaded) is type(model)
    assert loaded_tokenizer(PROMPTS).input_ids == tokenizer(PROMPTS).input_ids
    assert torch.allclose(_logits(loaded, loaded_tokenizer), _logits(model, tokenizer), atol=1e-6)
    assert _greedy(loaded, loaded_tokenizer) == _greedy(model, tokenizer)
    # model loaders glob *.safetensors at the top: only the weights may be there
    assert sorted(p.name for p in checkpoint.glob("*.safetensors")) == ["model.safetensors"]
    assert sorted(p.name for p in (checkpoint / TRAINING_STATE_DIR).iterdir()) == [
        "manifest.json",
        "optimizer.safetensors",
        "rng.safetensors",
        "state.json",
    ]


@pytest.mark.parametrize("kind", ["qwen2", "gpt2"])  # tied embeddings: the head is not saved twice
def test_resume_loads_the_model_folder_back_exactly(tmp_path, kind):
    model, tokenizer, optimizer, scheduler = _trained(kind)
    checkpoint = _save(tmp_path, 3, model, tokenizer, optimizer, scheduler)
    other, _, other_optimizer, other_scheduler = _trained(kind, seed=1)
    step, _ = load_checkpoint(
        checkpoint,
        model=other,
        optimizer=other_optimizer,
        scheduler=other_scheduler,
        torch_generators={},
        numpy_rng=np.random.default_rng(),
    )
    assert step == 3
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, other.state_dict()[name]), name
    assert other.get_output_embeddings().weight.data_ptr() == other.get_input_embeddings().weight.data_ptr()


def test_export_writes_the_chosen_step_without_training_state(tmp_path):
    model, tokenizer, optimizer, scheduler = _trained("llama")
    _save(tmp_path, 2, model, tokenizer, optimizer, scheduler, keep=2)
    expected = _logits(model, tokenizer)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.5)
    _save(tmp_path, 4, model, tokenizer, optimizer, scheduler, keep=2)
    out = export_model(tmp_path, tmp_path / "exported", step=2)
    assert TRAINING_STATE_DIR not in {p.name for p in out.iterdir()}
    loaded = AutoModelForCausalLM.from_pretrained(out, local_files_only=True)
    assert torch.allclose(_logits(loaded, AutoTokenizer.from_pretrained(out)), expected, atol=1e-6)
    with pytest.raises(InputError, match="kept steps: 2, 4"):
        export_model(tmp_path, tmp_path / "other", step=3)
    with pytest.raises(InputError, match="already exists"):
        export_model(tmp_path, out)


def test_export_cli_newest_step_and_errors(tmp_path):
    model, tokenizer, optimizer, scheduler = _trained("gpt2")
    run = tmp_path / "run"
    _save(run, 5, model, tokenizer, optimizer, scheduler)
    runner = CliRunner()
    result = runner.invoke(app, ["export", str(run), str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    assert "from_pretrained" in result.stdout
    assert json.loads((tmp_path / "a" / "config.json").read_text())["model_type"] == "gpt2"
    result = runner.invoke(app, ["export", str(run), "-o", str(tmp_path / "b"), "--step", "5"])
    assert result.exit_code == 0 and (tmp_path / "b" / "model.safetensors").is_file()
    for arguments, fragment in [
        ([str(run)], "missing the output folder"),
        ([str(tmp_path / "none"), str(tmp_path / "c")], "does not exist"),
        ([str(run), str(tmp_path / "c"), "--step", "4"], "kept steps: 5"),
    ]:
        result = runner.invoke(app, ["export", *arguments])
        assert result.exit_code == 2 and result.stderr.startswith("error: "), result.output
        assert fragment in result.stderr and not (tmp_path / "c").exists()


def test_export_rebuilds_a_flat_checkpoint_of_the_older_layout(tmp_path):
    from scalerl.train.run_setup import fresh_policy

    config = TrainConfig().with_overrides(["model.num_layers=1", "model.hidden_size=32", "model.num_heads=2"])
    save_config(config, tmp_path)
    model, tokenizer = fresh_policy(config)
    optimizer = build_optimizer(model, config.optim)
    checkpoint = _save(tmp_path, 1, model, None, optimizer, build_scheduler(optimizer, 2))
    for path in (checkpoint / TRAINING_STATE_DIR).iterdir():  # the flat layout of earlier versions
        shutil.move(path, checkpoint / path.name)
    (checkpoint / TRAINING_STATE_DIR).rmdir()
    (checkpoint / "config.json").unlink()
    assert latest_checkpoint(tmp_path) == checkpoint
    with torch.no_grad():
        expected = _logits(model, tokenizer)
    out = export_model(tmp_path, tmp_path / "exported", accept_old=True)  # no manifest: asked for
    loaded = AutoModelForCausalLM.from_pretrained(out, local_files_only=True)
    assert torch.allclose(_logits(loaded, AutoTokenizer.from_pretrained(out)), expected, atol=1e-6)


# two training steps of a local Qwen2 model through the CLI, then export: under a second
def test_a_trained_local_qwen2_run_checkpoint_loads_and_generates(tmp_path):
    from tiny_hf import save_tiny_hf_model

    model_dir = save_tiny_hf_model("qwen2", tmp_path / "qwen2")
    run = tmp_path / "run"
    settings = [
        "eval_prompts=4",
        "num_val_prompts=8",
        "eval_samples_per_prompt=2",
        "prompts_per_step=2",
        "generations_per_prompt=2",
        "max_new_tokens=16",
        "thinking_budget_min=6",
        "thinking_budget_max=8",
        "penalty_cache_tokens=8",
        "num_train_prompts=20",
        "max_steps=2",
        "checkpoint_every=1",
        "keep_checkpoints=2",
        "zero_variance_filter=false",
    ]
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "train",
            "--out",
            str(run),
            "--model",
            str(model_dir),
            "--no-progress",
            *[token for s in settings for token in ("--set", s)],
        ],
    )
    assert result.exit_code == 0, result.output
    checkpoint = latest_checkpoint(run)
    assert checkpoint.name == "step_00000002"
    trained = AutoModelForCausalLM.from_pretrained(checkpoint, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint, local_files_only=True)
    start = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True)
    assert not torch.allclose(
        _logits(trained, tokenizer), _logits(start, tokenizer)
    )  # the optimiser stepped (weight decay at least)
    assert len(_greedy(trained, tokenizer)[0]) > len(tokenizer(PROMPTS[0]).input_ids)
    result = runner.invoke(app, ["export", str(run), str(tmp_path / "exported"), "--step", "1"])
    assert result.exit_code == 0, result.output
    exported = AutoModelForCausalLM.from_pretrained(tmp_path / "exported", local_files_only=True)
    first = AutoModelForCausalLM.from_pretrained(run / "checkpoints" / "step_00000001", local_files_only=True)
    assert torch.equal(_logits(exported, tokenizer), _logits(first, tokenizer))
