"""CSV / TSV logs with a header row (W&B history exports included: empty cells are missing)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from scalerl.errors import InputError
from scalerl.forecast.readers.table import LogTable, RawTable
from scalerl.forecast.readers.wandb import is_chart_export, reshape_chart_export

# Columns that name the run of each row in a long-format file, in order of preference.
RUN_COLUMNS: tuple[str, ...] = ("run", "run_name", "run_id", "series")


def read_csv_table(text: str, path: Path, delimiter: str = ",") -> LogTable:
    """The table of a CSV file; a W&B chart export (`<run> - <metric>` columns) becomes long format."""
    columns = parse_csv_columns(text, path, delimiter)
    if is_chart_export(columns):
        return reshape_chart_export(columns)
    run_column = next((name for name in RUN_COLUMNS if name in columns), None)
    return LogTable(columns, run_column=run_column)


def parse_csv_columns(text: str, path: Path, delimiter: str = ",") -> RawTable:
    """Header + rows as columns; empty cells are None; InputError for ragged rows or a bad header."""
    try:
        rows = [row for row in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter) if row]
    except csv.Error as error:
        raise InputError(f"{path} is not a valid CSV file: {error}") from None
    if not rows:
        raise InputError(f"{path} is empty")
    header = [name.strip() for name in rows[0]]
    if len(set(header)) != len(header):
        duplicated = sorted({name for name in header if header.count(name) > 1})
        raise InputError(f"{path} has duplicated column names in its header: {', '.join(duplicated)}")
    columns: RawTable = {name: [] for name in header}
    lists = [columns[name] for name in header]
    width = len(header)
    for line_number, row in enumerate(rows[1:], start=2):
        if len(row) != width:
            raise InputError(
                f"{path} is not a valid CSV file: row {line_number} has {len(row)} fields, the header has {width}"
            )
        for column, cell in zip(lists, row):
            cell = cell.strip()
            column.append(cell if cell else None)
    return columns
