"""TRL's flat `GRPOConfig` keys (a `trl grpo --config` YAML) as scalerl config keys.

`trl_assignments(values, base)` turns the TRL keys of a config file into dotted scalerl keys
and values, following TRL's meaning of each key (trl/trainer/grpo_config.py): one
optimiser step consumes per_device_train_batch_size * gradient_accumulation_steps completions,
num_generations per prompt; `loss_type` picks the aggregation (grpo: per sequence, bnpo / dapo /
cispo: per token); `epsilon` / `epsilon_high` are the clip of whichever loss that gives;
`max_steps` > 0 wins over `num_train_epochs`, as in transformers. A TRL key scalerl has no
counterpart for is refused with the reason. Torch-free, like the config.
"""

from __future__ import annotations

from typing import Any, Mapping

from scalerl.errors import ConfigError
from scalerl.parsing_limits import shown

# TRL key -> scalerl key, when the value carries over as it is.
DIRECT_KEYS: dict[str, str] = {
    "learning_rate": "optim.lr", "weight_decay": "optim.weight_decay", "adam_beta1": "optim.adam_beta1",
    "adam_beta2": "optim.adam_beta2", "adam_epsilon": "optim.adam_eps", "max_grad_norm": "optim.grad_clip",
    "warmup_steps": "optim.warmup_steps", "num_generations": "sampling.generations_per_prompt",
    "max_completion_length": "sampling.max_new_tokens", "temperature": "sampling.temperature",
    "top_p": "sampling.top_p", "seed": "seed", "eval_steps": "eval_every", "save_steps": "checkpoint_every",
    "save_total_limit": "keep_checkpoints", "run_name": "wandb_run_name", "model_name_or_path": "model.path",
    "dataset_name": "task.name",
}
# TRL keys read together with others (see `trl_assignments`).
COMBINED_KEYS = ("per_device_train_batch_size", "gradient_accumulation_steps", "loss_type", "epsilon",
                 "epsilon_high", "beta", "importance_sampling_level", "scale_rewards", "report_to", "bf16",
                 "num_train_epochs", "max_steps", "output_dir")
# TRL keys with no counterpart here, and what to do instead.
REFUSED_KEYS: dict[str, str] = {
    "num_train_epochs": "scalerl counts optimiser steps: set max_steps (TRL's max_steps wins over it too)",
    "fp16": "use bf16: true (dtype bfloat16)",
    "use_vllm": "set pipeline.backend=vllm with pipeline.mode=async",
    "logging_steps": "scalerl logs every step: drop it",
    "max_prompt_length": "scalerl does not cut prompts: drop it",
}
# loss_type -> (rl.loss, rl.aggregation)
LOSS_TYPES: dict[str, tuple[str, str]] = {
    "grpo": ("grpo", "sample"), "bnpo": ("grpo", "token"), "dapo": ("dapo", "token"), "cispo": ("cispo", "token"),
}
SCALE_REWARDS = {True: "prompt", "group": "prompt", "batch": "batch", False: "none", "none": "none"}
REPORT_TARGETS = ("tensorboard", "wandb")
TRL_DEFAULT_EPSILON = 0.2


def is_trl_key(key: str) -> bool:
    """Whether `key` is a GRPOConfig key this module maps or refuses with a reason."""
    return key in DIRECT_KEYS or key in COMBINED_KEYS or key in REFUSED_KEYS


def report_targets(value: Any, where: str = "report_to") -> dict[str, bool]:
    """transformers' report_to ('all', 'none', a name or a list of names) as
    {'tensorboard': bool, 'wandb': bool}; ConfigError for a logger scalerl has not."""
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not all(isinstance(name, str) for name in names):
        raise ConfigError(f"{where}: expected 'all', 'none' or logger names, got {shown(value)}")
    names = {part.strip() for name in names for part in name.replace(" ", ",").split(",") if part.strip()}
    if "all" in names:
        names = (names - {"all"}) | set(REPORT_TARGETS)
    unknown = sorted(names - set(REPORT_TARGETS) - {"none"})
    if unknown or ("none" in names and len(names) > 1):
        raise ConfigError(f"{where} takes all, none, or tensorboard and/or wandb, got {shown(value)}")
    return {target: target in names for target in REPORT_TARGETS}


def _is_positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _max_steps(values: Mapping[str, Any]) -> int | None:
    """TRL's max_steps when it is set (> 0; TRL's -1 means 'use num_train_epochs')."""
    steps = values.get("max_steps", -1)
    if not isinstance(steps, int) or isinstance(steps, bool):
        raise ConfigError(f"max_steps: expected an integer, got {shown(steps)}")
    return steps if steps > 0 else None


