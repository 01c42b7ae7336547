"""The keys of a config dataclass: every settable dotted path, its type and declared field, a key
named by its unique leaf name, and the close keys suggested for an unknown one (TRL's and
transformers' names for them included).

Generic over the root dataclass. A section's keys are its fields, except the `rl` section, whose
`loss_params` field is one key per registered loss parameter (scalerl.rl.config). Torch-free.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import typing
from typing import Any

from scalerl.errors import ConfigError
from scalerl.parsing_limits import shown
from scalerl.rl.config import RLConfig, spread_loss_params
from scalerl.rl.registry import loss_parameters
from scalerl.train.config.trl_config import DIRECT_KEYS

# Names TRL / transformers users type, and the key that does the job here (suggestions only).
FOREIGN_KEY_NAMES: dict[str, str] = {
    "learning_rate": "optim.lr",
    "num_generations": "sampling.generations_per_prompt",
    "max_completion_length": "sampling.max_new_tokens",
    "batch_size": "sampling.prompts_per_step",
    "per_device_train_batch_size": "sampling.prompts_per_step",
    "max_grad_norm": "optim.grad_clip",
    "loss_type": "rl.loss",
    "scale_rewards": "rl.advantage_norm",
    "model_name_or_path": "model.path",
    "dataset": "task.name",
    "eval_steps": "eval_every",
    "save_steps": "checkpoint_every",
    "save_total_limit": "keep_checkpoints",
    "bf16": "dtype",
    "adam_epsilon": "optim.adam_eps",
    "report_to": "tensorboard",
    "num_train_epochs": "max_steps",
    "warmup_ratio": "optim.warmup_steps",
}
KEYS_COMMAND = "scalerl config keys"


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    # Fixed per class and slow to evaluate (~3 ms): `--set` resolves every key through it.
    return typing.get_type_hints(cls)


def field_types(cls: type) -> dict[str, Any]:
    """The keys of a section and their types (RLConfig: one per registered loss parameter in
    place of its loss_params)."""
    types = _type_hints(cls)
    return spread_loss_params(types) if cls is RLConfig else dict(types)


def field_paths(root: type) -> list[str]:
    """Every settable dotted path of `root`, e.g. ['model.path', ..., 'tensorboard']."""
    paths = []
    for name, field_type in field_types(root).items():
        if dataclasses.is_dataclass(field_type):
            paths.extend(f"{name}.{leaf}" for leaf in field_types(field_type))
        else:
            paths.append(name)
    return paths


def path_type(root: type, path: str) -> type:
    """The declared type of the key at dotted `path`."""
    cls: Any = root
    for part in path.split("."):
        cls = field_types(cls)[part]
    return cls


def config_field(root: type, path: str) -> dataclasses.Field | None:
    """The dataclass field declared for dotted `path` (its default and metadata), or None for a key
    no field declares (a loss parameter of the rl section)."""
    *sections, leaf = path.split(".")
    cls: Any = root
    for section in sections:
        cls = field_types(cls)[section]
    return next((item for item in dataclasses.fields(cls) if item.name == leaf), None)


def leaf_names(root: type) -> set[str]:
    """The last part of every dotted key of `root` (what a file may name a key by)."""
    return {path.rsplit(".", 1)[-1] for path in field_paths(root)}


def resolve_key(root: type, key: str) -> tuple[str, type]:
    """Full dotted path and type for `key` (a dotted path or an unambiguous leaf name)."""
    types = {p: path_type(root, p) for p in field_paths(root)}
    if key in types:
        return key, types[key]
    by_leaf = [p for p in types if p.rsplit(".", 1)[-1] == key]
    if len(by_leaf) == 1:
        return by_leaf[0], types[by_leaf[0]]
    if len(by_leaf) > 1:
        raise ConfigError(f"config key {shown(key)} is ambiguous: use one of {', '.join(by_leaf)}")
    raise ConfigError(unknown_key_message(root, key))


def close_keys(root: type, key: str, trl_names: bool = False) -> list[str]:
    """Up to 4 keys of `root` close to `key` (never `key` itself), TRL's names for them included
    (`trl_names`: TRL GRPOConfig names too, which a config file accepts)."""
    paths = [path for path in field_paths(root) if path != key]
    leaf = key.rsplit(".", 1)[-1]
    foreign = {
        **FOREIGN_KEY_NAMES,
        **{name: f"rl.{spec.config_key}" for spec in loss_parameters() for name in spec.trl_names},
    }
    close = [foreign[leaf]] if leaf in foreign else []
    close += [p for p in difflib.get_close_matches(key, paths, n=3, cutoff=0.6) if p not in close]
    leaf_to_path = {p.rsplit(".", 1)[-1]: p for p in paths}
    for near_leaf in difflib.get_close_matches(leaf, list(leaf_to_path), n=3, cutoff=0.6):
        if leaf_to_path[near_leaf] not in close:
            close.append(leaf_to_path[near_leaf])
    if trl_names and "." not in key:
        names = [name for name in DIRECT_KEYS if DIRECT_KEYS[name] in paths]
        close[:0] = [name for name in difflib.get_close_matches(key, names, n=2, cutoff=0.8) if name != key]
    return close[:4]


def unknown_key_message(root: type, key: str, trl_names: bool = False) -> str:
    """'unknown config key ...; did you mean ...?' with the closest keys of `root` (`close_keys`)."""
    close = close_keys(root, key, trl_names)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"unknown config key {shown(key)}{hint} (`{KEYS_COMMAND}` lists every key)"


def unknown_keys_message(root: type, keys: list[str], trl_names: bool = False) -> str:
    """`unknown_key_message` for one key; for several, every one with its closest keys in one line."""
    if len(keys) == 1:
        return unknown_key_message(root, keys[0], trl_names)
    parts = []
    for key in keys[:20]:
        close = close_keys(root, key, trl_names)
        parts.append(f"{shown(key)} (did you mean {', '.join(close)}?)" if close else shown(key))
    more = f" and {len(keys) - 20} more" if len(keys) > 20 else ""
    return f"unknown config keys {', '.join(parts)}{more} (`{KEYS_COMMAND}` lists every key)"
