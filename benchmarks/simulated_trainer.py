"""BENCHMARK / TEST BACKEND, never used by default: the trainer of the simulated-device pipeline
(see simulated_device.py): TrainerWorker with its optimiser step replaced by simulated device
time; publication, checkpoints and the model shape are TrainerWorker's own.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks.simulated_device import DeviceCosts, SimulatedGenerator, sleep_until
from scalerl.distributed.actors import TrainerWorker, WorkerClasses
from scalerl.distributed.messages import StepResult
from scalerl.errors import InputError
from scalerl.train.batch.packed_rollouts import PackedRollouts, generation_totals
from scalerl.train.held_out import PASS_RATE_COLUMN


class SimulatedTrainer(TrainerWorker):
    """A trainer whose optimiser step takes simulated device time, then publishes the real
    weights of its (untrained) model exactly as TrainerWorker does."""

    def __init__(
        self,
        config,
        registry,
        *,
        torch_threads: int = 1,
        resume_checkpoint: str | None = None,
        costs: DeviceCosts | None = None,
    ) -> None:
        if costs is None:
            raise InputError("SimulatedTrainer needs DeviceCosts")
        self.costs = costs
        super().__init__(config, registry, torch_threads=torch_threads, resume_checkpoint=resume_checkpoint)

    def train(self, batch: PackedRollouts) -> StepResult:
        from scalerl.train.train_step import StepStats

        started_at = time.time()
        # TrainerWorker.train trains on a packed batch as it is: nothing is unpacked here either
        tokens, context = generation_totals(batch.columns())
        sleep_until(time.perf_counter() + self.costs.train_seconds(tokens))
        self.version += 1
        publish_seconds = self.publish()  # TrainerWorker's own publication
        groups = int(np.unique(batch.group_index).size)
        stats = StepStats(
            loss=0.0,
            grad_norm=0.0,
            lr=0.0,
            entropy=0.0,
            mean_ratio=1.0,
            clipped_fraction=0.0,
            kept_prompts=groups,
            total_prompts=groups,
            kept_sequences=len(batch),
            tokens_trained=tokens,
            trained_context_sum=context,
            updated=True,
        )
        return StepResult(
            stats=stats,
            version=self.version,
            publish_seconds=publish_seconds,
            started_at=started_at,
            finished_at=time.time(),
        )

    def validate(self, run_dir: str | None = None, step: int | None = None) -> tuple[dict[str, float], float, float]:
        started_at = time.time()
        sleep_until(time.perf_counter() + self.costs.validate_seconds)
        return {PASS_RATE_COLUMN: 0.5}, started_at, time.time()


def simulated_workers(costs: DeviceCosts) -> WorkerClasses:
    """The WorkerClasses (scalerl.distributed.actors) that run a pipeline on simulated devices
    with these costs."""
    return WorkerClasses(
        generator=SimulatedGenerator,
        trainer=SimulatedTrainer,
        generator_kwargs={"costs": costs},
        trainer_kwargs={"costs": costs},
    )
