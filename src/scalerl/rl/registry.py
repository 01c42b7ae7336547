"""Config strings -> algorithm blocks: each loss, aggregation, advantage normalisation and length
control declared once, as a `BlockSpec` with its parameters (default, bounds, meaning).

The run config validates `rl.loss`, `rl.aggregation`, `rl.advantage_norm`,
`sampling.length_control` and every loss parameter (`rl.cispo_eps_max`, ...) from these specs,
`scalerl config keys` lists them, and `train_step` takes the loss's keyword arguments from them.
Torch-free on purpose (a spec names its function as "module:attribute", imported when a run
trains), so the CLI validates a config before any heavy import. Adding a loss: its function in
`losses.py` and one `BlockSpec` in `LOSSES` below; nothing else names it.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from scalerl.errors import ConfigError


@dataclass(frozen=True)
class ParamSpec:
    """One numeric parameter of a block: the function's keyword `name`, the config leaf
    `config_key` that sets it (unique across blocks, e.g. "cispo_eps_max"), its `default`, its
    bounds, a one-line `meaning` and the names TRL gives it. Values must be finite and
    low < value < high (inclusive ends where `low_inclusive` / `high_inclusive`)."""

    name: str
    config_key: str
    default: float
    meaning: str
    low: float = 0.0
    high: float = math.inf
    low_inclusive: bool = False
    high_inclusive: bool = False
    trl_names: tuple[str, ...] = ()  # what TRL calls it, for "did you mean" on an unknown key

    def bounds_text(self) -> str:
        """The allowed interval, e.g. '(0, inf)' or '[0, inf)'."""
        return f"{'[' if self.low_inclusive else '('}{self.low:g}, {self.high:g}{']' if self.high_inclusive else ')'}"

    def check(self, value: Any, field_path: str) -> float:
        """`value` as a float when it is a finite number inside the bounds; ConfigError naming
        `field_path` otherwise."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{field_path}: expected a number, got {value!r}")
        number = float(value)
        above = number >= self.low if self.low_inclusive else number > self.low
        below = number <= self.high if self.high_inclusive else number < self.high
        if not (math.isfinite(number) and above and below):
            raise ConfigError(f"{field_path}: must be finite and in {self.bounds_text()}, got {value!r}")
        return number


@dataclass(frozen=True)
class BlockSpec:
    """One algorithm block a config string selects.

    name: the config string ("cispo"). function: the callable, or "module:attribute" naming it
    (imported by `resolve`, so declaring a spec needs no torch), or None for a mode the trainer
    applies itself (length control). meaning: one line for `scalerl config keys`.
    parameters: the keyword arguments the config may set.
    reference_when: a parameter whose value > 0 makes the block need the reference policy's
    log-probs (`ref_logprobs`), e.g. GRPO's "kl_coef"; "" if it never does.
    """

    name: str
    function: Callable[..., Any] | str | None
    meaning: str
    parameters: tuple[ParamSpec, ...] = ()
    reference_when: str = ""

    def resolve(self) -> Callable[..., Any]:
        """The block's function."""
        if callable(self.function):
            return self.function
        if self.function is None:
            raise ConfigError(f"{self.name!r} is a mode, not a function")
        module_name, _, attribute = self.function.partition(":")
        return getattr(importlib.import_module(module_name), attribute)

    def kwargs(self, values: Mapping[str, float]) -> dict[str, float]:
        """Keyword arguments from parameter values keyed by config key, defaults for the rest.

        E.g. LOSSES["dapo"].kwargs({"dapo_eps_high": 0.3, "cispo_eps_max": 5})
        == {"eps_low": 0.2, "eps_high": 0.3}."""
        return {p.name: float(values.get(p.config_key, p.default)) for p in self.parameters}

    def needs_reference(self, kwargs: Mapping[str, float]) -> bool:
        """Whether these keyword arguments make the block need `ref_logprobs`."""
        return bool(self.reference_when) and kwargs.get(self.reference_when, 0.0) > 0


def _catalog(*specs: BlockSpec) -> dict[str, BlockSpec]:
    return {spec.name: spec for spec in specs}


