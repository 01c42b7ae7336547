"""Asynchronous PipelineRL on Ray: generators keep generating while the trainer steps.

Orchestration only. The driver samples prompts (the synchronous trainer's curriculum pool and
RNG), hands GenerationRequests to idle generator actors when the staleness rule allows it, hands
finished batches to the trainer actor when the staleness rule admits them, and writes one
metrics row per optimiser step (the synchronous trainer's columns plus the pipeline's).
With max_lag = 0 this is exactly the synchronous trainer, run on two actors (a test says so).
PPO-off-policy-k lives in offpolicy.py and shares the session/bookkeeping in this file.
"""
from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from scalerl.distributed import run_parts
from scalerl.distributed.actors import (
    GenerationRequest,
    GeneratorWorker,
    TrainerWorker,
    remote_class,
)
from scalerl.distributed.observability import BusyLedger, pipeline_columns
from scalerl.distributed.settings import PipelineConfig
from scalerl.distributed.staleness import (
    Admission,
    admit_batch,
    batch_lag_stats,
    latest_consumer_version,
)
from scalerl.distributed.weights import WeightRegistry
from scalerl.errors import ConfigError, ScaleRLError

RowCallback = Callable[[dict, "PipelineSession"], None]


@dataclass
class PipelineResult:
    """What a pipeline run did (the rows are also in RUN/metrics.jsonl)."""

    run_dir: Path
    steps_done: int
    rows: list[dict]
    dropped_batches: int
    generator_failures: int
    wall_seconds: float
    interrupted: bool
    final_weights: object | None = None  # WeightSnapshot when asked for
    log_lines: list[str] = field(default_factory=list)


def init_ray(pipeline: PipelineConfig) -> bool:
    """Start (or join) Ray; returns True when this call started it (and should shut it down)."""
    import os

    import ray

    if ray.is_initialized():
        return False
    common = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
    if pipeline.ray_address:
        ray.init(address=pipeline.ray_address, **common)
        return True
    needed = pipeline.trainer_cpus + pipeline.num_generators * pipeline.generator_cpus
    num_cpus = pipeline.num_cpus or max(os.cpu_count() or 1, int(needed + 0.999))
    ray.init(num_cpus=num_cpus, runtime_env={"env_vars": {
        "OMP_NUM_THREADS": str(pipeline.torch_threads),
        "MKL_NUM_THREADS": str(pipeline.torch_threads)}}, **common)
    return True


