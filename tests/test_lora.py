"""LoRA through peft: a step trains the adapter only (the starting weights stay bit-identical),
a checkpoint holds the adapter, a resume continues the run exactly, `scalerl export --merge`
gives the adapted model's logits, and without peft model.lora_r is one error naming the extra."""

import copy
import json
import sys

import pytest
import torch
from test_micro_batches import _rollouts
from tiny_hf import build_tiny_hf_model, save_tiny_hf_model
from transformers import AutoModelForCausalLM
from typer.testing import CliRunner

from scalerl.cli.app import app
from scalerl.models.forward import is_lora, policy_logits
from scalerl.models.hf_folder import load_weights_into
from scalerl.models.lora import ADAPTER_WEIGHTS_FILE, adapter_state
from scalerl.train.batch.packed_rollouts import pack_rollouts
from scalerl.train.checkpoint.save_load import latest_checkpoint
from scalerl.train.config.step_recipe import step_recipe
from scalerl.train.config.train_config import TrainConfig
from scalerl.train.lora_policy import adapted, run_policy
from scalerl.train.run_setup import build_task
from scalerl.train.train_step import build_optimizer, build_scheduler, train_step
from scalerl.train.trainer import train

LORA = ("model.lora_r=4", "model.lora_alpha=8")


def test_a_lora_step_changes_the_adapter_and_leaves_the_starting_weights_bit_identical():
    base, _ = build_tiny_hf_model("llama")
    config = TrainConfig().with_overrides(
        [*LORA, "rl.loss=cispo", "model.fp32_head=false", "warmup_steps=0", "optim.lr=1e-2"]
    )
    model = adapted(copy.deepcopy(base), config)
    assert is_lora(model)
    optimizer = build_optimizer(model, config.optim)
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    in_optimizer = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert in_optimizer == trainable
    assert trainable == {id(p) for name, p in model.named_parameters() if "lora_" in name}
    before_adapter = {name: tensor.clone() for name, tensor in adapter_state(model).items()}
    before_base = {
        name: tensor.clone() for name, tensor in model.get_base_model().state_dict().items() if "lora_" not in name
    }
    stats = train_step(
        model, optimizer, build_scheduler(optimizer, 0), pack_rollouts(_rollouts(model)), step_recipe(config)
    )
    assert stats.updated and stats.grad_norm > 0
    after_base = {name: tensor for name, tensor in model.get_base_model().state_dict().items() if "lora_" not in name}
    assert after_base.keys() == before_base.keys()
    for name, tensor in before_base.items():
        assert torch.equal(after_base[name], tensor), name
    moved = [name for name, tensor in adapter_state(model).items() if not torch.equal(tensor, before_adapter[name])]
    assert any("lora_B" in name for name in moved)


def test_a_lora_run_checkpoints_its_adapter_and_its_merged_export_gives_the_adapted_logits(tmp_path, tiny_config):
    folder = save_tiny_hf_model("qwen2", tmp_path / "qwen2")
    config = tiny_config(*LORA, f"model.path={folder}", "max_steps=2", "checkpoint_every=2")
    train(config, tmp_path / "run", show_progress=False)
    checkpoint = latest_checkpoint(tmp_path / "run")
    assert (checkpoint / ADAPTER_WEIGHTS_FILE).is_file() and not (checkpoint / "model.safetensors").exists()

    model, _ = run_policy(config, build_task(config), resuming=True)
    load_weights_into(model, checkpoint)
    assert any(float(t.abs().max()) > 0 for n, t in adapter_state(model).items() if "lora_B" in n)  # trained
    result = CliRunner().invoke(app, ["export", str(tmp_path / "run"), str(tmp_path / "merged"), "--merge"])
    assert result.exit_code == 0, result.output
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged", local_files_only=True)
    assert not (tmp_path / "merged" / "adapter_config.json").exists()
    ids = torch.tensor([[5, 9, 14, 20, 7, 33, 12]])
    mask = torch.ones_like(ids)
    with torch.no_grad():
        expected = policy_logits(model.eval(), ids, mask)
        got = policy_logits(merged.eval(), ids, mask)
        own = merged(input_ids=ids, attention_mask=mask).logits
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    torch.testing.assert_close(own, expected, rtol=0, atol=1e-5)
    plain = CliRunner().invoke(app, ["export", str(tmp_path / "run"), str(tmp_path / "adapter")])
    assert plain.exit_code == 0, plain.output
    assert json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())["r"] == 4


