"""Default `--x` / `--y` columns: the names the common trainers log, in order of preference.

Compute-like x columns come first (a forecast is in compute), then step counters. A name
ending in `*` is a pattern; when a pattern (or a tier of names) matches several columns, the
choice is the user's and the error lists the candidates.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Collection, Iterable

from scalerl.errors import InputError

# Each tier is tried in order; within a tier, names are in order of preference.
DEFAULT_X_TIERS: tuple[tuple[str, ...], ...] = (
    ("gpu_hours", "compute", "flops", "tokens"),
    ("eval_num_tokens", "num_tokens", "eval/num_tokens", "train/num_tokens", "perf/total_num_tokens"),
    ("training/global_step", "train/global_step", "global_step", "step", "Step", "_step"),
)
DEFAULT_Y_TIERS: tuple[tuple[str, ...], ...] = (
    ("val_pass_rate", "val/pass_rate", "eval/pass_rate"),  # scalerl: metrics.jsonl, TRL-style, its TensorBoard tag
    ("eval_reward", "eval/reward"),
    ("eval_rewards/*/mean", "eval/rewards/*/mean"),  # TRL: one column per reward function
    ("val-core/*/reward/mean@1",),
    ("val-core/*/acc/mean@1",),  # verl, when the reward function also returns `acc`
    ("val/test_score/*",),
    ("reward", "train/reward"),
    ("rewards/*/mean", "train/rewards/*/mean"),
)
# The reward of the rollouts being trained on (TRL's `reward`, `rewards/<fn>/mean`; verl's
# `critic/score/mean`), not of a held-out evaluation: it runs above the evaluation curve, and its
# plateau is the training prompts'. The bare `reward` is one when the log is a trainer's.
TRAINING_REWARD_COLUMNS: tuple[str, ...] = (
    "train/reward",
    "rewards/*/mean",
    "train/rewards/*/mean",
    "critic/score/mean",
    "critic/rewards/mean",
)
TRAINER_COLUMNS: tuple[str, ...] = (
    "loss",
    "learning_rate",
    "grad_norm",
    "kl",
    "entropy",
    "epoch",
    "completion_length",
    "train/loss",
    "actor/entropy",
    "actor/pg_loss",
)
DEFAULT_X_COLUMNS: tuple[str, ...] = tuple(name for tier in DEFAULT_X_TIERS for name in tier)
DEFAULT_Y_COLUMNS: tuple[str, ...] = tuple(name for tier in DEFAULT_Y_TIERS for name in tier)

# verl logs the tokens of each step, not a running total: as compute they must be accumulated.
PER_STEP_COLUMNS: frozenset[str] = frozenset({"perf/total_num_tokens"})
STEP_COLUMNS: tuple[str, ...] = DEFAULT_X_TIERS[-1]


def matches(pattern: str, names: Collection[str]) -> list[str]:
    """Column names equal to `pattern`, or matching it when it holds a `*` wildcard."""
    if "*" not in pattern:
        return [pattern] if pattern in names else []
    return [name for name in names if fnmatch.fnmatchcase(name, pattern)]


def choose_y(names: Collection[str], requested: str | None, source: str) -> str:
    """The requested y column, or the one default present; several candidates -> InputError listing them."""
    if requested is not None:
        return require(names, requested, source)
    for tier in DEFAULT_Y_TIERS:
        found = list(dict.fromkeys(name for pattern in tier for name in matches(pattern, names)))
        if len(found) > 1:  # e.g. two verl datasets, or `reward` beside `train/reward`: not ours to pick
            raise InputError(
                f"several reward columns in {source} could be the y axis ({', '.join(found)}); pass --y NAME"
            )
        if found:
            return found[0]
    raise InputError(
        f"none of the default y columns ({', '.join(DEFAULT_Y_COLUMNS)}) is in {source}; "
        f"pass --y (available columns: {available(names)})"
    )


def choose_x(names: Collection[str], requested: str | None, usable: Callable[[str], bool], source: str) -> str:
    """The requested x column, or the first default present with at least one row shared with y.

    `usable(name) -> bool` says whether that column has a value in some row where y has one (TRL's
    `trainer_state.json` logs tokens on training rows only, so its evaluation rows use the step).
    """
    if requested is not None:
        return require(names, requested, source)
    present = [name for name in DEFAULT_X_COLUMNS if name in names]
    for name in present:
        if usable(name):
            return name
    if present:
        return present[0]
    raise InputError(
        f"none of the default x columns ({', '.join(DEFAULT_X_COLUMNS)}) is in {source}; "
        f"pass --x (available columns: {available(names)})"
    )


def training_reward_note(y_name: str, names: Collection[str]) -> str | None:
    """A note when y is a training reward (TRAINING_REWARD_COLUMNS, or `reward` in a log holding
    a trainer's columns), None otherwise."""
    trainer_log = any(name in names for name in TRAINER_COLUMNS)
    if not (
        any(matches(pattern, [y_name]) for pattern in TRAINING_REWARD_COLUMNS) or (y_name == "reward" and trainer_log)
    ):
        return None
    return (
        f"y is '{y_name}', a training reward (of the rollouts being trained on), not a held-out "
        "evaluation: it runs above an evaluation curve and levels off at the training prompts' "
        "reward; pass --y with an evaluation column when the log has one"
    )


def require(names: Collection[str], requested: str, source: str) -> str:
    """`requested` when it is a column; InputError listing the columns otherwise."""
    if requested not in names:
        raise InputError(f"column '{requested}' not found in {source}; available columns: {available(names)}")
    return requested


def available(names: Iterable[str], limit: int = 40) -> str:
    """Column names for an error message (the first `limit`, then how many more)."""
    names = list(names)
    if not names:
        return "none"
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown} and {len(names) - limit} more"