class PipelineSession:
    """The actors of one run and the driver-side state shared by the async and off-policy loops."""

    def __init__(self, config, pipeline: PipelineConfig, run_dir, *, resume: bool = False,
                 log: Callable[[str], None] = print) -> None:
        self.config, self.pipeline, self.run_dir = config, pipeline, Path(run_dir)
        self.log_lines: list[str] = []
        self._log = log
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.books = run_parts.RunBooks.start(config, self.run_dir, resume=resume)
        self.registry = remote_class(WeightRegistry, num_cpus=0, max_concurrency=1000).remote()
        trainer_class = remote_class(TrainerWorker, num_cpus=pipeline.trainer_cpus,
                                     num_gpus=pipeline.trainer_gpus)
        self.trainer = trainer_class.remote(config, self.registry,
                                            torch_threads=pipeline.torch_threads,
                                            resume_checkpoint=self.books.trainer_resume_state())
        generator_class = remote_class(GeneratorWorker, num_cpus=pipeline.generator_cpus,
                                       num_gpus=pipeline.generator_gpus,
                                       max_restarts=pipeline.max_generator_restarts)
        self.generators = [
            generator_class.remote(config, index, self.registry, torch_threads=pipeline.torch_threads,
                                   poll_interval_seconds=pipeline.weight_poll_seconds,
                                   backend=pipeline.backend)
            for index in range(pipeline.num_generators)]
        self.alive = [True] * len(self.generators)
        self.failures = [0] * len(self.generators)
        self.generator_busy = BusyLedger(len(self.generators))
        self.trainer_busy = BusyLedger(1)
        self.steps_committed = self.books.step  # optimiser steps handed to the trainer
        self.published_version = self.books.step  # newest version a train result reported
        self.dropped_batches = 0
        self.window_start = time.time()
        self._model_shape = None
        self.pending: collections.deque = collections.deque()  # [row, validation ref or None]
        self.validation_seconds = 0.0

    def busy_generators(self) -> list[int]:
        """Indices of the generators still working on a batch right now (tests, progress)."""
        import ray

        generating = getattr(getattr(self, "loop", None), "generating", {})
        if not generating:
            return []
        _, running = ray.wait(list(generating), num_returns=len(generating), timeout=0)
        return sorted({generating[ref][0] for ref in running})

    def log(self, message: str) -> None:
        self.log_lines.append(message)
        self._log(message)

    def generator_failed(self, index: int, error: Exception) -> None:
        """A generator's batch failed because the actor died: count it and say so in the log.

        Ray restarts the actor (up to max_generator_restarts); the batch is generated again.
        """
        self.failures[index] += 1
        self.log(f"warning: generator {index} died ({type(error).__name__}); Ray restarts it "
                 f"(failure {self.failures[index]}, max_restarts "
                 f"{self.pipeline.max_generator_restarts}); its batch is generated again, the run "
                 "goes on with the other generators")

    def generator_lost(self, index: int) -> None:
        """Ray gave up restarting a generator: continue without it (or stop if none is left)."""
        self.alive[index] = False
        self.log(f"warning: generator {index} is gone for good; continuing with "
                 f"{sum(self.alive)} generator(s)")
        if not any(self.alive):
            raise ScaleRLError("every generator actor died; the run cannot continue")

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
        return GenerationRequest(step=step, prompt_indices=tuple(prompt_indices),
                                 seed=run_parts.generation_seed(self.config, step),
                                 min_version=self.published_version, in_flight=in_flight,
                                 rng_state=self.books.take_chained_rng_state())

    def batch_finished(self, batch, dispatched_at: float) -> None:
        self.generator_busy.add(max(dispatched_at, batch.started_at), batch.finished_at)
        if batch.rng_state_after is not None:
            self.books.chain_rng_state(batch.rng_state_after)
        else:
            self.books.in_flight -= 1

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
        versions = [r.token_policy_versions for r in batch.rollouts if r.token_policy_versions]
        lag = batch_lag_stats(versions or [[batch.start_version]], result.version - 1)
        extras = pipeline_columns(lag, generator_idle, trainer_idle,
                                  result.publish_seconds + batch.weight_sync_seconds)
        row = self.books.step_row(result.version, batch.rollouts, result.stats, extras,
                                  model_shape=self.model_shape(),
                                  dropped=[b.rollouts for b in dropped],
                                  excluded_seconds=self.validation_seconds)
        self.validation_seconds = 0.0
        due = self.books.validation_due(row["step"])
        self.pending.append([row, self.trainer.validate.remote() if due else None])

    def checkpoint_pending(self) -> bool:
        """A row whose step needs a checkpoint is not written yet: the trainer must not step."""
        return any(self.books.checkpoint_due(row["step"]) for row, _ in self.pending)

    def pending_refs(self) -> list:
        return [ref for _, ref in self.pending if ref is not None]

    def flush(self, *, block: bool = False) -> list[dict]:
        """Append the pending rows whose validation is done, in step order; checkpoint on cadence.

        Like the synchronous trainer, device_hours count training time: a validation's duration
        is subtracted from the wall time of the step during which it ran.
        """
        import ray

        written = []
        while self.pending:
            row, ref = self.pending[0]
            if ref is not None:
                if not block and not ray.wait([ref], timeout=0)[0]:
                    break
                pass_rate, started, finished = ray.get(ref)
                self.trainer_busy.add(started, finished)
                self.validation_seconds += finished - started
                row["val_pass_rate"] = pass_rate
            self.pending.popleft()
            self.books.append(row)
            if self.books.checkpoint_due(row["step"]):
                self.checkpoint()
            written.append(row)
        return written

    def initial_validation(self) -> None:
        """Step 0's row (R0), as the synchronous trainer writes it."""
        self.pending.append([self.books.initial_row(), self.trainer.validate.remote()])
        self.flush(block=True)
        self.validation_seconds = 0.0

    def checkpoint(self) -> None:
        """The synchronous trainer's checkpoint of the last written step (trainer idle here)."""
        import ray

        ray.get(self.trainer.save_checkpoint.remote(str(self.run_dir), self.books.step,
                                                    self.books.driver_state()))

    def model_shape(self):
        import ray

        if self._model_shape is None:
            self._model_shape = ray.get(self.trainer.model_shape.remote())
        return self._model_shape

    def final_weights(self):
        import ray

        return ray.get(self.trainer.weights.remote())

    def shutdown(self) -> None:
        import ray

        for actor in [self.trainer, self.registry, *self.generators]:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - an actor that is already gone is fine
                pass
        self.books.close()


