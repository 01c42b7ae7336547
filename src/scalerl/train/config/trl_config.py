"""TRL's flat `GRPOConfig` keys (a `trl grpo --config` YAML) as scalerl config keys.

`trl_assignments(values, base)` turns the TRL keys of a config file into dotted scalerl keys
and values, following TRL's meaning of each key (trl/trainer/grpo_config.py): one
optimiser step consumes per_device_train_batch_size * gradient_accumulation_steps completions,
num_generations per prompt; `loss_type` picks the aggregation (grpo: per sequence, bnpo / dapo /
cispo: per token); `epsilon` / `epsilon_high` are the clip of whichever loss that gives;
`max_steps` > 0 wins over `num_train_epochs`, as in transformers. A config file that names a
TRL-only key is TRL's run: the keys it leaves out take TRL's GRPOConfig defaults (TRL_DEFAULTS,
read from trl 1.16's grpo_config.py and transformers' TrainingArguments) and scalerl's knobs TRL
has no key for take TRL's behaviour (TRL_BEHAVIOUR). gradient_accumulation_steps > 1 runs
micro-batches of per_device_train_batch_size completions (the whole batch's gradient). Keys that
change nothing here are accepted with a note (HARMLESS_KEYS); every refused key is listed in one
message (`refused_keys`). Torch-free, like the config.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from scalerl.errors import ConfigError
from scalerl.parsing_limits import shown

# TRL key -> scalerl key, when the value carries over as it is.
DIRECT_KEYS: dict[str, str] = {
    "learning_rate": "optim.lr",
    "weight_decay": "optim.weight_decay",
    "adam_beta1": "optim.adam_beta1",
    "adam_beta2": "optim.adam_beta2",
    "adam_epsilon": "optim.adam_eps",
    "max_grad_norm": "optim.grad_clip",
    "warmup_steps": "optim.warmup_steps",
    "num_generations": "sampling.generations_per_prompt",
    "max_completion_length": "sampling.max_new_tokens",
    "temperature": "sampling.temperature",
    "top_p": "sampling.top_p",
    "top_k": "sampling.top_k",
    "repetition_penalty": "sampling.repetition_penalty",
    "max_prompt_length": "sampling.max_prompt_length",
    "seed": "seed",
    "eval_steps": "eval_every",
    "save_steps": "checkpoint_every",
    "save_total_limit": "keep_checkpoints",
    "run_name": "wandb_run_name",
    "model_name_or_path": "model.path",
    "dataset_name": "task.name",
    "gradient_checkpointing": "train.gradient_checkpointing",
    "activation_checkpointing": "train.gradient_checkpointing",
}
# TRL keys read together with others (see `trl_assignments`).
COMBINED_KEYS = (
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "loss_type",
    "epsilon",
    "epsilon_high",
    "beta",
    "importance_sampling_level",
    "scale_rewards",
    "report_to",
    "bf16",
    "num_train_epochs",
    "max_steps",
    "output_dir",
    "lr_scheduler_type",
    "warmup_ratio",
)
# TRL keys with no counterpart here, and what to do instead.
REFUSED_KEYS: dict[str, str] = {
    "num_train_epochs": "scalerl counts optimiser steps: set max_steps (TRL's max_steps wins over it too)",
}
# TRL keys that change nothing here: (the values accepted, None: any; the note said). Another
# value is refused with the note.
HARMLESS_KEYS: dict[str, tuple[tuple[Any, ...] | None, str]] = {
    "logging_steps": (None, "scalerl logs every step"),
    "logging_strategy": (None, "scalerl logs every step"),
    "logging_first_step": (None, "scalerl logs every step"),
    "logging_dir": (None, "scalerl logs into the run directory"),
    "log_level": (None, "scalerl's log has one level"),
    "disable_tqdm": (None, "--no-progress hides the progress bar"),
    "log_completions": (None, "validation completions go to RUN/completions.jsonl"),
    "num_completions_to_print": (None, "validation completions go to RUN/completions.jsonl"),
    "use_vllm": ((False,), "set pipeline.backend=vllm with pipeline.mode=async for vLLM generation"),
    "fp16": ((False,), "use bf16: true (dtype bfloat16) for half precision"),
    "save_strategy": (("steps", "no"), "scalerl checkpoints every save_steps (checkpoint_every) and at the last step"),
    "eval_strategy": (
        ("steps", "no"),
        "scalerl validates every eval_every steps and at step 0 (the forecast's points)",
    ),
    "eval_on_start": (None, "scalerl validates at step 0 (R0 of the curve)"),
    "per_device_eval_batch_size": (None, "validation batches are set by eval_prompts"),
    "optim": (("adamw_torch", "adamw_torch_fused", "adamw_hf"), "scalerl's optimiser is torch's AdamW"),
    "overwrite_output_dir": (None, "the run directory is --out / output_dir"),
    "do_train": (None, "scalerl train trains"),
    "do_eval": (None, "scalerl train validates every eval_every steps"),
    "remove_unused_columns": (None, "every dataset column reaches the reward functions"),
    "dataloader_num_workers": (None, "tasks are read in memory"),
    "push_to_hub": ((False,), "export the run with scalerl export"),
    "num_iterations": ((1,), "one update per generated batch (pipeline.mode=ppo-offpolicy for more)"),
    "mask_truncated_completions": ((False,), "truncated completions are trained on"),
    "use_liger_kernel": ((False,), "no liger kernels here"),
}
# lr_scheduler_type -> optim.lr_schedule
LR_SCHEDULER_TYPES = {
    "constant": "constant",
    "constant_with_warmup": "constant",
    "linear": "linear",
    "cosine": "cosine",
}
# TRL's GRPOConfig defaults (trl 1.16) of the keys mapped here: a TRL config's missing keys take them.
TRL_DEFAULTS: dict[str, Any] = {
    "learning_rate": 1e-6,
    "weight_decay": 0.0,
    "adam_beta1": 0.9,
    "adam_beta2": 0.999,
    "adam_epsilon": 1e-8,
    "max_grad_norm": 1.0,
    "warmup_steps": 0,
    "lr_scheduler_type": "linear",
    "num_generations": 8,
    "max_completion_length": 512,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "repetition_penalty": 1.0,
    "seed": 42,
    "save_steps": 500,
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "loss_type": "dapo",
    "epsilon": 0.2,
    "beta": 0.0,
    "scale_rewards": "group",
}
# scalerl knobs TRL has no key for, set as TRL runs: no filter, no curriculum, no forced interruption
# (cut at max_completion_length), the LM head in the body's dtype; `config_defaults` records it.
TRL_BEHAVIOUR: dict[str, Any] = {
    "rl.zero_variance_filter": False,
    "rl.npr": False,
    "sampling.length_control": "truncate",
    "model.fp32_head": False,
    "config_defaults": "trl",
}
# loss_type -> (rl.loss, rl.aggregation)
LOSS_TYPES: dict[str, tuple[str, str]] = {
    "grpo": ("grpo", "sample"),
    "bnpo": ("grpo", "token"),
    "dapo": ("dapo", "token"),
    "cispo": ("cispo", "token"),
}
SCALE_REWARDS = {
    True: "prompt_sample_std",
    "group": "prompt_sample_std",
    "batch": "batch",
    False: "none",
    "none": "none",
}
REPORT_TARGETS = ("tensorboard", "wandb")
TRL_DEFAULT_EPSILON = 0.2


def is_trl_key(key: str) -> bool:
    """Whether `key` is a GRPOConfig key this module maps, accepts or refuses with a reason."""
    return key in DIRECT_KEYS or key in COMBINED_KEYS or key in REFUSED_KEYS or key in HARMLESS_KEYS


def _accepted_harmless(key: str, value: Any) -> bool:
    values, _ = HARMLESS_KEYS[key]
    return values is None or any(
        value is allowed or (value == allowed and isinstance(value, bool) == isinstance(allowed, bool))
        for allowed in values
    )


def refused_keys(values: Mapping[str, Any]) -> list[str]:
    """'key (reason)' for every TRL key of `values` refused here: no counterpart, a harmless key
    with a value that would change something, an unknown scheduler."""
    max_steps = values.get("max_steps", -1)
    has_steps = isinstance(max_steps, int) and not isinstance(max_steps, bool) and max_steps > 0
    refused = [
        f"{key} ({REFUSED_KEYS[key]})"
        for key in values
        if key in REFUSED_KEYS and not (key == "num_train_epochs" and has_steps)
    ]
    refused += [
        f"{key}: {shown(value)} ({HARMLESS_KEYS[key][1]})"
        for key, value in values.items()
        if key in HARMLESS_KEYS and not _accepted_harmless(key, value)
    ]
    scheduler = values.get("lr_scheduler_type", "constant")
    if not isinstance(scheduler, str) or scheduler not in LR_SCHEDULER_TYPES:
        refused.append(f"lr_scheduler_type: {shown(scheduler)} (use one of {', '.join(LR_SCHEDULER_TYPES)})")
    return refused


def trl_notes(values: Mapping[str, Any], defaults_taken: bool) -> list[str]:
    """What a user should know about the TRL keys of `values`: the defaults the file's missing
    keys took (`defaults_taken`) and each harmless key's note."""
    notes = []
    if defaults_taken:
        missing = [f"{key} {value}" for key, value in TRL_DEFAULTS.items() if key not in values]
        notes.append(
            "a TRL GRPOConfig: keys it leaves out take TRL's defaults ("
            + ", ".join(missing)
            + "); no zero-variance filter, no curriculum, truncation at max_completion_length, no FP32 "
            "head; max_steps stays scalerl's unless the file sets it"
        )
    notes += [f"{key}: accepted, {HARMLESS_KEYS[key][1]}" for key in values if key in HARMLESS_KEYS]
    return notes


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
    """prompts_per_step = per_device_train_batch_size * gradient_accumulation_steps / num_generations;
    with gradient_accumulation_steps > 1, micro-batches of per_device_train_batch_size sequences."""
    per_device, accumulation = values["per_device_train_batch_size"], values.get("gradient_accumulation_steps", 1)
    if not all(_is_positive_int(value) for value in (per_device, accumulation, generations)):
        raise ConfigError(
            "per_device_train_batch_size, gradient_accumulation_steps and num_generations must be "
            f"positive integers, got {shown(per_device)}, {shown(accumulation)}, {shown(generations)}"
        )
    completions = per_device * accumulation
    if completions % generations:
        raise ConfigError(
            f"per_device_train_batch_size * gradient_accumulation_steps = {completions} completions "
            f"per step is not a multiple of num_generations = {generations}"
        )
    out: dict[str, Any] = {"sampling.prompts_per_step": completions // generations}
    if accumulation > 1:
        out["train.micro_batch_size"] = per_device
    return out


def _schedule_assignments(values: Mapping[str, Any], max_steps: int) -> dict[str, Any]:
    """optim.lr_schedule from lr_scheduler_type; warmup_ratio (or transformers' warmup_steps < 1)
    as optim.warmup_steps = ceil(ratio * max_steps)."""
    out: dict[str, Any] = {}
    if "lr_scheduler_type" in values:
        out["optim.lr_schedule"] = LR_SCHEDULER_TYPES[values["lr_scheduler_type"]]
    ratio = values.get("warmup_ratio")
    warmup = values.get("warmup_steps")
    if ratio is None and isinstance(warmup, float) and 0 < warmup < 1:
        ratio = warmup
    if ratio is not None:
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 <= ratio < 1:
            raise ConfigError(f"warmup_ratio must be a number in [0, 1), got {shown(ratio)}")
        out["optim.warmup_steps"] = math.ceil(ratio * max_steps)
    return out


def _loss_assignments(values: Mapping[str, Any], base_loss: str) -> dict[str, Any]:
    """rl.loss, rl.aggregation and the loss's clip/KL keys from loss_type, importance_sampling_level,
    epsilon, epsilon_high and beta (epsilon_high defaults to epsilon, as in TRL)."""
    out: dict[str, Any] = {}
    loss = base_loss
    if "loss_type" in values:
        if not isinstance(values["loss_type"], str) or values["loss_type"] not in LOSS_TYPES:
            raise ConfigError(
                f"loss_type {shown(values['loss_type'])} has no counterpart here; use one of {', '.join(LOSS_TYPES)}"
            )
        loss, out["rl.aggregation"] = LOSS_TYPES[values["loss_type"]]
    level = values.get("importance_sampling_level", "token")
    if not isinstance(level, str) or level not in ("token", "sequence"):
        raise ConfigError(f"importance_sampling_level must be token or sequence, got {shown(level)}")
    if level == "sequence":
        loss = "gspo"
    low = values.get("epsilon", TRL_DEFAULT_EPSILON)
    high = values.get("epsilon_high", low)
    clip_keys = {
        "grpo": ("rl.grpo_eps", None),
        "dapo": ("rl.dapo_eps_low", "rl.dapo_eps_high"),
        "gspo": ("rl.gspo_eps_low", "rl.gspo_eps_high"),
        "cispo": (None, "rl.cispo_eps_max"),
    }
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


def trl_assignments(
    values: Mapping[str, Any], base: Mapping[str, Any], *, with_defaults: bool = False
) -> dict[str, Any]:
    """{dotted scalerl key: value} for the TRL keys of `values` (every key of it must satisfy
    `is_trl_key`); `base` (nested config values) gives what a TRL key depends on and the file
    leaves out (num_generations, the loss, max_steps). `with_defaults`: the keys `values` leaves
    out take TRL_DEFAULTS and the run TRL_BEHAVIOUR. `output_dir` is the run directory: the caller's."""
    if with_defaults:
        values = {**TRL_DEFAULTS, **values}
    refused = refused_keys(values)
    if refused:
        raise ConfigError("TRL keys with no counterpart here: " + "; ".join(refused))
    max_steps = _max_steps(values)
    out = {DIRECT_KEYS[key]: value for key, value in values.items() if key in DIRECT_KEYS}
    for key in ("top_k", "max_prompt_length"):  # null: TRL's "off" / "no limit"
        if key in values and values[key] is None:
            out[DIRECT_KEYS[key]] = 0
    if with_defaults:
        out.update(TRL_BEHAVIOUR)
    if max_steps is not None:
        out["max_steps"] = max_steps
    out.update(_schedule_assignments(values, max_steps or base["max_steps"]))
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
