"""Validation: the held-out pass rate R(C) that the compute-performance curve is fitted to.

Every evaluation uses the same held-out prompts (the first `eval_prompts` of the task's
validation split), `eval_samples_per_prompt` samples each, and a sampling generator reseeded to
the same value each time (common random numbers: the difference between two evaluations then
reflects the policy, not the sampling noise). Evaluation draws from its own generator, so it never
perturbs the training run's random streams (a resumed run stays reproducible).

When the held-out prompts carry a `difficulty` column with two to MAX_DIFFICULTY_GROUPS values (the
built-in task's easy / hard prompts; a JSONL task's own column), the pass rate of each group is
logged beside the total (`val_pass_rate_<value>`): where a run levels off, it says which prompts
it still fails.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from scalerl.errors import InputError
from scalerl.tasks.passing import ScoredSamples, score_samples
from scalerl.tasks.rollout import LengthControl, Rollout, SamplingSettings
from scalerl.tasks.types import Task, TaskExample
from scalerl.train.config.step_recipe import length_control, sampling_settings
from scalerl.train.config.train_config import TrainConfig
from scalerl.train.records.completions_table import COMPLETIONS_FILE
from scalerl.train.step_rollouts import generate_rollouts

_EVAL_SEED_OFFSET = 1_000_003
DIFFICULTY_COLUMN = "difficulty"
MAX_DIFFICULTY_GROUPS = 8
PASS_RATE_COLUMN = "val_pass_rate"


SamplesCallback = Callable[[Sequence[TaskExample], Sequence[Rollout], ScoredSamples], None]


def evaluate_correct_counts(
    model: torch.nn.Module,
    tokenizer: Any,
    task: Task,
    prompts: Sequence[TaskExample],
    samples_per_prompt: int,
    *,
    sampling: SamplingSettings = SamplingSettings(),
    length_control: LengthControl = LengthControl(),
    torch_generator: torch.Generator | None = None,
    prompts_per_batch: int = 64,
    pass_threshold: float = 0.0,
    pass_by_verifier: bool = False,
    on_samples: SamplesCallback | None = None,
) -> list[int]:
    """Per example, how many of its `samples_per_prompt` samples pass (validation): reward >
    pass_threshold, or the verifier's verdict (passing.score_samples), scored one prompt batch
    at a time; `on_samples(examples of the batch, rollouts, scores)` sees every batch."""
    if not prompts:
        raise InputError("an evaluation needs at least one prompt")
    if torch_generator is None:
        device = next(model.parameters()).device
        torch_generator = torch.Generator(device=device).manual_seed(0)
    counts = [0] * len(prompts)
    for start in range(0, len(prompts), prompts_per_batch):
        batch = list(prompts[start : start + prompts_per_batch])
        rollouts = generate_rollouts(
            model,
            tokenizer,
            [example.prompt for example in batch],
            list(range(len(batch))),
            num_generations=samples_per_prompt,
            sampling=sampling,
            length_control=length_control,
            torch_generator=torch_generator,
        )
        scores = score_samples(
            task,
            [r.completion_text for r in rollouts],
            [batch[r.prompt_index] for r in rollouts],
            pass_threshold=pass_threshold,
            by_verifier=pass_by_verifier,
        )
        for rollout, passed in zip(rollouts, scores.passed):
            counts[start + rollout.prompt_index] += passed
        if on_samples is not None:
            on_samples(batch, rollouts, scores)
    return counts


def evaluate_pass_rate(
    model: torch.nn.Module,
    tokenizer: Any,
    task: Task,
    prompts: Sequence[TaskExample],
    samples_per_prompt: int,
    **options: Any,
) -> float:
    """Mean of (reward > 0) over `samples_per_prompt` samples of each example (validation);
    `options` as evaluate_correct_counts."""
    counts = evaluate_correct_counts(model, tokenizer, task, prompts, samples_per_prompt, **options)
    return sum(counts) / (len(prompts) * samples_per_prompt)


def validation_sampling(config: TrainConfig) -> SamplingSettings:
    """The sampling settings of an evaluation: the run's, at temperature 0 (greedy) with eval_greedy."""
    sampling = sampling_settings(config)
    return dataclasses.replace(sampling, temperature=0.0) if config.eval_greedy else sampling


def validation_examples(task: Task, config: TrainConfig) -> tuple[TaskExample, ...]:
    """The held-out prompts every evaluation uses (at most `eval_prompts`)."""
    return tuple(task.validation[: config.eval_prompts])


