"""The two Ray roles of the pipeline: generator workers and the trainer worker.

The classes are plain Python (so tests can also run them in-process); `remote_class` turns one
into a Ray actor class with the resources the pipeline settings ask for. A generator samples
rollouts with the synchronous trainer's own generation code and swaps weights in flight through
a WeightSubscriber; the trainer steps with the synchronous trainer's own `train_step` and
publishes each new version. Neither decides anything about staleness (see staleness.py).
"""
from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from scalerl.distributed import run_parts
from scalerl.distributed.messages import GeneratedBatch, GenerationRequest, TrainResult
from scalerl.distributed.weights import WeightSubscriber, publish_weights
from scalerl.tasks.rollout import Rollout


def configure_torch_threads(num_threads: int) -> None:
    """Pin intra-op threads of this process (one per actor on a 2-core laptop avoids thrashing)."""
    import torch

    if num_threads > 0:
        torch.set_num_threads(int(num_threads))
        os.environ["OMP_NUM_THREADS"] = str(int(num_threads))


class GeneratorWorker:
    """Holds a copy of the policy; turns GenerationRequests into GeneratedBatches."""

    def __init__(self, config, generator_id: int, registry, *, torch_threads: int = 1,
                 poll_interval_seconds: float = 0.0, backend: str = "hf") -> None:
        configure_torch_threads(torch_threads)
        self.config = config
        self.generator_id = int(generator_id)
        self.task = run_parts.build_task(config)
        self.backend = backend
        self.subscriber = WeightSubscriber(registry, poll_interval_seconds)
        if backend == "vllm":
            from scalerl.distributed.vllm_generator import VllmRolloutBackend

            self.vllm = VllmRolloutBackend(config.model.path, run_parts.sampling_settings(config),
                                           run_parts.length_control(config))
            self.model, self.tokenizer = None, self.vllm.tokenizer
        else:
            self.model, self.tokenizer = run_parts.build_generator_policy(config)

    def pid(self) -> int:
        return os.getpid()

    def generate(self, request: GenerationRequest) -> GeneratedBatch:
        started_at = time.time()
        sync_before, swaps_before = self.subscriber.sync_seconds, self.subscriber.num_swaps
        if self.backend == "vllm":
            rollouts, start_version = self._generate_vllm(request)
        else:
            start_version = self.subscriber.sync(self.model, request.min_version)
            hook = self.subscriber.hook_for(self.model) if request.in_flight else None
            rollouts, rng_after = run_parts.generate_step_rollouts(
                self.model, self.tokenizer, self.task, self.config, request.prompt_indices,
                seed=request.seed, rng_state=request.rng_state, policy_version=start_version,
                weight_update_hook=hook)
        return GeneratedBatch(
            step=request.step, generator_id=self.generator_id, rollouts=tuple(rollouts),
            start_version=start_version, started_at=started_at, finished_at=time.time(),
            weight_sync_seconds=self.subscriber.sync_seconds - sync_before,
            num_weight_swaps=self.subscriber.num_swaps - swaps_before,
            rng_state_after=None if self.backend == "vllm" else rng_after)

    def _generate_vllm(self, request: GenerationRequest) -> tuple[list[Rollout], int]:
        version = self.subscriber.sync(self.vllm.load_snapshot, request.min_version)
        examples = [self.task.train[i] for i in request.prompt_indices]
        rollouts = self.vllm.generate(
            [e.prompt for e in examples], list(request.prompt_indices),
            num_generations=self.config.sampling.generations_per_prompt, seed=request.seed,
            policy_version=version)
        return run_parts.score_rollouts(self.task, self.config, rollouts), version


class TrainerWorker:
    """Holds the policy being trained, its optimiser and LR schedule; publishes every version."""

    def __init__(self, config, registry, *, torch_threads: int = 1,
                 resume_checkpoint: str | None = None) -> None:
        configure_torch_threads(torch_threads)
        self.config = config
        self.registry = registry
        self.model, self.tokenizer = run_parts.build_trainer_policy(
            config, warm_start=resume_checkpoint is None)
        self.optimizer, self.scheduler = run_parts.build_optimisation(self.model, config)
        self.task = run_parts.build_task(config)
        self.version = 0
        if resume_checkpoint is not None:
            self.version = run_parts.restore_trainer(self, resume_checkpoint)
        self.publish_seconds = publish_weights(registry, self.model, self.version)

    def pid(self) -> int:
        return os.getpid()

    def model_shape(self):
        from scalerl.train.flops import model_shape

        return model_shape(self.model)

    def train(self, rollouts: Sequence[Rollout]) -> TrainResult:
        """train_step (the synchronous trainer's code), then publish the new version."""
        from scalerl.train.train_step import train_step

        started_at = time.time()
        stats = train_step(self.model, self.optimizer, self.scheduler,
                           run_parts.training_rewards(rollouts, self.config), self.config)
        self.version += 1
        publish_seconds = publish_weights(self.registry, self.model, self.version)
        return TrainResult(stats=stats, version=self.version, publish_seconds=publish_seconds,
                           started_at=started_at, finished_at=time.time())

    def validate(self) -> tuple[float, float, float]:
        """(val_pass_rate, started_at, finished_at) with the synchronous trainer's validation."""
        started_at = time.time()
        pass_rate = run_parts.validation(self.model, self.tokenizer, self.task, self.config)
        return pass_rate, started_at, time.time()

    def save_checkpoint(self, run_dir: str, step: int, driver_state: dict) -> str:
        """Write the synchronous trainer's checkpoint format (weights, optimiser, RNG, pool)."""
        return str(run_parts.save_trainer_checkpoint(self, run_dir, step, driver_state))

    def weights(self):
        """The current weights as a WeightSnapshot (tests compare runs with it)."""
        from scalerl.distributed.weights import snapshot_weights

        return snapshot_weights(self.model, self.version)


@dataclass(frozen=True)
class WorkerClasses:
    """The generator and trainer classes a pipeline run instantiates (the real ones by default).

    Benchmarks and tests swap in other classes with the same constructor and methods, e.g.
    scalerl.distributed.simulated_device's; the `*_kwargs` are added to each constructor call.
    """

    generator: type = GeneratorWorker
    trainer: type = TrainerWorker
    generator_kwargs: dict = field(default_factory=dict)
    trainer_kwargs: dict = field(default_factory=dict)


def remote_class(cls, *, num_cpus: float, num_gpus: float = 0.0, max_restarts: int = 0,
                 max_concurrency: int = 1):
    """`cls` as a Ray actor class with these resources (ray imported here, not at module import)."""
    import ray

    return ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_restarts=max_restarts,
                      max_task_retries=0, max_concurrency=max_concurrency)(cls)
