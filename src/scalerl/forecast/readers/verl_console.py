"""verl's console log: one line per step, `step:N - key:value - key:value ...`.

Lines may carry a prefix (Ray prints `(TaskRunner pid=123) step:...`); other lines (warnings,
progress bars) are ignored. Values may be written as `np.float64(0.5)` or `tensor(0.5)`.
"""

from __future__ import annotations

import re
from pathlib import Path

from scalerl.errors import InputError
from scalerl.forecast.readers.table import LogTable, records_to_columns

STEP_LINE = re.compile(r"(?:^|\s)step:(\d+) - ")
WRAPPED_NUMBER = re.compile(r"^(?:np\.\w+|numpy\.\w+|tensor|float|int)\((.*?)(?:,\s*\w+=.*)?\)$")


def looks_like_verl_console(text: str) -> bool:
    """True when some line of `text` has the `step:N - key:value` shape."""
    return STEP_LINE.search(text) is not None


def read_verl_console(text: str, path: Path) -> LogTable:
    """One row per `step:N - ...` line, keys as columns."""
    rows = []
    for line in text.splitlines():
        match = STEP_LINE.search(line)
        if match is None:
            continue
        row: dict = {"step": match.group(1)}
        for field in line[match.start(1) - len("step:") :].split(" - ")[1:]:
            key, sep, value = field.rpartition(":")
            if sep and key.strip():
                row[key.strip()] = unwrap_number(value.strip())
        rows.append(row)
    if not rows:
        raise InputError(f"{path} has no `step:N - key:value` lines")
    return LogTable(records_to_columns(rows))


def unwrap_number(text: str) -> str:
    """`np.float64(0.5)` -> `0.5`; other text unchanged (checked later where it is used)."""
    match = WRAPPED_NUMBER.match(text)
    return match.group(1) if match else text
