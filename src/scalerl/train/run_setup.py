"""What a run is built from, shared by the synchronous trainer and the pipeline's actors.

The task, the starting policy (warm start cached) and the frozen reference policy of a KL
penalty, the optimiser and LR schedule, and the checks of paths, device, run directory and a
resume's config. One step's rollouts are scalerl.train.step_rollouts'.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError

from scalerl.errors import ConfigError, InputError
from scalerl.models.chat import chat_renderer
from scalerl.models.policy import BUILTIN_MODEL, TinyModelSpec, load_policy
from scalerl.tasks.custom_reward import RewardFunction, with_reward_functions
from scalerl.tasks.hub_datasets import is_hub_dataset_id
from scalerl.tasks.loading import load_task
from scalerl.tasks.types import Task
from scalerl.train.config.train_config import CONFIG_FILE_NAME, TrainConfig, load_config
from scalerl.train.train_step import build_optimizer, build_scheduler

# Keys a resume may change: they say how long to run and where to log, not what is computed.
# train.*: how a step is executed (micro-batches, log-prob chunks, activation checkpointing, skipped
# non-finite steps), never what it computes.
RESUMABLE_CHANGES = (
    "max_steps",
    "train",
    "tensorboard",
    "wandb",
    "wandb_project",
    "wandb_run_name",
    "forecast",
    "eval_logged_completions",
)


def check_paths(config: TrainConfig, *, device_here: bool = True) -> None:
    """model.path and task.name must be 'builtin' or exist, and (`device_here`: the device is
    this machine's, not a Ray cluster's) the device must be there; checked before a run starts."""
    model_path = config.model.path
    if model_path != BUILTIN_MODEL and not (Path(model_path) / "config.json").is_file():
        raise ConfigError(
            f"model.path: {model_path!r} is neither 'builtin' nor a local Hugging Face model directory (no config.json)"
        )
    task_name = config.task.name
    if task_name != "builtin" and not Path(task_name).is_file() and not is_hub_dataset_id(task_name):
        raise ConfigError(
            f"task.name: {task_name!r} is neither 'builtin', an existing JSONL or parquet file, "
            "nor a dataset id (org/name)"
        )
    for key, names in (("task.train_files", config.task.train_paths), ("task.val_files", config.task.val_paths)):
        missing = [name for name in names if not Path(name).is_file() and not is_hub_dataset_id(name)]
        if missing:
            raise ConfigError(f"{key}: {', '.join(map(repr, missing))} is no existing file nor dataset id")
    if device_here:
        check_device(config.device)
    if config.wandb:
        from scalerl.train.records.wandb_log import require_wandb

        require_wandb()


def with_device_resolved(config: TrainConfig) -> TrainConfig:
    """`config` with device=auto made cuda when torch sees a CUDA device, else cpu (the saved
    config names the device the run used)."""
    if config.device != "auto":
        return config
    return dataclasses.replace(config, device="cuda" if torch.cuda.is_available() else "cpu")


def check_device(device: str) -> None:
    """The configured device exists on this machine (checked before anything is written)."""
    if device.startswith("cuda"):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(device.split(":", 1)[1]) if ":" in device else 0
        if index >= count:
            found = f"{count} CUDA device(s)" if count else "no CUDA device"
            raise ConfigError(f"device: {device!r} is not available on this machine ({found}); use device=cpu")
    elif device == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("device: 'mps' is not available on this machine; use device=cpu")


def build_task(config: TrainConfig, reward_functions: Sequence[RewardFunction] = ()) -> Task:
    """The built-in arithmetic task at the configured difficulty, or a JSONL task; scored by the
    task.reward functions (or the Python API's `reward_functions`) when there are any.

    The held-out pool size is a task knob (not eval_prompts): changing how many prompts an
    evaluation uses must not change the training prompts or the warm-start cache key."""
    scored_by_functions = (
        bool(reward_functions) or bool(config.task.reward.strip())
    ) and not config.task.pass_by_verifier
    task = load_task(
        config.task,
        render_chat=chat_renderer(config.model.path, config.model.chat_template),
        answers_required=not scored_by_functions,
    )
    if reward_functions:
        return with_reward_functions(task, list(reward_functions), config.task.reward_weights, config.max_steps)
    return with_reward_functions(task, config.task.reward, config.task.reward_weights, config.max_steps)


def tiny_model_spec(config: TrainConfig) -> TinyModelSpec:
    """Shape of the built-in model; positions cover the prompt plus max_new_tokens."""
    model = config.model
    return TinyModelSpec(
        num_layers=model.num_layers,
        hidden_size=model.hidden_size,
        num_heads=model.num_heads,
        intermediate_size=3 * model.hidden_size,
        max_positions=max(256, config.sampling.max_new_tokens + 128),
    )


def fresh_policy(config: TrainConfig) -> tuple[torch.nn.Module, Any]:
    """(model, tokenizer) as loaded from model.path, or a freshly initialised built-in model
    (initial weights from model.init_seed, shared by every RL seed). A folder that does not load
    (a truncated weights file, a broken config) is one InputError naming it."""
    try:
        return load_policy(
            config.model.path,
            dtype=config.dtype,
            device=config.device,
            tiny_spec=tiny_model_spec(config),
            seed=config.model.init_seed,
        )
    except (OSError, ValueError, RuntimeError, KeyError, SafetensorError) as error:
        if config.model.path == BUILTIN_MODEL:
            raise
        detail = " ".join(str(error).split())[:300] or type(error).__name__
        raise InputError(f"model.path: {config.model.path} cannot be loaded: {detail}") from None


def build_policy(config: TrainConfig, task: Task) -> tuple[torch.nn.Module, Any]:
    """The starting policy: the built-in model is warm-started (cached on disk) on worked examples
    until a quick probe reaches model.warmstart_stop_pass_rate; a local model is used as is."""
    model, tokenizer = fresh_policy(config)
    if config.model.path != BUILTIN_MODEL or config.model.warmstart_steps == 0:
        return model, tokenizer
    from scalerl.train.warmstart_config import warm_start_for_config

    model, tokenizer, _ = warm_start_for_config(config, model, tokenizer, task)
    return model, tokenizer


def starting_policy(config: TrainConfig, task: Task, *, resuming: bool) -> tuple[torch.nn.Module, Any]:
    """The policy a run starts from: warm-started when fresh; when resuming, the bare architecture
    (its weights come from the checkpoint)."""
    return fresh_policy(config) if resuming else build_policy(config, task)


def reference_policy(config: TrainConfig, task: Task) -> torch.nn.Module | None:
    """The frozen policy a loss's KL penalty is measured against (GRPO with rl.grpo_kl_coef > 0:
    the run's starting policy, its warm start read from the cache, the same on a resume), or
    None when the configured loss needs no reference log-probs."""
    if not config.rl.needs_reference():
        return None
    model, _ = build_policy(config, task)
    model.eval()
    return model.requires_grad_(False)


def build_optimisation(model: torch.nn.Module, config: TrainConfig) -> tuple[torch.optim.Optimizer, Any]:
    """(AdamW, warm-up then optim.lr_schedule LR schedule over max_steps) of the run's optimiser settings."""
    optimizer = build_optimizer(model, config.optim)
    return optimizer, build_scheduler(optimizer, config.optim.warmup_steps, config.optim.lr_schedule, config.max_steps)


def _leaf_values(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'optim.lr': 0.01, ...} of a nested config dict."""
    leaves: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            leaves.update(_leaf_values(value, f"{prefix}{key}."))
        else:
            leaves[f"{prefix}{key}"] = value
    return leaves


def resume_changes(saved: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    """`key: old -> new` for each setting a resume may not change (RESUMABLE_CHANGES may).

    Keys present on one side only are a change of scalerl's config schema, not of the run."""
    before, after = _leaf_values(saved), _leaf_values(config)
    return [
        f"{key}: {before[key]!r} -> {after[key]!r}"
        for key in sorted(before.keys() & after.keys())
        if key.split(".")[0] not in RESUMABLE_CHANGES and before[key] != after[key]
    ]


def check_resumable(config: TrainConfig, saved: Mapping[str, Any], source: str) -> None:
    """ConfigError listing what differs between the run saved in `source` and `config`."""
    changed = resume_changes(saved, config.to_dict())
    if changed:
        raise ConfigError(
            f"--resume: the config differs from the saved run's in {'; '.join(changed)} "
            f"({source}); only max_steps may change (and train.*, tensorboard, wandb*, forecast.*)"
        )


def check_run_dir(config: TrainConfig, run_dir: Path, resume: bool) -> None:
    """The run directory suits a fresh run (no run there yet) or a resume (config.json there, and
    `config` differs from it only where a resume may); nothing is written."""
    has_run = (run_dir / CONFIG_FILE_NAME).exists()
    if resume and not has_run:
        raise ConfigError(f"--resume: no run to resume in {run_dir} (no {CONFIG_FILE_NAME})")
    if resume:
        check_resumable(config, load_config(run_dir).to_dict(), str(run_dir / CONFIG_FILE_NAME))
        return
    run_files = [name for name in (CONFIG_FILE_NAME, "metrics.jsonl", "checkpoints") if (run_dir / name).exists()]
    if run_files:
        raise ConfigError(
            f"{run_dir} already holds a run ({', '.join(run_files)}); pass --resume or choose another --out"
        )
