"""A run's checkpoint beside the trainer's tensors, for the synchronous trainer and the pipeline.

A checkpoint is the trainer's tensors (weights, optimiser, LR schedule) plus a `RunSnapshot` of
the run state (scalerl.train.run_state.RunState.snapshot, with the run's config, so a resume can
tell what changed), written by `save_run_checkpoint` (scalerl.train.checkpoint.save_load's format)
wherever the tensors live. A resume reads the newest intact checkpoint's run state
(`read_resume_point`, every file verified first, a `ResumePoint`) before it writes anything, and
`restore_training` loads its tensors in place.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from scalerl.errors import ConfigError, InputError
from scalerl.rl.curriculum import PromptPool
from scalerl.train.checkpoint.layout import training_file
from scalerl.train.checkpoint.save_load import load_checkpoint, save_checkpoint
from scalerl.train.config.train_config import TrainConfig
from scalerl.train.flops import Counters

ROLLOUT_GENERATOR = "rollout"  # the checkpoint's name for the run's sampling stream


@dataclass(frozen=True)
class RunSnapshot:
    """The run state a checkpoint saves beside the trainer's tensors, taken at one step.

    `rollout_rng`: the sampling stream's state (a torch generator state on `rng_device`);
    `numpy_rng`: the prompt RNG's bit-generator state; `run`: pool, counters, last_val_pass_rate.
    """

    step: int
    rollout_rng: torch.Tensor
    rng_device: str
    numpy_rng: dict[str, Any]
    run: dict[str, Any]


@dataclass(frozen=True)
class ResumePoint:
    """What a checkpoint restores of the run state, read and checked before it is used."""

    step: int
    pool: PromptPool
    counters: Counters
    last_val_pass_rate: float | None
    rollout_rng: torch.Tensor
    numpy_rng: dict[str, Any]
    config: dict[str, Any] | None  # the run's config when the checkpoint was written (None: older checkpoints)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def read_resume_point(
    checkpoint: Path,
    config: TrainConfig,
    *,
    num_train_prompts: int,
    rng_device: str = "cpu",
    weight_shapes: Mapping[str, tuple[int, ...]] | None = None,
    accept_old: bool = False,
) -> ResumePoint:
    """Verify every file of `checkpoint` and read the run state it holds; InputError names the
    file and the problem (a missing manifest too, unless `accept_old`), ConfigError a checkpoint
    of another task."""
    generator, numpy_rng = torch.Generator(device=rng_device), np.random.default_rng(0)
    step, run = load_checkpoint(
        checkpoint,
        torch_generators={ROLLOUT_GENERATOR: generator},
        numpy_rng=numpy_rng,
        weight_shapes=weight_shapes,
        require_manifest=not accept_old,
    )
    state_file = training_file(checkpoint, "state.json")
    counters, last_val = run.get("counters"), run.get("last_val_pass_rate")
    counter_names = {f.name for f in dataclasses.fields(Counters)}
    if not (
        isinstance(counters, dict)
        and set(counters) == counter_names
        and all(_is_number(value) for value in counters.values())
    ):
        raise InputError(f"{state_file} is damaged: run.counters is not {sorted(counter_names)} as numbers")
    if not (last_val is None or _is_number(last_val)):
        raise InputError(f"{state_file} is damaged: run.last_val_pass_rate is {last_val!r}")
    try:
        pool = PromptPool.from_state_dict(run["pool"])
    except (KeyError, TypeError, ValueError, InputError, ConfigError) as error:
        raise InputError(f"{state_file} is damaged: run.pool: {error}") from None
    if pool.num_prompts != num_train_prompts:
        raise ConfigError(
            f"checkpoint {checkpoint} has a pool of {pool.num_prompts} training prompts, the "
            f"task now {num_train_prompts}: was the task file changed?"
        )
    saved_config = run.get("config")
    return ResumePoint(
        step=step,
        pool=pool,
        counters=Counters(**counters),
        last_val_pass_rate=last_val,
        rollout_rng=generator.get_state(),
        numpy_rng=numpy_rng.bit_generator.state,
        config=saved_config if isinstance(saved_config, dict) else None,
    )


def save_run_checkpoint(
    run_dir: str | Path,
    snapshot: RunSnapshot,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    keep: int,
    tokenizer: Any = None,
) -> Path:
    """Checkpoint `snapshot.step`: the trainer's tensors plus the run state (checkpoint.py's format;
    with `tokenizer` the checkpoint folder loads on its own as a Hugging Face model)."""
    generator = torch.Generator(device=snapshot.rng_device)
    generator.set_state(snapshot.rollout_rng)
    numpy_rng = np.random.default_rng(0)
    numpy_rng.bit_generator.state = snapshot.numpy_rng
    return save_checkpoint(
        run_dir,
        snapshot.step,
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        torch_generators={ROLLOUT_GENERATOR: generator},
        numpy_rng=numpy_rng,
        state=snapshot.run,
        keep=keep,
        tokenizer=tokenizer,
    )


def restore_training(
    checkpoint: str | Path, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any
) -> int:
    """Load a checkpoint's weights, optimiser and LR schedule (and the global torch RNG) in place;
    its step. The run state is `RunState.open`'s to restore."""
    step, _ = load_checkpoint(checkpoint, model=model, optimizer=optimizer, scheduler=scheduler)
    return step
