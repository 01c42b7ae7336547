"""The run's `metrics.jsonl`: one JSON object per line, appended atomically, truncated on resume.

Each append writes one complete line, flushes and fsyncs before returning, so after a crash
(even `kill -9`) the file holds whole rows plus at most one torn last line, which readers ignore
and `truncate_after_step` removes. Non-finite floats are written as null (strict JSON).
Optionally mirrors every numeric column to TensorBoard.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Mapping

from scalerl.errors import InputError

METRICS_FILE_NAME = "metrics.jsonl"

# Columns of every training row, in order (issue 5); validation rows add `val_pass_rate`.
TRAIN_COLUMNS = (
    "step", "samples", "tokens_generated", "tokens_trained", "flops", "device_hours",
    "train_reward", "kept_prompts", "pool_size", "mean_length", "truncation_rate", "entropy",
    "loss", "lr", "grad_norm",
)


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def format_row(row: Mapping[str, Any]) -> str:
    """One line of strict JSON (no NaN tokens), newline-terminated."""
    clean = {key: _json_safe(value) for key, value in row.items()}
    return json.dumps(clean, allow_nan=False) + "\n"


def append_row(path: str | os.PathLike, row: Mapping[str, Any]) -> None:
    """Append one row and make it durable: write, flush, fsync."""
    line = format_row(row).encode()
    with open(path, "ab") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def _complete_lines(data: bytes) -> list[bytes]:
    """Lines of `data` that end with a newline (a torn last line is dropped)."""
    lines = data.split(b"\n")
    return [line for line in lines[:-1] if line.strip()]


def read_rows(path: str | os.PathLike) -> list[dict[str, Any]]:
    """All complete rows of a metrics file (a missing file has no rows)."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    for number, line in enumerate(_complete_lines(path.read_bytes()), start=1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            raise InputError(f"{path}: line {number} is not valid JSON") from None
    return rows


def truncate_after_step(path: str | os.PathLike, last_step: int) -> int:
    """Keep only complete rows with step <= last_step (atomic rewrite); return rows kept.

    Used on resume: rows written after the checkpoint being resumed are dropped, so the resumed
    run appends them again exactly once.
    """
    path = Path(path)
    if not path.exists():
        return 0
    kept = [line for line in _complete_lines(path.read_bytes())
            if json.loads(line)["step"] <= last_step]
    temp_path = path.with_suffix(".jsonl.tmp")
    with open(temp_path, "wb") as handle:
        handle.write(b"".join(line + b"\n" for line in kept))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp_path, path)
    return len(kept)


class TensorBoardMirror:
    """Writes numeric columns of each row as scalars at the row's step (if tensorboard exists)."""

    def __init__(self, log_dir: str | os.PathLike):
        from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package

        self._writer = SummaryWriter(log_dir=str(log_dir))

    def write(self, row: Mapping[str, Any]) -> None:
        step = int(row["step"])
        for key, value in row.items():
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                if math.isfinite(value):
                    self._writer.add_scalar(key, value, global_step=step)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


def open_tensorboard(log_dir: str | os.PathLike) -> TensorBoardMirror | None:
    """A TensorBoard mirror, or None when tensorboard is not installed."""
    try:
        return TensorBoardMirror(log_dir)
    except ImportError:
        return None


class MetricsLog:
    """The run's metrics sink: JSONL file (always) plus TensorBoard and W&B (optional), every
    mirror under the names of the JSONL columns."""

    def __init__(self, run_dir: str | os.PathLike, *, tensorboard: bool = False, mirrors: tuple = ()):
        self.path = Path(run_dir) / METRICS_FILE_NAME
        tensorboard_mirror = open_tensorboard(Path(run_dir) / "tensorboard") if tensorboard else None
        self._mirrors = [m for m in (tensorboard_mirror, *mirrors) if m is not None]

    @classmethod
    def for_config(cls, run_dir: str | os.PathLike, config: Any) -> "MetricsLog":
        """The log a run's config asks for: `tensorboard`, `wandb` (project, run name)."""
        mirrors = ()
        if config.wandb:
            from scalerl.train.wandb_log import WandbMirror

            mirrors = (WandbMirror(run_dir, project=config.wandb_project, run_name=config.wandb_run_name,
                                   config=config.to_dict()),)
        return cls(run_dir, tensorboard=config.tensorboard, mirrors=mirrors)

    def append(self, row: Mapping[str, Any]) -> None:
        append_row(self.path, row)
        for mirror in self._mirrors:
            mirror.write(row)

    def rows(self) -> list[dict[str, Any]]:
        return read_rows(self.path)

    def close(self) -> None:
        for mirror in self._mirrors:
            mirror.close()


class RunProgress:
    """A rich progress bar on stderr: step, last train reward, last validation pass rate."""

    def __init__(self, total_steps: int, *, enabled: bool = True, start_step: int = 0):
        self._enabled = enabled
        self._total = total_steps
        self._start = start_step
        self._progress = None
        self._task_id = None

    def __enter__(self) -> "RunProgress":
        if self._enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("step"), MofNCompleteColumn(), BarColumn(), TimeElapsedColumn(),
                TextColumn("{task.fields[rewards]}"), console=Console(stderr=True))
            self._progress.start()
            self._task_id = self._progress.add_task("train", total=self._total, completed=self._start,
                                                    rewards="")
        return self

    def update(self, step: int, train_reward: float | None, val_pass_rate: float | None) -> None:
        if self._progress is None:
            return
        parts = []
        if train_reward is not None:
            parts.append(f"reward {train_reward:+.3f}")
        if val_pass_rate is not None:
            parts.append(f"val pass rate {val_pass_rate:.3f}")
        self._progress.update(self._task_id, completed=step, rewards="  ".join(parts))

    def note(self, message: str) -> None:
        if self._progress is not None:
            self._progress.console.print(message)

    def __exit__(self, *exc_info) -> None:
        if self._progress is not None:
            self._progress.stop()
