"""What the trainer needs from a task: the `Task` protocol and one `TaskExample` (prompt, answer,
worked completion), shared by the built-in arithmetic task and JSONL tasks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class TaskExample:
    """One prompt, its reference answer, and (if known) a worked completion for warm-up."""

    prompt: str
    answer: str
    demonstration: str | None = None


class Task(Protocol):
    """What the trainer needs from a task: two disjoint prompt pools and a reward."""

    name: str
    train: tuple[TaskExample, ...]
    validation: tuple[TaskExample, ...]

    def reward(self, completion_text: str, example: TaskExample) -> float:
        """+1 for a correct final answer, -1 otherwise."""
        ...
