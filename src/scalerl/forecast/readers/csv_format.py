"""CSV / TSV logs with a header row (W&B history exports included: empty cells are missing).

Long files without quotes are parsed by pandas' C parser straight into float columns (time and
memory linear in rows, a few bytes per cell; pandas is imported only for them); any other file,
or one pandas would read differently, goes through the csv module, which says which row is wrong.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from scalerl.errors import InputError
from scalerl.forecast.readers.table import LogTable, RawTable, cells
from scalerl.forecast.readers.wandb import is_chart_export, reshape_chart_export

if TYPE_CHECKING:
    import pandas as pd

# Below this size the csv module is fast enough and the one path to reason about.
FAST_PARSE_MIN_CHARS = 1 << 20
# Columns a CSV log may have (a W&B history export of every logged metric has hundreds to a few
# thousand); a quoted header is counted as its raw delimiters, an upper bound.
MAX_COLUMNS = 10_000

FIRST_CONTENT = re.compile(r"[^\r\n]")

# Columns that name the run of each row in a long-format file, in order of preference.
RUN_COLUMNS: tuple[str, ...] = ("run", "run_name", "run_id", "series")


def check_column_count(text: str, path: Path, delimiter: str = ",") -> None:
    """InputError when the header line has more than MAX_COLUMNS fields (counted on the raw line,
    before any parser builds a column per field: 10^6 columns would take minutes and gigabytes)."""
    first = FIRST_CONTENT.search(text)
    if first is None:
        return
    line_end = text.find("\n", first.start())
    fields = (
        text.count(delimiter, first.start()) if line_end == -1 else text.count(delimiter, first.start(), line_end)
    ) + 1
    if fields > MAX_COLUMNS:
        raise InputError(
            f"{path} has {fields} columns in its header, more than the {MAX_COLUMNS} a log may have; "
            "keep the columns to fit (e.g. the compute and the metric) in a smaller file"
        )


def read_csv_table(text: str, path: Path, delimiter: str = ",") -> LogTable:
    """The table of a CSV file; a W&B chart export (`<run> - <metric>` columns) becomes long format.
    A header of more than MAX_COLUMNS fields is refused before parsing."""
    check_column_count(text, path, delimiter)
    columns = parse_plain_csv_fast(text, path, delimiter) if len(text) >= FAST_PARSE_MIN_CHARS else None
    if columns is None:
        columns = parse_csv_columns(text, path, delimiter)
    if is_chart_export(columns):
        return reshape_chart_export({name: cells(column) for name, column in columns.items()})
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


def parse_plain_csv_fast(text: str, path: Path, delimiter: str = ",") -> RawTable | None:
    """The columns of a CSV file without quotes, numeric columns as float arrays (NaN = empty cell).

    None when the file is not plain (quotes, NUL bytes, a lone carriage return, one column) or
    pandas reads it differently from the csv module: the caller then uses parse_csv_columns.
    Row widths are checked first (pandas would pad a short row), with the csv module's row numbers.
    """
    plain = '"' not in text and "\x00" not in text and text.count("\r") == text.count("\r\n")
    if not plain:
        return None
    first = FIRST_CONTENT.search(text)  # the csv module skips empty lines before the header
    if first is None:
        return None
    line_end = text.find("\n", first.start())
    header_line = text[first.start() :] if line_end == -1 else text[first.start() : line_end]
    header = [name.strip() for name in header_line.rstrip("\r").split(delimiter)]
    if len(header) < 2 or len(set(header)) != len(header):
        return None  # the csv path gives the duplicate-name error
    import pandas as pd

    data = text.encode("utf-8")
    n_rows = check_row_widths(data, path, delimiter, len(header))
    text_columns = [name for name in RUN_COLUMNS if name in header]
    try:
        frame = pd.read_csv(
            io.BytesIO(data),
            encoding="utf-8",
            sep=delimiter,
            header=0,
            names=header,
            index_col=False,
            keep_default_na=False,
            na_values=[""],
            skip_blank_lines=True,
            engine="c",
            dtype={name: str for name in text_columns},
        )
    except (ValueError, pd.errors.ParserError):
        return None
    if len(frame) != n_rows:
        return None
    return {name: frame_column(frame[name]) for name in header}


def check_row_widths(encoded: bytes, path: Path, delimiter: str, width: int) -> int:
    """Number of data rows; InputError for the first non-empty row without `width` fields.

    Vectorised over the UTF-8 bytes: fields in a line = delimiters in it + 1 (no quotes in the file).
    """
    data = np.frombuffer(encoded, dtype=np.uint8)
    newlines = np.flatnonzero(data == 10)
    starts = np.r_[0, newlines + 1]
    ends = np.r_[newlines, data.size]
    ends = ends - ((ends > starts) & (data[np.maximum(ends - 1, 0)] == 13))  # a \r\n line ends at the \r
    non_empty = ends > starts
    starts, ends = starts[non_empty], ends[non_empty]
    delimiter_at = np.flatnonzero(data == ord(delimiter))
    fields = np.searchsorted(delimiter_at, ends) - np.searchsorted(delimiter_at, starts) + 1
    ragged = np.flatnonzero(fields != width)
    if ragged.size:
        row = int(ragged[0])
        raise InputError(
            f"{path} is not a valid CSV file: row {row + 1} has {int(fields[row])} fields, the header has {width}"
        )
    return int(starts.size) - 1


def frame_column(series: pd.Series) -> np.ndarray | list[str | None]:
    """A parsed column: numbers as a float array, anything else as stripped cells (None if empty)."""
    import pandas as pd

    if pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(series.dtype):
        return series.to_numpy(dtype=float)
    return [
        None if cell is None or cell != cell or not str(cell).strip() else str(cell).strip() for cell in series.tolist()
    ]
