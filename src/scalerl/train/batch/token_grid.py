"""The decoder's record of a batch as arrays: one row per sequence, one column per decoding step.

A sequence's completion token j (its token id, the generator's log-prob of it, the policy version
that sampled it and whether it was sampled or forced) is written at [row, j] in the step that
made it, for every live row at once, so the batch is packed (scalerl.train.batch.packed_rollouts) by
reading the first `lengths[row]` columns of each row in row order, a mask, where packing Rollouts
walks every token of every tuple again in Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scalerl.train.batch.packed_rollouts import PackedRollouts, offsets_of


@dataclass(frozen=True, eq=False)
class TokenGrid:
    """Completion fields of n sequences of at most `width` tokens; row i holds lengths[i] of them."""

    tokens: np.ndarray  # int64 [n, width]
    logprobs: np.ndarray  # float64 [n, width]
    versions: np.ndarray  # int64 [n, width]
    loss_mask: np.ndarray  # int8 [n, width]: 1 sampled, 0 forced
    lengths: np.ndarray  # int64 [n]

    @classmethod
    def empty(cls, num_rows: int, width: int) -> TokenGrid:
        shape = (int(num_rows), max(int(width), 0))
        return cls(
            np.zeros(shape, np.int64),
            np.zeros(shape, np.float64),
            np.zeros(shape, np.int64),
            np.zeros(shape, np.int8),
            np.zeros(int(num_rows), np.int64),
        )

    def write(
        self,
        rows: Sequence[int],
        tokens: Sequence[int],
        logprobs: Sequence[float],
        version: int,
        sampled: Sequence[bool],
    ) -> None:
        """Append one token to each of `rows` (distinct): column lengths[row], then lengths += 1."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size == 0:
            return
        columns = self.lengths[rows]
        self.tokens[rows, columns] = np.asarray(tokens, dtype=np.int64)
        self.logprobs[rows, columns] = np.asarray(logprobs, dtype=np.float64)
        self.versions[rows, columns] = int(version)
        self.loss_mask[rows, columns] = np.asarray(sampled, dtype=np.int8)
        self.lengths[rows] += 1

    def filled(self) -> np.ndarray:
        """bool [n, width]: the cells written, column j of row i iff j < lengths[i]."""
        return np.arange(self.tokens.shape[1])[None, :] < self.lengths[:, None]

    def offsets(self) -> np.ndarray:
        """[0, l0, l0 + l1, ...]: where each row's tokens start in the row-major concatenation."""
        return offsets_of(self.lengths)


def pack_decoded(
    grid: TokenGrid,
    prompt_ids: Sequence[Sequence[int]],
    prompt_indices: Sequence[int],
    num_generations: int,
    texts: Sequence[str],
    *,
    truncated: Sequence[bool],
    interrupted: Sequence[bool],
) -> PackedRollouts:
    """The batch a decoder recorded, packed (rewards 0.0): sequence r is generation r % G of prompt
    r // G, its completion the first lengths[r] cells of grid row r; equal to pack_rollouts of the
    Rollouts made from the same fields."""
    encoded = [text.encode("utf-8") for text in texts]
    groups = np.repeat(np.arange(len(prompt_ids), dtype=np.int64), int(num_generations))
    filled = grid.filled()
    return PackedRollouts(
        prompt_index=np.asarray(prompt_indices, dtype=np.int64)[groups],
        group_index=groups,
        reward=np.zeros(groups.size, dtype=np.float64),
        truncated=np.asarray(truncated, dtype=bool),
        interrupted=np.asarray(interrupted, dtype=bool),
        prompt_offsets=offsets_of(np.repeat([len(ids) for ids in prompt_ids], int(num_generations))),
        prompt_tokens=np.concatenate(
            [np.tile(np.asarray(ids, dtype=np.int64), int(num_generations)) for ids in prompt_ids]
        ),
        completion_offsets=grid.offsets(),
        completion_tokens=grid.tokens[filled],
        logprobs=grid.logprobs[filled],
        versions=grid.versions[filled],
        loss_mask=grid.loss_mask[filled],
        text_offsets=offsets_of([len(text) for text in encoded]),
        text_bytes=np.frombuffer(b"".join(encoded), dtype=np.uint8).copy(),
    )