def _batch_assignments(values: Mapping[str, Any], generations: int) -> dict[str, Any]:
    """prompts_per_step = per_device_train_batch_size * gradient_accumulation_steps / num_generations."""
    per_device, accumulation = values["per_device_train_batch_size"], values.get("gradient_accumulation_steps", 1)
    if not all(_is_positive_int(value) for value in (per_device, accumulation, generations)):
        raise ConfigError("per_device_train_batch_size, gradient_accumulation_steps and num_generations must be "
                          f"positive integers, got {shown(per_device)}, {shown(accumulation)}, {shown(generations)}")
    completions = per_device * accumulation
    if completions % generations:
        raise ConfigError(f"per_device_train_batch_size * gradient_accumulation_steps = {completions} completions "
                          f"per step is not a multiple of num_generations = {generations}")
    return {"sampling.prompts_per_step": completions // generations}


def _loss_assignments(values: Mapping[str, Any], base_loss: str) -> dict[str, Any]:
    """rl.loss, rl.aggregation and the loss's clip/KL keys from loss_type, importance_sampling_level,
    epsilon, epsilon_high and beta (epsilon_high defaults to epsilon, as in TRL)."""
    out: dict[str, Any] = {}
    loss = base_loss
    if "loss_type" in values:
        if not isinstance(values["loss_type"], str) or values["loss_type"] not in LOSS_TYPES:
            raise ConfigError(f"loss_type {shown(values['loss_type'])} has no counterpart here; "
                              f"use one of {', '.join(LOSS_TYPES)}")
        loss, out["rl.aggregation"] = LOSS_TYPES[values["loss_type"]]
    level = values.get("importance_sampling_level", "token")
    if not isinstance(level, str) or level not in ("token", "sequence"):
        raise ConfigError(f"importance_sampling_level must be token or sequence, got {shown(level)}")
    if level == "sequence":
        loss = "gspo"
    low = values.get("epsilon", TRL_DEFAULT_EPSILON)
    high = values.get("epsilon_high", low)
    clip_keys = {"grpo": ("rl.grpo_eps", None), "dapo": ("rl.dapo_eps_low", "rl.dapo_eps_high"),
                 "gspo": ("rl.gspo_eps_low", "rl.gspo_eps_high"), "cispo": (None, "rl.cispo_eps_max")}
    low_key, high_key = clip_keys.get(loss, (None, None))
    if loss == "grpo" and high != low:
        raise ConfigError("loss_type grpo/bnpo clips symmetrically here: drop epsilon_high or use loss_type dapo")
    if any(key in values for key in ("loss_type", "epsilon", "epsilon_high", "importance_sampling_level")):
        out.update({key: value for key, value in ((low_key, low), (high_key, high)) if key})
    if "beta" in values:
        if loss != "grpo" and values["beta"] != 0:
            raise ConfigError("beta (a KL penalty) needs loss_type grpo or bnpo here")
        if loss == "grpo":
            out["rl.grpo_kl_coef"] = values["beta"]
    if loss != base_loss or "loss_type" in values:
        out["rl.loss"] = loss
    return out


def trl_assignments(values: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """{dotted scalerl key: value} for the TRL keys of `values` (every key of it must satisfy
    `is_trl_key`); `base` (nested config values) gives what a TRL key depends on and the file
    leaves out (num_generations, the loss). `output_dir` is the run directory: the caller's."""
    max_steps = _max_steps(values)
    refused = [f"{key} ({REFUSED_KEYS[key]})" for key in values if key in REFUSED_KEYS
               and not (key == "num_train_epochs" and max_steps is not None)]
    if refused:
        raise ConfigError("TRL keys with no counterpart here: " + "; ".join(refused))
    out = {DIRECT_KEYS[key]: value for key, value in values.items() if key in DIRECT_KEYS}
    if max_steps is not None:
        out["max_steps"] = max_steps
    generations = out.get("sampling.generations_per_prompt", base["sampling"]["generations_per_prompt"])
    if "per_device_train_batch_size" in values:
        out.update(_batch_assignments(values, generations))
    elif "gradient_accumulation_steps" in values:
        raise ConfigError("gradient_accumulation_steps needs per_device_train_batch_size beside it")
    out.update(_loss_assignments(values, base["rl"]["loss"]))
    if "scale_rewards" in values:
        scale = values["scale_rewards"]
        if not isinstance(scale, (str, bool)) or scale not in SCALE_REWARDS:
            raise ConfigError(f"scale_rewards must be group, batch or none, got {shown(scale)}")
        out["rl.advantage_norm"] = SCALE_REWARDS[scale]
    if "report_to" in values:
        out.update(report_targets(values["report_to"]))
    if "bf16" in values:
        if not isinstance(values["bf16"], bool):
            raise ConfigError(f"bf16: expected true/false, got {shown(values['bf16'])}")
        out["dtype"] = "bfloat16" if values["bf16"] else "float32"
    return out
