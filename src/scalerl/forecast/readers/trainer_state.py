"""transformers / TRL `trainer_state.json` (one in every checkpoint folder).

The metrics are in its `log_history` list: training rows (`loss`, `reward`, `num_tokens`, ...)
and evaluation rows (`eval_loss`, `eval_reward`, ...) interleaved, each with `step` and `epoch`.
Rows logged at the same step are joined into one (an evaluation row then carries the training
row's `num_tokens`), so evaluation metrics can be read against compute.
"""

from __future__ import annotations

from pathlib import Path

from scalerl.errors import InputError
from scalerl.forecast.readers.jsonl import flatten_record
from scalerl.forecast.readers.table import LogTable, records_to_columns


def is_trainer_state(document: object) -> bool:
    """A JSON object with a `log_history` list (what transformers.Trainer saves)."""
    return isinstance(document, dict) and isinstance(document.get("log_history"), list)


def read_trainer_state(document: dict, path: Path) -> LogTable:
    """The rows of `log_history`, those of one step joined; InputError when it holds none."""
    history = document["log_history"]
    if not history:
        raise InputError(f"{path} has an empty log_history (the run logged no metrics yet)")
    rows: list[dict] = []
    for index, record in enumerate(history, start=1):
        if not isinstance(record, dict):
            raise InputError(f"entry {index} of log_history in {path} is not a JSON object")
        try:
            flat = flatten_record(record)
        except InputError as error:
            raise InputError(f"entry {index} of log_history in {path}: {error}") from None
        if (
            rows
            and "step" in flat
            and rows[-1].get("step") == flat["step"]
            and not set(flat) & set(rows[-1]) - {"step", "epoch"}
        ):
            rows[-1].update(flat)
        else:
            rows.append(flat)
    return LogTable(records_to_columns(rows))
