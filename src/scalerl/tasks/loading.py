"""Build the configured task: the built-in arithmetic task, a JSONL or parquet file, or a dataset
of the local Hugging Face cache."""

from __future__ import annotations

from pathlib import Path

from scalerl.errors import InputError
from scalerl.tasks.arithmetic import ArithmeticTask
from scalerl.tasks.config import TaskConfig
from scalerl.tasks.hub_datasets import cached_dataset_files, is_hub_dataset_id, split_of_file
from scalerl.tasks.jsonl import ChatRenderer, JsonlTask, read_task_examples, split_examples
from scalerl.tasks.parquet import PARQUET_SUFFIX, read_parquet_examples
from scalerl.tasks.types import Task, TaskExample

MAX_NAME_CHARS = 4096  # PATH_MAX: a longer name is no path


def read_task_file(path: Path, render_chat: ChatRenderer | None) -> list[tuple[TaskExample, str | None]]:
    """(example, split or None) of a parquet file (by its suffix) or a JSONL file."""
    if path.suffix.lower() == PARQUET_SUFFIX:
        return read_parquet_examples(path, render_chat)
    return read_task_examples(path, render_chat)


def read_named_task(name: str, render_chat: ChatRenderer | None) -> list[tuple[TaskExample, str | None]]:
    """The rows of task.name: a file, or every data file of a cached hub dataset (a row without
    a split takes its file's, when the file name says one)."""
    if not is_hub_dataset_id(name):
        return read_task_file(Path(name), render_chat)
    rows = []
    for path in cached_dataset_files(name):
        file_split = split_of_file(path)
        rows += [(example, split or file_split) for example, split in read_task_file(path, render_chat)]
    return rows


def load_task(config: TaskConfig, render_chat: ChatRenderer | None = None) -> Task:
    """task.name "builtin" -> the arithmetic task at the configured difficulty; anything else is
    read as a JSONL or parquet file or a cached hub dataset (answer_check, val_fraction and seed
    apply; `render_chat` turns chat messages into prompt text)."""
    if config.name == "builtin":
        return ArithmeticTask(config)
    if len(config.name) > MAX_NAME_CHARS:
        raise InputError(f"task.name is {len(config.name)} characters long: not a file path or dataset id")
    if not 0 <= config.val_fraction < 1:
        raise InputError(f"val_fraction must be in [0, 1), got {config.val_fraction}")
    train, validation = split_examples(read_named_task(config.name, render_chat), config.val_fraction, config.seed)
    return JsonlTask(Path(config.name).stem, train, validation, config.answer_check)
