"""Where a resumed run continues, decided before anything in the run directory is written.

The newest checkpoint that passes every check is used; a damaged newer one is skipped with a
warning that names its file and what is wrong (the metrics rows after the checkpoint used are
dropped and computed again, as after any crash). When every checkpoint is damaged, one
InputError says why. The run's metrics.jsonl must hold every step up to that checkpoint (a
missing file or a gap would lose reported steps: an error), and max_steps may not end the run
before a step it already reported.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from scalerl.errors import ConfigError, InputError
from scalerl.train.checkpoint.save_load import checkpoint_folders
from scalerl.train.records.metrics_log import missing_steps, nonfinite_cells, read_numbered_rows

Restored = TypeVar("Restored")


def newest_intact(run_dir: str | Path, read: Callable[[Path], Restored]) -> tuple[Path, Restored, list[str]] | None:
    """(checkpoint folder, what `read` made of it, warnings) of the newest checkpoint `read`
    accepts; None when the run has no checkpoint. `read` raises InputError for a damaged one."""
    problems: list[str] = []
    for folder in reversed(checkpoint_folders(run_dir)):
        try:
            restored = read(folder)
        except InputError as error:
            problems.append(str(error))
            continue
        warnings = [
            f"warning: {problem}; resuming from the older checkpoint {folder.name} instead" for problem in problems
        ]
        return folder, restored, warnings
    if problems:
        older = "every older checkpoint is damaged too" if len(problems) > 1 else "there is no older checkpoint"
        raise InputError(f"cannot resume: {problems[0]}; {older} (start a new run with another --out)")
    return None


def steps_text(steps: list[int]) -> str:
    """[3, 4, 5, 9] -> '3-5, 9' (at most a few ranges)."""
    ranges: list[list[int]] = []
    for step in steps:
        if ranges and step == ranges[-1][1] + 1:
            ranges[-1][1] = step
        else:
            ranges.append([step, step])
    texts = [f"{low}-{high}" if high > low else str(low) for low, high in ranges[:4]]
    return ", ".join(texts) + (", ..." if len(ranges) > 4 else "")


def check_kept_rows(metrics_path: Path, numbered: list[tuple[int, dict]]) -> None:
    """InputError naming the lines when the rows a resume keeps (line number, row) hold a NaN or an
    infinity, repeat a step or go back in steps: carried on, they would be read as the run's
    curve (a fit, a report) and the run would append after them."""
    bad = [(number, row["step"], cells) for number, row in numbered if (cells := nonfinite_cells(row))]
    if bad:
        lines = "; ".join(f"line {number} (step {step}): {', '.join(cells[:4])}" for number, step, cells in bad[:4])
        raise InputError(
            f"{metrics_path} holds values that are not finite numbers ({lines}"
            f"{'; ...' if len(bad) > 4 else ''}); scalerl never writes them: fix or delete those "
            "lines, or start a new run with another --out"
        )
    first_line: dict[int, int] = {}
    highest = None
    for number, row in numbered:
        step = row["step"]
        if step in first_line:
            raise InputError(
                f"{metrics_path}: lines {first_line[step]} and {number} both hold step {step}; "
                "delete the repeated line, or start a new run with another --out"
            )
        if highest is not None and step < highest:
            raise InputError(
                f"{metrics_path}: line {number} holds step {step} after step {highest}; "
                "rows are in step order: fix the file, or start a new run with another --out"
            )
        first_line[step], highest = number, step


def check_rows_for_resume(metrics_path: Path, checkpoint_step: int | None, max_steps: int) -> list[str]:
    """Notes on the rows a resume from `checkpoint_step` (None: no checkpoint, start over) drops.

    InputError when the file lost rows the checkpoint covers (deleted, lines removed) or those rows
    are damaged (check_kept_rows); ConfigError
    when max_steps is below a step already reported. Damaged lines are InputErrors of read_rows.
    """
    numbered = read_numbered_rows(metrics_path)
    steps = [row["step"] for _, row in numbered]
    kept_until = -1 if checkpoint_step is None else checkpoint_step
    if kept_until > 0 and not metrics_path.exists():
        raise InputError(
            f"{metrics_path} is missing but the run has a checkpoint of step {kept_until}: "
            f"resuming would lose the rows of steps 0-{kept_until}; put the file back, or "
            "start a new run with another --out"
        )
    check_kept_rows(metrics_path, [(number, row) for number, row in numbered if row["step"] <= kept_until])
    missing = missing_steps([step for step in steps if step <= kept_until], kept_until)
    if missing:
        raise InputError(
            f"{metrics_path} has no rows for steps {steps_text(missing)} although the run's "
            f"checkpoint is at step {kept_until}: resuming would lose them; put the rows back, "
            "or start a new run with another --out"
        )
    reached = max([*steps, kept_until, 0])
    if max_steps < reached:
        raise ConfigError(
            f"max_steps: {max_steps} is below step {reached}, which the run already reached "
            f"({metrics_path}); a resume continues the run: pass --max-steps {reached} or more"
        )
    dropped = sorted(step for step in steps if step > kept_until)
    if not dropped:
        return []
    if checkpoint_step is None:
        return [f"no checkpoint yet: the run starts over; the rows of steps {steps_text(dropped)} are computed again"]
    return [
        f"resuming from the checkpoint of step {checkpoint_step}: the rows of steps "
        f"{steps_text(dropped)}, written after it, are computed again"
    ]
