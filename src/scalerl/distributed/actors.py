"""The two Ray roles of the pipeline: generator workers and the trainer worker.

The classes are plain Python (so tests can also run them in-process); `remote_class` turns one
into a Ray actor class with the resources the pipeline settings ask for. Both build and run
what they hold with the synchronous trainer's own functions (scalerl.train.run_setup, step_rollouts,
scalerl.train.run_state): a generator samples rollouts with `generate_step` (packed as they are
decoded) and swaps weights in flight through a WeightSubscriber; the trainer steps with `train_step`
(through the divergence guard), publishes each new version and writes the run's checkpoints from
the driver's RunSnapshot. Neither decides anything about staleness (see staleness.py).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from scalerl.distributed.messages import GeneratedBatch, GenerationRequest, StepResult
from scalerl.distributed.weight_sync.broadcast import BroadcastPublisher, BroadcastSubscriber, rendezvous_address
from scalerl.distributed.weight_sync.collective import join_group
from scalerl.distributed.weight_sync.object_store import (
    BackgroundPublisher,
    WeightSnapshot,
    WeightSubscriber,
    publish_weights,
    registry_handle,
    snapshot_weights,
)
from scalerl.train.batch.packed_rollouts import PackedRollouts
from scalerl.train.config.step_recipe import step_recipe
from scalerl.train.flops import ModelShape, model_shape
from scalerl.train.guards.context_check import check_prompt_lengths
from scalerl.train.guards.divergence_guard import guard_for
from scalerl.train.held_out import validation_pass_rates
from scalerl.train.lora_policy import run_policy
from scalerl.train.run_checkpoint import RunSnapshot, restore_training, save_run_checkpoint
from scalerl.train.run_setup import build_optimisation, build_task, fresh_policy, reference_policy
from scalerl.train.step_rollouts import generate_step, score_batch, training_rewards
from scalerl.train.train_step import guarded_train_step


def configure_torch_threads(num_threads: int) -> None:
    """Pin intra-op threads of this process (one per actor on a 2-core laptop avoids thrashing)."""
    if num_threads > 0:
        torch.set_num_threads(int(num_threads))
        os.environ["OMP_NUM_THREADS"] = str(int(num_threads))


class GeneratorWorker:
    """Holds a copy of the policy; turns GenerationRequests into GeneratedBatches."""

    def __init__(
        self,
        config,
        generator_id: int,
        registry,
        *,
        torch_threads: int = 1,
        poll_interval_seconds: float = 0.0,
        backend: str = "hf",
        bucket_mb: float = 256.0,
    ) -> None:
        configure_torch_threads(torch_threads)
        self.config = config
        self.recipe = step_recipe(config)  # the config resolved once for every batch
        self.bucket_mb = float(bucket_mb)
        self.generator_id = int(generator_id)
        self.task = build_task(config)
        self.backend = backend
        self.subscriber = WeightSubscriber(registry_handle(registry), poll_interval_seconds)
        if backend == "vllm":
            from scalerl.distributed.vllm_generator import VllmRolloutBackend

            self.vllm = VllmRolloutBackend(config.model.path, self.recipe.sampling, self.recipe.length_control)
            self.model, self.tokenizer = None, self.vllm.tokenizer
        elif config.model.lora_r > 0:  # the starting weights built here; only the adapters travel
            self.model, self.tokenizer = run_policy(config, self.task, resuming=False)
        else:  # architecture and tokenizer only: the weights always come from the registry
            self.model, self.tokenizer = fresh_policy(config)

    def pid(self) -> int:
        return os.getpid()

    def join_weight_group(self, address: str, world_size: int, rank: int) -> None:
        """pipeline.weight_sync = broadcast: join the trainer's group; weights arrive by broadcast."""
        group = join_group(rank, world_size, address, group_backend(self.model))
        self.subscriber = BroadcastSubscriber(self.model, self.bucket_mb, group)

    def generate(self, request: GenerationRequest) -> GeneratedBatch:
        started_at = time.time()
        sync_before, swaps_before = self.subscriber.sync_seconds, self.subscriber.num_swaps
        rng_after = None
        if self.backend == "vllm":
            packed, start_version = self._generate_vllm(request)
        else:
            start_version = self.subscriber.sync(self.model, request.min_version)
            hook = self.subscriber.hook_for(self.model) if request.in_flight else None
            generator = sampling_generator(self.model, request)
            packed = generate_step(
                self.model,
                self.tokenizer,
                self.task,
                self.recipe,
                request.prompt_indices,
                torch_generator=generator,
                policy_version=start_version,
                weight_update_hook=hook,
            )
            if request.rng_state is not None:  # this request held the run's sampling stream
                rng_after = generator.get_state()
        return GeneratedBatch(
            step=request.step,
            generator_id=self.generator_id,
            packed=packed,
            start_version=start_version,
            started_at=started_at,
            finished_at=time.time(),
            weight_sync_seconds=self.subscriber.sync_seconds - sync_before,
            num_weight_swaps=self.subscriber.num_swaps - swaps_before,
            rng_state_after=rng_after,
        )

    def _generate_vllm(self, request: GenerationRequest) -> tuple[PackedRollouts, int]:
        version = self.subscriber.sync(self.vllm.load_snapshot, request.min_version)
        examples = [self.task.train[i] for i in request.prompt_indices]
        packed = self.vllm.generate(
            [e.prompt for e in examples],
            list(request.prompt_indices),
            num_generations=self.config.sampling.generations_per_prompt,
            seed=request.seed,
            policy_version=version,
        )
        return score_batch(self.task, packed), version


