"""Build the configured task: the built-in arithmetic task, a JSONL or parquet file, or a dataset
of the local Hugging Face cache."""

from __future__ import annotations

from pathlib import Path

from scalerl.errors import InputError
from scalerl.tasks.arithmetic import ArithmeticTask
from scalerl.tasks.config import TaskConfig
from scalerl.tasks.hub_datasets import cached_dataset_files, is_hub_dataset_id, split_of_file
from scalerl.tasks.jsonl import ChatRenderer, JsonlTask, read_task_examples, require_answers, split_examples
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


def read_files_task(
    config: TaskConfig, render_chat: ChatRenderer | None
) -> tuple[list[TaskExample], list[TaskExample]]:
    """(train, validation) of task.train_files and task.val_files: every row of a validation file
    validates, every row of a training file trains; without validation files the training rows are
    split as one task file's (their split fields, else the seeded val_fraction hold-out)."""
    train_rows = [row for name in config.train_paths for row in read_named_task(name, render_chat)]
    if not config.val_paths:
        return split_examples(train_rows, config.val_fraction, config.seed)
    validation = [example for name in config.val_paths for example, _ in read_named_task(name, render_chat)]
    return [example for example, _ in train_rows], validation


def load_task(config: TaskConfig, render_chat: ChatRenderer | None = None, *, answers_required: bool = True) -> Task:
    """task.name "builtin" -> the arithmetic task at the configured difficulty; anything else is
    read as a JSONL or parquet file, a cached hub dataset or task.train_files / task.val_files
    (answer_check, val_fraction and seed apply; `render_chat` turns chat messages into prompt text;
    `answers_required`: every row needs a reference answer, as the answer check scores it)."""
    if config.name == "builtin" and not config.train_paths:
        return ArithmeticTask(config)
    for name in (config.name, *config.train_paths, *config.val_paths):
        if len(name) > MAX_NAME_CHARS:
            raise InputError(f"task file name is {len(name)} characters long: not a file path or dataset id")
    if not 0 <= config.val_fraction < 1:
        raise InputError(f"val_fraction must be in [0, 1), got {config.val_fraction}")
    if config.train_paths:
        name = Path(config.train_paths[0]).stem
        train, validation = read_files_task(config, render_chat)
    else:
        name = Path(config.name).stem
        train, validation = split_examples(read_named_task(config.name, render_chat), config.val_fraction, config.seed)
    if not validation:
        raise InputError(
            f"task {name!r} has no validation rows (every row is in the train split): give the "
            "held-out file as task.val_files (verl's data.val_files)"
        )
    if answers_required:
        require_answers(train + validation, name)
    return JsonlTask(name, train, validation, config.answer_check)
