"""Build the configured task: the built-in arithmetic task or a JSONL file."""

from __future__ import annotations

from scalerl.tasks.arithmetic import ArithmeticTask, Task
from scalerl.tasks.config import TaskConfig
from scalerl.tasks.jsonl import JsonlTask


def load_task(config: TaskConfig) -> Task:
    """task.name "builtin" -> the arithmetic task at the configured difficulty; anything else is
    read as a JSONL file (answer_check, val_fraction and seed apply)."""
    if config.name == "builtin":
        return ArithmeticTask(config)
    return JsonlTask.from_file(config.name, answer_check=config.answer_check,
                               val_fraction=config.val_fraction, seed=config.seed)
