"""Tasks from a parquet file, read with pyarrow: verl's layout (`prompt` as chat messages,
`reward_model.ground_truth` the reference answer, `data_source`, `extra_info.split`) or rows of
the JSONL task format (prompt/messages, answer/completion, split) as Hugging Face datasets store
them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scalerl.errors import InputError
from scalerl.tasks.jsonl import TRAIN_SPLITS, VALIDATION_SPLITS, ChatRenderer, parse_record
from scalerl.tasks.types import TaskExample

PARQUET_SUFFIX = ".parquet"


def verl_record(row: dict[str, Any]) -> dict[str, Any]:
    """A verl row as a task record: prompt as it is, answer = reward_model.ground_truth, split =
    extra_info.split when it is one the task format knows, every column (data_source, ability,
    reward_model, extra_info, ...) kept as it is for reward functions. A row without reward_model is
    returned unchanged (the JSONL task format)."""
    reward_model = row.get("reward_model")
    if not isinstance(reward_model, dict):
        return row
    record = dict(row)
    if reward_model.get("ground_truth") is not None:
        record["answer"] = reward_model["ground_truth"]
    extra = row.get("extra_info")
    split = extra.get("split") if isinstance(extra, dict) else None
    if split in TRAIN_SPLITS + VALIDATION_SPLITS:
        record["split"] = split
    return record


def read_parquet_rows(path: Path) -> list[dict[str, Any]]:
    """Every row of a parquet file as plain Python values (InputError when it is not parquet)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(f"reading the parquet task file {path} needs pyarrow (pip install pyarrow)") from None
    import pyarrow as pa

    try:
        return pq.read_table(path).to_pylist()
    except (pa.ArrowException, OSError) as error:
        reason = " ".join(str(error).split())[:200]
        raise InputError(f"task file {path} is not a readable parquet file: {reason}") from None


def read_parquet_examples(
    path: str | Path, render_chat: ChatRenderer | None = None
) -> list[tuple[TaskExample, str | None]]:
    """(example, split or None) for every row of a parquet task file; InputError names the row."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"task file {str(path)!r} does not exist")
    rows = [
        parse_record(verl_record(row), f"{path}, row {number}", render_chat)
        for number, row in enumerate(read_parquet_rows(path), start=1)
    ]
    if not rows:
        raise InputError(f"task file {str(path)!r} has no examples")
    return rows
