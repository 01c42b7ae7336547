"""Several runs for `compare`, `plot` and `report`: their labels (`--label`, or `NAME=PATH`), the fit
window of each (`--fit-fraction` / `--fit-until`, the meaning `fit` gives them) and a warning when
their axes differ. Imports no reader at module level (`scalerl --help` loads this module).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from scalerl.errors import InputError

if TYPE_CHECKING:
    from scalerl.forecast.readers import Curve

LABEL_OPTION = typer.Option(
    [], "--label", help="Name of each run, in the order given (repeat it once per run); or give a run as NAME=PATH."
)
FIT_UNTIL_OPTION = typer.Option(None, "--fit-until", help="Fit each run only on its points with x <= X.")
FIT_FRACTION_OPTION = typer.Option(
    None, "--fit-fraction", help="Fit each run only on x <= F * its max(x): decide from the first part of runs."
)


def named_paths(arguments: list[Path]) -> tuple[list[Path], list[str | None]]:
    """(paths, the name given with each or None): `NAME=PATH` names a run when PATH exists and the
    argument itself is not a file."""
    paths, names = [], []
    for argument in arguments:
        name, equals, rest = str(argument).partition("=")
        if equals and name and rest and not argument.exists() and Path(rest).exists():
            paths.append(Path(rest))
            names.append(name)
        else:
            paths.append(argument)
            names.append(None)
    return paths, names


def chosen_labels(default: list[str], given: list[str | None], labels: list[str]) -> list[str]:
    """Each run's label: `--label` (one per run, in order), else NAME of NAME=PATH, else `default`;
    InputError for a wrong count or a label used twice."""
    if labels and len(labels) != len(default):
        raise InputError(f"--label given {len(labels)} time(s) for {len(default)} runs: give one per run, in order")
    if labels and any(name is not None for name in given):
        raise InputError("name runs either with --label or as NAME=PATH, not both")
    chosen = labels or [name if name is not None else fallback for name, fallback in zip(given, default)]
    repeated = sorted({label for label in chosen if chosen.count(label) > 1})
    if repeated:
        raise InputError(f"run label(s) used twice: {', '.join(repeated)}")
    return chosen


def read_labelled_runs(arguments: list[Path], runs: list[str], reading, labels: list[str]) -> dict[str, Curve]:
    """{label: curve} of the runs the arguments name (reading.read_runs), labelled by `--label`,
    `NAME=PATH` or the file names (fit_inputs.run_labels)."""
    from scalerl.cli.fit_inputs import run_labels
    from scalerl.cli.reading import read_runs

    paths, given = named_paths(arguments)
    curves = read_runs(paths, runs, reading, run_labels(paths))
    if len(curves) != len(given) and any(name is not None for name in given):
        raise InputError("NAME=PATH names the one run of PATH; name several --run of one file with --label")
    given = given if len(curves) == len(given) else [None] * len(curves)
    return dict(zip(chosen_labels(list(curves), given, labels), curves.values()))


def fit_windows(
    curves: dict[str, Curve], fit_until: float | None, fit_fraction: float | None
) -> tuple[dict[str, Curve], dict[str, Curve | None]]:
    """({label: the part of the curve to fit}, {label: the points held out after it, or None})."""
    from scalerl.forecast.readers.curve import curve_up_to

    parts = {name: curve_up_to(curve, fit_until, fit_fraction) for name, curve in curves.items()}
    return {name: fitted for name, (fitted, _) in parts.items()}, {name: held for name, (_, held) in parts.items()}
