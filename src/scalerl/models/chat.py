"""Chat-form prompts: a list of {role, content} messages rendered with the model tokenizer's chat
template (`apply_chat_template(..., add_generation_prompt=True)`), as TRL does for conversational
datasets, so the policy sees the prompt format it was tuned on.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from scalerl.errors import InputError

Messages = list[dict[str, str]]


def render_chat_prompt(tokenizer: Any, messages: Messages, *, source: str = "the model") -> str:
    """The prompt text of `messages`. A template that writes the BOS token itself loses it here
    when the tokenizer adds BOS on encoding anyway (one BOS, not two)."""
    if not getattr(tokenizer, "chat_template", None):
        raise InputError(
            f"the tokenizer of {source} has no chat template; write the task with 'prompt' text instead of 'messages'"
        )
    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except Exception as error:  # jinja2 raises its own types (TemplateError, UndefinedError, ...)
        raise InputError(f"the chat template of {source} failed on these messages: {error}") from None
    bos = getattr(tokenizer, "bos_token", None)
    if bos and text.startswith(bos) and tokenizer("").input_ids[:1] == [tokenizer.bos_token_id]:
        text = text[len(bos) :]
    return text


def template_text(chat_template: str) -> str:
    """model.chat_template's Jinja text: the file's contents for a .jinja / .j2 path, else itself."""
    if chat_template.endswith((".jinja", ".j2")):
        try:
            return Path(chat_template).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise InputError(f"model.chat_template: cannot read {chat_template}: {error}") from None
    return chat_template


def chat_renderer(model_path: str, chat_template: str = "") -> Callable[[Messages], str]:
    """A renderer for the tokenizer of `model_path` ('builtin' or a local folder), with
    `chat_template` (model.chat_template) in place of its own when given; loaded on first use
    only: a task without chat lines never loads it."""
    loaded: list[Any] = []

    def render(messages: Messages) -> str:
        if not loaded:
            tokenizer = _load_tokenizer(model_path)
            if chat_template:
                tokenizer.chat_template = template_text(chat_template)
            loaded.append(tokenizer)
        return render_chat_prompt(loaded[0], messages, source=repr(model_path))

    return render


def _load_tokenizer(model_path: str) -> Any:
    if model_path == "builtin":
        from scalerl.models.char_tokenizer import build_char_tokenizer

        return build_char_tokenizer()
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(model_path, local_files_only=True)
    except (OSError, ValueError) as error:
        raise InputError(f"cannot load the tokenizer of {model_path!r}: {error}") from None
