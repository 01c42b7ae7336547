"""The messages between the pipeline's driver, generators and trainer (plain frozen dataclasses).

Kept apart from the workers (actors.py) so that a process handling them needs no torch model
code: the simulated-device backend's generators import only this, packed_rollouts.py and weight_sync/object_store.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from scalerl.train.batch.packed_rollouts import PackedRollouts


@dataclass(frozen=True)
class GenerationRequest:
    """One batch to generate: the prompts of training step `step`, sampled by the driver.

    `min_version`: the generator first loads weights of at least this version (the version the
    dispatch decision was made with). `in_flight`: allow weight swaps between decoding steps.
    """

    step: int
    prompt_indices: tuple[int, ...]
    seed: int
    min_version: int
    in_flight: bool = True
    rng_state: object | None = None  # torch uint8 state continuing the run's sampling stream


@dataclass(frozen=True)
class GeneratedBatch:
    """Rollouts (rewards filled in), packed into arrays (packed_rollouts.py), and how the generator
    spent its time on them."""

    step: int
    generator_id: int
    packed: PackedRollouts
    start_version: int
    started_at: float
    finished_at: float
    weight_sync_seconds: float
    num_weight_swaps: int
    rng_state_after: object | None = None

    @property
    def oldest_policy_version(self) -> int:
        return self.packed.oldest_policy_version(self.start_version)


@dataclass(frozen=True)
class StepResult:
    """One optimiser step done by the trainer worker, and the version it published."""

    stats: object  # scalerl.train.train_step.StepStats
    version: int
    publish_seconds: float
    started_at: float
    finished_at: float
