"""The policy of a run with LoRA adapters (model.lora_r > 0): the run's starting weights (its warm
start included) wrapped by peft, so that the adapters train and the starting weights stay frozen.
A LoRA checkpoint holds only the adapter, so a resume and `scalerl export --merge` rebuild the
starting weights the same way and load the adapter onto them."""

from __future__ import annotations

from typing import Any

import torch

from scalerl.models.lora import with_lora
from scalerl.tasks.types import Task
from scalerl.train.config.train_config import TrainConfig
from scalerl.train.run_setup import starting_policy


def adapted(model: torch.nn.Module, config: TrainConfig) -> torch.nn.Module:
    """`model` with the configured LoRA adapters (their initialisation drawn under the run's seed),
    or `model` itself when model.lora_r is 0."""
    settings = config.model
    if settings.lora_r == 0:
        return model
    return with_lora(
        model, rank=settings.lora_r, alpha=settings.lora_alpha, targets=settings.lora_target_modules, seed=config.seed
    )


def run_policy(config: TrainConfig, task: Task, *, resuming: bool) -> tuple[torch.nn.Module, Any]:
    """(model, tokenizer) a run trains: `starting_policy` (when resuming, the bare architecture the
    checkpoint's weights go into); with LoRA, always the starting weights plus fresh adapters (the
    checkpoint's adapter replaces them on a resume)."""
    if config.model.lora_r == 0:
        return starting_policy(config, task, resuming=resuming)
    model, tokenizer = starting_policy(config, task, resuming=False)
    return adapted(model, config), tokenizer
