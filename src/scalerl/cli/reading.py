"""Reading options shared by `fit`, `compare` and `plot`: which run of a log, and how to read it.

`--run NAME` / `--group COLUMN` pick one series of a long-format log (or one run of a
TensorBoard folder), `--segment N` one of several runs appended in one file, `--cumulative`
accumulates a per-step compute column, `--allow-partial` fits the readable part of a corrupt
TensorBoard file. The reader's notes (resumes, accumulation, averaging, binning) go to stderr.
The readers are imported when a log is read, not when the command line is parsed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from scalerl.errors import InputError
from scalerl.escaping import for_rich

if TYPE_CHECKING:
    from scalerl.forecast.readers import Curve

GROUP_OPTION = typer.Option(
    None, "--group", help="Column naming the run of each row (default: run, run_name, run_id, series)."
)
SEGMENT_OPTION = typer.Option(
    None, "--segment", min=1, help="Use run N of several appended in one file (x goes back to its start)."
)
CUMULATIVE_OPTION = typer.Option(
    None,
    "--cumulative/--no-cumulative",
    help="Accumulate a per-step compute column (default: only known per-step columns, "
    "e.g. verl's perf/total_num_tokens).",
)
ALLOW_PARTIAL_OPTION = typer.Option(
    False, "--allow-partial", help="Fit the readable part of a corrupt or truncated TensorBoard file (with a warning)."
)
RUN_HELP = "Series to use in a log holding several (a run column value, a W&B chart run, a TensorBoard run folder)."


@dataclass(frozen=True)
class Reading:
    """How to read each log: columns and which run of it."""

    x: str | None = None
    y: str | None = None
    group: str | None = None
    segment: int | None = None
    cumulative: bool | None = None
    allow_partial: bool = False

    def read(self, path: Path, run: str | None = None) -> Curve:
        """The curve of `run` (or of the only run) in `path`."""
        from scalerl.forecast.readers import read_curve

        return read_curve(
            path,
            x=self.x,
            y=self.y,
            run=run,
            group=self.group,
            segment=self.segment,
            cumulative=self.cumulative,
            allow_partial=self.allow_partial,
        )


def read_runs(paths: list[Path], runs: list[str], reading: Reading, labels: list[str]) -> dict[str, Curve]:
    """{label: curve}: one curve per path, or, for one path and several --run, one per run.

    InputError when a file is given twice (a run compared with itself tells nothing).
    """
    resolved = [path.resolve() for path in paths]
    repeated = sorted({str(path) for path, key in zip(paths, resolved) if resolved.count(key) > 1})
    if repeated:
        raise InputError(f"{', '.join(repeated)} given twice: compare needs different runs")
    if len(paths) == 1 and len(runs) > 1:
        if len(set(runs)) < len(runs):
            raise InputError("a --run is given twice: compare needs different runs")
        return {run: reading.read(paths[0], run) for run in runs}
    if len(runs) > 1:
        raise InputError("several --run values need exactly one log file (the one holding those runs)")
    run = runs[0] if runs else None
    return {label: reading.read(path, run) for label, path in zip(labels, paths)}


def curve_notes(curves: dict[str, Curve]) -> list[str]:
    """What the reader did to each curve (resumes, segments, accumulation, averaging, binning),
    prefixed with the run's label when there are several runs. Said only once the command has
    succeeded: a failing command prints one `error:` line and nothing else."""
    labelled = len(curves) > 1
    return [f"{name}: {note}" if labelled else note for name, curve in curves.items() for note in curve.notes]


def say_notes(notes: list[str]) -> None:
    """Print each note on stderr as `note: ...` (user text escaped)."""
    from rich.console import Console

    console = Console(stderr=True)
    for note in notes:
        console.print(f"[yellow]note: {for_rich(note)}[/yellow]", highlight=False, soft_wrap=True)
