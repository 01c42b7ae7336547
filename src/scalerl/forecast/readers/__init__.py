"""Read one run's compute-performance curve (compute, reward) from the logs people have.

One module per format (csv_format, wandb, jsonl, trainer_state, verl_console, tensorboard);
`formats.read_table` picks the reader, `curve.curve_from_table` picks the columns, keeps one run
(series.py: runs are never mixed) and checks the cells once for all formats.
"""

from __future__ import annotations

from pathlib import Path

from scalerl.forecast.readers.columns import DEFAULT_X_COLUMNS, DEFAULT_Y_COLUMNS
from scalerl.forecast.readers.curve import MAX_POINTS, Curve, bin_points, curve_from_table, merge_duplicate_compute
from scalerl.forecast.readers.formats import is_tensorboard_file, log_in_folder, read_table
from scalerl.forecast.readers.table import LogTable, cell_to_float

__all__ = [
    "Curve",
    "LogTable",
    "read_curve",
    "read_table",
    "curve_from_table",
    "merge_duplicate_compute",
    "bin_points",
    "cell_to_float",
    "is_tensorboard_file",
    "DEFAULT_X_COLUMNS",
    "DEFAULT_Y_COLUMNS",
    "MAX_POINTS",
]


def read_curve(
    path: str | Path,
    x: str | None = None,
    y: str | None = None,
    *,
    run: str | None = None,
    group: str | None = None,
    segment: int | None = None,
    cumulative: bool | None = None,
    allow_partial: bool = False,
) -> Curve:
    """Read `path` and return one run's (x, y) curve.

    Without `x` / `y` the default columns of the common trainers are tried (columns.py).
    A folder is read by what it holds (a scalerl run folder, a TRL checkpoint or output folder,
    TensorBoard: formats.log_in_folder).
    `run` / `group` pick one series of a long-format file or one run of a TensorBoard folder;
    `segment` (1-based) one of several runs appended in one file; `cumulative` accumulates a
    per-step x (None: only for known per-step columns); `allow_partial` fits the readable part
    of a corrupt TensorBoard file. Raises InputError naming the problem for any bad input.
    """
    path = Path(path)
    table = read_table(path, run=run, allow_partial=allow_partial)
    tensorboard_run = is_tensorboard_file(path) or (path.is_dir() and log_in_folder(path)[0] is None)
    return curve_from_table(
        table,
        x=x,
        y=y,
        source=str(path),
        run=None if tensorboard_run else run,
        group=group,
        segment=segment,
        cumulative=cumulative,
    )