def run_pipeline(config, pipeline: PipelineConfig, run_dir, *, resume: bool = False,
                 on_row: RowCallback | None = None, keep_weights: bool = False,
                 log: Callable[[str], None] = print) -> PipelineResult:
    """Run (or resume) `config.max_steps` optimiser steps in `pipeline.mode`.

    Ctrl-C (KeyboardInterrupt) stops the run after writing a checkpoint of the last finished
    step, in the synchronous trainer's format, so `resume=True` continues it.
    """
    if pipeline.mode == "sync":
        raise ConfigError("pipeline.mode: 'sync' runs the synchronous trainer, not the Ray pipeline")
    started_ray = init_ray(pipeline)
    started = time.time()
    session = PipelineSession(config, pipeline, run_dir, resume=resume, log=log)
    interrupted = False
    try:
        if session.books.step == 0:
            session.initial_validation()
        if pipeline.mode == "async":
            _AsyncLoop(session, on_row).run()
        else:
            from scalerl.distributed.offpolicy import OffPolicyLoop

            OffPolicyLoop(session, on_row).run()
    except KeyboardInterrupt:
        interrupted = True
        loop = getattr(session, "loop", None)
        if loop is not None:
            loop.drain()  # the trainer's weights must be those of the step we checkpoint
        session.log(f"interrupted: writing a resumable checkpoint at step {session.books.step}")
        session.checkpoint()
    try:
        weights = session.final_weights() if keep_weights else None
    finally:
        session.shutdown()
        if started_ray:
            import ray

            ray.shutdown()
    return PipelineResult(run_dir=Path(run_dir), steps_done=session.books.step,
                          rows=session.books.rows, dropped_batches=session.dropped_batches,
                          generator_failures=sum(session.failures),
                          wall_seconds=time.time() - started, interrupted=interrupted,
                          final_weights=weights, log_lines=session.log_lines)


