"""One batch of rollouts as arrays: a batch of `Rollout`s packed into a few contiguous numpy buffers.

What crosses between the pipeline's actors. Ray serialises numpy arrays out of band (pickle
protocol 5), so a packed batch is one memory copy into the object store and is read from it
without a copy, where a tuple of Rollouts is pickled and unpickled object by object. The
generator packs once; the trainer builds its training tensors from the arrays
(scalerl.train.train_step.build_batch, rows picked with `select`) and the driver books a
step from their columns (`columns`), so neither rebuilds Rollout objects.

The decoder records a batch in a `TokenGrid`: one row per sequence, one column per decoding step.
A sequence's completion token j (its token id, the generator's log-prob of it, the policy version
that sampled it and whether it was sampled or forced) is written at [row, j] in the step that made
it, for every live row at once, so the batch is packed (`pack_decoded`) by reading the first
`lengths[row]` columns of each row in row order, a mask, where packing Rollouts walks every token
of every tuple again in Python.

A step's counters and metrics row (RunState.book_step) and the prompt pool's update need six
numbers per sequence, never its tokens: `BatchColumns`, views of the packed arrays (lengths are
differences of its offsets), so the trainer and the pipeline's driver book a step in a few
vectorised passes. numpy only: cheap to import anywhere.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scalerl.tasks.rollout import Rollout


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


@dataclass(frozen=True, eq=False)
class PackedRollouts:
    """n rollouts. Ragged fields are concatenated with offsets: rollout i's completion tokens are
    `completion_tokens[completion_offsets[i]:completion_offsets[i + 1]]`, and the same offsets
    cut `logprobs`, `versions` and `loss_mask`; prompts use `prompt_offsets`, the completion
    texts (UTF-8) `text_offsets`. Per-rollout fields are arrays of length n."""

    prompt_index: np.ndarray  # int64 [n]
    group_index: np.ndarray  # int64 [n]
    reward: np.ndarray  # float64 [n]
    truncated: np.ndarray  # bool [n]
    interrupted: np.ndarray  # bool [n]
    prompt_offsets: np.ndarray  # int64 [n + 1]
    prompt_tokens: np.ndarray  # int64 [sum of prompt lengths]
    completion_offsets: np.ndarray  # int64 [n + 1]
    completion_tokens: np.ndarray  # int64 [sum of completion lengths]
    logprobs: np.ndarray  # float64, as completion_tokens
    versions: np.ndarray  # int64, as completion_tokens
    loss_mask: np.ndarray  # int8, as completion_tokens
    text_offsets: np.ndarray  # int64 [n + 1]
    text_bytes: np.ndarray  # uint8 [total UTF-8 bytes]

    def __len__(self) -> int:
        return int(self.prompt_index.size)

    @property
    def num_bytes(self) -> int:
        return int(sum(getattr(self, name).nbytes for name in self.__dataclass_fields__))

    def oldest_policy_version(self, default: int) -> int:
        """The oldest weight version behind any completion token (`default` when none)."""
        return int(self.versions.min()) if self.versions.size else int(default)

    def select(self, indices) -> PackedRollouts:
        """The rollouts at `indices` (in that order), packed: each ragged field gathered in one
        vectorised pass (equal to packing [rollouts[i] for i in indices])."""
        rows = np.asarray(indices, dtype=np.int64).reshape(-1)
        prompt_offsets, prompt_at = _gather(self.prompt_offsets, rows)
        completion_offsets, completion_at = _gather(self.completion_offsets, rows)
        text_offsets, text_at = _gather(self.text_offsets, rows)
        return PackedRollouts(
            prompt_index=self.prompt_index[rows],
            group_index=self.group_index[rows],
            reward=self.reward[rows],
            truncated=self.truncated[rows],
            interrupted=self.interrupted[rows],
            prompt_offsets=prompt_offsets,
            prompt_tokens=self.prompt_tokens[prompt_at],
            completion_offsets=completion_offsets,
            completion_tokens=self.completion_tokens[completion_at],
            logprobs=self.logprobs[completion_at],
            versions=self.versions[completion_at],
            loss_mask=self.loss_mask[completion_at],
            text_offsets=text_offsets,
            text_bytes=self.text_bytes[text_at],
        )

    def with_rewards(self, rewards: np.ndarray) -> PackedRollouts:
        """The same rollouts with these rewards (float64 [n])."""
        rewards = np.asarray(rewards, dtype=np.float64)
        if rewards.shape != self.reward.shape:
            raise ValueError(f"{rewards.shape[0] if rewards.ndim else 0} rewards for {len(self)} rollouts")
        return dataclasses.replace(self, reward=rewards)

    def columns(self) -> BatchColumns:
        """The per-sequence numbers a step's bookkeeping reads, as views of these arrays
        (lengths: differences of the offsets); nothing is unpacked."""
        return BatchColumns(
            prompt_index=self.prompt_index,
            reward=self.reward,
            truncated=self.truncated,
            interrupted=self.interrupted,
            prompt_lengths=np.diff(self.prompt_offsets),
            completion_lengths=np.diff(self.completion_offsets),
        )


def offsets_of(lengths: Sequence[int]) -> np.ndarray:
    """[0, l0, l0 + l1, ...]: where each item starts in the concatenation (and the total)."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def _gather(offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(new offsets, flat positions) of the pieces `rows` of a ragged field cut at `offsets`:

    lengths_j = offsets[rows_j + 1] - offsets[rows_j];  position of item k of piece j =
    offsets[rows_j] + k, listed piece after piece."""
    starts = offsets[rows]
    lengths = offsets[rows + 1] - starts
    new_offsets = offsets_of(lengths)
    positions = np.arange(new_offsets[-1], dtype=np.int64) + np.repeat(starts - new_offsets[:-1], lengths)
    return new_offsets, positions


def _flat(rows, dtype, total: int) -> np.ndarray:
    """The rows concatenated into one array of `total` items, straight from the iterator (no
    intermediate list); a length mismatch raises ValueError."""
    items = itertools.chain.from_iterable(rows)
    flat = np.fromiter(items, dtype=dtype, count=total)  # too few items raise here
    if next(items, None) is not None:
        raise ValueError(f"more than {total} items where the offsets say {total}")
    return flat


def pack_rollouts(rollouts: Sequence[Rollout]) -> PackedRollouts:
    """The rollouts as a PackedRollouts (exact: unpack_rollouts gives them back equal)."""
    prompt_offsets = offsets_of([len(r.prompt_token_ids) for r in rollouts])
    completion_offsets = offsets_of([len(r.completion_token_ids) for r in rollouts])
    texts = [r.completion_text.encode("utf-8") for r in rollouts]
    tokens = int(completion_offsets[-1])
    return PackedRollouts(
        prompt_index=np.array([r.prompt_index for r in rollouts], dtype=np.int64),
        group_index=np.array([r.group_index for r in rollouts], dtype=np.int64),
        reward=np.array([r.reward for r in rollouts], dtype=np.float64),
        truncated=np.array([r.truncated for r in rollouts], dtype=bool),
        interrupted=np.array([r.interrupted for r in rollouts], dtype=bool),
        prompt_offsets=prompt_offsets,
        prompt_tokens=_flat((r.prompt_token_ids for r in rollouts), np.int64, int(prompt_offsets[-1])),
        completion_offsets=completion_offsets,
        completion_tokens=_flat((r.completion_token_ids for r in rollouts), np.int64, tokens),
        logprobs=_flat((r.generator_logprobs for r in rollouts), np.float64, tokens),
        versions=_flat((r.token_policy_versions for r in rollouts), np.int64, tokens),
        loss_mask=_flat((r.loss_mask for r in rollouts), np.int8, tokens),
        text_offsets=offsets_of([len(t) for t in texts]),
        text_bytes=np.frombuffer(b"".join(texts), dtype=np.uint8).copy(),
    )


# PackedRollouts' fields by kind: one entry per rollout, offsets [n + 1], flat buffers the offsets cut.
PER_ROLLOUT_FIELDS = ("prompt_index", "group_index", "reward", "truncated", "interrupted")
OFFSET_FIELDS = ("prompt_offsets", "completion_offsets", "text_offsets")
FLAT_FIELDS = ("prompt_tokens", "completion_tokens", "logprobs", "versions", "loss_mask", "text_bytes")


def concat_packed(parts: Sequence[PackedRollouts]) -> PackedRollouts:
    """The parts' rollouts in order, as one batch (equal to packing the concatenated Rollout lists):
    per-rollout fields and flat buffers joined, each part's offsets shifted by the items before it,

        offsets = [0] + [o + total_before_part for o in part.offsets[1:], part after part]."""
    if not parts:
        return pack_rollouts([])

    def joined(name: str) -> np.ndarray:
        return np.concatenate([getattr(part, name) for part in parts])

    def offsets(name: str) -> np.ndarray:
        ends = [getattr(part, name)[1:] for part in parts]
        shifts = np.cumsum([0] + [int(getattr(part, name)[-1]) for part in parts[:-1]])
        return np.concatenate([np.zeros(1, dtype=np.int64)] + [end + shift for end, shift in zip(ends, shifts)])

    return PackedRollouts(
        **{name: joined(name) for name in PER_ROLLOUT_FIELDS + FLAT_FIELDS},
        **{name: offsets(name) for name in OFFSET_FIELDS},
    )


def _split(values: np.ndarray, offsets: list[int]) -> list[tuple]:
    """values cut at offsets, each piece a tuple of Python numbers."""
    flat = values.tolist()
    return [tuple(flat[start:end]) for start, end in zip(offsets, offsets[1:])]


def _rollout(fields: dict) -> Rollout:
    """A Rollout from fields that were valid when packed, made as unpickling makes one (no
    __init__ or __post_init__: a frozen dataclass's checked constructor costs more than the
    whole rest of unpacking)."""
    rollout = object.__new__(Rollout)
    rollout.__dict__.update(fields)
    return rollout


def unpack_rollouts(packed: PackedRollouts) -> list[Rollout]:
    """The Rollouts a PackedRollouts holds, in order (each field equal to the packed one)."""
    prompt_offsets = packed.prompt_offsets.tolist()
    completion_offsets = packed.completion_offsets.tolist()
    text_offsets = packed.text_offsets.tolist()
    text = packed.text_bytes.tobytes()
    columns = zip(
        packed.prompt_index.tolist(),
        packed.group_index.tolist(),
        _split(packed.prompt_tokens, prompt_offsets),
        _split(packed.completion_tokens, completion_offsets),
        _split(packed.logprobs, completion_offsets),
        _split(packed.versions, completion_offsets),
        packed.reward.tolist(),
        packed.truncated.tolist(),
        packed.interrupted.tolist(),
        _split(packed.loss_mask, completion_offsets),
        zip(text_offsets, text_offsets[1:]),
    )
    return [
        _rollout(
            {
                "prompt_index": prompt,
                "group_index": group,
                "prompt_token_ids": prompt_ids,
                "completion_token_ids": ids,
                "generator_logprobs": logprobs,
                "token_policy_versions": versions,
                "reward": reward,
                "truncated": truncated,
                "interrupted": interrupted,
                "completion_text": text[start:end].decode("utf-8"),
                "loss_mask": mask,
            }
        )
        for (
            prompt,
            group,
            prompt_ids,
            ids,
            logprobs,
            versions,
            reward,
            truncated,
            interrupted,
            mask,
            (start, end),
        ) in columns
    ]


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

    def write_row(
        self, row: int, tokens: Sequence[int], logprobs: Sequence[float], version: int, loss_mask: Sequence[int]
    ) -> None:
        """Row `row`'s whole completion at once (a generator that returns sequences, not steps)."""
        length = len(tokens)
        self.tokens[row, :length] = np.asarray(tokens, dtype=np.int64)
        self.logprobs[row, :length] = np.asarray(logprobs, dtype=np.float64)
        self.versions[row, :length] = int(version)
        self.loss_mask[row, :length] = np.asarray(loss_mask, dtype=np.int8)
        self.lengths[row] = length

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
    first_group: int = 0,
) -> PackedRollouts:
    """The batch a decoder recorded, packed (rewards 0.0): sequence r is generation r % G of prompt
    r // G, its completion the first lengths[r] cells of grid row r; equal to pack_rollouts of the
    Rollouts made from the same fields. A shard of a larger batch numbers its groups from
    `first_group`, the batch's index of its first prompt."""
    encoded = [text.encode("utf-8") for text in texts]
    prompt_of_row = np.repeat(np.arange(len(prompt_ids), dtype=np.int64), int(num_generations))
    filled = grid.filled()
    return PackedRollouts(
        prompt_index=np.asarray(prompt_indices, dtype=np.int64)[prompt_of_row],
        group_index=prompt_of_row + int(first_group),
        reward=np.zeros(prompt_of_row.size, dtype=np.float64),
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
