"""A tiny model's optimiser after a few AdamW steps, and its checkpoint saved with fixed random
generators, for the checkpoint, export and reader tests."""

import numpy as np
import torch

from scalerl.train.checkpoint.save_load import save_checkpoint
from scalerl.train.config.train_config import TrainConfig
from scalerl.train.train_step import build_optimizer, build_scheduler


def adamw_trained(model, ids, *, steps: int, warmup_steps: int = 2):
    """(optimizer, scheduler): the default optim section's AdamW and a `warmup_steps` warm-up,
    after `steps` language-model steps of `model` on the token ids `ids`."""
    optimizer = build_optimizer(model, TrainConfig().optim)
    scheduler = build_scheduler(optimizer, warmup_steps)
    for _ in range(steps):
        loss = model(input_ids=ids, labels=ids).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
    return optimizer, scheduler


def save_with_fixed_generators(run_dir, step, model, optimizer, scheduler, **options):
    """save_checkpoint of step `step` with the rollout generator seeded 1, the numpy generator
    seeded 2 and an empty run state; `options` (state, keep, tokenizer, ...) replace those."""
    settings = {
        "torch_generators": {"rollout": torch.Generator().manual_seed(1)},
        "numpy_rng": np.random.default_rng(2),
        "state": {},
        **options,
    }
    return save_checkpoint(run_dir, step, model=model, optimizer=optimizer, scheduler=scheduler, **settings)
