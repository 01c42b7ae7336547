"""The `rl` section of a run's config: the algorithm blocks by name and the loss parameters, all
validated from the specs of scalerl.rl.registry (nothing here names a loss).

In config files, `--set` and `scalerl config keys` each registered loss parameter is one key of
the section, its spec's config_key (`rl.cispo_eps_max`, `rl.grpo_kl_coef`, ...); the dataclass
holds them together in `loss_params`. Torch-free, like the rest of the config.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from scalerl.checks import require, require_choice, require_fraction
from scalerl.errors import ConfigError
from scalerl.rl.registry import ADVANTAGE_NORMALISATIONS, AGGREGATIONS, LOSSES, loss_parameters

LOSS_PARAMS_FIELD = "loss_params"


class ParamValues(Mapping[str, float]):
    """Read-only parameter values by config key; hashable and picklable, as a frozen config is."""

    def __init__(self, values: Mapping[str, float] | None = None) -> None:
        self._values = dict(values or {})

    def __getitem__(self, key: str) -> float:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __hash__(self) -> int:
        return hash(frozenset(self._values.items()))

    def __repr__(self) -> str:
        return f"ParamValues({self._values!r})"


def checked_loss_params(values: Mapping[str, Any]) -> ParamValues:
    """Every registered loss parameter by config key: the given values checked by their spec
    (finite, inside its bounds), the others at their defaults. A key no loss declares is an error."""
    specs = {spec.config_key: spec for spec in loss_parameters()}
    unknown = [key for key in values if key not in specs]
    if unknown:
        raise ConfigError(
            f"rl.{unknown[0]}: no registered loss has this parameter (loss parameters: {', '.join(specs)})"
        )
    return ParamValues({key: spec.check(values.get(key, spec.default), f"rl.{key}") for key, spec in specs.items()})


@dataclass(frozen=True)
class RLConfig:
    """The algorithm: loss and its parameters, aggregation, advantages, filtering, curriculum.

    A field's `help` is its meaning in `scalerl config keys` and the CLI; `choices` names the
    registry catalog whose entries (and their meanings) the field selects from."""

    loss: str = field(default="cispo", metadata={"help": "policy loss", "choices": LOSSES})
    loss_params: Mapping[str, float] = field(
        default_factory=ParamValues,
        metadata={"help": "the loss parameters, one key each (rl.cispo_eps_max, ...; meanings from their specs)"},
    )
    aggregation: str = field(default="prompt", metadata={"help": "loss aggregation", "choices": AGGREGATIONS})
    advantage_norm: str = field(
        default="batch", metadata={"help": "advantage normalisation", "choices": ADVANTAGE_NORMALISATIONS}
    )
    zero_variance_filter: bool = field(
        default=True, metadata={"help": "drop prompt groups whose completions all got the same reward"}
    )
    npr: bool = field(
        default=True, metadata={"help": "no-positive-resampling: retire prompts the policy solves reliably"}
    )
    npr_threshold: float = field(
        default=0.9, metadata={"help": "no-positive-resampling: pass rate at which a prompt is retired"}
    )
    min_kept_prompts: int = field(
        default=1, metadata={"help": "a step whose filters keep fewer prompts than this makes no update (1: any)"}
    )

    def __post_init__(self) -> None:
        require_choice(self.loss, "rl.loss", tuple(LOSSES))
        object.__setattr__(self, LOSS_PARAMS_FIELD, checked_loss_params(self.loss_params))
        require_choice(self.aggregation, "rl.aggregation", tuple(AGGREGATIONS))
        require_choice(self.advantage_norm, "rl.advantage_norm", tuple(ADVANTAGE_NORMALISATIONS))
        require_fraction(self.npr_threshold, "rl.npr_threshold", open_low=True)
        whole_number = isinstance(self.min_kept_prompts, int) and not isinstance(self.min_kept_prompts, bool)
        require(
            whole_number and self.min_kept_prompts >= 1,
            "rl.min_kept_prompts",
            f"must be an integer >= 1, got {self.min_kept_prompts!r}",
        )

    def loss_kwargs(self) -> dict[str, float]:
        """The selected loss's keyword arguments, e.g. {"eps_max": 4.0} for cispo."""
        return LOSSES[self.loss].kwargs(self.loss_params)

    def needs_reference(self) -> bool:
        """Whether the selected loss, with these parameters, needs the frozen reference policy's
        log-probs (GRPO with rl.grpo_kl_coef > 0)."""
        return LOSSES[self.loss].needs_reference(self.loss_kwargs())

    def to_dict(self) -> dict[str, Any]:
        """The section as config files hold it: one key per field, loss parameters spread out."""
        values: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            values.update(dict(value) if item.name == LOSS_PARAMS_FIELD else {item.name: value})
        return values


def spread_loss_params(field_types: Mapping[str, Any]) -> dict[str, Any]:
    """RLConfig's field types as config keys: `loss_params` replaced, in place, by one float key
    per registered loss parameter."""
    spread: dict[str, Any] = {}
    for name, field_type in field_types.items():
        if name == LOSS_PARAMS_FIELD:
            spread.update({spec.config_key: float for spec in loss_parameters()})
        else:
            spread[name] = field_type
    return spread


def gather_loss_params(values: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of `RLConfig.to_dict`'s spreading: loss-parameter keys collected into
    `loss_params` (keyword arguments for RLConfig)."""
    keys = {spec.config_key for spec in loss_parameters()}
    gathered = {name: value for name, value in values.items() if name not in keys}
    gathered[LOSS_PARAMS_FIELD] = {name: value for name, value in values.items() if name in keys}
    return gathered
