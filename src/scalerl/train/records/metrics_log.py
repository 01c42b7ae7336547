"""The run's `metrics.jsonl`: one JSON object per line, appended atomically, truncated on resume.

Each append writes one complete line, flushes and fsyncs before returning, so after a crash
(even `kill -9`) the file holds whole rows plus at most one torn last line (no newline), which
readers ignore and `truncate_after_step` removes. Any other line that is not a JSON object with
an integer step is damage: InputError names the file and the line. Non-finite floats are written
as null (strict JSON).
Optionally mirrors every numeric column to TensorBoard (and W&B, scalerl.train.records.wandb_log) under its
grouped name (scalerl.train.records.metric_groups).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scalerl.errors import InputError
from scalerl.train.records.completions_table import COMPLETIONS_FILE, COMPLETIONS_TAG, CompletionsFeed, markdown_table
from scalerl.train.records.metric_groups import grouped_metric_name
from scalerl.train.records.safe_writes import write_atomically, writing

METRICS_FILE_NAME = "metrics.jsonl"

# Columns of every training row, in this order (what readers of metrics.jsonl may rely on);
# validation rows add `val_pass_rate`.
TRAIN_COLUMNS = (
    "step",
    "samples",
    "tokens_generated",
    "tokens_trained",
    "flops",
    "device_hours",
    "train_reward",
    "kept_prompts",
    "pool_size",
    "mean_length",
    "truncation_rate",
    "entropy",
    "loss",
    "lr",
    "grad_norm",
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
    """Append one row and make it durable: write, flush, fsync (OutputError names the file)."""
    line = format_row(row).encode()
    with writing(path), open(path, "ab") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def _complete_lines(data: bytes) -> list[tuple[int, bytes]]:
    """(line number, line) of each non-blank line of `data` that ends with a newline: a torn last
    line (a crash in the middle of an append) is left out."""
    lines = data.split(b"\n")[:-1]
    return [(number, line) for number, line in enumerate(lines, start=1) if line.strip()]


def _parse_row(path: Path, number: int, line: bytes) -> dict[str, Any]:
    """One complete line: a JSON object with an integer `step`, else InputError naming file and line."""
    try:
        row = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError(f"{path}: line {number} is not valid JSON; fix or delete that line") from None
    if not isinstance(row, dict) or isinstance(row.get("step"), bool) or not isinstance(row.get("step"), int):
        raise InputError(f"{path}: line {number} is not a metrics row (a JSON object with an integer step)")
    return row


def _read_lines(path: Path) -> list[tuple[int, bytes]]:
    try:
        return _complete_lines(path.read_bytes())
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror or error}") from None


def read_rows(path: str | os.PathLike) -> list[dict[str, Any]]:
    """All complete rows of a metrics file (a missing file has no rows)."""
    return [row for _, row in read_numbered_rows(path)]


def read_numbered_rows(path: str | os.PathLike) -> list[tuple[int, dict[str, Any]]]:
    """(line number, row) of every complete row of a metrics file (a missing file has no rows)."""
    path = Path(path)
    if not path.exists():
        return []
    return [(number, _parse_row(path, number, line)) for number, line in _read_lines(path)]


def nonfinite_cells(row: Mapping[str, Any]) -> list[str]:
    """The columns of a row holding NaN or an infinity (scalerl writes non-finite numbers as null,
    so such a value was put there by hand or by damage)."""
    return [key for key, value in row.items() if isinstance(value, float) and not math.isfinite(value)]


def truncate_after_step(path: str | os.PathLike, last_step: int) -> int:
    """Keep only complete rows with step <= last_step (atomic rewrite); return rows kept.

    Used on resume: rows written after the checkpoint being resumed are dropped, so the resumed
    run appends them again exactly once.
    """
    path = Path(path)
    if not path.exists():
        return 0
    kept = [line for number, line in _read_lines(path) if _parse_row(path, number, line)["step"] <= last_step]
    write_atomically(path, b"".join(line + b"\n" for line in kept))
    return len(kept)


def missing_steps(steps: list[int], last_step: int) -> list[int]:
    """Steps 0..last_step that have no row among `steps`."""
    present = set(steps)
    return [step for step in range(last_step + 1) if step not in present]


class TensorBoardMirror:
    """Writes numeric columns of each row as scalars at the row's step, under their grouped names
    (if tensorboard exists)."""

    def __init__(self, log_dir: str | os.PathLike):
        from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package

        self._writer = SummaryWriter(log_dir=str(log_dir))

    def write(self, row: Mapping[str, Any]) -> None:
        step = int(row["step"])
        for key, value in row.items():
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                if math.isfinite(value):
                    self._writer.add_scalar(grouped_metric_name(key), value, global_step=step)
        self._writer.flush()

    def write_completions(self, step: int, rows: list[dict[str, Any]]) -> None:
        """The validation samples of `step` as one Markdown table (TensorBoard's Text tab)."""
        self._writer.add_text(COMPLETIONS_TAG, markdown_table(rows), global_step=step)
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
    mirror under the grouped names of the JSONL columns (`grouped_metric_name`). The validation
    samples of RUN/completions.jsonl go to the mirrors with their step's row, before it."""

    def __init__(self, run_dir: str | os.PathLike, *, tensorboard: bool = False, mirrors: tuple = ()):
        self.path = Path(run_dir) / METRICS_FILE_NAME
        tensorboard_mirror = open_tensorboard(Path(run_dir) / "tensorboard") if tensorboard else None
        self._mirrors = [m for m in (tensorboard_mirror, *mirrors) if m is not None]
        self._completions = CompletionsFeed(Path(run_dir) / COMPLETIONS_FILE)

    @classmethod
    def for_config(cls, run_dir: str | os.PathLike, config: Any) -> MetricsLog:
        """The log a run's config asks for: `tensorboard`, `wandb` (project, run name)."""
        mirrors = ()
        if config.wandb:
            from scalerl.train.records.wandb_log import WandbMirror

            mirrors = (
                WandbMirror(
                    run_dir, project=config.wandb_project, run_name=config.wandb_run_name, config=config.to_dict()
                ),
            )
        return cls(run_dir, tensorboard=config.tensorboard, mirrors=mirrors)

    def append(self, row: Mapping[str, Any]) -> None:
        append_row(self.path, row)
        samples = self._completions.due(int(row["step"])) if self._mirrors else []
        for mirror in self._mirrors:
            if samples:
                mirror.write_completions(int(row["step"]), samples)
            mirror.write(row)

    def rows(self) -> list[dict[str, Any]]:
        return read_rows(self.path)

    def close(self) -> None:
        for mirror in self._mirrors:
            mirror.close()