LOSSES: dict[str, BlockSpec] = _catalog(
    BlockSpec(
        "cispo",
        "scalerl.rl.losses:cispo",
        "truncated importance-sampling REINFORCE, MiniMax-M1 and ScaleRL",
        (ParamSpec("eps_max", "cispo_eps_max", 4.0, "CISPO: upper truncation of the importance ratio"),),
    ),
    BlockSpec(
        "dapo",
        "scalerl.rl.losses:dapo",
        "token-level clipped surrogate with clip-higher, DAPO",
        (
            ParamSpec("eps_low", "dapo_eps_low", 0.2, "DAPO: lower clip of the ratio (1 - eps_low)"),
            ParamSpec(
                "eps_high",
                "dapo_eps_high",
                0.28,
                "DAPO: upper clip of the ratio (1 + eps_high, clip-higher)",
                trl_names=("epsilon_high",),
            ),
        ),
    ),
    BlockSpec(
        "grpo",
        "scalerl.rl.losses:grpo",
        "clipped surrogate with a symmetric clip, DeepSeekMath",
        (
            ParamSpec("eps", "grpo_eps", 0.2, "GRPO: symmetric clip of the ratio", trl_names=("epsilon",)),
            ParamSpec(
                "kl_coef",
                "grpo_kl_coef",
                0.0,
                "GRPO: weight of the k3 KL penalty to the starting policy (0: off, as in ScaleRL)",
                low_inclusive=True,
                trl_names=("beta",),
            ),
        ),
        reference_when="kl_coef",
    ),
    BlockSpec(
        "gspo",
        "scalerl.rl.losses:gspo",
        "sequence-level clipped surrogate, GSPO",
        (
            ParamSpec("eps_low", "gspo_eps_low", 3e-4, "GSPO: lower clip of the sequence-level ratio"),
            ParamSpec("eps_high", "gspo_eps_high", 4e-4, "GSPO: upper clip of the sequence-level ratio"),
        ),
    ),
)

AGGREGATIONS: dict[str, BlockSpec] = _catalog(
    BlockSpec("prompt", "scalerl.rl.aggregation:prompt_mean", "mean over prompts of their token mean"),
    BlockSpec("sample", "scalerl.rl.aggregation:sample_mean", "mean over sequences of their token mean"),
    BlockSpec("token", "scalerl.rl.aggregation:token_mean", "mean over every token of the batch"),
)

ADVANTAGE_NORMALISATIONS: dict[str, BlockSpec] = _catalog(
    BlockSpec("batch", "scalerl.rl.advantages:normalise_by_batch_std", "divide by the batch std, ScaleRL"),
    BlockSpec("prompt", "scalerl.rl.advantages:normalise_by_prompt_std", "divide by each prompt group's std, GRPO"),
    BlockSpec(
        "prompt_sample_std",
        "scalerl.rl.advantages:normalise_by_prompt_sample_std",
        "divide by each prompt group's sample std (n - 1) + 1e-4, TRL's scale_rewards=group",
    ),
    BlockSpec("none", "scalerl.rl.advantages:no_normalisation", "centred advantages as they are"),
)

# Length control is applied by generation and the reward (scalerl.train); its budgets are the
# `sampling.*` keys, checked there against sampling.max_new_tokens.
LENGTH_CONTROLS: dict[str, BlockSpec] = _catalog(
    BlockSpec("interrupt", None, "forced interruption between two thinking budgets, ScaleRL"),
    BlockSpec("truncate", None, "cut at max_new_tokens"),
    BlockSpec("penalty", None, "cut at max_new_tokens, DAPO's overlong penalty added to the reward"),
)


def lookup(kind: str, catalog: Mapping[str, BlockSpec], name: str) -> BlockSpec:
    """The spec registered as `name`; ConfigError listing the valid names otherwise."""
    if name not in catalog:
        raise ConfigError(f"unknown {kind} {name!r}; valid choices: {', '.join(sorted(catalog))}")
    return catalog[name]


def loss_parameters() -> Iterator[ParamSpec]:
    """Every registered loss parameter, in registration order."""
    for spec in LOSSES.values():
        yield from spec.parameters


def get_loss(name: str) -> Callable[..., Any]:
    """Loss function `(logprobs, generator_logprobs, advantages, mask, **params) -> LossOutput`."""
    return lookup("loss", LOSSES, name).resolve()


def get_aggregation(name: str) -> Callable[..., Any]:
    """Aggregation `(token_loss, mask, group_ids) -> scalar tensor`."""
    return lookup("aggregation", AGGREGATIONS, name).resolve()


def get_advantage_normalisation(name: str) -> Callable[..., Any]:
    """Normalisation `(centred_advantages, group_ids, eps) -> advantages`."""
    return lookup("advantage normalisation", ADVANTAGE_NORMALISATIONS, name).resolve()


def loss_kwargs(name: str, values: Mapping[str, float]) -> dict[str, float]:
    """The keyword arguments of loss `name` from values keyed by config key, over its defaults."""
    return lookup("loss", LOSSES, name).kwargs(values)
