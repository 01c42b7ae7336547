"""Asynchronous PipelineRL on Ray: generators keep generating while the trainer steps.

Orchestration only. The driver samples prompts (the synchronous trainer's curriculum pool and
RNG), hands GenerationRequests to idle generator actors when the staleness rule allows it, hands
finished batches to the trainer actor when the staleness rule admits them, and writes one
metrics row per optimiser step (the synchronous trainer's columns plus the pipeline's).
With max_lag = 0 this is exactly the synchronous trainer, run on two actors (a test says so).
PPO-off-policy-k lives in offpolicy.py; both loops share session.PipelineSession.
"""

from __future__ import annotations

import collections
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from scalerl.distributed.actors import WorkerClasses
from scalerl.distributed.messages import GenerationRequest
from scalerl.distributed.ray_reaper import start_reaper
from scalerl.distributed.session import PipelineSession
from scalerl.distributed.settings import PipelineConfig
from scalerl.distributed.staleness import Admission, admit_batch, latest_consumer_version
from scalerl.errors import ConfigError, ScaleRLError
from scalerl.train.guards.interrupt import interrupts_deferred, terminate_as_interrupt
from scalerl.train.records.progress import RunProgress

RowCallback = Callable[[dict, "PipelineSession"], None]
TRAINER_QUEUE = 2  # optimiser steps handed to the trainer actor ahead of their bookkeeping
GENERATOR_QUEUE = 2  # requests handed to one generator actor (one running, one waiting)


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
    exit_code: int = 130  # when interrupted: 128 + the signal (130 Ctrl-C, 143 SIGTERM)


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
    ray.init(
        num_cpus=num_cpus,
        runtime_env={
            "env_vars": {"OMP_NUM_THREADS": str(pipeline.torch_threads), "MKL_NUM_THREADS": str(pipeline.torch_threads)}
        },
        **common,
    )
    start_reaper()  # a driver killed outright takes the local Ray with it
    return True


def run_pipeline(
    config,
    pipeline: PipelineConfig,
    run_dir,
    *,
    resume: bool = False,
    on_row: RowCallback | None = None,
    keep_weights: bool = False,
    log: Callable[[str], None] = print,
    workers: WorkerClasses | None = None,
    show_progress: bool = False,
    accept_old_checkpoints: bool = False,
) -> PipelineResult:
    """Run (or resume) `config.max_steps` optimiser steps in `pipeline.mode`.

    `workers`: the generator/trainer classes (default: the real ones; benchmarks pass
    benchmarks.simulated_device's). `accept_old_checkpoints`: a resume may use a checkpoint
    without a manifest. `show_progress`: the synchronous trainer's progress
    (scalerl.train.records.progress) on stderr, one update per logged row; `log` lines then go above it.

    Ctrl-C or SIGTERM (KeyboardInterrupt) stops the run after writing a checkpoint of the last
    finished step, in the synchronous trainer's format, so `resume=True` continues it; the
    result says `interrupted` (the CLI exits with code 130, or 143 after SIGTERM). A trainer
    actor that dies, or a failure inside it, is one ScaleRLError (the CLI's exit code 2) saying
    the run is resumable from its last checkpoint; the actors and a Ray instance this call
    started are shut down whatever happens.
    """
    if pipeline.mode == "sync":
        raise ConfigError("pipeline.mode: 'sync' runs the synchronous trainer, not the Ray pipeline")
    if config.model.lora_r > 0:
        from scalerl.models.lora import require_peft

        require_peft()  # in the driver, before any actor or run folder
    started_ray = init_ray(pipeline)
    started = time.time()
    session = None
    try:
        with terminate_as_interrupt() as stop:
            session = PipelineSession(
                config,
                pipeline,
                run_dir,
                resume=resume,
                log=log,
                workers=workers,
                accept_old_checkpoints=accept_old_checkpoints,
            )
            with RunProgress(config.max_steps, enabled=show_progress, start_step=session.run_state.step) as progress:
                session.progress = progress if show_progress else None
                try:
                    with actor_failures_as_errors(Path(run_dir)):
                        interrupted = _run_loop(session, on_row)
                finally:
                    session.progress = None
            weights = session.final_weights() if keep_weights else None
    finally:
        if session is not None:
            session.shutdown()
        if started_ray:
            import ray

            ray.shutdown()
    return PipelineResult(
        run_dir=Path(run_dir),
        steps_done=session.run_state.step,
        rows=session.run_state.rows,
        dropped_batches=session.dropped_batches,
        generator_failures=sum(session.failures),
        wall_seconds=time.time() - started,
        interrupted=interrupted,
        final_weights=weights,
        log_lines=session.log_lines,
        exit_code=stop.exit_code,
    )


