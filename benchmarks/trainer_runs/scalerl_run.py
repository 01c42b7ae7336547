"""scalerl's synchronous trainer in the throughput benchmark: its steps timed, or profiled after
the warm-up.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks.trainer_runs.matched_setup import scalerl_config
from benchmarks.trainer_runs.measures import peak_rss_mib, profile_summary, throughput


def run_scalerl(args) -> dict:
    """scalerl's trainer loop (open_run + run_one_step: no validation, no checkpoint) timed per step."""
    import torch

    from scalerl.train.trainer import open_run, run_one_step

    torch.set_num_threads(args.threads)
    config = scalerl_config(args, args.model_dir)
    with tempfile.TemporaryDirectory(prefix="bench_scalerl_") as run_dir:
        run = open_run(config, Path(run_dir), resume=False)
        started = time.perf_counter()
        end_times, tokens, rewards = [started], [0], []
        for _ in range(args.warmup_steps + args.steps):
            before = run.state.counters.tokens_generated
            row = run_one_step(run)
            end_times.append(time.perf_counter())
            tokens.append(run.state.counters.tokens_generated - before)
            rewards.append(row["train_reward"])
        run.state.close()
    result = throughput(end_times[1:], tokens[1:], args.warmup_steps, args.prompts * args.generations)
    result.update(
        trainer="scalerl",
        recipe=args.recipe,
        mean_train_reward=sum(rewards) / len(rewards),
        torch_threads=torch.get_num_threads(),
        peak_rss_mib=peak_rss_mib(),
    )
    return result


SCALERL_PHASES = (
    "_generate",
    "_decode",
    "policy_forward",
    "sample_with_noise",
    "_record_token",
    "pack_decoded",
    "train_step",
    "run_backward",
)


def profile_scalerl(args) -> dict:
    """cProfile of scalerl's steps after the warm-up."""
    import cProfile

    import torch

    from scalerl.train.trainer import open_run, run_one_step

    torch.set_num_threads(args.threads)
    profiler = cProfile.Profile()
    with tempfile.TemporaryDirectory(prefix="bench_profile_") as run_dir:
        run = open_run(scalerl_config(args, args.model_dir), Path(run_dir), resume=False)
        for _ in range(args.warmup_steps):
            run_one_step(run)
        profiler.enable()
        for _ in range(args.steps):
            run_one_step(run)
        profiler.disable()
        run.state.close()
    return profile_summary(profiler, args.steps, SCALERL_PHASES)