# A data-parallel rank waits this long in a collective for the others (one step, or a checkpoint).
DATA_PARALLEL_TIMEOUT_SECONDS = 600.0


class TrainerWorker:
    """Holds the policy being trained, its optimiser and LR schedule; publishes every version."""

    def __init__(
        self,
        config,
        registry,
        *,
        torch_threads: int = 1,
        resume_checkpoint: str | None = None,
        bucket_mb: float | None = None,
        data_parallel_rank: int = 0,
    ) -> None:
        configure_torch_threads(torch_threads)
        self.config = config
        self.registry = registry = registry_handle(registry)
        self.task = build_task(config)
        self.model, self.tokenizer = run_policy(config, self.task, resuming=resume_checkpoint is not None)
        check_prompt_lengths(self.task, self.tokenizer, self.model, config.sampling.max_new_tokens)
        self.optimizer, self.scheduler = build_optimisation(self.model, config)
        self.reference = reference_policy(config, self.task)
        self.version = 0
        self.guard = guard_for(config)  # non-finite steps: skip (train.skip_nonfinite_steps) or stop
        self.recipe = step_recipe(config)  # the config resolved once for every step
        if resume_checkpoint is not None:
            self.version = restore_training(
                resume_checkpoint, model=self.model, optimizer=self.optimizer, scheduler=self.scheduler
            )
        # Data parallel (pipeline.num_trainers > 1, trainer_replicas.py): only rank 0 publishes.
        self.publishes = int(data_parallel_rank) == 0
        # bucket_mb given: weights go by broadcast, from join_weight_group on (no object-store copy)
        self.bucket_mb, self.publisher = bucket_mb, None
        self.publish_seconds = (
            publish_weights(registry, self.model, self.version) if bucket_mb is None and self.publishes else 0.0
        )
        # later versions: put into the object store on a background thread, beside the next step
        self.background = BackgroundPublisher(registry)

    def pid(self) -> int:
        return os.getpid()

    def rendezvous(self) -> str:
        return rendezvous_address()

    def join_weight_group(self, address: str, world_size: int) -> float:
        """pipeline.weight_sync = broadcast: open the group as rank 0, then send the current version."""
        group = join_group(0, world_size, address, group_backend(self.model))
        self.publisher = BroadcastPublisher(self.model, self.bucket_mb, group)
        return self.publish()

    def join_data_parallel(self, address: str, rank: int, world_size: int) -> None:
        """pipeline.num_trainers > 1: join the trainers' torch.distributed default group, in which
        train_step's data-parallel path sums the ranks' gradients (scalerl.train.parallel.data_parallel)."""
        import datetime

        import torch.distributed as dist

        dist.init_process_group(
            backend=group_backend(self.model),
            init_method=f"tcp://{address}",
            rank=int(rank),
            world_size=int(world_size),
            timeout=datetime.timedelta(seconds=DATA_PARALLEL_TIMEOUT_SECONDS),
        )

    def publish(self) -> float:
        """Send this version to the generators (broadcast, or the object store); its seconds.
        A data-parallel rank other than 0 holds the same weights and sends nothing."""
        if not self.publishes:
            return 0.0
        if self.publisher is not None:
            return self.publisher.publish(self.model, self.version)
        return self.background.publish(self.model, self.version)

    def model_shape(self) -> ModelShape:
        return model_shape(self.model)

    def train(self, packed: PackedRollouts) -> StepResult:
        """train_step (the synchronous trainer's code) on the batch, then publish the new version.
        The batch is trained on as it is: its tensors are built from its buffers (no Rollout
        objects)."""
        started_at = time.time()
        stats = guarded_train_step(
            self.guard,
            self.version + 1,
            self.model,
            self.optimizer,
            self.scheduler,
            training_rewards(packed, self.config),
            self.recipe,
            reference=self.reference,
        )
        self.version += 1
        publish_seconds = self.publish()
        return StepResult(
            stats=stats,
            version=self.version,
            publish_seconds=publish_seconds,
            started_at=started_at,
            finished_at=time.time(),
        )

    def validate(self, run_dir: str | None = None, step: int | None = None) -> tuple[dict[str, float], float, float]:
        """(validation columns, started_at, finished_at) with the synchronous trainer's validation
        (validation_pass_rates: val_pass_rate, and per difficulty group where the prompts have one);
        with `run_dir`, its sample completions appended to RUN/completions.jsonl tagged `step`."""
        started_at = time.time()
        rates = validation_pass_rates(
            self.model,
            self.tokenizer,
            self.task,
            self.config,
            run_dir=None if run_dir is None else Path(run_dir),
            step=step,
        )
        return rates, started_at, time.time()

    def save_checkpoint(self, run_dir: str, snapshot: RunSnapshot) -> str:
        """The synchronous trainer's checkpoint of `snapshot.step`: this actor's tensors plus the
        driver's run state."""
        return str(
            save_run_checkpoint(
                run_dir,
                snapshot,
                model=self.model,
                optimizer=self.optimizer,
                scheduler=self.scheduler,
                keep=self.config.keep_checkpoints,
                tokenizer=self.tokenizer,
            )
        )

    def weights(self) -> WeightSnapshot:
        """The current weights as a WeightSnapshot (tests compare runs with it)."""
        return snapshot_weights(self.model, self.version)