@contextlib.contextmanager
def actor_failures_as_errors(run_dir: Path):
    """A failure inside an actor that is one of ours (a ScaleRLError, e.g. a diverged step) is
    re-raised as itself; a dead trainer actor, or another failure inside it, becomes one
    ScaleRLError saying the run can be resumed (its checkpoints are written atomically, so the
    last one is intact), never Ray's traceback."""
    import ray

    try:
        yield
    except ray.exceptions.RayActorError as error:
        reason = " ".join(str(getattr(error, "error_msg", "") or type(error).__name__).split())[:200]
        raise ScaleRLError(
            f"an actor of the run died ({type(error).__name__}: {reason}); the run stopped and "
            f"can be resumed from its last checkpoint: scalerl train --out {run_dir} --resume"
        ) from None
    except ray.exceptions.RayTaskError as error:
        if isinstance(error.cause, ScaleRLError):
            raise error.cause from None
        cause = error.cause if error.cause is not None else error
        detail = " ".join(f"{type(cause).__name__}: {cause}".split())[:200]
        raise ScaleRLError(
            f"the trainer failed ({detail}); the run stopped and can be resumed from its last "
            f"checkpoint: scalerl train --out {run_dir} --resume"
        ) from None


def _run_loop(session: PipelineSession, on_row: RowCallback | None) -> bool:
    """Step 0's validation, then the mode's loop; True if stopped by Ctrl-C (checkpoint written)."""
    try:
        if session.run_state.step == 0:
            session.initial_validation()
        session.start_clock()
        if session.pipeline.mode == "async":
            _AsyncLoop(session, on_row).run()
        else:
            from scalerl.distributed.offpolicy import OffPolicyLoop

            OffPolicyLoop(session, on_row).run()
    except KeyboardInterrupt:
        loop = getattr(session, "loop", None)
        if loop is not None:
            loop.drain()  # the trainer's weights must be those of the step we checkpoint
        session.log(f"interrupted: writing a resumable checkpoint at step {session.run_state.step}")
        session.checkpoint()
        return True
    return False


