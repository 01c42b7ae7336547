"""One pipeline run's actors and driver-side state, shared by the async and off-policy loops.

Creates the weight registry, the trainer actor and the generator actors; books every optimiser
step in the run's `RunState` (scalerl.train.run_state, the very object the synchronous trainer
uses: step accounting, schedule, pool, RNG streams, rows, checkpoint state), in step order;
keeps the generator failure accounting. The loops (pipeline.py, offpolicy.py) decide what runs
when.
"""

from __future__ import annotations

import collections
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from scalerl.distributed.actors import (
    GenerationRequest,
    WorkerClasses,
    remote_class,
)
from scalerl.distributed.observability import BusyLedger, pipeline_columns
from scalerl.distributed.settings import PipelineConfig, actor_gpus, cluster_gpus, with_cluster_device
from scalerl.distributed.staleness import LagStats, batch_lag_stats, packed_lag_stats
from scalerl.distributed.trainer_replicas import ReplicaSteps, join_data_parallel
from scalerl.distributed.weight_sync.object_store import WeightRegistry
from scalerl.errors import ScaleRLError
from scalerl.train.flops import ModelShape
from scalerl.train.guards.divergence_guard import require_finite_validation
from scalerl.train.held_out import PASS_RATE_COLUMN
from scalerl.train.records.progress import RunProgress
from scalerl.train.run_checkpoint import RunSnapshot
from scalerl.train.run_setup import build_task, check_paths
from scalerl.train.run_state import RunState, generation_seed


