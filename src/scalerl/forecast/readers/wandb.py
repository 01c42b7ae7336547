"""W&B chart exports: a `Step` column and one `<run> - <metric>` column per run (plus `__MIN` /
`__MAX` band columns), reshaped to long format (one row per run and step, a `run` column).

W&B history exports (`_step`, metric names with `/`) are plain CSV and need no reshaping.
"""

from __future__ import annotations

import re

from scalerl.forecast.readers.table import LogTable, RawTable

CHART_COLUMN = re.compile(r"^(?P<run>.+?) - (?P<metric>.+)$")
BAND_SUFFIXES = ("__MIN", "__MAX")


def is_chart_export(columns: RawTable) -> bool:
    """A `Step` column and every other column named `<run> - <metric>`."""
    others = [name for name in columns if name != "Step"]
    return "Step" in columns and bool(others) and all(CHART_COLUMN.match(name) for name in others)


def reshape_chart_export(columns: RawTable) -> LogTable:
    """One row per (run, step) with the run's metrics as columns; band columns are dropped."""
    steps = columns["Step"]
    by_run: dict[str, dict[str, str]] = {}
    for name in columns:
        match = CHART_COLUMN.match(name) if name != "Step" else None
        if match is None or match["metric"].endswith(BAND_SUFFIXES):
            continue
        by_run.setdefault(match["run"], {})[match["metric"]] = name
    metrics = sorted({metric for run_metrics in by_run.values() for metric in run_metrics})
    long: RawTable = {"run": [], "Step": [], **{metric: [] for metric in metrics}}
    for run, run_metrics in by_run.items():
        for row, step in enumerate(steps):
            cells = {metric: columns[name][row] for metric, name in run_metrics.items()}
            if all(cell is None for cell in cells.values()):
                continue
            long["run"].append(run)
            long["Step"].append(step)
            for metric in metrics:
                long[metric].append(cells.get(metric))
    return LogTable(long, run_column="run")