class _AsyncLoop:
    """PipelineRL: dispatch while the rule allows, train what the rule admits, log in order."""

    def __init__(self, session: PipelineSession, on_row: RowCallback | None) -> None:
        self.session = session
        self.run_state = session.run_state  # the run's RunState, shared with the session
        self.on_row = on_row
        self.k = session.pipeline.max_lag
        self.on_stale = session.pipeline.on_stale
        self.generating: dict = {}  # ObjectRef -> (generator index, request, dispatched at)
        self.ready: dict = {}  # request step -> finished batch
        # batches reach the trainer in dispatch order, so the bound the dispatch gate computed
        # (consumed after every batch already outstanding) holds with several generators too
        self.order: collections.deque = collections.deque()  # request steps, dispatch order
        self.training: collections.deque = collections.deque()  # (train ObjectRef, batch)
        self.dropped_since_row: list = []  # stale batches: their generation is booked anyway
        self.probing: dict = {}  # probe ObjectRef -> index of a generator being restarted
        self.retry: collections.deque = collections.deque()  # requests of failed batches
        self.next_request_step = session.run_state.step
        session.loop = self

    def generator_slots(self) -> list[int]:
        """Generators that can take one more request: idle ones first, then (while every live
        generator is busy) those with a single request, so the next one is queued on the actor
        and it never waits for the driver between two batches (GENERATOR_QUEUE)."""
        load = collections.Counter(index for index, _, _ in self.generating.values())
        live = [i for i, alive in enumerate(self.session.alive) if alive and i not in self.probing.values()]
        return [i for depth in range(GENERATOR_QUEUE) for i in live if load[i] == depth]

    def running_since(self) -> list[float]:
        """Dispatch time of the batch each busy generator works on (not of those queued)."""
        first: dict[int, float] = {}
        for index, _, dispatched in self.generating.values():
            first[index] = min(dispatched, first.get(index, dispatched))
        return list(first.values())

    def may_dispatch(self, *, queued: bool = False) -> bool:
        """The dispatch-time question to admit_batch ("wait"); a bounded queue under "drop".

        A request `queued` behind a generator's running batch generates nothing until that batch
        is done, yet holds one of the k + 1 places the lag bound leaves: it is sent only if one
        more batch would still be admitted after it, so it never takes the place another
        generator needs (with k = 2 and two generators it did: 0.83 of max(G / n, T) at 8:1,
        below k = 1). See would_queue.
        """
        outstanding = len(self.generating) + len(self.ready) + len(self.retry)
        if (
            self.session.steps_committed + outstanding >= self.session.config.max_steps
            or self.run_state.pool.active_count == 0
        ):
            return False
        held = outstanding + int(queued)
        if self.on_stale == "drop":
            return held < len(self.session.generators) + max(1, self.k)
        consumer = latest_consumer_version(self.session.steps_committed, held)
        return admit_batch(self.session.published_version, consumer, self.k, "wait") is Admission.ADMIT

    def would_queue(self, index: int) -> bool:
        """A request for generator `index` would wait behind one it holds while another live
        generator might need its place (with a single generator it displaces nothing)."""
        live = sum(self.session.alive) - len(self.probing)
        return live > 1 and any(holder == index for holder, _, _ in self.generating.values())

    def dispatch(self, index: int, request: GenerationRequest | None = None) -> None:
        if request is None:
            request = self.session.request(self.next_request_step, self.run_state.sample_prompts(), in_flight=True)
            self.next_request_step += 1
            self.order.append(request.step)
        ref = self.session.generators[index].generate.remote(request)
        self.generating[ref] = (index, request, time.time())

    def trainer_has_room(self) -> bool:
        """Up to TRAINER_QUEUE steps queued on the trainer, so that it never waits for the
        driver's bookkeeping between two steps; never past a step whose validation or checkpoint
        is due (they must see that step's weights)."""
        if not self.training:
            return True
        last = self.session.steps_committed
        return (
            len(self.training) < TRAINER_QUEUE
            and not self.run_state.validation_due(last)
            and not self.run_state.checkpoint_due(last)
        )

    def feed_trainer(self) -> None:
        """Admit (or drop) finished batches in dispatch order and hand them to the trainer."""
        while (
            self.order
            and self.order[0] in self.ready
            and self.trainer_has_room()
            and not self.session.checkpoint_pending()
        ):
            batch = self.ready.pop(self.order.popleft())
            decision = admit_batch(batch.oldest_policy_version, self.session.steps_committed, self.k, self.on_stale)
            if decision is not Admission.ADMIT:
                self.session.dropped_batches += 1
                self.dropped_since_row.append(batch)
                self.session.log(
                    f"dropped a batch of policy version {batch.oldest_policy_version} at "
                    f"trainer version {self.session.steps_committed} (max_lag {self.k})"
                )
                continue
            self.run_state.update_pool(batch.packed.columns())  # views of its arrays: nothing unpacked
            ref = self.session.train(batch.packed)  # arrays: no pickling per rollout
            self.training.append((ref, batch))
            self.session.steps_committed += 1

    def run(self) -> None:
        import ray

        while self.run_state.step < self.session.config.max_steps or self.training:
            for index in self.generator_slots():
                if self.retry:
                    self.dispatch(index, self.retry.popleft())
                elif self.may_dispatch(queued=self.would_queue(index)):
                    self.dispatch(index)
            self.feed_trainer()
            waiting = [
                *self.generating,
                *self.probing,
                *[ref for ref, _ in self.training],
                *self.session.pending_refs(),
            ]
            if not waiting:
                break  # nothing left to generate or train: the pool ran dry
            done, _ = ray.wait(waiting, num_returns=1)
            self.handle(done[0])
            self.emit(self.session.flush())
        self.emit(self.session.flush(block=True))
        if self.run_state.step < self.session.config.max_steps:
            self.session.log(f"stopped at step {self.run_state.step}: every training prompt left the pool")

    def drain(self) -> None:
        """Book the optimiser steps already queued on the trainer (after an interrupt)."""
        import ray

        while self.training:
            train_ref, batch = self.training.popleft()
            self.session.complete_step(ray.get(train_ref), batch, self.dropped_since_row)
            self.dropped_since_row = []
        self.session.flush(block=True)

    def emit(self, rows: list[dict]) -> None:
        if self.on_row is not None:
            for row in rows:
                self.on_row(row, self.session)

    def handle(self, ref) -> None:
        import ray

        if ref in self.probing:
            index = self.probing.pop(ref)
            if self.session.probe_result(index, ref) is None:
                self.probing[self.session.probe(index)] = index
            return
        if ref in self.generating:
            index, request, dispatched_at = self.generating.pop(ref)
            try:
                batch = ray.get(ref)
            except ray.exceptions.RayActorError as error:
                self.session.generator_failed(index, error, dispatched_at)
                self.retry.append(request)
                if index not in self.probing.values():
                    self.probing[self.session.probe(index)] = index
                return
            self.session.batch_finished(batch, dispatched_at)
            self.ready[request.step] = batch
            return
        if self.training and ref == self.training[0][0]:
            with interrupts_deferred():  # a stop never falls between taking the step off and booking it
                train_ref, batch = self.training.popleft()
                self.session.complete_step(ray.get(train_ref), batch, self.dropped_since_row, self.running_since())
                self.dropped_since_row = []
        # otherwise a validation finished: the caller flushes the rows it completes
