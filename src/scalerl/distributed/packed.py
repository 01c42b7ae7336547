"""Rollouts as arrays: a batch of `Rollout`s packed into a few contiguous numpy buffers.

What crosses between the pipeline's actors. Ray serialises numpy arrays out of band (pickle
protocol 5), so a packed batch is one memory copy into the object store and is read from it
without a copy, where a tuple of Rollouts is pickled and unpickled object by object. The
generator packs once, the trainer unpacks once; the driver reads what it needs from the arrays.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scalerl.tasks.rollout import Rollout


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


def _offsets(lengths: Sequence[int]) -> np.ndarray:
    """[0, l0, l0 + l1, ...]: where each item starts in the concatenation (and the total)."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def _flat(rows, dtype, total: int) -> np.ndarray:
    flat = np.array(list(itertools.chain.from_iterable(rows)), dtype=dtype)
    return flat if flat.size == total else flat.reshape(total)  # reshape: a length mismatch raises


def pack_rollouts(rollouts: Sequence[Rollout]) -> PackedRollouts:
    """The rollouts as a PackedRollouts (exact: unpack_rollouts gives them back equal)."""
    prompt_offsets = _offsets([len(r.prompt_token_ids) for r in rollouts])
    completion_offsets = _offsets([len(r.completion_token_ids) for r in rollouts])
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
        text_offsets=_offsets([len(t) for t in texts]),
        text_bytes=np.frombuffer(b"".join(texts), dtype=np.uint8).copy())


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
    columns = zip(packed.prompt_index.tolist(), packed.group_index.tolist(),
                  _split(packed.prompt_tokens, prompt_offsets),
                  _split(packed.completion_tokens, completion_offsets),
                  _split(packed.logprobs, completion_offsets),
                  _split(packed.versions, completion_offsets),
                  packed.reward.tolist(), packed.truncated.tolist(), packed.interrupted.tolist(),
                  _split(packed.loss_mask, completion_offsets),
                  zip(text_offsets, text_offsets[1:]))
    return [_rollout({"prompt_index": prompt, "group_index": group, "prompt_token_ids": prompt_ids,
                      "completion_token_ids": ids, "generator_logprobs": logprobs,
                      "token_policy_versions": versions, "reward": reward, "truncated": truncated,
                      "interrupted": interrupted, "completion_text": text[start:end].decode("utf-8"),
                      "loss_mask": mask})
            for (prompt, group, prompt_ids, ids, logprobs, versions, reward, truncated, interrupted,
                 mask, (start, end)) in columns]


def as_rollouts(batch: PackedRollouts | Sequence[Rollout]) -> list[Rollout]:
    """A trainer's argument as Rollouts: unpacked when packed, else the sequence as a list."""
    return unpack_rollouts(batch) if isinstance(batch, PackedRollouts) else list(batch)
