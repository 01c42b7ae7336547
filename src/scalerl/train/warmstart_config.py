"""The warm start of a run's config: its settings, cache directory and the record of which
warm-started weights a run starts from (cache key and weights digest), for the trainer and studies.

Kept apart from scalerl.train.warmstart so that the code digest in the cache key (the code the
warm start runs, `warm_start_code_digest`) does not cover the run config's other sections.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from scalerl.tasks.types import Task
from scalerl.train.config.train_config import TrainConfig
from scalerl.train.warmstart import WarmStartSettings, warm_start_cache_key, warm_start_cached, weights_digest


@dataclass(frozen=True)
class WarmStartRecord:
    """Which warm start a run starts from: its cache key, the sha256 of its weights
    (`weights_digest`), and what the supervised phase did."""

    key: str
    weights_sha256: str
    steps_run: int
    pass_rate: float
    reached_band: bool

    def to_dict(self) -> dict:
        return asdict(self)


def warmstart_cache_dir(config: TrainConfig) -> Path:
    """model.warmstart_cache_dir, else $XDG_CACHE_HOME/scalerl/warmstart (~/.cache/...)."""
    if config.model.warmstart_cache_dir:
        return Path(config.model.warmstart_cache_dir)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "scalerl" / "warmstart"


def warm_start_inputs(config: TrainConfig) -> dict:
    """The parts of a run config the warm start depends on: the model section (shape, init seed,
    warm-start settings; not fp32_head), the task, the dtype and device, and the generation length
    (the probe's and the model's positions). Two configs equal here share one warm start."""
    values = config.to_dict()
    # the warm start computes its logits in FP32 whatever the run's fp32_head
    model = {key: value for key, value in values["model"].items() if key != "fp32_head"}
    return {
        "model": model,
        "task": values["task"],
        "dtype": config.dtype,
        "device": config.device,
        "max_new_tokens": config.sampling.max_new_tokens,
    }


def warm_start_settings(config: TrainConfig) -> WarmStartSettings:
    """The run config's warm-start settings: stop at model.warmstart_stop_pass_rate, seeded by
    model.init_seed (never by the RL seed)."""
    return WarmStartSettings(
        target_band=(config.model.warmstart_stop_pass_rate, 1.0),
        probe_every=config.model.warmstart_probe_every,
        max_new_tokens=config.sampling.max_new_tokens,
        seed=config.model.init_seed,
    )


def warm_start_for_config(
    config: TrainConfig, model: torch.nn.Module, tokenizer: Any, task: Task
) -> tuple[torch.nn.Module, object, WarmStartRecord]:
    """`warm_start_cached` with the config's settings and cache directory; `model` must be the
    freshly initialised policy. Returns the warm-started (model, tokenizer) and its record."""
    steps, settings = config.model.warmstart_steps, warm_start_settings(config)
    key = warm_start_cache_key(model, task, steps, settings)
    model, tokenizer, result = warm_start_cached(warmstart_cache_dir(config), model, tokenizer, task, steps, settings)
    record = WarmStartRecord(key, weights_digest(model), result.steps_run, result.pass_rate, result.reached_band)
    return model, tokenizer, record