def group_backend(model: torch.nn.Module) -> str:
    """The weight-sync group's backend for a model's device: NCCL on CUDA, else gloo."""
    return "nccl" if next(model.parameters()).is_cuda else "gloo"


def sampling_generator(model: torch.nn.Module, request: GenerationRequest) -> torch.Generator:
    """The request's sampling generator on the model's device: the run's stream when the request
    holds it (`rng_state`, what the synchronous trainer samples with), else seeded with `seed`."""
    generator = torch.Generator(device=next(model.parameters()).device)
    if request.rng_state is not None:
        generator.set_state(request.rng_state)
    else:
        generator.manual_seed(int(request.seed))
    return generator


@dataclass(frozen=True)
class WorkerClasses:
    """The generator and trainer classes a pipeline run instantiates (the real ones by default).

    Benchmarks and tests swap in other classes with the same constructor and methods, e.g.
    benchmarks.simulated_device's; the `*_kwargs` are added to each constructor call.
    """

    generator: type = GeneratorWorker
    trainer: type = TrainerWorker
    generator_kwargs: dict = field(default_factory=dict)
    trainer_kwargs: dict = field(default_factory=dict)


def remote_class(cls, *, num_cpus: float, num_gpus: float = 0.0, max_restarts: int = 0, max_concurrency: int = 1):
    """`cls` as a Ray actor class with these resources (ray imported here, not at module import)."""
    import ray

    return ray.remote(
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        max_restarts=max_restarts,
        max_task_retries=0,
        max_concurrency=max_concurrency,
    )(cls)
