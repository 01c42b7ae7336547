"""PPO-off-policy-k (ScaleRL arXiv 2510.13786, section 4, the alternative to PipelineRL):
generate k x the per-step batch with the current weights, then take k optimiser steps on its
slices, and repeat. Slice j is trained j versions after it was generated, so the lag of every
batch is at most k - 1 (checked by the same admission rule as the asynchronous pipeline).
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from scalerl.distributed.staleness import Admission, admit_batch
from scalerl.errors import ScaleRLError
from scalerl.train.batch.packed_rollouts import PackedRollouts, concat_packed


def split_groups(prompt_indices: list[int], num_parts: int) -> list[list[int]]:
    """Split a round's prompts into at most `num_parts` contiguous, near-equal chunks."""
    num_parts = max(1, min(num_parts, len(prompt_indices)))
    size, extra = divmod(len(prompt_indices), num_parts)
    chunks, start = [], 0
    for part in range(num_parts):
        end = start + size + (1 if part < extra else 0)
        chunks.append(prompt_indices[start:end])
        start = end
    return chunks


def slice_rounds(packed: PackedRollouts, prompts_per_step: int) -> list[PackedRollouts]:
    """Consecutive slices of `prompts_per_step` prompt groups, group indices renumbered from 0.

    `packed` comes grouped by prompt (G per prompt, in the round's prompt order): a group starts
    where group_index changes; group number j goes to slice j // prompts_per_step as its group
    j % prompts_per_step."""
    if not len(packed):
        return []
    starts = np.ones(len(packed), dtype=np.int64)
    starts[1:] = packed.group_index[1:] != packed.group_index[:-1]
    slice_of, group_in_slice = np.divmod(np.cumsum(starts) - 1, prompts_per_step)
    slices = []
    for part in range(int(slice_of[-1]) + 1):
        rows = np.flatnonzero(slice_of == part)
        slices.append(dataclasses.replace(packed.select(rows), group_index=group_in_slice[rows]))
    return slices


class OffPolicyLoop:
    """Rounds of (generate k batches with one policy version, then k optimiser steps)."""

    def __init__(self, session, on_row) -> None:
        self.session = session
        self.on_row = on_row
        self.k = session.pipeline.offpolicy_steps
        self.pending = None  # (train ObjectRef, batch) between submission and booking
        session.loop = self

    def drain(self) -> None:
        """Book the optimiser step in progress on the trainer (after an interrupt)."""
        import ray

        if self.pending is not None:
            train_ref, batch = self.pending
            self.pending = None
            self.session.complete_step(ray.get(train_ref), batch)
            self.session.flush(block=True)

    def run(self) -> None:
        run_state = self.session.run_state
        while not run_state.finished():
            steps = min(self.k, self.session.config.max_steps - run_state.step)
            round_prompts = [i for _ in range(steps) for i in run_state.sample_prompts()]
            batches = self._generate_round(round_prompts)
            self._train_round(batches)
        if run_state.step < self.session.config.max_steps:
            self.session.log(f"stopped at step {run_state.step}: every training prompt left the pool")

    def _generate_round(self, round_prompts: list[int]) -> list:
        """One request per live generator (whole prompt groups each); failures re-dispatched."""
        import ray

        alive = [i for i, ok in enumerate(self.session.alive) if ok]
        pending = {}
        for part, chunk in enumerate(split_groups(round_prompts, len(alive))):
            request = self.session.request(self.session.run_state.step * 1000 + part, chunk, in_flight=False)
            pending[part] = (alive[part], request)
        results: dict[int, object] = {}
        refs = {}
        while pending or refs:
            for part, (index, request) in list(pending.items()):
                refs[self.session.generators[index].generate.remote(request)] = (part, index, request, time.time())
                del pending[part]
            done, _ = ray.wait(list(refs), num_returns=1)
            part, index, request, dispatched_at = refs.pop(done[0])
            try:
                batch = ray.get(done[0])
            except ray.exceptions.RayActorError as error:
                self.session.generator_failed(index, error, dispatched_at)
                back = self.session.wait_until_back(index)
                pending[part] = (index if back else self.session.alive.index(True), request)
                continue
            self.session.batch_finished(batch, dispatched_at)
            results[part] = batch
        return [results[part] for part in sorted(results)]

    def _train_round(self, batches: list) -> None:
        import ray

        first = batches[0]
        round_batch = concat_packed([_regrouped(batch) for batch in batches])
        slices = slice_rounds(round_batch, self.session.config.sampling.prompts_per_step)
        for position, packed in enumerate(slices):
            batch = dataclasses.replace(
                first,
                packed=packed,
                weight_sync_seconds=sum(b.weight_sync_seconds for b in batches) if position == 0 else 0.0,
            )
            oldest = batch.oldest_policy_version
            if admit_batch(oldest, self.session.steps_committed, self.k - 1, "drop") is not Admission.ADMIT:
                raise ScaleRLError("PPO-off-policy-k produced a batch older than k - 1 (internal error)")
            self.session.run_state.update_pool(packed.columns())
            self.session.steps_committed += 1
            self.pending = (self.session.train(packed), batch)
            result = ray.get(self.pending[0])
            self.pending = None
            self.session.complete_step(result, batch)
            for row in self.session.flush(block=True):
                if self.on_row is not None:
                    self.on_row(row, self.session)


def _regrouped(batch) -> PackedRollouts:
    """A batch's rollouts with group indices made unique across a round's batches."""
    tag = batch.generator_id * 1_000_000 + batch.step * 10_000
    return dataclasses.replace(batch.packed, group_index=batch.packed.group_index + tag)
