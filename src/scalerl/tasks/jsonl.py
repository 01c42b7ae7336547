"""User tasks from a JSONL file: one `{"prompt": ..., "answer": ...}` object per line, or in chat
form `{"messages": [{"role": "user", "content": ...}, ...], "answer": ...}` or
`{"prompt": [{"role": ..., "content": ...}, ...], ...}` (TRL's conversational formats), whose prompt
is the model tokenizer's chat template applied to the messages with the generation prompt added
(`render_chat`, given by the caller who knows the model). TRL's prompt-completion rows
`{"prompt": ..., "completion": ...}` work too: the completion (text or assistant messages) is the
worked demonstration and its final answer (after the last `</think>`, else all of it) the
reference, unless an `answer` is given. Lines are parsed with the bounds of scalerl.parsing_limits.

An optional `"split"` field ("train" or "validation"/"val"/"test") places a line; when no line has
one, a seeded random hold-out (`val_fraction`) is used; when some lines have it, lines without it
go to train. Answers are checked exactly or math-verify-style (`answer_check`), or by the verifier
of the row's `data_source` when scalerl.tasks.data_sources has one (verl's GSM8K and MATH names).
A row without an answer is read (TRL's reward functions may read another column, e.g. `solution`);
`require_answers` refuses it where the answer check would score it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from scalerl.errors import InputError
from scalerl.parsing_limits import load_json
from scalerl.tasks.data_sources import verifier_for
from scalerl.tasks.types import TaskExample
from scalerl.tasks.verifiers import (
    CORRECT_REWARD,
    INCORRECT_REWARD,
    answer_reward,
    extract_final_answer,
    get_answer_check,
)

TRAIN_SPLITS = ("train",)
VALIDATION_SPLITS = ("validation", "val", "test", "eval")
DATA_SOURCE_COLUMN = "data_source"


ChatRenderer = Callable[[list[dict[str, str]]], str]
# Refused at load time, before any tokenizer sees it: 128 K characters is beyond the context of
# the models trained here (a 32 K-token context holds ~128 K characters of English).
MAX_PROMPT_CHARS = 131_072


def _chat_messages(messages: Any, where: str, field: str = "messages") -> list[dict[str, str]]:
    """A messages field checked: a non-empty list of {role, content} string pairs."""
    if not isinstance(messages, list) or not messages:
        raise InputError(f"{where}: '{field}' must be a non-empty list of {{role, content}} objects")
    for number, message in enumerate(messages, start=1):
        if not (
            isinstance(message, dict)
            and isinstance(message.get("role"), str)
            and isinstance(message.get("content"), str)
        ):
            raise InputError(f"{where}: message {number} must be an object with string 'role' and 'content'")
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def _rendered(messages: list[dict[str, str]], where: str, field: str, render_chat: ChatRenderer | None) -> str:
    if render_chat is None:
        raise InputError(
            f"{where}: chat-form tasks ('{field}' as messages) need a model whose tokenizer has a chat template"
        )
    try:
        return render_chat(messages)
    except InputError as error:
        raise InputError(f"{where}: {error}") from None


def _prompt_of(
    record: dict, where: str, render_chat: ChatRenderer | None
) -> tuple[str, tuple[dict[str, str], ...] | None]:
    """(prompt text, the chat messages it was rendered from or None)."""
    if "prompt" in record and "messages" in record:
        raise InputError(f"{where}: give 'prompt' or 'messages', not both")
    field = "messages" if "messages" in record else "prompt"
    if field not in record:
        raise InputError(f"{where}: missing field 'prompt' (or 'messages')")
    value = messages = record[field]
    if field == "messages" or isinstance(value, list):
        messages = _chat_messages(value, where, field)
        value = _rendered(messages, where, field, render_chat)
    elif not isinstance(value, str) or not value:
        raise InputError(f"{where}: 'prompt' must be a non-empty string or a list of {{role, content}} messages")
    if len(value) > MAX_PROMPT_CHARS:
        raise InputError(
            f"{where}: the prompt is {len(value)} characters long; a task prompt may hold at most {MAX_PROMPT_CHARS}"
        )
    return value, (tuple(messages) if isinstance(messages, list) else None)


def _completion_text(completion: Any, where: str) -> str:
    """TRL's completion: text, or messages whose assistant contents are joined."""
    if isinstance(completion, list):
        messages = _chat_messages(completion, where, "completion")
        completion = "".join(m["content"] for m in messages if m["role"] == "assistant")
    if not isinstance(completion, str) or not completion.strip():
        raise InputError(f"{where}: 'completion' must be non-empty text or assistant messages")
    return completion


