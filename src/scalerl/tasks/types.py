"""What the trainer needs from a task: the `Task` protocol and one `TaskExample` (prompt, answer,
worked completion), shared by the built-in arithmetic task and JSONL tasks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class TaskExample:
    """One prompt, its reference answer (None when the row has none: only reward functions can
    score it), (if known) a worked completion for warm-up, the dataset's other columns as (name,
    value) pairs (what user reward functions receive), and the chat messages the prompt was
    rendered from (conversational rows: reward functions receive messages, as TRL passes them)."""

    prompt: str
    answer: str | None
    demonstration: str | None = None
    columns: tuple[tuple[str, Any], ...] = field(default=(), compare=False)
    prompt_messages: tuple[dict[str, str], ...] | None = field(default=None, compare=False)


class Task(Protocol):
    """What the trainer needs from a task: two disjoint prompt pools and a reward."""

    name: str
    train: tuple[TaskExample, ...]
    validation: tuple[TaskExample, ...]

    def reward(self, completion_text: str, example: TaskExample) -> float:
        """+1 for a correct final answer, -1 otherwise."""
        ...
