"""User tasks from a JSONL file: one `{"prompt": ..., "answer": ...}` object per line, or in chat
form `{"messages": [{"role": "user", "content": ...}, ...], "answer": ...}` (TRL's conversational
format), whose prompt is the model tokenizer's chat template applied to the messages with the
generation prompt added (`render_chat`, given by the caller who knows the model).

An optional `"split"` field ("train" or "validation"/"val"/"test") places a line; when no line has
one, a seeded random hold-out (`val_fraction`) is used; when some lines have it, lines without it
go to train. Answers are checked exactly or math-verify-style (`answer_check`).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Callable

from scalerl.errors import InputError
from scalerl.tasks.types import TaskExample
from scalerl.tasks.verifiers import answer_reward, get_answer_check

TRAIN_SPLITS = ("train",)
VALIDATION_SPLITS = ("validation", "val", "test", "eval")


ChatRenderer = Callable[[list[dict[str, str]]], str]


def _chat_messages(messages: Any, where: str) -> list[dict[str, str]]:
    """The `messages` field checked: a non-empty list of {role, content} string pairs."""
    if not isinstance(messages, list) or not messages:
        raise InputError(f"{where}: 'messages' must be a non-empty list of {{role, content}} objects")
    for number, message in enumerate(messages, start=1):
        if not (isinstance(message, dict) and isinstance(message.get("role"), str)
                and isinstance(message.get("content"), str)):
            raise InputError(f"{where}: message {number} must be an object with string 'role' and 'content'")
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def _prompt_of(record: dict, where: str, render_chat: ChatRenderer | None) -> str:
    if "prompt" in record and "messages" in record:
        raise InputError(f"{where}: give 'prompt' or 'messages', not both")
    if "messages" in record:
        messages = _chat_messages(record["messages"], where)
        if render_chat is None:
            raise InputError(f"{where}: chat-form tasks ('messages') need a model whose tokenizer has a chat template")
        try:
            return render_chat(messages)
        except InputError as error:
            raise InputError(f"{where}: {error}") from None
    if "prompt" not in record:
        raise InputError(f"{where}: missing field 'prompt' (or 'messages')")
    prompt = record["prompt"]
    if not isinstance(prompt, str) or not prompt:
        raise InputError(f"{where}: 'prompt' must be a non-empty string")
    return prompt


def _parse_line(line: str, line_number: int, path: Path,
                render_chat: ChatRenderer | None = None) -> tuple[TaskExample, str | None]:
    where = f"{path}, line {line_number}"
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise InputError(f"{where}: not valid JSON ({error.msg})") from None
    if not isinstance(record, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(record).__name__}")
    if "answer" not in record:
        raise InputError(f"{where}: missing field 'answer'")
    prompt, answer = _prompt_of(record, where, render_chat), record["answer"]
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        raise InputError(f"{where}: 'answer' must be a string or a number")
    split = record.get("split")
    if split is not None and split not in TRAIN_SPLITS + VALIDATION_SPLITS:
        raise InputError(
            f"{where}: unknown split {split!r}; use one of {', '.join(TRAIN_SPLITS + VALIDATION_SPLITS)}"
        )
    columns = tuple((key, value) for key, value in record.items() if key not in ("prompt", "messages", "answer", "completion", "split"))
    return TaskExample(prompt=prompt, answer=str(answer), columns=columns), split


def read_task_examples(path: str | Path,
                       render_chat: ChatRenderer | None = None) -> list[tuple[TaskExample, str | None]]:
    """(example, split or None) for every non-blank line; InputError names the bad line."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"task file {str(path)!r} does not exist")
    with path.open(encoding="utf-8") as handle:
        rows = [
            _parse_line(line, number, path, render_chat)
            for number, line in enumerate(handle, start=1)
            if line.strip()
        ]
    if not rows:
        raise InputError(f"task file {str(path)!r} has no examples")
    return rows


def split_examples(
    rows: list[tuple[TaskExample, str | None]], val_fraction: float, seed: int
) -> tuple[list[TaskExample], list[TaskExample]]:
    """(train, validation): by the split field if any line has one, else a seeded hold-out."""
    if any(split is not None for _, split in rows):
        validation = [example for example, split in rows if split in VALIDATION_SPLITS]
        train = [example for example, split in rows if split not in VALIDATION_SPLITS]
        return train, validation
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    num_val = round(val_fraction * len(rows))
    if val_fraction > 0:
        num_val = min(len(rows) - 1, max(1, num_val))
    held_out = set(order[:num_val])
    train = [rows[i][0] for i in range(len(rows)) if i not in held_out]
    validation = [rows[i][0] for i in range(len(rows)) if i in held_out]
    return train, validation


class JsonlTask:
    """A task read from a JSONL file (see the module docstring for the format)."""

    def __init__(
        self, name: str, train: list[TaskExample], validation: list[TaskExample], answer_check: str
    ) -> None:
        get_answer_check(answer_check)
        if not train:
            raise InputError(f"task {name!r} has no training examples")
        self.name = name
        self.train = tuple(train)
        self.validation = tuple(validation)
        self.answer_check = answer_check

    @classmethod
    def from_file(
        cls, path: str | Path, *, answer_check: str = "math", val_fraction: float = 0.1, seed: int = 0,
        render_chat: ChatRenderer | None = None,
    ) -> JsonlTask:
        if not 0 <= val_fraction < 1:
            raise InputError(f"val_fraction must be in [0, 1), got {val_fraction}")
        train, validation = split_examples(read_task_examples(path, render_chat), val_fraction, seed)
        return cls(Path(path).stem, train, validation, answer_check)

    def reward(self, completion_text: str, example: TaskExample) -> float:
        return answer_reward(completion_text, example.answer, check=self.answer_check)
