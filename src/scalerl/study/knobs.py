"""Knob names of `scalerl ablate`: short names for the recipe's choices and the scaling axes,
mapped to TrainConfig fields (a full dotted path such as `rl.loss` works too).

Most knobs are one field (`loss=dapo` -> `rl.loss=dapo`). Three scaling axes set several fields:
`gen_length` (max_new_tokens with the thinking budgets and penalty cache scaled alike),
`generations_fixed_batch` (generations per prompt at a fixed total batch: prompts = total / G)
and `model_size` (a named size of the built-in model, scalerl.models.sizes).
"""

from __future__ import annotations

from types import MappingProxyType

from scalerl.errors import ConfigError
from scalerl.models.sizes import model_size_assignments
from scalerl.train.config.train_config import TrainConfig, all_field_paths, parse_assignment

KNOB_FIELDS = MappingProxyType(
    {
        "loss": "rl.loss",
        "aggregation": "rl.aggregation",
        "adv_norm": "rl.advantage_norm",
        "zero_var_filter": "rl.zero_variance_filter",
        "no_positive_resampling": "rl.npr",
        "npr": "rl.npr",
        "fp32_head": "model.fp32_head",
        "length_control": "sampling.length_control",
        "batch_prompts": "sampling.prompts_per_step",
        "generations": "sampling.generations_per_prompt",
        "lr": "optim.lr",
        "dtype": "dtype",
    }
)
COMPOUND_KNOBS = ("gen_length", "generations_fixed_batch", "model_size")


def known_knobs() -> list[str]:
    return [*KNOB_FIELDS, *COMPOUND_KNOBS]


def split_knob(text: str, option: str = "--leave-one-out") -> tuple[str, str]:
    """'loss=dapo' -> ('loss', 'dapo'); a missing '=' or an empty side is a ConfigError."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise ConfigError(f"{option}: expected knob=value, got {text!r}")
    return name.strip(), value.strip()


def resolve_knob(name: str) -> str:
    """The config path of a short knob name, a full dotted path as is, or a compound knob's name.

    Unknown names raise one ConfigError listing the known knobs."""
    if name in KNOB_FIELDS:
        return KNOB_FIELDS[name]
    if name in COMPOUND_KNOBS or name in all_field_paths():
        return name
    raise ConfigError(
        f"unknown knob {name!r}: use one of {', '.join(known_knobs())} "
        "or a full config path such as rl.loss (see `scalerl presets`)"
    )


def _scaled(value: int, old_length: int, new_length: int) -> int:
    return max(1, round(value * new_length / old_length))


def generation_length_assignments(length: int, base: TrainConfig) -> tuple[str, ...]:
    """max_new_tokens = L; thinking budgets and penalty cache scaled by L / base max_new_tokens
    (the thinking budget kept below L, as the config requires)."""
    sampling = base.sampling
    budget_max = min(_scaled(sampling.thinking_budget_max, sampling.max_new_tokens, length), length - 1)
    budget_min = min(_scaled(sampling.thinking_budget_min, sampling.max_new_tokens, length), budget_max)
    cache = min(_scaled(sampling.penalty_cache_tokens, sampling.max_new_tokens, length), length)
    return (
        f"sampling.max_new_tokens={length}",
        f"sampling.thinking_budget_min={budget_min}",
        f"sampling.thinking_budget_max={budget_max}",
        f"sampling.penalty_cache_tokens={cache}",
    )


def fixed_batch_assignments(generations: int, base: TrainConfig) -> tuple[str, ...]:
    """G generations per prompt and total / G prompts, total = the base's prompts x generations."""
    total = base.sampling.prompts_per_step * base.sampling.generations_per_prompt
    if generations < 1 or total % generations:
        raise ConfigError(
            f"generations_fixed_batch={generations}: must divide the total batch of {total} "
            "sequences (prompts_per_step x generations_per_prompt)"
        )
    return (f"sampling.generations_per_prompt={generations}", f"sampling.prompts_per_step={total // generations}")


def _positive_int(name: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{name}={value}: expected a positive integer") from None
    if number < 1:
        raise ConfigError(f"{name}={value}: expected a positive integer")
    return number


def knob_assignments(name: str, value: str, base: TrainConfig) -> tuple[str, ...]:
    """The `--set` assignments of knob `name` = `value`, applied on top of `base` (checked here)."""
    target = resolve_knob(name)
    if target == "model_size":
        assignments = model_size_assignments(value)
    elif target == "gen_length":
        assignments = generation_length_assignments(_positive_int(name, value), base)
    elif target == "generations_fixed_batch":
        assignments = fixed_batch_assignments(_positive_int(name, value), base)
    else:
        parse_assignment(f"{target}={value}")  # the value's type, e.g. true/false for a bool
        assignments = (f"{target}={value}",)
    base.with_overrides(assignments)  # a value the config refuses fails now, before anything trains
    return assignments


def knob_label(name: str, value: str) -> str:
    """How a knob setting is named in plans and tables: 'rl.loss=dapo', 'model_size=m'."""
    return f"{resolve_knob(name)}={value}"
