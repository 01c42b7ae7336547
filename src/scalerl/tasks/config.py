"""The `task` section of a run's config: the built-in arithmetic task's difficulty or a JSONL file (torch-free).

The one settings type of the tasks: `ArithmeticTask(TaskConfig(...))` and `load_task(TaskConfig(...))`.
"""

from __future__ import annotations

from dataclasses import dataclass

from scalerl.checks import require, require_choice, require_positive
from scalerl.tasks.verifiers import ANSWER_CHECKS as _CHECKS

ANSWER_CHECKS = tuple(_CHECKS)


@dataclass(frozen=True)
class TaskConfig:
    """The verifiable task: 'builtin' (multi-step arithmetic) or a JSONL file, and its difficulty."""

    name: str = "builtin"
    num_operands: int = 4
    max_digits: int = 1
    operations: str = "+"
    num_train_prompts: int = 4000
    num_val_prompts: int = 64
    answer_check: str = "exact"
    val_fraction: float = 0.1
    seed: int = 0
    # A share of prompts with `hard_num_operands` operands, in both pools (validation prompts:
    # round(hard_fraction * num_val_prompts) of them). Their worked solution is longer than the
    # thinking budget, so they stay unsolved and cap the pass rate near 1 - hard_fraction.
    hard_fraction: float = 0.0
    hard_num_operands: int = 12
    # 0: plain arithmetic; m > 0: every reduction's result modulo m (one-digit results for m = 10).
    modulus: int = 0

    def __post_init__(self) -> None:
        require(bool(self.name), "task.name", "must be 'builtin' or a JSONL file path")
        require(self.num_operands >= 2, "task.num_operands", f"must be >= 2, got {self.num_operands}")
        require_positive(self.max_digits, "task.max_digits")
        bad_ops = sorted(set(self.operations) - set("+-*"))
        require(bool(self.operations) and not bad_ops, "task.operations",
                 f"{self.operations!r} must be made of the characters + - *")
        require_positive(self.num_train_prompts, "task.num_train_prompts")
        require_positive(self.num_val_prompts, "task.num_val_prompts")
        require(0 <= self.hard_fraction < 1, "task.hard_fraction",
                 f"must be in [0, 1), got {self.hard_fraction!r}")
        require(self.hard_num_operands >= 2, "task.hard_num_operands",
                 f"must be >= 2, got {self.hard_num_operands}")
        require(self.modulus == 0 or self.modulus >= 2, "task.modulus",
                 f"must be 0 (plain arithmetic) or >= 2, got {self.modulus}")
        require_choice(self.answer_check, "task.answer_check", ANSWER_CHECKS)
        require(0 < self.val_fraction < 1, "task.val_fraction",
                 f"must be in (0, 1), got {self.val_fraction!r}")