class _AsyncLoop:
    """PipelineRL: dispatch while the rule allows, train what the rule admits, log in order."""

    def __init__(self, session: PipelineSession, on_row: RowCallback | None) -> None:
        self.s = session
        self.on_row = on_row
        self.k = session.pipeline.max_lag
        self.on_stale = session.pipeline.on_stale
        self.generating: dict = {}  # ObjectRef -> (generator index, request, dispatched at)
        self.ready: collections.deque = collections.deque()  # finished batches, arrival order
        self.training: collections.deque = collections.deque()  # (ObjectRef, batch, dropped)
        self.dropped_since_row: list = []  # stale batches: their generation is booked anyway
        self.probing: dict = {}  # probe ObjectRef -> index of a generator being restarted
        self.retry: collections.deque = collections.deque()  # requests of failed batches
        self.next_request_step = session.books.step
        session.loop = self

    def idle_generators(self) -> list[int]:
        busy = {index for index, _, _ in self.generating.values()} | set(self.probing.values())
        return [i for i, alive in enumerate(self.s.alive) if alive and i not in busy]

    def may_dispatch(self) -> bool:
        """The dispatch-time question to admit_batch ("wait"); a bounded queue under "drop"."""
        outstanding = len(self.generating) + len(self.ready) + len(self.retry)
        if (self.s.steps_committed + outstanding >= self.s.config.max_steps
                or self.s.books.pool.active_count == 0):
            return False
        if self.on_stale == "drop":
            return outstanding < len(self.s.generators) + max(1, self.k)
        consumer = latest_consumer_version(self.s.steps_committed, outstanding)
        return admit_batch(self.s.published_version, consumer, self.k, "wait") is Admission.ADMIT

    def dispatch(self, index: int, request: GenerationRequest | None = None) -> None:
        if request is None:
            request = self.s.request(self.next_request_step, self.s.books.sample_prompts(),
                                     in_flight=True)
            self.next_request_step += 1
        ref = self.s.generators[index].generate.remote(request)
        self.generating[ref] = (index, request, time.time())

    def feed_trainer(self) -> None:
        """Admit (or drop) finished batches in arrival order and queue them on the trainer."""
        while self.ready and not self.training and not self.s.checkpoint_pending():
            batch = self.ready.popleft()
            decision = admit_batch(batch.oldest_policy_version, self.s.steps_committed, self.k,
                                   self.on_stale)
            if decision is not Admission.ADMIT:
                self.s.dropped_batches += 1
                self.dropped_since_row.append(batch)
                self.s.log(f"dropped a batch of policy version {batch.oldest_policy_version} at "
                           f"trainer version {self.s.steps_committed} (max_lag {self.k})")
                continue
            self.s.books.update_pool(batch.rollouts)
            ref = self.s.trainer.train.remote(list(batch.rollouts))
            self.training.append((ref, batch))
            self.s.steps_committed += 1

    def run(self) -> None:
        import ray

        while self.s.books.step < self.s.config.max_steps or self.training:
            for index in self.idle_generators():
                if self.retry:
                    self.dispatch(index, self.retry.popleft())
                elif self.may_dispatch():
                    self.dispatch(index)
            self.feed_trainer()
            waiting = [*self.generating, *self.probing, *[ref for ref, _ in self.training],
                       *self.s.pending_refs()]
            if not waiting:
                break  # nothing left to generate or train: the pool ran dry
            done, _ = ray.wait(waiting, num_returns=1)
            self.handle(done[0])
            self.emit(self.s.flush())
        self.emit(self.s.flush(block=True))
        if self.s.books.step < self.s.config.max_steps:
            self.s.log(f"stopped at step {self.s.books.step}: every training prompt left the pool")

    def drain(self) -> None:
        """Book the optimiser steps already queued on the trainer (after an interrupt)."""
        import ray

        while self.training:
            train_ref, batch = self.training.popleft()
            self.s.complete_step(ray.get(train_ref), batch, self.dropped_since_row)
            self.dropped_since_row = []
        self.s.flush(block=True)

    def emit(self, rows: list[dict]) -> None:
        if self.on_row is not None:
            for row in rows:
                self.on_row(row, self.s)

    def handle(self, ref) -> None:
        import ray

        if ref in self.probing:
            index = self.probing.pop(ref)
            if self.s.probe_result(index, ref) is None:
                self.probing[self.s.probe(index)] = index
            return
        if ref in self.generating:
            index, request, dispatched_at = self.generating.pop(ref)
            try:
                batch = ray.get(ref)
            except ray.exceptions.RayActorError as error:
                self.s.generator_failed(index, error)
                self.retry.append(request)
                self.probing[self.s.probe(index)] = index
                return
            self.s.batch_finished(batch, dispatched_at)
            self.ready.append(batch)
            return
        if self.training and ref == self.training[0][0]:
            train_ref, batch = self.training.popleft()
            running = [dispatched for _, _, dispatched in self.generating.values()]
            self.s.complete_step(ray.get(train_ref), batch, self.dropped_since_row, running)
            self.dropped_since_row = []
        # otherwise a validation finished: the caller flushes the rows it completes
