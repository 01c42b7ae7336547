"""`scalerl ablate --parallel` / `scalerl study` runs on Ray: one Ray task per training run.

Each task trains one (variant, seed) run directory with the synchronous trainer, exactly as the
sequential runner does (resume=True for a partial run), so a study stopped half-way continues the
same way whichever runner started it. Ray schedules the tasks by their `num_cpus`; a local Ray is
started unless an address is given.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from scalerl.distributed.ray_reaper import start_reaper
from scalerl.errors import ScaleRLError


class RunsFailedError(ScaleRLError):
    """Some runs of a parallel study raised; the others finished and are kept."""


def _train_run(config, run_dir: str, resume: bool, train_fn=None) -> int:
    """The body of one Ray task: train (or resume) one run; returns its last step."""
    if train_fn is None:
        from scalerl.train.trainer import train as train_fn
    result = train_fn(config, Path(run_dir), resume=resume, show_progress=False, on_row=None)
    return int(getattr(result, "last_step", 0) or 0)


def start_ray(cpus_per_run: float, address: str, total_cpus: int) -> bool:
    """Join `address` or start a local Ray (threads per worker = CPUs per run); True if started here."""
    import ray

    if ray.is_initialized():
        return False
    common = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
    if address:
        ray.init(address=address, **common)
        return True
    threads = str(max(1, int(cpus_per_run)))
    num_cpus = total_cpus or max(os.cpu_count() or 1, int(cpus_per_run + 0.999))
    ray.init(
        num_cpus=num_cpus, runtime_env={"env_vars": {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}}, **common
    )
    start_reaper()  # a driver killed outright takes the local Ray with it
    return True


def run_jobs_on_ray(
    jobs: Sequence, labels: Sequence[str], options, *, log: Callable[[str], None] = print, train_fn=None
) -> list[str]:
    """Train `jobs` (scalerl.study.study_runs.Job) as Ray tasks of `options.cpus_per_run` CPUs each; log
    each run as it ends. Returns the labels of the finished runs; raises RunsFailedError naming
    every run that failed (after the others have finished)."""
    if not jobs:
        return []
    import ray

    started_here = start_ray(options.cpus_per_run, options.address, options.total_cpus)
    try:
        task = ray.remote(num_cpus=options.cpus_per_run, max_retries=0)(_train_run)
        pending = {
            task.remote(job.config, str(job.run_dir), job.status == "partial", train_fn): label
            for job, label in zip(jobs, labels)
        }
        finished, failed = [], []
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            label = pending.pop(done[0])
            try:
                last_step = ray.get(done[0])
            except ray.exceptions.RayError as error:
                failed.append(f"{label} ({str(error).strip().splitlines()[-1]})")
                log(f"run {label} failed")
                continue
            finished.append(label)
            log(f"run {label} finished at step {last_step} ({len(finished) + len(failed)} of {len(labels)})")
    finally:
        if started_here:
            ray.shutdown()
    if failed:
        raise RunsFailedError(
            f"{len(failed)} run(s) failed: {'; '.join(failed)}; the others are kept, "
            "run the same command again to resume the failed ones"
        )
    return finished
