"""Per-sequence columns of a batch of rollouts: the numbers a step's bookkeeping reads.

A step's counters and metrics row (RunState.book_step) and the prompt pool's update need six
numbers per sequence, never its tokens. A packed batch (scalerl.train.batch.packed_rollouts) gives them as
views of its arrays (lengths are differences of its offsets), so the pipeline's driver books a
step in a few vectorised passes without rebuilding Rollout objects; the synchronous trainer's
Rollouts give the same columns (`rollout_columns`). numpy only: cheap to import anywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class BatchColumns:
    """n sequences, one entry each."""

    prompt_index: np.ndarray  # int64 [n]
    reward: np.ndarray  # float64 [n]
    truncated: np.ndarray  # bool [n]
    interrupted: np.ndarray  # bool [n]
    prompt_lengths: np.ndarray  # int64 [n], P_i
    completion_lengths: np.ndarray  # int64 [n], L_i

    def __len__(self) -> int:
        return int(self.reward.size)


def rollout_columns(rollouts: Sequence) -> BatchColumns:
    """The columns of a sequence of scalerl.tasks.rollout.Rollout."""
    return BatchColumns(
        prompt_index=np.array([r.prompt_index for r in rollouts], dtype=np.int64),
        reward=np.array([r.reward for r in rollouts], dtype=np.float64),
        truncated=np.array([r.truncated for r in rollouts], dtype=bool),
        interrupted=np.array([r.interrupted for r in rollouts], dtype=bool),
        prompt_lengths=np.array([len(r.prompt_token_ids) for r in rollouts], dtype=np.int64),
        completion_lengths=np.array([len(r.completion_token_ids) for r in rollouts], dtype=np.int64),
    )


def as_columns(batch) -> BatchColumns:
    """BatchColumns as they are; a packed batch's own (its `columns()`); else Rollouts'."""
    if isinstance(batch, BatchColumns):
        return batch
    if hasattr(batch, "columns"):
        return batch.columns()
    return rollout_columns(list(batch))


def generation_totals(columns: BatchColumns) -> tuple[int, int]:
    """(tokens generated, attention context sum) of a batch's generation:

        tokens = sum_i L_i ;  context = sum_i (L_i * P_i + L_i * (L_i + 1) / 2)

    (scalerl.train.flops.context_token_sum per sequence, summed; exact integers)."""
    lengths, prompts = columns.completion_lengths, columns.prompt_lengths
    context = lengths * prompts + lengths * (lengths + 1) // 2
    return int(lengths.sum()), int(context.sum())
