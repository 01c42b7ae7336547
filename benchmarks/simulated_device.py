"""BENCHMARK / TEST BACKEND, never used by default: generator and trainer actors whose device time
is simulated, so the real pipeline can be measured as if each actor had its own accelerator.

`SimulatedGenerator` (here) and `SimulatedTrainer` (simulated_trainer.py) stand in for the real
workers (scalerl.distributed.actors) and keep everything that is the pipeline's own work: Ray actors, the staleness rule on the
driver, weight publication of a real built-in model through the object store, in-flight weight
swaps between decoding steps, policy-version tags on every token, bookkeeping, metrics rows and
checkpoints. Only the device compute is replaced: a generation or training call `time.sleep`s
for its tokens x a per-token cost (`DeviceCosts`), and rollouts are produced cheaply (fixed
lengths, half of each group rewarded), so the CPU stays idle and the actors never compete for
cores the way two CPU processes do. Pass them with
`run_pipeline(..., workers=simulated_workers(costs))` (benchmarks.simulated_trainer) (benchmarks/pipeline_efficiency.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scalerl.distributed.messages import GeneratedBatch, GenerationRequest
from scalerl.distributed.weight_sync.object_store import WeightSubscriber, registry_handle
from scalerl.errors import InputError
from scalerl.train.batch.packed_rollouts import PackedRollouts


@dataclass(frozen=True)
class DeviceCosts:
    """Per-token device costs of the simulated actors and the fake rollouts' shape.

    A generation call of N sequences takes N x completion_tokens x generate_seconds_per_token
    (spread evenly over completion_tokens decoding steps); an optimiser step takes its trained
    completion tokens x train_seconds_per_token.
    """

    generate_seconds_per_token: float
    train_seconds_per_token: float
    completion_tokens: int = 32
    prompt_tokens: int = 16
    validate_seconds: float = 0.0

    def __post_init__(self) -> None:
        if not (self.generate_seconds_per_token > 0 and self.train_seconds_per_token > 0):
            raise InputError("simulated per-token costs must be > 0")
        if self.completion_tokens < 1 or self.prompt_tokens < 1:
            raise InputError("simulated completion_tokens and prompt_tokens must be >= 1")

    @classmethod
    def for_step(
        cls,
        generate_seconds: float,
        train_seconds: float,
        sequences_per_step: int,
        completion_tokens: int = 32,
        prompt_tokens: int = 16,
    ) -> DeviceCosts:
        """Costs for which one step's batch takes `generate_seconds` on one generator and
        `train_seconds` on the trainer."""
        tokens = int(sequences_per_step) * int(completion_tokens)
        if tokens < 1:
            raise InputError("a step needs at least one sequence")
        return cls(generate_seconds / tokens, train_seconds / tokens, int(completion_tokens), int(prompt_tokens))

    def generate_seconds(self, num_sequences: int) -> float:
        return num_sequences * self.completion_tokens * self.generate_seconds_per_token

    def train_seconds(self, num_tokens: int) -> float:
        return num_tokens * self.train_seconds_per_token


def sleep_until(deadline: float) -> None:
    """Sleep until time.perf_counter() reaches `deadline` (no drift across many short sleeps)."""
    remaining = deadline - time.perf_counter()
    if remaining > 0:
        time.sleep(remaining)


def fake_packed(
    prompt_indices: Sequence[int], generations: int, costs: DeviceCosts, token_versions: Sequence[int]
) -> PackedRollouts:
    """G rollouts per prompt of fixed length, packed as a generator's decoder records them
    (step_rollouts.generate_packed): prompt tokens 1, completion tokens 2 sampled at log-prob -1,
    token j by policy version token_versions[j], empty texts; rewards alternate +1 / -1 within a
    group (every group keeps a 0.5 pass rate, so no prompt ever leaves the curriculum pool)."""
    n, length, prompt_length = len(prompt_indices) * int(generations), costs.completion_tokens, costs.prompt_tokens
    versions = np.asarray(token_versions, dtype=np.int64)
    if versions.size != length:
        raise InputError(f"{versions.size} token versions for {length} completion tokens")
    groups = np.repeat(np.arange(len(prompt_indices), dtype=np.int64), int(generations))
    return PackedRollouts(
        prompt_index=np.asarray(prompt_indices, dtype=np.int64)[groups],
        group_index=groups,
        reward=np.where(np.arange(n) % int(generations) % 2 == 0, 1.0, -1.0),
        truncated=np.zeros(n, dtype=bool),
        interrupted=np.zeros(n, dtype=bool),
        prompt_offsets=np.arange(n + 1, dtype=np.int64) * prompt_length,
        prompt_tokens=np.ones(n * prompt_length, dtype=np.int64),
        completion_offsets=np.arange(n + 1, dtype=np.int64) * length,
        completion_tokens=np.full(n * length, 2, dtype=np.int64),
        logprobs=np.full(n * length, -1.0),
        versions=np.tile(versions, n),
        loss_mask=np.ones(n * length, dtype=np.int8),
        text_offsets=np.zeros(n + 1, dtype=np.int64),
        text_bytes=np.zeros(0, dtype=np.uint8),
    )


class SimulatedGenerator:
    """A generator whose decoding takes simulated device time; weights really are fetched.

    GeneratorWorker's interface (constructor, `pid`, `generate`) without its model code, so
    that starting eight of them on a small machine costs seconds, not a minute."""

    def __init__(
        self,
        config,
        generator_id: int,
        registry,
        *,
        torch_threads: int = 1,
        poll_interval_seconds: float = 0.0,
        backend: str = "hf",
        costs: DeviceCosts | None = None,
    ) -> None:
        if costs is None:
            raise InputError("SimulatedGenerator needs DeviceCosts")
        self.config = config
        self.generator_id = int(generator_id)
        self.backend = "simulated"
        self.costs = costs
        self.subscriber = WeightSubscriber(registry_handle(registry), poll_interval_seconds)

    def _load(self, snapshot) -> None:
        """Stands in for copying the weights to the device: the snapshot was already fetched."""

    def pid(self) -> int:
        return os.getpid()

    def generate(self, request: GenerationRequest) -> GeneratedBatch:
        started_at = time.time()
        sync_before, swaps_before = self.subscriber.sync_seconds, self.subscriber.num_swaps
        version = start_version = self.subscriber.sync(self._load, request.min_version)
        generations = self.config.sampling.generations_per_prompt
        steps = self.costs.completion_tokens
        per_step = self.costs.generate_seconds(len(request.prompt_indices) * generations) / steps
        versions = []
        clock = time.perf_counter()
        for _step in range(steps):  # one decoding step: the in-flight swap point, then the device
            if request.in_flight:
                version = self.subscriber.maybe_update(self._load) or version
            versions.append(version)
            clock += per_step
            sleep_until(clock)
        return GeneratedBatch(
            step=request.step,
            generator_id=self.generator_id,
            packed=fake_packed(request.prompt_indices, generations, self.costs, versions),
            start_version=start_version,
            started_at=started_at,
            finished_at=time.time(),
            weight_sync_seconds=self.subscriber.sync_seconds - sync_before,
            num_weight_swaps=self.subscriber.num_swaps - swaps_before,
            rng_state_after=request.rng_state,
        )
