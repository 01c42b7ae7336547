"""Per-sequence columns of a batch of rollouts: the numbers a step's bookkeeping reads.

A step's counters and metrics row (RunState.book_step) and the prompt pool's update need six
numbers per sequence, never its tokens. A packed batch (scalerl.train.batch.packed_rollouts) gives them as
views of its arrays (lengths are differences of its offsets), so the trainer and the pipeline's
driver book a step in a few vectorised passes without rebuilding Rollout objects. numpy only:
cheap to import anywhere.
"""

from __future__ import annotations

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


def generation_totals(columns: BatchColumns) -> tuple[int, int]:
    """(tokens generated, attention context sum) of a batch's generation:

        tokens = sum_i L_i ;  context = sum_i (L_i * P_i + L_i * (L_i + 1) / 2)

    (scalerl.train.flops.context_token_sum per sequence, summed; exact integers)."""
    lengths, prompts = columns.completion_lengths, columns.prompt_lengths
    context = lengths * prompts + lengths * (lengths + 1) // 2
    return int(lengths.sum()), int(context.sum())
