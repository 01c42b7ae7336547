"""Build the configured task: the built-in arithmetic task or a JSONL file."""

from __future__ import annotations

from scalerl.tasks.arithmetic import ArithmeticTask
from scalerl.tasks.config import TaskConfig
from scalerl.tasks.jsonl import ChatRenderer, JsonlTask
from scalerl.tasks.types import Task


def load_task(config: TaskConfig, render_chat: ChatRenderer | None = None) -> Task:
    """task.name "builtin" -> the arithmetic task at the configured difficulty; anything else is
    read as a JSONL file (answer_check, val_fraction and seed apply; `render_chat` turns the
    `messages` of chat-form lines into prompt text)."""
    if config.name == "builtin":
        return ArithmeticTask(config)
    return JsonlTask.from_file(config.name, answer_check=config.answer_check,
                               val_fraction=config.val_fraction, seed=config.seed, render_chat=render_chat)
