"""Verifiers chosen by a row's `data_source` (verl's column naming the dataset a row comes from):
GSM8K's `#### N` answer and MATH's last `\\boxed{...}` answer. A row whose data_source has no
verifier here is scored by the task's answer check.

Both rules read one final answer only (the last `####`, the last `\\boxed{}`), so a completion
cannot earn credit by listing several candidates ("The answer is 7, not 8. #### 8" answers 8).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from fractions import Fraction

from scalerl.tasks.verifiers import math_equal, parse_number

GSM8K_MARKER = "####"
_GSM8K_NUMBER = re.compile(r"[+-]?\$?\s*(\d[\d,]*(\.\d+)?|\.\d+)")
_BOX_COMMANDS = ("\\boxed", "\\fbox")


def gsm8k_answer(solution: str) -> Fraction | None:
    """The number right after the last `####` of `solution` (commas, a `$` and a trailing '.'
    dropped), or None when there is no marker or no number follows it.

    "... #### 1,234.50" -> 2469/2; "#### $7." -> 7; "no marker" -> None."""
    _, marker, after = solution.rpartition(GSM8K_MARKER)
    if not marker:
        return None
    match = _GSM8K_NUMBER.match(after.strip())
    if match is None:
        return None
    text = match.group(0).replace("$", "").replace(",", "").replace(" ", "")
    return Fraction(text)


def gsm8k_correct(solution: str, ground_truth: str) -> bool:
    """Whether the last `####` answer of `solution` equals `ground_truth` as a number."""
    predicted = gsm8k_answer(solution)
    reference = parse_number(str(ground_truth))
    if reference is None:
        reference = gsm8k_answer(f"{GSM8K_MARKER} {ground_truth}")
    return predicted is not None and reference is not None and predicted == reference


def last_boxed(text: str) -> str | None:
    """The contents of the last `\\boxed{...}` (or `\\fbox{...}`) of `text`, braces balanced, or
    None when there is none or it is not closed. "\\boxed{\\frac{1}{2}} ... \\boxed{3}" -> "3"."""
    openings = [(text.rfind(command + "{"), command) for command in _BOX_COMMANDS]
    position, command = max(openings)
    if position < 0:
        return None
    start = position + len(command)
    depth = 0
    for index in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return text[start + 1 : index]
    return None


def math_correct(solution: str, ground_truth: str) -> bool:
    """Whether the last boxed answer of `solution` equals `ground_truth` (itself boxed or bare)
    mathematically (verifiers.math_equal); a solution with no boxed answer is wrong."""
    predicted = last_boxed(solution)
    if predicted is None:
        return False
    reference = last_boxed(str(ground_truth))
    return math_equal(predicted, reference if reference is not None else str(ground_truth))


# data_source -> verifier; the names verl's preprocessing scripts and the hub datasets use.
DATA_SOURCE_VERIFIERS: dict[str, Callable[[str, str], bool]] = {
    "openai/gsm8k": gsm8k_correct,
    "gsm8k": gsm8k_correct,
    "lighteval/MATH": math_correct,
    "DigitalLearningGmbH/MATH-lighteval": math_correct,
    "HuggingFaceH4/MATH-500": math_correct,
    "hendrycks/competition_math": math_correct,
    "EleutherAI/hendrycks_math": math_correct,
    "math": math_correct,
    "MATH": math_correct,
}


def verifier_for(data_source: object) -> Callable[[str, str], bool] | None:
    """The verifier of a row's data_source, or None when it names none here."""
    return DATA_SOURCE_VERIFIERS.get(data_source) if isinstance(data_source, str) else None
