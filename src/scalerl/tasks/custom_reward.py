"""Reward functions of the user's own, called as TRL calls its `reward_funcs`: keyword arguments
`prompts`, `completions`, `answers` (lists, one entry per sample), every dataset column of the
samples' examples (e.g. `answer`, `solution`, verl's `data_source` / `reward_model` /
`extra_info`), `trainer_state` (its `global_step` and `max_steps`) when the trainer knows the
step, and TRL's `log_extra` / `log_metric` hooks (accepted, their values dropped), returning one
float per sample. For conversational rows (prompts given as chat messages)
prompts are the message lists and each completion is `[{"role": "assistant", "content": text}]`,
as TRL passes them; otherwise both are text. A function with verl's signature
`compute_score(data_source, solution_str, ground_truth, extra_info)` is called once per sample
with the completion text and the row's reward_model.ground_truth (else its answer), and may return
a number or a dict holding "score". Several functions are combined as a weighted sum.

    task.reward = "my_rewards:correct, my_rewards.format:tags"    task.reward_weights = "1, 0.2"

A function is named "module.path:function" (imported; the working directory is searched too) or
"path/to/file.py:function"; the Python API also takes callables. An exception inside a function,
or a result that is not one finite number (or None: no opinion, 0) per sample, is one
RewardFunctionError naming the function and the first sample it fails on.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalerl.errors import ConfigError, InputError
from scalerl.tasks.types import Task, TaskExample

RewardFunction = Callable[..., Sequence[float | None]]


class RewardFunctionError(InputError):
    """A user's reward function raised or returned something other than one number per sample."""


@dataclass(frozen=True)
class WeightedReward:
    """One reward function, the name errors call it by, and its weight in the sum."""

    name: str
    function: RewardFunction
    weight: float = 1.0


@dataclass(frozen=True)
class RewardTrainerState:
    """What TRL's `trainer_state` keyword tells a reward function: optimiser steps done and the run's length."""

    global_step: int
    max_steps: int


def _ignored(*_: Any) -> None:
    """TRL's log_extra / log_metric hooks, accepted and dropped: scalerl logs each function's mean itself."""


TRL_LOGGING_HOOKS = {"log_extra": _ignored, "log_metric": _ignored}
VERL_PARAMETERS = ("data_source", "solution_str", "ground_truth")


def is_verl_compute_score(function: Callable) -> bool:
    """Whether `function` takes verl's compute_score arguments (data_source, solution_str, ground_truth)."""
    try:
        names = set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return False
    return set(VERL_PARAMETERS) <= names


def verl_score(value: Any) -> Any:
    """A compute_score result as a number: the number itself, or a dict's "score"."""
    return value.get("score") if isinstance(value, dict) else value


def as_trl_function(compute_score: Callable) -> RewardFunction:
    """A TRL-style reward function calling verl's `compute_score` once per sample with the
    completion text, the data_source, reward_model.ground_truth (else the answer) and extra_info."""

    def scores(completion_texts, data_source=None, reward_model=None, answers=None, extra_info=None, **_):
        count = len(completion_texts)
        sources, models = data_source or [None] * count, reward_model or [None] * count
        extras, references = extra_info or [None] * count, answers or [None] * count
        return [
            verl_score(
                compute_score(
                    data_source=source,
                    solution_str=text,
                    extra_info=extra,
                    ground_truth=model.get("ground_truth") if isinstance(model, dict) else reference,
                )
            )
            for text, source, model, extra, reference in zip(completion_texts, sources, models, extras, references)
        ]

    return scores


def _import_module(module_name: str, spec: str):
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise ConfigError(f"task.reward: {spec!r}: no file {module_name}")
        loaded = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(loaded)
        loaded.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name != module_name.split(".")[0] or os.getcwd() in sys.path:
            raise ConfigError(f"task.reward: {spec!r}: cannot import {module_name} ({error})") from None
    sys.path.insert(0, os.getcwd())  # as `python -m` would: a module in the working directory
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise ConfigError(f"task.reward: {spec!r}: cannot import {module_name} ({error})") from None


