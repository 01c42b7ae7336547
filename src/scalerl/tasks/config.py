"""The `task` section of a run's config: the built-in arithmetic task's difficulty, a JSONL or
parquet file, or verl-style train and validation files (torch-free).

The one settings type of the tasks: `ArithmeticTask(TaskConfig(...))` and `load_task(TaskConfig(...))`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scalerl.checks import require, require_choice, require_finite, require_positive
from scalerl.tasks.custom_reward import parse_reward_weights
from scalerl.tasks.verifiers import ANSWER_CHECKS as _CHECKS

ANSWER_CHECKS = tuple(_CHECKS)


@dataclass(frozen=True)
class TaskConfig:
    """The verifiable task: 'builtin' (multi-step arithmetic) or a JSONL file, and its difficulty.
    A field's `help` is its meaning in `scalerl config keys` and the CLI."""

    name: str = field(
        default="builtin",
        metadata={
            "help": "'builtin' (multi-step arithmetic), a JSONL or parquet file of "
            "{prompt|messages, answer|completion} "
            "(verl's layout too), or a dataset id in the local Hugging Face cache"
        },
    )
    num_operands: int = field(default=4, metadata={"help": "built-in task: operands per problem"})
    max_digits: int = field(default=1, metadata={"help": "built-in task: most digits per operand"})
    operations: str = field(
        default="+", metadata={"help": "built-in task: operators to draw from (characters of + - *)"}
    )
    num_train_prompts: int = field(default=4000, metadata={"help": "built-in task: training prompts"})
    num_val_prompts: int = field(default=64, metadata={"help": "built-in task: held-out validation prompts"})
    answer_check: str = field(
        default="exact", metadata={"help": "how a completion's answer is compared with the reference (exact, math)"}
    )
    val_fraction: float = field(
        default=0.1, metadata={"help": "JSONL task without split fields: share of lines held out for validation"}
    )
    seed: int = field(default=0, metadata={"help": "seed of the task's prompts and hold-out"})
    # Both pools hold the share (validation prompts: round(hard_fraction * num_val_prompts) of
    # them). Their worked solution is longer than the thinking budget, so they stay unsolved and
    # cap the pass rate near 1 - hard_fraction.
    hard_fraction: float = field(
        default=0.0,
        metadata={
            "help": "built-in task: share of prompts with hard_num_operands operands (beyond the thinking budget)"
        },
    )
    hard_num_operands: int = field(default=12, metadata={"help": "built-in task: operands of the hard prompts"})
    modulus: int = field(
        default=0,
        metadata={"help": "built-in task: 0 (plain sums) or m: each reduction modulo m (10: one-digit steps)"},
    )
    reward: str = field(
        default="",
        metadata={
            "help": "reward functions 'module.path:function' (comma-separated), called like TRL's reward_funcs "
            "('': the answer check)"
        },
    )
    reward_weights: str = field(
        default="", metadata={"help": "weights of the task.reward functions, comma-separated ('': 1 each)"}
    )
    pass_threshold: float = field(
        default=0.0,
        metadata={
            "help": "validation: a sample passes when its reward (the weighted sum of task.reward functions, else the "
            "verifier's +1/-1) is above this"
        },
    )
    pass_by_verifier: bool = field(
        default=False,
        metadata={
            "help": "validation with task.reward functions: a sample passes by the answer check's or data_source "
            "verifier's verdict (rows need answers), not by its reward"
        },
    )
    train_files: str = field(
        default="",
        metadata={
            "help": "training files, comma-separated (parquet or JSONL, as verl's data.train_files; every row trains "
            "unless task.val_files is empty); in place of task.name"
        },
    )
    val_files: str = field(
        default="",
        metadata={
            "help": "validation files, comma-separated (parquet or JSONL, as verl's data.val_files; every row "
            "validates); needs task.train_files"
        },
    )

    def __post_init__(self) -> None:
        require(bool(self.name), "task.name", "must be 'builtin' or a JSONL file path")
        require(self.num_operands >= 2, "task.num_operands", f"must be >= 2, got {self.num_operands}")
        require_positive(self.max_digits, "task.max_digits")
        bad_ops = sorted(set(self.operations) - set("+-*"))
        require(
            bool(self.operations) and not bad_ops,
            "task.operations",
            f"{self.operations!r} must be made of the characters + - *",
        )
        require_positive(self.num_train_prompts, "task.num_train_prompts")
        require_positive(self.num_val_prompts, "task.num_val_prompts")
        require(0 <= self.hard_fraction < 1, "task.hard_fraction", f"must be in [0, 1), got {self.hard_fraction!r}")
        require(self.hard_num_operands >= 2, "task.hard_num_operands", f"must be >= 2, got {self.hard_num_operands}")
        require(
            self.modulus == 0 or self.modulus >= 2,
            "task.modulus",
            f"must be 0 (plain arithmetic) or >= 2, got {self.modulus}",
        )
        require_choice(self.answer_check, "task.answer_check", ANSWER_CHECKS)
        require(0 < self.val_fraction < 1, "task.val_fraction", f"must be in (0, 1), got {self.val_fraction!r}")
        require(
            bool(self.reward.strip()) or not self.reward_weights.strip(),
            "task.reward_weights",
            "weights reward functions: set task.reward too",
        )
        parse_reward_weights(self.reward_weights, len([part for part in self.reward.split(",") if part.strip()]))
        require_finite(self.pass_threshold, "task.pass_threshold")
        require(
            not self.pass_by_verifier or bool(self.reward.strip()),
            "task.pass_by_verifier",
            "chooses the verifier over task.reward functions: set task.reward too",
        )
        require(
            not self.val_files.strip() or bool(self.train_files.strip()),
            "task.val_files",
            "needs task.train_files beside it (the training rows)",
        )
        require(
            not self.train_files.strip() or self.name == "builtin",
            "task.train_files",
            f"give task.name ({self.name!r}) or task.train_files, not both",
        )

    @property
    def train_paths(self) -> tuple[str, ...]:
        """The files of task.train_files, in order."""
        return file_list(self.train_files)

    @property
    def val_paths(self) -> tuple[str, ...]:
        """The files of task.val_files, in order."""
        return file_list(self.val_files)


def file_list(text: str) -> tuple[str, ...]:
    """ "a.parquet, b.jsonl" -> ("a.parquet", "b.jsonl"); blanks dropped."""
    return tuple(part.strip() for part in text.split(",") if part.strip())
