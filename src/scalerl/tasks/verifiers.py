"""Answer checking: extract the final answer of a completion and compare it with the reference,
exactly or math-verify-style ("1/2" == "0.5" == "\\frac{1}{2}"). Reward is +1 / -1 (ScaleRL)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from fractions import Fraction

from scalerl.errors import ConfigError

THINK_END = "</think>"
CORRECT_REWARD = 1.0
INCORRECT_REWARD = -1.0

_FRAC = re.compile(r"^\\[dt]?frac\{([^{}]+)\}\{([^{}]+)\}$")
_BOXED = re.compile(r"\\boxed\{(.*)\}")
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def extract_final_answer(completion_text: str, think_end: str = THINK_END) -> str:
    """The text after the last `think_end` tag, or the whole completion if there is none; stripped."""
    _, tag, after = completion_text.rpartition(think_end)
    return (after if tag else completion_text).strip()


def exact_match(predicted: str, reference: str) -> bool:
    """True when the two answers are the same string up to surrounding whitespace."""
    return predicted.strip() == reference.strip()


def _strip_latex_wrappers(text: str) -> str:
    text = text.strip().strip("$").strip()
    boxed = _BOXED.search(text)
    if boxed:
        text = boxed.group(1)
    for wrapper in ("\\left", "\\right", "\\!", "\\,", "\\ ", "{,}"):
        text = text.replace(wrapper, "")
    text = text.replace("\\%", "").replace("%", "")
    return text.replace(" ", "").rstrip(".")


def parse_number(text: str) -> Fraction | None:
    """The exact rational value of an answer string, or None if it is not a plain number.

    Accepts integers, decimals ("0.5", "1,000"), scientific notation, fractions "a/b" and
    LaTeX "\\frac{a}{b}" / "\\dfrac{a}{b}", optionally inside $...$ or \\boxed{...}.
    """
    text = _strip_latex_wrappers(text)
    if re.fullmatch(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?", text):
        text = text.replace(",", "")
    sign = 1
    if text.startswith("-") and _FRAC.match(text[1:]):
        sign, text = -1, text[1:]
    fraction = _FRAC.match(text)
    if fraction:
        numerator, denominator = (parse_number(part) for part in fraction.groups())
    elif text.count("/") == 1:
        numerator, denominator = (parse_number(part) for part in text.split("/"))
    elif _NUMBER.match(text):
        return Fraction(text)
    else:
        return None
    if numerator is None or denominator is None or denominator == 0:
        return None
    return sign * numerator / denominator


def math_equal(predicted: str, reference: str) -> bool:
    """Mathematical equality of two answers.

    True when the `math-verify` package (if installed) proves them equal, or when both sides parse
    as the same exact rational number, or when they match with LaTeX wrappers and spaces removed.
    math-verify parses LaTeX and plain numbers but not every plain-text expression, hence the
    fallbacks.
    """
    try:
        import math_verify
    except ImportError:
        math_verify = None
    if math_verify is not None and _math_verify_equal(math_verify, predicted, reference):
        return True
    predicted_value, reference_value = parse_number(predicted), parse_number(reference)
    if predicted_value is not None and reference_value is not None:
        return predicted_value == reference_value
    return _strip_latex_wrappers(predicted) == _strip_latex_wrappers(reference)


def _math_verify_equal(math_verify, predicted: str, reference: str) -> bool:
    """math-verify's verdict; its timeouts use SIGALRM, which only the main thread may set."""
    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    gold = math_verify.parse(reference, parsing_timeout=timeout)
    answer = math_verify.parse(predicted, parsing_timeout=timeout)
    return bool(math_verify.verify(gold, answer, timeout_seconds=timeout))


ANSWER_CHECKS: dict[str, Callable[[str, str], bool]] = {"exact": exact_match, "math": math_equal}


def get_answer_check(name: str) -> Callable[[str, str], bool]:
    """The answer comparison registered under `name` ("exact" or "math")."""
    if name not in ANSWER_CHECKS:
        raise ConfigError(f"answer check must be one of {', '.join(ANSWER_CHECKS)}, got {name!r}")
    return ANSWER_CHECKS[name]


def answer_reward(completion_text: str, reference: str, check: str = "exact") -> float:
    """+1 if the completion's final answer matches `reference` under `check`, else -1."""
    is_correct = get_answer_check(check)(extract_final_answer(completion_text), reference)
    return CORRECT_REWARD if is_correct else INCORRECT_REWARD
