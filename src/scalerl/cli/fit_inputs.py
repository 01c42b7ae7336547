"""The `fit`, `compare` and `plot` options, parsed and checked: compute values, the fit window, the
reward range, run labels, `--reward-range 0,1` in argv, and the options as fit_sigmoid keywords.
A bad value raises InputError (one `error: ...` line from the command). Imports neither numpy
nor the readers: `scalerl --help` loads this module.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from scalerl.errors import InputError

if TYPE_CHECKING:
    import numpy as np

    from scalerl.forecast.readers import Curve

MAX_REWARD_MAGNITUDE = 1e6
PAIR_OPTIONS = ("--reward-range",)
REWARD_RANGE_OPTION = typer.Option(
    None,
    "--reward-range",
    metavar="LOW HIGH",
    help="Range rewards must lie in (the ceiling A is bounded by it): `-1 1` or `-1,1`. Default: [0, 1] when "
    "every reward lies in it, else inferred as open (the ceiling in the reward's own units, said in the output).",
)
MARGIN_HELP = (
    "Ceilings within this margin count as equal (default: the paper's 0.02 of the reward's unit: "
    "0.02 for pass rates, 2 with --reward-range 0 100)."
)


def check_finite_options(**values: float | None) -> None:
    """Numeric options must be finite when given (typer accepts `nan` and `inf` as floats)."""
    for name, value in values.items():
        if value is not None and not math.isfinite(value):
            raise InputError(f"--{name.replace('_', '-')} must be a finite number, got {value}")


def parse_compute_values(texts: list[str], option: str) -> list[float]:
    """`--predict-at 1e4 --predict-at 2e4` or `--predict-at 1e4,2e4`: non-negative finite numbers."""
    values = []
    for text in texts:
        for piece in text.split(","):
            piece = piece.strip()
            try:
                value = float(piece)
            except ValueError:
                raise InputError(f"{option} takes numbers, got {piece!r}") from None
            if not math.isfinite(value) or value < 0:
                raise InputError(f"{option} values must be finite and >= 0, got {piece}")
            values.append(value)
    return values


def fit_window_limit(compute: np.ndarray, fit_until: float | None, fit_fraction: float | None) -> float | None:
    """Largest compute used for fitting: `fit_until`, or `fit_fraction * max(compute)`, or None (all)
    (scalerl.forecast.readers.curve.fit_window_limit)."""
    from scalerl.forecast.readers.curve import fit_window_limit as limit

    return limit(compute, fit_until, fit_fraction)


def check_reward_range(curve: Curve, reward_range: tuple[float, float]) -> None:
    """Rewards must lie in --reward-range (the ceiling is bounded by it); say how to widen it."""
    low, high = reward_range
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise InputError(f"--reward-range needs finite LOW < HIGH, got {low:g} {high:g}")
    if max(abs(low), abs(high)) > MAX_REWARD_MAGNITUDE:
        raise InputError(
            f"--reward-range bounds must be within +-{MAX_REWARD_MAGNITUDE:g} "
            f"(rewards are scores such as pass rates), got {low:g} {high:g}"
        )
    if curve.reward.min() < low or curve.reward.max() > high:
        raise InputError(
            f"rewards in {curve.source} ('{curve.y_name}') go from {curve.reward.min():.4g} to "
            f"{curve.reward.max():.4g}, outside the reward range [{low:g}, {high:g}]; "
            "pass --reward-range LOW HIGH (e.g. --reward-range -1 1 for +1/-1 rewards)"
        )


def reward_range_for(
    curves: list[Curve], given: tuple[float, float] | None
) -> tuple[tuple[float, float] | None, list[str]]:
    """(the reward range to fit with, a note when it was inferred).

    `given` (--reward-range) is used as it is; without it, [0, 1] when every reward lies in it
    (pass rates, accuracies), else the range is left open (None): the ceiling A is then in the
    reward's own units, bounded by the data (at most R0 + 3 x the observed gain), as for TRL's
    summed rewards or a reward of -1..1.
    """
    from scalerl.forecast.reward_unit import inferred_reward_range, open_range_note

    reward_range = inferred_reward_range([curve.reward for curve in curves], given)
    note = None if given is not None else open_range_note(curves)
    return reward_range, [] if note is None else [note]


def fit_options(r0, min_x, loss, level, reward_range, n_draws, fit_through_collapse, seed=None) -> dict:
    """Command-line options as fit_sigmoid keywords (None: leave the library default)."""
    return {
        "r0": r0,
        "min_compute": min_x,
        "loss": loss,
        "level": level,
        "reward_range": None if reward_range is None else tuple(reward_range),
        "n_draws": n_draws,
        "fit_through_collapse": fit_through_collapse or None,
        "seed": seed,
    }


def run_labels(paths: list[Path]) -> list[str]:
    """Short distinct names for runs: the file stem, or parent/stem when stems collide."""
    stems = [path.stem if path.suffix else path.name for path in paths]
    labels = [
        f"{path.resolve().parent.name}/{stem}" if stems.count(stem) > 1 else stem for path, stem in zip(paths, stems)
    ]
    if len(set(labels)) < len(labels):
        labels = [str(path) for path in paths]
    return labels


def split_pair_values(argv: list[str]) -> list[str]:
    """`--reward-range 0,1`, `--reward-range=0,1` and `--reward-range "0 1"` -> `--reward-range 0 1`
    (the option takes two values; people write them with a comma as often as with a space)."""
    result: list[str] = []
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == "--":
            return result + argv[index:]
        name, equals, value = token.partition("=")
        following = argv[index + 1] if index + 1 < len(argv) else ""
        if name in PAIR_OPTIONS and equals:
            pieces = value.replace(",", " ").split()
        elif token in PAIR_OPTIONS and ("," in following or " " in following.strip()):
            pieces = following.replace(",", " ").split()
            index += 1
        else:
            result.append(token)
            index += 1
            continue
        result += [name, *pieces]
        index += 1
    return result
