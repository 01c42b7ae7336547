"""Mirror of the run's metrics rows to Weights & Biases, under the grouped names of
`metrics.jsonl`'s columns (train/..., eval/..., forecast/...; scalerl.train.records.metric_groups).

One W&B run per scalerl run: its id is kept in `RUN/wandb_run_id`, so `--resume` continues the
same W&B run. W&B's own console capture is off (the progress bar stays ours); `WANDB_MODE=offline`
logs to `RUN/wandb/` without a network, for `wandb sync` later. W&B's environment variables
(WANDB_PROJECT, WANDB_ENTITY, WANDB_RUN_GROUP, WANDB_NAME) win over scalerl's defaults; a project
or run name set in the config wins over them.
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scalerl.errors import ConfigError
from scalerl.train.records.completions_table import COMPLETIONS_TAG, table_cell, table_columns
from scalerl.train.records.metric_groups import grouped_metric_name

RUN_ID_FILE = "wandb_run_id"
DEFAULT_PROJECT = "scalerl"


def require_wandb() -> None:
    """ConfigError, before a run starts, when wandb=true but the package is missing."""
    import importlib.util

    if importlib.util.find_spec("wandb") is None:
        raise ConfigError(
            "wandb: logging to W&B needs the wandb package (pip install wandb), or drop --wandb / --report-to wandb"
        )


def numeric_columns(row: Mapping[str, Any]) -> dict[str, float]:
    """The row's finite numeric columns except `step` (W&B gets the step separately), under their
    grouped names."""
    return {
        grouped_metric_name(key): value
        for key, value in row.items()
        if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    }


def run_identity(project: str, run_name: str, run_dir: Path, environ: Mapping[str, str]) -> dict[str, str | None]:
    """wandb.init's project, name, entity and group: the config's value when set, else W&B's
    variable (WANDB_PROJECT, WANDB_NAME, WANDB_ENTITY, WANDB_RUN_GROUP), else scalerl's default
    (project 'scalerl', the run directory's name; no entity or group: W&B's own)."""
    return {
        "project": project or environ.get("WANDB_PROJECT") or DEFAULT_PROJECT,
        "name": run_name or environ.get("WANDB_NAME") or run_dir.name,
        "entity": environ.get("WANDB_ENTITY") or None,
        "group": environ.get("WANDB_RUN_GROUP") or None,
    }


def _run_id(run_dir: Path) -> str:
    """The W&B id of this run directory, created on first use (atomically)."""
    path = run_dir / RUN_ID_FILE
    if path.is_file() and path.read_text().strip():
        return path.read_text().strip()
    run_id = uuid.uuid4().hex[:12]  # W&B ids: lowercase letters and digits
    temp = path.with_suffix(".tmp")
    temp.write_text(run_id + "\n")
    os.replace(temp, path)
    return run_id


class WandbMirror:
    """Logs each metrics row to one W&B run at the row's step; W&B's files go to $WANDB_DIR when
    set, else into the run directory."""

    def __init__(
        self, run_dir: str | os.PathLike, *, project: str, run_name: str = "", config: Mapping[str, Any] | None = None
    ):
        require_wandb()
        import wandb

        run_dir = Path(run_dir)
        try:
            self._run = wandb.init(
                **run_identity(project, run_name, run_dir, os.environ),
                id=_run_id(run_dir),
                resume="allow",
                dir=os.environ.get("WANDB_DIR") or str(run_dir),
                config=dict(config or {}),
                settings=wandb.Settings(console="off", quiet=True),
            )
        except Exception as error:  # wandb raises its own types (UsageError, CommError, ...) and more
            raise ConfigError(
                f"wandb: could not start a W&B run ({' '.join(str(error).split())}); "
                "`wandb login`, or set WANDB_MODE=offline to log locally"
            ) from None

    def write(self, row: Mapping[str, Any]) -> None:
        self._run.log(numeric_columns(row), step=int(row["step"]))

    def write_completions(self, step: int, rows: list[dict[str, Any]]) -> None:
        """The validation samples of `step` as one wandb.Table (W&B's Tables view)."""
        import wandb

        columns = table_columns(rows)
        data = [[table_cell(row.get(column)) for column in columns] for row in rows]
        table = wandb.Table(columns=columns, data=data, allow_mixed_types=True)
        self._run.log({COMPLETIONS_TAG: table}, step=step)

    def close(self) -> None:
        self._run.finish()