def resolve_reward_function(spec: str) -> RewardFunction:
    """The function "module.path:function" (or "file.py:function") names; ConfigError otherwise.
    Errors raised while importing the user's module are reported as they are, in one line."""
    module_name, colon, attribute = spec.strip().rpartition(":")
    if not colon or not module_name or not attribute:
        raise ConfigError(f"task.reward: {spec!r} is not 'module.path:function'")
    try:
        module = _import_module(module_name, spec)
    except ConfigError:
        raise
    except Exception as error:  # the user's module failed at import: say where, in one line
        raise ConfigError(f"task.reward: importing {module_name} raised {type(error).__name__}: {error}") from None
    function = getattr(module, attribute, None)
    if not callable(function):
        raise ConfigError(f"task.reward: {module_name} has no function {attribute!r}")
    return function


def parse_reward_weights(text: str, count: int) -> tuple[float, ...]:
    """ "1, 0.5" -> (1.0, 0.5); "" -> 1 for each of `count` functions. ConfigError unless there is
    one finite number per function."""
    if not text.strip():
        return (1.0,) * count
    try:
        weights = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise ConfigError(f"task.reward_weights: {text!r} is not a comma-separated list of numbers") from None
    if len(weights) != count or not all(math.isfinite(w) for w in weights):
        raise ConfigError(
            f"task.reward_weights: {text!r} must give one finite weight for each of the "
            f"{count} reward function(s) of task.reward"
        )
    return weights


def reward_functions(
    specs: str | Sequence[str | RewardFunction], weights: str | Sequence[float] = ""
) -> tuple[WeightedReward, ...]:
    """The weighted functions of "a:f, b:g" (or a list of names and callables) and their weights."""
    items = [part for part in specs.split(",") if part.strip()] if isinstance(specs, str) else list(specs)
    functions = [
        (item.strip(), resolve_reward_function(item))
        if isinstance(item, str)
        else (getattr(item, "__qualname__", repr(item)), item)
        for item in items
    ]
    if not all(callable(function) for _, function in functions):
        raise ConfigError("reward functions must be callables or 'module.path:function' names")
    functions = [
        (name, as_trl_function(function) if is_verl_compute_score(function) else function)
        for name, function in functions
    ]
    values = parse_reward_weights(weights, len(functions)) if isinstance(weights, str) else tuple(map(float, weights))
    if len(values) != len(functions):
        raise ConfigError(f"{len(values)} reward weight(s) for {len(functions)} reward function(s)")
    return tuple(WeightedReward(name, function, weight) for (name, function), weight in zip(functions, values))


