"""The raw table every reader returns, and the checks of its cells shared by all formats.

pandas is imported only for long columns (a short log is read without it: `scalerl fit` starts faster).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from scalerl.errors import InputError

# Columns of at least this many cells are converted by pandas (vectorised); shorter ones cell by cell,
# which takes less time than importing pandas.
VECTORISED_MIN_CELLS = 20_000

# A column is a list of cells (None where missing), or, when a reader parsed it as numbers in one
# go (long CSV files), a float array with NaN where missing.
Column = list | np.ndarray
RawTable = dict[str, Column]


@dataclass
class LogTable:
    """Columns of one log file in file order (None where a row has no value).

    `run_column` names the column that tells runs apart in a long-format file (one row per run
    and step), None when the file holds one run; `notes` are said to the user with the curve.
    """

    columns: RawTable
    notes: list[str] = field(default_factory=list)
    run_column: str | None = None

    @property
    def n_rows(self) -> int:
        """Number of rows (every column has this length)."""
        return len(next(iter(self.columns.values()), []))


def records_to_columns(records: list[dict]) -> RawTable:
    """A list of flat dicts as columns (a key absent from a record is None in that row)."""
    names: dict[str, None] = {}
    for record in records:
        names.update(dict.fromkeys(record))
    return {name: [record.get(name) for record in records] for name in names}


def cells(column: Column) -> list:
    """A column as a list of cells: a float array's NaN become None."""
    if isinstance(column, np.ndarray):
        return [None if value != value else value for value in column.tolist()]
    return column


def has_value(column: Column, rows: np.ndarray) -> bool:
    """Whether some row of `rows` has a value in `column`."""
    if isinstance(column, np.ndarray):
        return bool(np.any(~np.isnan(column[rows])))
    return any(column[i] is not None for i in rows)


def cell_to_float(cell: object, column: str, row_number: int, source: str) -> float | None:
    """A numeric cell as float, None when missing; InputError for text, booleans, NaN or inf.

    Missing cells (empty, null, absent key) are not errors: sparse evaluation rows are normal.
    A value written out as NaN or inf is an error, since it is a broken measurement.
    """
    if cell is None or cell == "":
        return None
    if isinstance(cell, (bool, list, dict)) or (isinstance(cell, str) and not _numeric_text(cell)):
        raise InputError(f"non-numeric value {cell!r} in column '{column}' at row {row_number} of {source}")
    try:
        value = float(cell)
    except (TypeError, ValueError):
        raise InputError(f"non-numeric value {cell!r} in column '{column}' at row {row_number} of {source}") from None
    except OverflowError:  # a JSON integer beyond the float range
        value = math.inf
    if not math.isfinite(value):
        raise InputError(f"column '{column}' has a non-finite value ({cell}) at row {row_number} of {source}")
    return value


def _numeric_text(text: str) -> bool:
    """Whether `text` may be a number as a log writes one: ASCII without `_` (Python's float() also
    reads `1_000` and other scripts' digits, which pandas and the logs' writers do not)."""
    return text.isascii() and "_" not in text


def column_to_floats(cells: Column, column: str, source: str) -> np.ndarray:
    """Cells as a float array with NaN where missing; the first bad cell raises as in cell_to_float.

    A column of VECTORISED_MIN_CELLS or more is converted by pandas for the common case of clean
    numbers; a cell that does not convert is re-read by cell_to_float so the error names its row.
    A float array (NaN = missing) is only checked for infinities (a CSV cell `inf` or `1e400`).
    """
    if isinstance(cells, np.ndarray):
        return _checked_float_array(cells, column, source)
    if any(type(cell) is bool for cell in cells):  # noqa: E721 - bool is an int subclass
        _raise_first_bad(cells, column, source)
    if len(cells) < VECTORISED_MIN_CELLS:
        return _floats_cell_by_cell(cells, column, source)
    import pandas as pd

    try:
        values = np.asarray(pd.to_numeric(pd.Series(cells, dtype=object), errors="coerce"), dtype=float)
    except (TypeError, ValueError, OverflowError):
        values = None
    if values is None or values.shape != (len(cells),):
        return _floats_cell_by_cell(cells, column, source)
    suspicious = ~np.isfinite(values)
    if np.any(suspicious):
        for index in np.flatnonzero(suspicious):
            cell = cells[index]
            if cell is not None and cell != "":
                cell_to_float(cell, column, int(index) + 1, source)  # raises for text, nan, inf
                raise InputError(f"non-numeric value {cell!r} in column '{column}' at row {index + 1} of {source}")
    return values


def _floats_cell_by_cell(cells: list, column: str, source: str) -> np.ndarray:
    return np.array([_nan_if_none(cell_to_float(c, column, i, source)) for i, c in enumerate(cells, 1)], dtype=float)


def _checked_float_array(values: np.ndarray, column: str, source: str) -> np.ndarray:
    infinite = np.flatnonzero(np.isinf(values))
    if infinite.size:
        row = int(infinite[0])
        raise InputError(f"column '{column}' has a non-finite value ({values[row]}) at row {row + 1} of {source}")
    return np.array(values, dtype=float)


def _raise_first_bad(cells: list, column: str, source: str) -> None:
    for row_number, cell in enumerate(cells, start=1):
        cell_to_float(cell, column, row_number, source)


def _nan_if_none(value: float | None) -> float:
    return math.nan if value is None else value
