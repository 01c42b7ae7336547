"""The generator interface contract, as checks any backend's output can be run through.

A rollout backend (the HF path in scalerl.train.generation, vllm_generator.VllmRolloutBackend, a
test fake) turns P prompts into P x G rollouts, packed (`PackedRollouts`; checked here unpacked, as
`Rollout`s); a generator worker wraps them in a
`GeneratedBatch` for one `GenerationRequest`. The driver, the staleness rule and the trainer rely
on the properties below; tests run the fake backend through them on CPU and the vLLM backend on
a GPU node (tests/test_vllm_gpu.py). Pure Python: no torch, no ray.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scalerl.errors import ScaleRLError
from scalerl.tasks.rollout import Rollout
from scalerl.train.batch.packed_rollouts import unpack_rollouts


def rollout_violations(
    rollouts: Sequence[Rollout],
    prompt_indices: Sequence[int],
    num_generations: int,
    *,
    min_version: int,
    max_version: int,
) -> list[str]:
    """What is wrong with a backend's rollouts for these prompts (empty list: nothing).

    Contract: len = P x G, grouped by prompt in request order (rollout i belongs to group
    i // G, prompt prompt_indices[i // G]); a non-empty prompt; generator log-probs finite and
    <= 0, and exactly 0 on forced tokens (loss_mask 0); loss_mask in {0, 1}; token versions
    non-decreasing along a sequence and within [min_version, max_version]; a finite reward.
    """
    problems: list[str] = []
    expected = len(prompt_indices) * int(num_generations)
    if len(rollouts) != expected:
        return [
            f"expected {expected} rollouts ({len(prompt_indices)} prompts x {num_generations}), got {len(rollouts)}"
        ]
    for i, rollout in enumerate(rollouts):
        group = i // int(num_generations)
        where = f"rollout {i}"
        if rollout.group_index != group or rollout.prompt_index != int(prompt_indices[group]):
            problems.append(
                f"{where}: group/prompt ({rollout.group_index}, "
                f"{rollout.prompt_index}), expected ({group}, {prompt_indices[group]})"
            )
        if not rollout.prompt_token_ids:
            problems.append(f"{where}: empty prompt")
        mask = rollout.loss_mask or (1,) * rollout.num_completion_tokens
        if any(m not in (0, 1) for m in mask):
            problems.append(f"{where}: loss_mask values outside {{0, 1}}")
        for logprob, kept in zip(rollout.generator_logprobs, mask):
            if not math.isfinite(logprob) or logprob > 1e-6 or (not kept and logprob != 0.0):
                problems.append(
                    f"{where}: generator log-prob {logprob} (mask {kept}) is not a "
                    "finite value <= 0 (0 on forced tokens)"
                )
                break
        versions = list(rollout.token_policy_versions)
        if any(later < earlier for earlier, later in zip(versions, versions[1:])):
            problems.append(f"{where}: token policy versions go backwards")
        if versions and not (min_version <= min(versions) and max(versions) <= max_version):
            problems.append(
                f"{where}: token versions {min(versions)}..{max(versions)} outside [{min_version}, {max_version}]"
            )
        if not math.isfinite(rollout.reward):
            problems.append(f"{where}: reward {rollout.reward} is not finite")
    return problems


def batch_violations(batch, request, num_generations: int, *, published_version: int) -> list[str]:
    """What is wrong with a GeneratedBatch answering `request` (empty list: nothing).

    Contract: the request's step; start_version >= request.min_version and <= the newest
    published version; every token's version in [start_version, published_version]; started_at
    <= finished_at; weight_sync_seconds >= 0; and the rollouts' own contract above.
    """
    problems: list[str] = []
    if batch.step != request.step:
        problems.append(f"batch step {batch.step} answers request step {request.step}")
    if not request.min_version <= batch.start_version <= published_version:
        problems.append(f"start version {batch.start_version} outside [{request.min_version}, {published_version}]")
    if batch.finished_at < batch.started_at:
        problems.append("finished before it started")
    if batch.weight_sync_seconds < 0:
        problems.append("negative weight_sync_seconds")
    problems += rollout_violations(
        unpack_rollouts(batch.packed),
        request.prompt_indices,
        num_generations,
        min_version=batch.start_version,
        max_version=published_version,
    )
    return problems


def check(problems: list[str], what: str = "generator output") -> None:
    """Raise one ScaleRLError listing the violations, if any."""
    if problems:
        raise ScaleRLError(f"{what} breaks the generator contract: " + "; ".join(problems[:5]))