def _accepted(function: RewardFunction, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments `function` can take: all of them when it has **kwargs, else those it names."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return arguments
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return arguments
    names = {p.name for p in parameters}
    return {key: value for key, value in arguments.items() if key in names}


def reward_arguments(completions: Sequence[str], examples: Sequence[TaskExample]) -> dict[str, list]:
    """TRL-style keyword arguments: prompts, completions (both as chat messages when every example
    is conversational), completion_texts, answers, and one list per dataset column (`answer` when
    a row has one, and each extra field of the examples; a column an example lacks is None there)."""
    answers = [example.answer for example in examples]
    columns = {"answer": answers} if any(answer is not None for answer in answers) else {}
    for name in dict.fromkeys(key for example in examples for key, _ in example.columns):
        columns.setdefault(name, [dict(example.columns).get(name) for example in examples])
    conversational = bool(examples) and all(example.prompt_messages is not None for example in examples)
    if conversational:
        prompts = [[dict(message) for message in example.prompt_messages] for example in examples]
        shown_completions = [[{"role": "assistant", "content": text}] for text in completions]
    else:
        prompts, shown_completions = [example.prompt for example in examples], list(completions)
    return {
        **columns,
        "prompts": prompts,
        "completions": shown_completions,
        "completion_texts": list(completions),
        "answers": answers,
    }


def _checked(values: Any, count: int) -> list[float]:
    """One finite float per sample (None -> 0.0); ValueError naming the first bad entry otherwise."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__") or len(values) != count:
        raise ValueError(f"returned {type(values).__name__} instead of a list of {count} numbers")
    out = []
    for index, value in enumerate(values):
        number = 0.0 if value is None else value
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number):
            raise ValueError(f"returned {value!r} for sample {index}, not a finite number")
        out.append(float(number))
    return out


def _failure(reward: WeightedReward, arguments: dict[str, list], error: Exception) -> RewardFunctionError:
    """The error naming the function and the first sample it fails on (found by calling it on
    one sample at a time; the batch as a whole when each sample alone passes)."""
    count = len(arguments["completions"])
    for index in range(count):
        single = {
            key: value[index : index + 1] if isinstance(value, list) else value for key, value in arguments.items()
        }
        try:
            _checked(reward.function(**_accepted(reward.function, single)), 1)
        except Exception as sample_error:  # the user's code: any exception is its failure
            prompt, completion = str(arguments["prompts"][index]), arguments["completion_texts"][index]
            return RewardFunctionError(
                f"reward function {reward.name} failed on sample {index} (prompt {prompt[:60]!r}, completion "
                f"{completion[:60]!r}): {type(sample_error).__name__}: {sample_error}"
            )
    return RewardFunctionError(
        f"reward function {reward.name} failed on a batch of {count} samples: {type(error).__name__}: {error}"
    )


def function_rewards(
    rewards: Sequence[WeightedReward],
    completions: Sequence[str],
    examples: Sequence[TaskExample],
    trainer_state: RewardTrainerState | None = None,
) -> list[list[float]]:
    """Each function's unweighted rewards f(prompts=..., completions=..., answers=..., **columns),
    one list per function (trainer_state passed when given)."""
    arguments: dict[str, Any] = {**reward_arguments(completions, examples), **TRL_LOGGING_HOOKS}
    if trainer_state is not None:
        arguments["trainer_state"] = trainer_state
    values = []
    for reward in rewards:
        try:
            values.append(_checked(reward.function(**_accepted(reward.function, arguments)), len(completions)))
        except Exception as error:  # the user's code: any exception is its failure
            raise _failure(reward, arguments, error) from None
    return values


def combined_rewards(
    rewards: Sequence[WeightedReward],
    completions: Sequence[str],
    examples: Sequence[TaskExample],
    trainer_state: RewardTrainerState | None = None,
) -> list[float]:
    """sum_f weight_f * f(prompts=..., completions=..., answers=..., **columns)[i] for each sample i."""
    totals = [0.0] * len(completions)
    for reward, values in zip(rewards, function_rewards(rewards, completions, examples, trainer_state)):
        totals = [total + reward.weight * value for total, value in zip(totals, values)]
    return totals


class RewardFunctionTask:
    """A task whose rewards come from the user's functions instead of its answer check; prompts and
    validation split unchanged. A validation sample passes when its combined reward is > 0."""

    def __init__(self, task: Task, rewards: Sequence[WeightedReward], max_steps: int = 0) -> None:
        if not rewards:
            raise ConfigError("a reward-function task needs at least one reward function")
        self.max_steps = max_steps
        self.base = task
        self.name = task.name
        self.train = task.train
        self.validation = task.validation
        self.reward_functions = tuple(rewards)

    def rewards(
        self,
        completions: Sequence[str],
        examples: Sequence[TaskExample],
        trainer_state: RewardTrainerState | None = None,
    ) -> list[float]:
        """The combined reward of each (completion, example) pair, in one call per function."""
        return combined_rewards(self.reward_functions, completions, examples, trainer_state)

    def reward(self, completion_text: str, example: TaskExample) -> float:
        return self.rewards([completion_text], [example])[0]


def with_reward_functions(
    task: Task,
    specs: str | Sequence[str | RewardFunction] = "",
    weights: str | Sequence[float] = "",
    max_steps: int = 0,
) -> Task:
    """`task` itself when no reward function is given, else a RewardFunctionTask scoring with them
    (`max_steps`: the run's length, told to functions in trainer_state)."""
    if not specs:
        return task
    return RewardFunctionTask(task, reward_functions(specs, weights), max_steps)