class PipelineSession:
    """The actors of one run and the driver-side state shared by the async and off-policy loops."""

    def __init__(
        self,
        config,
        pipeline: PipelineConfig,
        run_dir,
        *,
        resume: bool = False,
        log: Callable[[str], None] = print,
        workers: WorkerClasses | None = None,
        accept_old_checkpoints: bool = False,
    ) -> None:
        workers = workers or WorkerClasses()
        config = with_cluster_device(config, cluster_gpus() if config.device == "auto" else 0.0)
        self.config, self.pipeline, self.run_dir = config, pipeline, Path(run_dir)
        self.log_lines: list[str] = []
        self._log = log
        # a local cluster runs the actors on this machine: its device must exist here
        check_paths(config, device_here=not pipeline.ray_address)
        # the driver's RunState keeps the sampling stream on the CPU: it crosses to the actors
        self.run_state = RunState.open(
            config,
            self.run_dir,
            resume=resume,
            num_train_prompts=len(build_task(config).train),
            accept_old_checkpoints=accept_old_checkpoints,
        )
        self.progress: RunProgress | None = None  # set by the caller while a progress display runs
        for note in self.run_state.notes:
            self.log(note)
        self.registry, self.trainer, self.trainers, self.generators = None, None, [], []
        try:
            self._start_actors(workers, self.run_state.resumed_from)
        except BaseException:  # e.g. a --model that does not load: no actor left, no half-made run folder
            self._kill_actors()
            self.run_state.discard_unstarted()
            raise
        self.alive = [True] * len(self.generators)
        self.failures = [0] * len(self.generators)
        self.death_seen_at = [float("-inf")] * len(self.generators)
        self.generator_busy = BusyLedger(len(self.generators))
        self.trainer_busy = BusyLedger(1)
        self.steps_committed = self.run_state.step  # optimiser steps handed to the trainer
        self.published_version = self.run_state.step  # newest version a train result reported
        self.dropped_batches = 0
        self.window_start = time.time()
        self._model_shape: ModelShape | None = None
        self.pending: collections.deque = collections.deque()  # [row, validation ref, snapshot]
        self.validation_seconds = 0.0
        self.last_row_time = time.perf_counter()

    def _start_actors(self, workers: WorkerClasses, resume_checkpoint: Path | None) -> None:
        """The weight registry, the trainer actor and the generator actors, each checked started."""
        config, pipeline = self.config, self.pipeline
        # the actors find the registry by name: an actor handle among a restartable actor's
        # constructor arguments is an object-store reference Ray warns about (at ERROR level)
        registry_name = f"scalerl-weights-{uuid.uuid4().hex}"
        self.registry = (
            remote_class(WeightRegistry, num_cpus=0, max_concurrency=1000).options(name=registry_name).remote()
        )
        trainer_gpus, generator_gpus = actor_gpus(config.device, pipeline)
        trainer_class = remote_class(workers.trainer, num_cpus=pipeline.trainer_cpus, num_gpus=trainer_gpus)
        self.trainers = [
            trainer_class.remote(
                config,
                registry_name,
                torch_threads=pipeline.torch_threads,
                resume_checkpoint=None if resume_checkpoint is None else str(resume_checkpoint),
                **_broadcast_kwargs(pipeline),
                **workers.trainer_kwargs,
                **({"data_parallel_rank": rank} if pipeline.num_trainers > 1 else {}),
            )
            for rank in range(pipeline.num_trainers)
        ]
        self.trainer = self.trainers[0]  # rank 0: publishes, validates, checkpoints
        self.trainer_steps = ReplicaSteps(self.trainers)
        generator_class = remote_class(
            workers.generator,
            num_cpus=pipeline.generator_cpus,
            num_gpus=generator_gpus,
            # a restarted generator could not rejoin a broadcast group
            max_restarts=pipeline.max_generator_restarts if pipeline.weight_sync == "object_store" else 0,
        )
        self.generators = [
            generator_class.remote(
                config,
                index,
                registry_name,
                torch_threads=pipeline.torch_threads,
                poll_interval_seconds=pipeline.weight_poll_seconds,
                backend=pipeline.backend,
                **_broadcast_kwargs(pipeline),
                **workers.generator_kwargs,
            )
            for index in range(pipeline.num_generators)
        ]
        for rank, trainer in enumerate(self.trainers):
            _check_started(trainer, "trainer" if len(self.trainers) == 1 else f"trainer rank {rank}")
        for index, generator in enumerate(self.generators):
            _check_started(generator, f"generator {index}")
        if len(self.trainers) > 1:
            join_data_parallel(self.trainers)
            self.log(
                f"training data parallel on {len(self.trainers)} trainer actors (torch.distributed), "
                "each on its share of every batch"
            )
        if pipeline.weight_sync == "broadcast":
            _join_weight_group(self.trainer, self.generators)

    def busy_generators(self) -> list[int]:
        """Indices of the generators still working on a batch right now (tests, progress)."""
        import ray

        generating = getattr(getattr(self, "loop", None), "generating", {})
        if not generating:
            return []
        _, running = ray.wait(list(generating), num_returns=len(generating), timeout=0)
        return sorted({generating[ref][0] for ref in running})

    def log(self, message: str) -> None:
        """One line to the user: above the progress display while it runs, else to `log`."""
        self.log_lines.append(message)
        if self.progress is not None:
            self.progress.note(message)
        else:
            self._log(message)

    def generator_failed(self, index: int, error: Exception, dispatched_at: float) -> bool:
        """A generator's batch failed because the actor died: count the death once and log it.

        Ray restarts the actor (up to max_generator_restarts); the batch is generated again.
        Several requests can be queued on one actor, and each fails when it dies: a request
        dispatched before the last death already seen is that same death, not a new one.
        Returns True when this is a new death.
        """
        if dispatched_at <= self.death_seen_at[index]:
            return False
        self.death_seen_at[index] = time.time()
        self.failures[index] += 1
        self.log(
            f"warning: generator {index} died ({type(error).__name__}); Ray restarts it "
            f"(failure {self.failures[index]}, max_restarts "
            f"{self.pipeline.max_generator_restarts}); its batch is generated again, the run "
            "goes on with the other generators"
        )
        return True

    def generator_lost(self, index: int) -> None:
        """Ray gave up restarting a generator: continue without it (or stop if none is left)."""
        self.alive[index] = False
        self.log(f"warning: generator {index} is gone for good; continuing with {sum(self.alive)} generator(s)")
        if not any(self.alive):
            raise ScaleRLError(
                f"every generator actor died (past pipeline.max_generator_restarts); the run "
                f"stopped and can be resumed from its last checkpoint: scalerl train --out "
                f"{self.run_dir} --resume"
            )

    def probe(self, index: int):
        """A cheap call that returns once generator `index` is back up."""
        return self.generators[index].pid.remote()

    def probe_result(self, index: int, probe_ref) -> bool | None:
        """True: the generator is back; None: still restarting; False: gone for good."""
        import ray

        try:
            pid = ray.get(probe_ref)
        except ray.exceptions.ActorUnavailableError:
            time.sleep(0.1)
            return None
        except ray.exceptions.RayActorError:
            self.generator_lost(index)
            return False
        self.log(f"generator {index} is back (pid {pid})")
        return True

    def wait_until_back(self, index: int) -> bool:
        """Block until generator `index` answers again (True) or is gone for good (False)."""
        while True:
            state = self.probe_result(index, self.probe(index))
            if state is not None:
                return state

    def request(self, step: int, prompt_indices, *, in_flight: bool) -> GenerationRequest:
        """A request for the next batch; continues the run's sampling stream when it is free."""
        return GenerationRequest(
            step=step,
            prompt_indices=tuple(prompt_indices),
            seed=generation_seed(self.config, step),
            min_version=self.published_version,
            in_flight=in_flight,
            rng_state=self.run_state.take_rng_state(),
        )

    def batch_finished(self, batch, dispatched_at: float) -> None:
        """A request came back: its busy time, and the sampling stream if it held it."""
        self.generator_busy.add(max(dispatched_at, batch.started_at), batch.finished_at)
        self.run_state.return_rng_state(batch.rng_state_after)

    def complete_step(self, result, batch, dropped=(), running_since=()) -> None:
        """Book one optimiser step like the synchronous trainer, plus the pipeline columns.

        The row waits in `pending` for its validation (submitted now, so that it runs on this
        step's weights before any later step) and is appended by `flush`.
        """
        self.published_version = max(self.published_version, result.version)
        self.trainer_busy.add(result.started_at, result.finished_at)
        now = time.time()
        generator_idle = self.generator_busy.idle_fraction(self.window_start, now, running_since)
        trainer_idle = self.trainer_busy.idle_fraction(self.window_start, now)
        self.window_start = now
        lag = step_lag_stats(batch, result.version - 1)
        extras = pipeline_columns(lag, generator_idle, trainer_idle, result.publish_seconds + batch.weight_sync_seconds)
        # the step's wall time runs from the previous row, minus the validations run meanwhile
        # (the synchronous trainer does not count evaluation as training time either)
        clock = time.perf_counter()
        wall_seconds = max(0.0, clock - self.last_row_time - self.validation_seconds)
        self.last_row_time = clock
        self.validation_seconds = 0.0
        # booked from the packed arrays (their columns): the driver never unpacks a batch
        row = self.run_state.book_step(
            result.version,
            batch.packed.columns(),
            result.stats,
            shape=self.model_shape(),
            wall_seconds=wall_seconds,
            dropped=[b.packed.columns() for b in dropped],
        )
        row.update(extras)
        if result.stats.nonfinite:
            self.log(result.stats.nonfinite)
        due = self.run_state.validation_due(row["step"])
        # the run state of a checkpoint is taken now, before later batches are dispatched, so a
        # resumed k = 0 run samples exactly what the uninterrupted one does
        snapshot = self.run_state.snapshot() if self.run_state.checkpoint_due(row["step"]) else None
        validation = self.trainer.validate.remote(str(self.run_dir), row["step"]) if due else None
        self.pending.append([row, validation, snapshot])

    def checkpoint_pending(self) -> bool:
        """A row whose step needs a checkpoint is not written yet: the trainer must not step."""
        return any(snapshot is not None for _, _, snapshot in self.pending)

    def pending_refs(self) -> list:
        return [ref for _, ref, _ in self.pending if ref is not None]

    def flush(self, *, block: bool = False) -> list[dict]:
        """Append the pending rows whose validation is done, in step order; checkpoint on cadence.

        Like the synchronous trainer, device_hours count training time: a validation's duration
        is subtracted from the wall time of the step during which it ran.
        """
        import ray

        written = []
        while self.pending:
            row, ref, snapshot = self.pending[0]
            if ref is not None:
                if not block and not ray.wait([ref], timeout=0)[0]:
                    break
                rates, started, finished = ray.get(ref)
                self.trainer_busy.add(started, finished)
                self.validation_seconds += finished - started
                require_finite_validation(row["step"], rates[PASS_RATE_COLUMN])
                row.update(rates)
            self.pending.popleft()
            forecast = self.run_state.append(row)
            if self.progress is not None:
                self.progress.show_row(row, self.run_state.last_val_pass_rate, forecast)
            if snapshot is not None:
                self.checkpoint(snapshot)
            written.append(row)
        return written

    def initial_validation(self) -> None:
        """Step 0's row (R0), as the synchronous trainer writes it."""
        row = self.run_state.initial_row()
        self.pending.append([row, self.trainer.validate.remote(str(self.run_dir), row["step"]), None])
        self.flush(block=True)

    def start_clock(self) -> None:
        """Training time starts now: Ray and actor start-up and step 0's validation are not
        training compute (the synchronous trainer's clock also starts with its first step)."""
        self.validation_seconds = 0.0
        self.last_row_time = time.perf_counter()
        self.window_start = time.time()

    def checkpoint(self, snapshot: RunSnapshot | None = None) -> None:
        """The synchronous trainer's checkpoint of `snapshot` (default: the last booked step; the
        trainer holds that step's weights: no later step was handed to it)."""
        import ray

        snapshot = self.run_state.snapshot() if snapshot is None else snapshot
        try:
            ray.get(self.trainer.save_checkpoint.remote(str(self.run_dir), snapshot))
        except ray.exceptions.RayTaskError as error:
            # e.g. a full disk: the actor's OutputError names the checkpoint; its traceback would not help
            if isinstance(error.cause, ScaleRLError):
                raise error.cause from None
            raise

    def model_shape(self) -> ModelShape:
        import ray

        if self._model_shape is None:
            self._model_shape = ray.get(self.trainer.model_shape.remote())
        return self._model_shape

    def train(self, packed):
        """Hand a batch to the trainer (every rank when data parallel); rank 0's result ref."""
        return self.trainer_steps.train(packed)

    def final_weights(self):
        import ray

        self.trainer_steps.wait_all()
        return ray.get(self.trainer.weights.remote())

    def shutdown(self) -> None:
        self._kill_actors()
        self.run_state.close()

    def _kill_actors(self) -> None:
        import ray

        for actor in [*self.trainers, self.registry, *self.generators]:
            if actor is None:
                continue
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - an actor that is already gone is fine
                pass


