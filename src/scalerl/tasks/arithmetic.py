"""The built-in multi-step arithmetic task.

Prompts like `12+47+30=`, worked solutions like `<think>12+47=59;59+30=89</think>89` (one
reduction per step, `*` before `+`/`-`, left to right). With `modulus` m > 0 every reduction
keeps its result modulo m (`7+8=5` for m = 10): every intermediate result of one-digit operands is
then one digit, each step sits at the same offset in every prompt, and all prompts are equally
hard, so the policy learns them together instead of leaving a tail of rare layouts. Reward +1 if
the final answer (the text after `</think>`) equals the reference exactly, else -1.

Difficulty: number of operands, digits, operations, and a share of hard prompts (`hard_fraction`,
`hard_num_operands` operands) whose worked solution does not fit the thinking budget: like the
problems of a real training set that lie beyond the model's generation budget, they cap the
attainable pass rate below 1, so a run's ceiling A is a property of the task that a forecast can
pin (ScaleRL, arXiv 2510.13786, section 2: A is the asymptotic pass rate). Train and validation
prompts are disjoint and deterministic under the seed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

from scalerl.errors import ConfigError
from scalerl.tasks.config import TaskConfig
from scalerl.tasks.types import TaskExample
from scalerl.tasks.verifiers import answer_reward


def _apply(left: int, operation: str, right: int) -> int:
    if operation == "+":
        return left + right
    if operation == "-":
        return left - right
    return left * right


def solve_with_steps(operands: Sequence[int], operations: Sequence[str], modulus: int = 0) -> tuple[list[str], int]:
    """Evaluate with the usual precedence, one binary reduction per step; with modulus m > 0 each
    reduction's result is taken modulo m (r = (a op b) mod m, in [0, m)).

    Returns the steps (e.g. ["4*5=20", "3+20=23"] for 3+4*5; ["4*5=0", "3+0=3"] with m = 10) and the value.
    """
    values, ops = list(operands), list(operations)
    steps = []
    while ops:
        index = ops.index("*") if "*" in ops else 0
        result = _apply(values[index], ops[index], values[index + 1])
        result = result % modulus if modulus else result
        steps.append(f"{values[index]}{ops[index]}{values[index + 1]}={result}")
        values[index : index + 2] = [result]
        del ops[index]
    return steps, values[0]


def arithmetic_example(operands: Sequence[int], operations: Sequence[str], modulus: int = 0) -> TaskExample:
    """The prompt `a+b+c=`, the answer, and the worked demonstration `<think>steps</think>answer`."""
    prompt = "".join(f"{value}{op}" for value, op in zip(operands, list(operations) + ["="]))
    steps, value = solve_with_steps(operands, operations, modulus)
    demonstration = f"<think>{';'.join(steps)}</think>{value}"
    return TaskExample(prompt=prompt, answer=str(value), demonstration=demonstration)


def _random_example(settings: TaskConfig, rng: random.Random, num_operands: int) -> TaskExample:
    """A random prompt of `num_operands` operands, tagged ("difficulty", "hard") when that is
    hard_num_operands (and the task has hard prompts), else ("difficulty", "easy"): validation
    logs the pass rate of each (train.validation)."""
    operands = [rng.randrange(10**settings.max_digits) for _ in range(num_operands)]
    operations = [rng.choice(settings.operations) for _ in range(num_operands - 1)]
    example = arithmetic_example(operands, operations, settings.modulus)
    hard = settings.hard_fraction > 0 and num_operands == settings.hard_num_operands
    return replace(example, columns=(("difficulty", "hard" if hard else "easy"),))


def _unique_examples(
    count: int, settings: TaskConfig, rng: random.Random, exclude: set[str], num_operands: int
) -> list[TaskExample]:
    examples: list[TaskExample] = []
    while len(examples) < count:
        example = _random_example(settings, rng, num_operands)
        if example.prompt not in exclude:
            exclude.add(example.prompt)
            examples.append(example)
    return examples


def hard_count(settings: TaskConfig, pool_size: int) -> int:
    """Hard prompts in a pool of `pool_size`: round(hard_fraction * pool_size)."""
    return int(round(settings.hard_fraction * pool_size))


def distinct_prompts(settings: TaskConfig, num_operands: int) -> int:
    """(10**max_digits)**num_operands * len(set(operations))**(num_operands - 1)."""
    return (10**settings.max_digits) ** num_operands * len(set(settings.operations)) ** (num_operands - 1)


def check_enough_prompts(settings: TaskConfig) -> None:
    """ConfigError unless twice the train + validation prompts of each difficulty fit in the
    distinct prompts of that difficulty (`distinct_prompts`)."""
    pools = (settings.num_train_prompts, settings.num_val_prompts)
    hard = sum(hard_count(settings, size) for size in pools)
    wanted = {settings.num_operands: sum(pools) - hard}
    if hard:
        wanted[settings.hard_num_operands] = wanted.get(settings.hard_num_operands, 0) + hard
    for num_operands, count in wanted.items():
        distinct = distinct_prompts(settings, num_operands)
        if 2 * count > distinct:
            raise ConfigError(
                f"only {distinct} distinct prompts exist with {num_operands} operands at this "
                f"difficulty; ask for at most {distinct // 2} train + validation prompts of them"
            )


def _pool(size: int, settings: TaskConfig, rng: random.Random, seen: set[str]) -> tuple[TaskExample, ...]:
    """`size` distinct prompts, `hard_count` of them hard, in an order shuffled by `rng`."""
    hard = hard_count(settings, size)
    examples = _unique_examples(size - hard, settings, rng, seen, settings.num_operands)
    if hard:
        examples += _unique_examples(hard, settings, rng, seen, settings.hard_num_operands)
        rng.shuffle(examples)
    return tuple(examples)


class ArithmeticTask:
    """The built-in task. Validation prompts are drawn first, so they do not depend on the size
    of the training pool; training prompts never repeat a validation prompt."""

    def __init__(self, settings: TaskConfig = TaskConfig()) -> None:
        check_enough_prompts(settings)
        self.settings = settings
        hard = (
            f"+{settings.hard_fraction:g}x{settings.hard_num_operands}"
            if hard_count(settings, settings.num_val_prompts + settings.num_train_prompts)
            else ""
        )
        modulus = f"-mod{settings.modulus}" if settings.modulus else ""
        self.name = f"arithmetic-{settings.num_operands}x{settings.max_digits}d-{settings.operations}{modulus}{hard}"
        rng = random.Random(settings.seed)
        seen: set[str] = set()
        self.validation = _pool(settings.num_val_prompts, settings, rng, seen)
        self.train = _pool(settings.num_train_prompts, settings, rng, seen)

    def reward(self, completion_text: str, example: TaskExample) -> float:
        return answer_reward(completion_text, example.answer, check="exact")
