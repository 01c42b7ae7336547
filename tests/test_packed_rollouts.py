"""Rollouts packed into arrays (scalerl.train.batch.packed_rollouts) come back exactly as they went in,
also through Ray's serialiser, and the driver's reads of a packed batch match the unpacked one."""

from __future__ import annotations

import pickle

import numpy as np

from scalerl.distributed.messages import GeneratedBatch
from scalerl.tasks.rollout import Rollout
from scalerl.train.batch.packed_rollouts import (
    PackedRollouts,
    concat_packed,
    pack_rollouts,
    unpack_rollouts,
)


def ragged_rollouts() -> list[Rollout]:
    """Ragged prompts and completions, an empty completion, forced tokens, non-ASCII text,
    log-probs that need every bit of a float64, versions that change mid-sequence."""
    return [
        Rollout(
            prompt_index=7,
            group_index=0,
            prompt_token_ids=(5, 6, 7),
            completion_token_ids=(9, 10, 11, 2),
            generator_logprobs=(-0.1, -1e-300, -2.5, 0.1 + 0.2),
            token_policy_versions=(3, 3, 4, 5),
            reward=1.0,
            truncated=False,
            interrupted=True,
            completion_text="7 = 3 + 4 – ok ✓",
            loss_mask=(1, 0, 0, 1),
        ),
        Rollout(
            prompt_index=7,
            group_index=0,
            prompt_token_ids=(5, 6, 7),
            completion_token_ids=(),
            generator_logprobs=(),
            token_policy_versions=(),
            reward=-1.0,
            truncated=True,
            interrupted=False,
            completion_text="",
        ),
        Rollout(
            prompt_index=123456789012,
            group_index=1,
            prompt_token_ids=(),
            completion_token_ids=(2**40,),
            generator_logprobs=(-np.pi,),
            token_policy_versions=(0,),
            reward=-0.25,
            truncated=False,
            interrupted=False,
            completion_text="x",
        ),
    ]


def test_packed_rollouts_round_trip_exactly():
    rollouts = ragged_rollouts()
    packed = pack_rollouts(rollouts)
    assert len(packed) == 3
    assert packed.completion_offsets.tolist() == [0, 4, 4, 5]
    assert packed.prompt_offsets.tolist() == [0, 3, 6, 6]
    back = unpack_rollouts(packed)
    assert back == rollouts  # every field, bit for bit (dataclass equality of tuples of Python numbers)
    assert [type(x) for x in back[0].generator_logprobs] == [float] * 4
    assert [type(x) for x in back[0].completion_token_ids] == [int] * 4
    assert back[0].generator_logprobs[3] == 0.1 + 0.2 and back[0].generator_logprobs[1] == -1e-300


def test_empty_batch_and_all_empty_completions():
    assert unpack_rollouts(pack_rollouts([])) == []
    empty = [r for r in ragged_rollouts() if not r.completion_token_ids] * 2
    packed = pack_rollouts(empty)
    assert packed.completion_tokens.size == 0 and packed.oldest_policy_version(default=9) == 9
    assert unpack_rollouts(packed) == empty


def _same_arrays(a: PackedRollouts, b: PackedRollouts) -> None:
    for name in PackedRollouts.__dataclass_fields__:
        left, right = getattr(a, name), getattr(b, name)
        assert left.dtype == right.dtype and left.tolist() == right.tolist(), name


def test_concat_of_packs_is_the_pack_of_the_concatenated_rollouts():
    rollouts = ragged_rollouts()
    parts = [rollouts[:1], [], rollouts[1:], rollouts[::-1]]  # an empty part, an empty completion, reordering
    joined = concat_packed([pack_rollouts(part) for part in parts])
    _same_arrays(joined, pack_rollouts([r for part in parts for r in part]))
    # by hand: completions of lengths 4 | - | 0, 1 | 1, 0, 4 -> offsets shifted by 4 and 5
    assert joined.completion_offsets.tolist() == [0, 4, 4, 5, 6, 6, 10]
    assert joined.text_offsets.tolist()[:2] == [0, len("7 = 3 + 4 – ok ✓".encode())]
    assert unpack_rollouts(joined) == [r for part in parts for r in part]
    _same_arrays(concat_packed([]), pack_rollouts([]))
    _same_arrays(concat_packed([pack_rollouts(rollouts)]), pack_rollouts(rollouts))


def test_packed_rollouts_survive_ray_serialisation_and_pickle():
    import ray.cloudpickle

    packed = pack_rollouts(ragged_rollouts())
    for dumps, loads in ((pickle.dumps, pickle.loads), (ray.cloudpickle.dumps, ray.cloudpickle.loads)):
        again = loads(dumps(packed, protocol=5))
        assert isinstance(again, PackedRollouts)
        assert unpack_rollouts(again) == ragged_rollouts()
    # protocol 5 carries every array as one out-of-band buffer: no per-rollout objects are pickled
    buffers = []
    pickle.dumps(packed, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == len(PackedRollouts.__dataclass_fields__)


def test_generated_batch_reads_its_packed_rollouts():
    rollouts = ragged_rollouts()
    batch = GeneratedBatch(
        step=2,
        generator_id=0,
        packed=pack_rollouts(rollouts),
        start_version=3,
        started_at=0.0,
        finished_at=1.0,
        weight_sync_seconds=0.0,
        num_weight_swaps=0,
    )
    assert unpack_rollouts(batch.packed) == rollouts
    assert batch.oldest_policy_version == 0  # the third rollout's token was made by version 0