def difficulty_groups(examples: tuple[TaskExample, ...]) -> dict[str, list[int]] | None:
    """{column suffix: indices of the examples in that group} by the `difficulty` column, or None
    unless every example has one and it takes 2..MAX_DIFFICULTY_GROUPS values. The suffix is the
    value with every run of characters other than letters, digits and '.' made one '_'."""
    values = [dict(example.columns).get(DIFFICULTY_COLUMN) for example in examples]
    if any(value is None for value in values):
        return None
    groups: dict[str, list[int]] = {}
    for index, value in enumerate(values):
        groups.setdefault(re.sub(r"[^A-Za-z0-9.]+", "_", str(value)).strip("_") or "none", []).append(index)
    return groups if 2 <= len(groups) <= MAX_DIFFICULTY_GROUPS else None


def pass_rate_columns(
    counts: list[int], samples_per_prompt: int, groups: dict[str, list[int]] | None
) -> dict[str, float]:
    """{"val_pass_rate": sum(counts) / (n k)} and, per group g, "val_pass_rate_<g>": the same over
    its examples only (k samples per prompt)."""
    columns = {PASS_RATE_COLUMN: sum(counts) / (len(counts) * samples_per_prompt)}
    for name, indices in (groups or {}).items():
        columns[f"{PASS_RATE_COLUMN}_{name}"] = sum(counts[i] for i in indices) / (len(indices) * samples_per_prompt)
    return columns


def validation_pass_rates(
    model: torch.nn.Module,
    tokenizer: Any,
    task: Task,
    config: TrainConfig,
    *,
    run_dir: Path | None = None,
    step: int | None = None,
) -> dict[str, float]:
    """The validation columns of a metrics row: {"val_pass_rate": share of the held-out prompts x
    `eval_samples_per_prompt` samples that pass (reward > task.pass_threshold, or the verifier
    with task.pass_by_verifier; one greedy completion each with eval_greedy)}, one pass rate per
    difficulty group (difficulty_groups), "val_reward_mean" and, with task.reward functions,
    "val_reward_<function>" (each function's mean). With `run_dir`, the first
    `eval_logged_completions` samples are appended to RUN/completions.jsonl, tagged with `step`."""
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(config.seed + _EVAL_SEED_OFFSET)
    examples = validation_examples(task, config)
    samples = SampleLog(config.eval_logged_completions if run_dir is not None else 0)
    counts = evaluate_correct_counts(
        model,
        tokenizer,
        task,
        examples,
        config.eval_samples_per_prompt,
        sampling=validation_sampling(config),
        length_control=length_control(config),
        torch_generator=generator,
        pass_threshold=config.task.pass_threshold,
        pass_by_verifier=config.task.pass_by_verifier,
        on_samples=samples.add,
    )
    if run_dir is not None and samples.rows:
        append_completions(run_dir / COMPLETIONS_FILE, samples.rows, step)
    return {
        **pass_rate_columns(counts, config.eval_samples_per_prompt, difficulty_groups(examples)),
        **samples.reward_means(),
    }


class SampleLog:
    """What an evaluation keeps of its samples: the first `limit` as table rows, and the sums
    behind each reward mean."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.rows: list[dict[str, Any]] = []
        self.sums: dict[str, float] = {}
        self.count = 0

    def add(self, examples, rollouts, scores: ScoredSamples) -> None:
        self.count += len(rollouts)
        self.sums["val_reward_mean"] = self.sums.get("val_reward_mean", 0.0) + sum(scores.rewards)
        for name, values in scores.function_values.items():
            column = f"val_reward_{re.sub(r'[^A-Za-z0-9.]+', '_', name).strip('_')}"
            self.sums[column] = self.sums.get(column, 0.0) + sum(values)
        for index, rollout in enumerate(rollouts[: max(0, self.limit - len(self.rows))]):
            example = examples[rollout.prompt_index]
            self.rows.append(
                {
                    "prompt": example.prompt,
                    "completion": rollout.completion_text,
                    "answer": example.answer,
                    "reward": scores.rewards[index],
                    "passed": scores.passed[index],
                    **{name: values[index] for name, values in scores.function_values.items()},
                }
            )

    def reward_means(self) -> dict[str, float]:
        return {column: total / self.count for column, total in self.sums.items()} if self.count else {}


def append_completions(path: Path, rows: list[dict[str, Any]], step: int | None) -> None:
    """Append one JSON line per sampled completion, each tagged with the step it was validated at."""
    with path.open("a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps({"step": step, **row}, default=str) + "\n")
