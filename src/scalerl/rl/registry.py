"""Config strings -> algorithm blocks: the one place a recipe's names are resolved.

`get_loss("cispo")`, `get_aggregation("prompt")`, `get_advantage_normalisation("batch")`; an
unknown name raises ConfigError listing the valid ones. `LOSS_PARAMETERS` names the keyword
arguments (with defaults) each loss accepts, so a config can pass only the relevant ones.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, TypeVar

from scalerl.errors import ConfigError
from scalerl.rl.advantages import ADVANTAGE_NORMALISATIONS
from scalerl.rl.aggregation import prompt_mean, sample_mean, token_mean
from scalerl.rl.losses import cispo, dapo, grpo, gspo

LOSSES = {"cispo": cispo, "dapo": dapo, "grpo": grpo, "gspo": gspo}

LOSS_PARAMETERS: dict[str, dict[str, float]] = {
    "cispo": {"eps_max": 4.0},
    "dapo": {"eps_low": 0.2, "eps_high": 0.28},
    "grpo": {"eps": 0.2, "kl_coef": 0.0},
    "gspo": {"eps_low": 3e-4, "eps_high": 4e-4},
}

AGGREGATIONS = {"prompt": prompt_mean, "sample": sample_mean, "token": token_mean}

_Block = TypeVar("_Block")


def _lookup(kind: str, registry: Mapping[str, _Block], name: str) -> _Block:
    if name not in registry:
        raise ConfigError(f"unknown {kind} {name!r}; valid choices: {', '.join(sorted(registry))}")
    return registry[name]


def get_loss(name: str) -> Callable[..., Any]:
    """Loss function `(logprobs, generator_logprobs, advantages, mask, **params) -> LossOutput`."""
    return _lookup("loss", LOSSES, name)


def get_aggregation(name: str) -> Callable[..., Any]:
    """Aggregation `(token_loss, mask, group_ids) -> scalar tensor`."""
    return _lookup("aggregation", AGGREGATIONS, name)


def get_advantage_normalisation(name: str) -> Callable[..., Any]:
    """Normalisation `(centred_advantages, group_ids, eps) -> advantages`."""
    return _lookup("advantage normalisation", ADVANTAGE_NORMALISATIONS, name)


def loss_kwargs(name: str, settings: Mapping[str, float]) -> dict[str, float]:
    """The subset of `settings` the loss `name` accepts, over its defaults.

    E.g. loss_kwargs("dapo", {"eps_max": 5, "eps_high": 0.3}) == {"eps_low": 0.2, "eps_high": 0.3}.
    """
    defaults = _lookup("loss", LOSS_PARAMETERS, name)
    return {key: float(settings.get(key, default)) for key, default in defaults.items()}
