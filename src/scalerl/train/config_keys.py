"""Every key of a run's config with its type, default and meaning (`scalerl config keys`).

The meanings are the one-line help of each field of scalerl.train.config.TrainConfig; the
choices of the algorithm blocks and the loss parameters (default, meaning) come from the specs of
scalerl.rl.registry. A test checks that every settable key has one, so the listing cannot fall
behind the config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from scalerl.rl.registry import ADVANTAGE_NORMALISATIONS, AGGREGATIONS, LENGTH_CONTROLS, LOSSES, BlockSpec, loss_parameters
from scalerl.train.config import TrainConfig, _path_type, all_field_paths

KEY_MEANINGS: dict[str, str] = {
    "model.path": "'builtin' (tiny Llama-style model, character tokenizer) or a local Hugging Face model folder",
    "model.fp32_head": "compute the LM head in float32 whatever the body dtype (ScaleRL section 4)",
    "model.hidden_size": "built-in model: hidden size",
    "model.num_layers": "built-in model: transformer layers",
    "model.num_heads": "built-in model: attention heads (must divide hidden_size)",
    "model.warmstart_steps": "built-in model: most supervised warm-start steps (0: none)",
    "model.warmstart_stop_pass_rate": "built-in model: stop the warm start at this probed pass rate",
    "model.warmstart_probe_every": "built-in model: probe the pass rate every N warm-start steps",
    "model.init_seed": "built-in model: seed of its initial weights and warm start (shared by every run seed)",
    "model.warmstart_cache_dir": "where warm starts are cached ('': $XDG_CACHE_HOME/scalerl/warmstart)",
    "task.name": "'builtin' (multi-step arithmetic) or a JSONL file of {prompt|messages, answer}",
    "task.num_operands": "built-in task: operands per problem",
    "task.max_digits": "built-in task: most digits per operand",
    "task.operations": "built-in task: operators to draw from (characters of + - *)",
    "task.hard_fraction": "built-in task: share of prompts with hard_num_operands operands (beyond the thinking budget)",
    "task.hard_num_operands": "built-in task: operands of the hard prompts",
    "task.modulus": "built-in task: 0 (plain sums) or m: each reduction modulo m (10: one-digit steps)",
    "task.num_train_prompts": "built-in task: training prompts",
    "task.num_val_prompts": "built-in task: held-out validation prompts",
    "task.answer_check": "how a completion's answer is compared with the reference (exact, math)",
    "task.val_fraction": "JSONL task without split fields: share of lines held out for validation",
    "task.seed": "seed of the task's prompts and hold-out",
    "sampling.prompts_per_step": "prompts per optimiser step (P)",
    "sampling.generations_per_prompt": "completions per prompt (G, TRL's num_generations)",
    "sampling.max_new_tokens": "most generated tokens per completion (TRL's max_completion_length)",
    "sampling.temperature": "sampling temperature",
    "sampling.top_p": "nucleus sampling mass (1: off)",
    "sampling.thinking_budget_min": "interrupt: thinking tokens after which a thinking section may be cut",
    "sampling.thinking_budget_max": "interrupt: thinking tokens after which it is always cut",
    "sampling.penalty_cache_tokens": "penalty: soft-penalty window before max_new_tokens (DAPO)",
    "rl.zero_variance_filter": "drop prompt groups whose completions all got the same reward",
    "rl.npr": "no-positive-resampling: retire prompts the policy solves reliably",
    "rl.npr_threshold": "no-positive-resampling: pass rate at which a prompt is retired",
    "rl.min_kept_prompts": "a step whose filters keep fewer prompts than this makes no update (1: any)",
    "optim.lr": "AdamW learning rate (TRL's learning_rate)",
    "optim.warmup_steps": "linear learning-rate warm-up steps",
    "optim.weight_decay": "AdamW decoupled weight decay",
    "optim.adam_eps": "AdamW epsilon",
    "optim.adam_beta1": "AdamW beta1",
    "optim.adam_beta2": "AdamW beta2",
    "optim.grad_clip": "clip the gradient norm to this value (TRL's max_grad_norm)",
    "pipeline.mode": "sync (this process), async (PipelineRL on Ray) or ppo-offpolicy",
    "pipeline.max_lag": "async: most steps the trainer may be ahead of its data (k)",
    "pipeline.on_stale": "async: what to do with a batch older than max_lag: wait or drop",
    "pipeline.num_generators": "Ray generator actors",
    "pipeline.offpolicy_steps": "ppo-offpolicy: optimiser steps per generated round (k)",
    "pipeline.ray_address": "Ray cluster to join ('auto' or host:port; '': start a local one)",
    "pipeline.num_cpus": "CPUs of the local Ray instance (0: Ray's default)",
    "pipeline.generator_cpus": "CPUs reserved per generator actor",
    "pipeline.trainer_cpus": "CPUs reserved for the trainer actor",
    "pipeline.generator_gpus": "GPUs reserved per generator actor",
    "pipeline.trainer_gpus": "GPUs reserved for the trainer actor",
    "pipeline.torch_threads": "torch threads per actor",
    "pipeline.max_generator_restarts": "restarts of a generator actor that died before the run fails",
    "pipeline.weight_poll_seconds": "async: how often a generator looks for new weights",
    "pipeline.backend": "generator backend: hf (transformers) or vllm",
    "forecast.enabled": "fit the compute-performance sigmoid at every validation (live forecast)",
    "forecast.budget_flops": "compute at which the live forecast predicts (0: projected to max_steps)",
    "forecast.n_bootstrap": "bootstrap refits of each live forecast",
    "max_steps": "optimiser steps of the run",
    "eval_every": "validate every N steps (and at step 0 for R0, and at the last step)",
    "eval_prompts": "validation prompts per evaluation",
    "eval_samples_per_prompt": "completions per validation prompt",
    "eval_greedy": "validate with greedy decoding (one completion per prompt) instead of sampling",
    "checkpoint_every": "write a checkpoint every N steps (and at the last step)",
    "keep_checkpoints": "how many of the newest checkpoints to keep",
    "seed": "seed of the run (sampling, prompts, built-in model)",
    "device": "cpu, cuda, cuda:N or mps",
    "dtype": "model body dtype: float32 or bfloat16",
    "num_devices": "devices counted in device_hours",
    "torch_threads": "torch threads of the trainer process (0: torch's default)",
    "tensorboard": "also log every metric to RUN/tensorboard (same names as metrics.jsonl)",
    "wandb": "also log every metric to Weights & Biases (same names as metrics.jsonl)",
    "wandb_project": "W&B project",
    "wandb_run_name": "W&B run name ('': the run directory's name)",
}


# The keys that name a registered algorithm block: their meaning lists the registry's choices.
CHOICE_KEYS: dict[str, tuple[str, Mapping[str, BlockSpec]]] = {
    "sampling.length_control": ("length control", LENGTH_CONTROLS),
    "rl.loss": ("policy loss", LOSSES),
    "rl.aggregation": ("loss aggregation", AGGREGATIONS),
    "rl.advantage_norm": ("advantage normalisation", ADVANTAGE_NORMALISATIONS),
}


def key_meaning(path: str) -> str:
    """The one-line meaning of a config key ('' if it has none): from KEY_MEANINGS, or from the
    registry for block choices ('policy loss, one of cispo: ...; dapo: ...') and loss parameters."""
    if path in CHOICE_KEYS:
        what, catalog = CHOICE_KEYS[path]
        return f"{what}, one of " + "; ".join(f"{name}: {spec.meaning}" for name, spec in catalog.items())
    parameters = {f"rl.{spec.config_key}": spec for spec in loss_parameters()}
    if path in parameters:
        spec = parameters[path]
        return f"{spec.meaning}; finite, in {spec.bounds_text()}"
    return KEY_MEANINGS.get(path, "")


@dataclass(frozen=True)
class KeyInfo:
    """One settable key: dotted path, type name, default value and meaning."""

    path: str
    type_name: str
    default: Any
    meaning: str


def describe_keys() -> list[KeyInfo]:
    """Every key of TrainConfig in declaration order, with its default and meaning."""
    defaults = TrainConfig().to_dict()
    keys = []
    for path in all_field_paths():
        value: Any = defaults
        for part in path.split("."):
            value = value[part]
        keys.append(KeyInfo(path, _path_type(path).__name__, value, key_meaning(path)))
    return keys


def keys_table(keys: list[KeyInfo]) -> str:
    """Plain aligned text, one key per line (never wrapped, so grep and pipes read it)."""
    rows = [(key.path, key.type_name, _show(key.default), key.meaning) for key in keys]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    header = ("key".ljust(widths[0]), "type".ljust(widths[1]), "default".ljust(widths[2]), "meaning")
    lines = ["  ".join(header)]
    lines += ["  ".join((row[0].ljust(widths[0]), row[1].ljust(widths[1]), row[2].ljust(widths[2]), row[3]))
              for row in rows]
    return "\n".join(lines)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value) if value == "" else value
    return repr(value)
