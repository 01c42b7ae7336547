"""`scalerl export`: the exported folder has the checkpoint folder's permissions (not mkdtemp's
0700), `--dtype` casts its weights, and a note says when the exported LM head computes in another
precision than the run's FP32 head."""

import json
import os
import stat

import numpy as np
import torch
from cli_invocation import invoke
from safetensors import safe_open
from tiny_hf import build_tiny_hf_model
from transformers import AutoModelForCausalLM

from scalerl.train.checkpoint.save_load import save_checkpoint
from scalerl.train.config.train_config import TrainConfig, save_config
from scalerl.train.train_step import build_optimizer, build_scheduler


def _bf16_run(run_dir):
    """A run of a bfloat16 llama body with the FP32 head (as scalerl trains it), one checkpoint."""
    save_config(TrainConfig().with_overrides(["dtype=bfloat16", "model.fp32_head=true"]), run_dir)
    model, tokenizer = build_tiny_hf_model("llama")
    model = model.to(torch.bfloat16)
    optimizer = build_optimizer(model, TrainConfig().optim)
    save_checkpoint(
        run_dir,
        2,
        model=model,
        optimizer=optimizer,
        scheduler=build_scheduler(optimizer, 2),
        torch_generators={"rollout": torch.Generator().manual_seed(1)},
        numpy_rng=np.random.default_rng(2),
        state={"pool": {}},
        keep=1,
        tokenizer=tokenizer,
    )
    return model


def _dtypes(folder):
    with safe_open(folder / "model.safetensors", framework="pt") as weights:
        return {weights.get_slice(name).get_dtype() for name in weights.keys()}


def test_export_keeps_the_checkpoint_permissions_and_notes_the_head_precision(tmp_path):
    _bf16_run(tmp_path / "run")
    checkpoint = next((tmp_path / "run" / "checkpoints").iterdir())
    os.chmod(checkpoint, 0o750)
    result = invoke("export", tmp_path / "run", tmp_path / "model")
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE((tmp_path / "model").stat().st_mode) == 0o750
    assert "note: the run computed its LM head in float32; the exported head is bfloat16" in result.stderr
    assert _dtypes(tmp_path / "model") == {"BF16"}


def test_export_dtype_float32_casts_every_weight_and_keeps_the_head_precision(tmp_path):
    model = _bf16_run(tmp_path / "run")
    result = invoke("export", tmp_path / "run", tmp_path / "model", "--dtype", "float32")
    assert result.exit_code == 0, result.output
    assert "note:" not in result.stderr
    assert _dtypes(tmp_path / "model") == {"F32"}
    assert json.loads((tmp_path / "model" / "config.json").read_text())["torch_dtype"] == "float32"
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "model", local_files_only=True)
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor.float()), name  # bf16 -> f32 is exact


def test_export_refuses_an_unknown_dtype_before_writing(tmp_path):
    _bf16_run(tmp_path / "run")
    result = invoke("export", tmp_path / "run", tmp_path / "model", "--dtype", "int8")
    assert result.exit_code == 2 and result.stderr.startswith("error: --dtype must be one of float32, bfloat16")
    assert not (tmp_path / "model").exists()