def step_lag_stats(batch, trainer_version: int) -> LagStats:
    """The policy lag of a GeneratedBatch consumed at `trainer_version`, from its packed token
    versions; a batch without completion tokens counts as its start version's."""
    if batch.packed.versions.size:
        return packed_lag_stats(batch.packed.versions, trainer_version)
    return batch_lag_stats([[batch.start_version]], trainer_version)


def _broadcast_kwargs(pipeline: PipelineConfig) -> dict:
    """The workers' constructor arguments of pipeline.weight_sync = broadcast (none otherwise)."""
    return {"bucket_mb": pipeline.bucket_mb} if pipeline.weight_sync == "broadcast" else {}


def _join_weight_group(trainer, generators: list) -> None:
    """Open the weight-sync group (trainer rank 0, generator i rank i + 1) at an address on the
    trainer's node; the trainer then broadcasts its current weights (the first version)."""
    import ray

    address = ray.get(trainer.rendezvous.remote())
    world_size = 1 + len(generators)
    ray.get(
        [
            trainer.join_weight_group.remote(address, world_size),
            *[g.join_weight_group.remote(address, world_size, i + 1) for i, g in enumerate(generators)],
        ]
    )


def _check_started(actor, role: str) -> None:
    """Wait for an actor's constructor; a failure there becomes one clear ScaleRLError."""
    import ray

    try:
        ray.get(actor.pid.remote())
    except ray.exceptions.RayActorError as error:
        cause = getattr(error, "cause", None) or error
        last_line = str(cause).strip().splitlines()[-1] if str(cause).strip() else repr(cause)
        raise ScaleRLError(f"the {role} actor failed to start: {last_line}") from None