def _answer_of(record: dict, where: str) -> tuple[str | None, str | None]:
    """(reference answer, demonstration or None): `answer`, else the final answer of `completion`,
    else None (a row only reward functions can score: `require_answers` checks)."""
    demonstration = _completion_text(record["completion"], where) if "completion" in record else None
    if "answer" not in record:
        return (None if demonstration is None else extract_final_answer(demonstration)), demonstration
    answer = record["answer"]
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        raise InputError(f"{where}: 'answer' must be a string or a number")
    return str(answer), demonstration


def parse_record(record: Any, where: str, render_chat: ChatRenderer | None = None) -> tuple[TaskExample, str | None]:
    """(example, split or None) of one task record (see the module docstring); InputError says
    what is wrong, prefixed by `where`."""
    if not isinstance(record, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(record).__name__}")
    answer, demonstration = _answer_of(record, where)
    prompt, messages = _prompt_of(record, where, render_chat)
    split = record.get("split")
    if split is not None and split not in TRAIN_SPLITS + VALIDATION_SPLITS:
        raise InputError(
            f"{where}: unknown split {str(split)[:40]!r}; use one of {', '.join(TRAIN_SPLITS + VALIDATION_SPLITS)}"
        )
    columns = tuple(
        (key, value)
        for key, value in record.items()
        if key not in ("prompt", "messages", "answer", "completion", "split")
    )
    example = TaskExample(
        prompt=prompt, answer=answer, demonstration=demonstration, columns=columns, prompt_messages=messages
    )
    return example, split


def require_answers(examples: Sequence[TaskExample], name: str) -> None:
    """InputError naming the first example without a reference answer (the answer check and the
    data_source verifiers need one; reward functions may not)."""
    missing = [example for example in examples if example.answer is None]
    if missing:
        raise InputError(
            f"task {name!r}: {len(missing)} row(s) have no 'answer' (nor TRL's 'completion'), the first "
            f"with prompt {missing[0].prompt[:60]!r}; give one, or score with task.reward functions"
        )


def _parse_line(
    line: str, line_number: int, path: Path, render_chat: ChatRenderer | None = None
) -> tuple[TaskExample, str | None]:
    where = f"{path}, line {line_number}"
    try:
        record = load_json(line)
    except ValueError as error:  # json.JSONDecodeError included
        raise InputError(f"{where}: not valid JSON ({getattr(error, 'msg', None) or error})") from None
    return parse_record(record, where, render_chat)


def read_task_examples(
    path: str | Path, render_chat: ChatRenderer | None = None
) -> list[tuple[TaskExample, str | None]]:
    """(example, split or None) for every non-blank line; InputError names the bad line."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"task file {str(path)!r} does not exist")
    try:
        with path.open(encoding="utf-8") as handle:
            rows = [
                _parse_line(line, number, path, render_chat)
                for number, line in enumerate(handle, start=1)
                if line.strip()
            ]
    except UnicodeDecodeError:
        raise InputError(
            f"task file {str(path)!r} is not UTF-8 JSON lines (a parquet file needs the .parquet suffix)"
        ) from None
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

    def __init__(self, name: str, train: list[TaskExample], validation: list[TaskExample], answer_check: str) -> None:
        get_answer_check(answer_check)
        if not train:
            raise InputError(f"task {name!r} has no training examples")
        self.name = name
        self.train = tuple(train)
        self.validation = tuple(validation)
        self.answer_check = answer_check

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        answer_check: str = "math",
        val_fraction: float = 0.1,
        seed: int = 0,
        render_chat: ChatRenderer | None = None,
    ) -> JsonlTask:
        if not 0 <= val_fraction < 1:
            raise InputError(f"val_fraction must be in [0, 1), got {val_fraction}")
        train, validation = split_examples(read_task_examples(path, render_chat), val_fraction, seed)
        require_answers(train + validation, Path(path).stem)
        return cls(Path(path).stem, train, validation, answer_check)

    def reward(self, completion_text: str, example: TaskExample) -> float:
        """The verifier of the example's data_source when it names one (data_sources), else the
        answer check: +1 correct, -1 otherwise."""
        verifier = verifier_for(dict(example.columns).get(DATA_SOURCE_COLUMN))
        if verifier is not None:
            return CORRECT_REWARD if verifier(completion_text, example.answer) else INCORRECT_REWARD
        return answer_reward(completion_text, example.answer, check=self.answer_check)