def _rows(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k not in ("device_hours", "wall_seconds")} for row in rows]


@pytest.mark.slow
def test_resuming_a_lora_run_continues_it_exactly(tmp_path, tiny_config):
    config = tiny_config(*LORA, "max_steps=4", "checkpoint_every=2", "eval_every=2")
    train(config, tmp_path / "straight", show_progress=False)
    train(
        tiny_config(*LORA, "max_steps=2", "checkpoint_every=2", "eval_every=2"),
        tmp_path / "resumed",
        show_progress=False,
    )
    train(config, tmp_path / "resumed", resume=True, show_progress=False)
    assert _rows(tmp_path / "resumed") == _rows(tmp_path / "straight")
    from safetensors.torch import load_file

    straight = load_file(latest_checkpoint(tmp_path / "straight") / ADAPTER_WEIGHTS_FILE)
    resumed = load_file(latest_checkpoint(tmp_path / "resumed") / ADAPTER_WEIGHTS_FILE)
    assert straight.keys() == resumed.keys()
    for name, tensor in straight.items():
        assert torch.equal(resumed[name], tensor), name


def test_lora_without_peft_is_one_error_naming_the_extra(tmp_path, tiny_set_options, monkeypatch):
    monkeypatch.setitem(sys.modules, "peft", None)  # `import peft` raises ImportError
    result = CliRunner().invoke(app, ["train", "--out", str(tmp_path / "run"), *tiny_set_options(*LORA)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == ['error: model.lora_r > 0 needs peft, which is not installed: pip install "scalerl[peft]"']
    assert not (tmp_path / "run").exists()


def test_lora_settings_are_checked():
    from scalerl.errors import ConfigError

    with pytest.raises(ConfigError, match="model.lora_target_modules"):
        TrainConfig().with_overrides(["model.lora_r=4", "model.lora_target_modules=q_proj,lm_head"])
    TrainConfig().with_overrides(["model.lora_r=4", "pipeline.mode=async"])  # the Ray pipeline trains LoRA too
    with pytest.raises(ConfigError, match="pipeline.backend=hf"):
        TrainConfig().with_overrides(["model.lora_r=4", "pipeline.mode=async", "pipeline.backend=vllm"])


def test_a_generator_receives_the_adapter_only_and_then_gives_the_trainers_logits(tiny_config):
    """A published version of a LoRA policy holds its adapter weights and nothing else; copied
    into a generator's policy (the same starting weights plus fresh adapters) it gives the
    trainer's logits exactly."""
    from scalerl.distributed.weight_sync.object_store import load_snapshot, snapshot_weights
    from scalerl.models.lora import state_to_sync

    config = tiny_config(*LORA)
    task = build_task(config)
    trainer_model, tokenizer = run_policy(config, task, resuming=False)
    generator_model, _ = run_policy(config, task, resuming=False)
    with torch.no_grad():  # a trained adapter: B is no longer zero
        for name, parameter in trainer_model.named_parameters():
            if parameter.requires_grad:
                parameter.add_(0.05 * torch.randn(parameter.shape, generator=torch.Generator().manual_seed(len(name))))
    snapshot = snapshot_weights(trainer_model, 3)
    trainable = {name for name, p in trainer_model.named_parameters() if p.requires_grad}
    assert set(snapshot.arrays) == trainable and all("lora_" in name for name in trainable)
    assert snapshot.num_bytes < 0.2 * sum(t.numel() * t.element_size() for t in trainer_model.state_dict().values())
    ids = torch.tensor([tokenizer.encode(task.train[0].prompt)])
    mask = torch.ones_like(ids)
    assert not torch.equal(policy_logits(generator_model, ids, mask), policy_logits(trainer_model, ids, mask))
    load_snapshot(generator_model, snapshot)
    assert torch.equal(policy_logits(generator_model, ids, mask), policy_logits(trainer_model, ids, mask))
    assert state_to_sync(torch.nn.Linear(2, 2)).keys() == {"weight", "bias"}  # a plain model: its state dict
