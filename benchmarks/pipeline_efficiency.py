"""Benchmark: the pipeline's overlap efficiency on simulated devices, against the analytic bounds.

Runs the real Ray pipeline (driver, staleness rule, weight publication of the built-in model,
in-flight swaps, bookkeeping, metrics rows, checkpoints) with the simulated-device actors of
scalerl.distributed.simulated_device: each generation / optimiser step sleeps for its tokens x a
per-token cost, so generators and trainer behave as if each had its own accelerator. For
generation : training time ratios 1:1, 3:1, 8:1 and 1, 2, 4, 8 generators it measures sync (the
pipeline with k = 0, one generator), async k = 1, 2, 4, 8 and PPO-off-policy-k, divides each
steady-state step rate by its bound (scalerl.distributed.overlap_bounds: sync G + T, async
max(G / n, T), off-policy G / n + T) and records the policy-lag distribution and the per-step
overhead (publication, generator weight fetch, driver bookkeeping). It then measures weight
publication (snapshot + ray.put, and a fetch from another process) for model sizes from the
built-in one to ~1 B parameters. Prints tables, writes benchmarks/results/pipeline_efficiency.json
(+ .md) and the figure docs/pipeline_efficiency.png (pipeline_efficiency_report.py). A script,
not a test: it asserts nothing about time.

    python benchmarks/pipeline_efficiency.py            # full grid (about 15 minutes)
    python benchmarks/pipeline_efficiency.py --quick    # a few cells (about 2 minutes)
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
RESULTS = HERE / "results" / "pipeline_efficiency.json"
BATCH = ("prompts_per_step=8", "generations_per_prompt=8")  # 64 sequences x 32 tokens per step
DEFAULT_BATCH = ()  # TrainConfig's 32 x 16, for the overhead cell


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few cells, fewer steps")
    parser.add_argument("--train-seconds", type=float, default=0.15, help="T, seconds per step")
    parser.add_argument("--ratios", default="1,3,8", help="G : T ratios")
    parser.add_argument("--generators", default="1,2,4,8")
    parser.add_argument("--lags", default="1,2,4,8", help="async max_lag values")
    parser.add_argument("--offpolicy-k", type=int, default=8)
    parser.add_argument("--steps", type=int, default=24, help="optimiser steps per cell")
    parser.add_argument("--param-sizes", default="builtin,xl,125e6,350e6,1e9",
                        help="model sizes for the publication measurement")
    parser.add_argument("--workdir", default="runs/bench_pipeline_efficiency")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--figure", default=str(HERE.parent / "docs" / "pipeline_efficiency.png"))
    return parser.parse_args(argv)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def plan(args) -> list[dict]:
    """The cells: (mode, k, ratio, generators). Sync ignores the generator count (one)."""
    ratios, generators, lags = _ints(args.ratios), _ints(args.generators), _ints(args.lags)
    if args.quick:
        ratios, generators, lags = [1, 3], [1, 4], [8]
    cells = [{"mode": "sync", "k": 0, "ratio": r, "generators": 1} for r in ratios]
    for r in ratios:
        for n in generators:
            cells += [{"mode": "async", "k": k, "ratio": r, "generators": n} for k in lags]
            cells.append({"mode": "ppo-offpolicy", "k": args.offpolicy_k, "ratio": r,
                          "generators": n})
    return cells


class Instrument:
    """Driver-side timing of the session's bookkeeping (benchmark-only wrapper, restored after)."""

    def __init__(self) -> None:
        from scalerl.distributed.session import PipelineSession

        self.cls = PipelineSession
        self.original = (PipelineSession.complete_step, PipelineSession.flush)
        self.bookkeeping, self.publish, self.fetch = [], [], []

    def __enter__(self) -> "Instrument":
        complete, flush = self.original
        me = self

        def timed_complete(session, result, batch, *rest, **kw):
            started = time.perf_counter()
            complete(session, result, batch, *rest, **kw)
            me.bookkeeping.append(time.perf_counter() - started)
            me.publish.append(result.publish_seconds)
            me.fetch.append(batch.weight_sync_seconds)

        def timed_flush(session, *a, **kw):
            started = time.perf_counter()
            rows = flush(session, *a, **kw)
            if rows and me.bookkeeping:
                me.bookkeeping[-1] += time.perf_counter() - started
            return rows

        self.cls.complete_step, self.cls.flush = timed_complete, timed_flush
        return self

    def __exit__(self, *exc) -> None:
        self.cls.complete_step, self.cls.flush = self.original


def run_cell(cell: dict, args, workdir: Path, batch=BATCH, completion_tokens: int = 32) -> dict:
    """One pipeline run on simulated devices; steady-state step time from the rows' arrival."""
    from scalerl.distributed import overlap_bounds as ob
    from scalerl.distributed.pipeline import run_pipeline
    from scalerl.distributed.settings import PipelineConfig
    from scalerl.distributed.simulated_device import DeviceCosts
    from scalerl.distributed.simulated_trainer import simulated_workers
    from scalerl.train.config import TrainConfig

    steps = args.steps if cell["mode"] != "ppo-offpolicy" else max(args.steps, 3 * cell["k"])
    config = TrainConfig().with_overrides([
        *batch, "model.warmstart_steps=0", f"max_steps={steps}", f"eval_every={steps}",
        f"checkpoint_every={steps}", f"max_new_tokens={max(64, completion_tokens + 1)}"])
    sequences = config.sampling.prompts_per_step * config.sampling.generations_per_prompt
    train_s = args.train_seconds
    generate_s = cell["ratio"] * train_s
    costs = DeviceCosts.for_step(generate_s, train_s, sequences, completion_tokens)
    n, k = cell["generators"], cell["k"]
    mode = "ppo-offpolicy" if cell["mode"] == "ppo-offpolicy" else "async"
    pipeline = PipelineConfig(mode=mode, max_lag=k if mode == "async" else 8, offpolicy_steps=max(k, 1),
                              num_generators=n, generator_cpus=0.0, trainer_cpus=0.0,
                              max_generator_restarts=0)
    stamps: list[float] = []
    run_dir = workdir / f"{cell['mode']}_k{k}_r{cell['ratio']}_n{n}"
    started = time.perf_counter()
    with Instrument() as probe:
        result = run_pipeline(config, pipeline, run_dir, workers=simulated_workers(costs),
                              log=lambda _m: None,
                              on_row=lambda _row, _s: stamps.append(time.perf_counter()))
    # steady state: skip the pipeline's fill (a quarter of the steps; whole rounds off-policy)
    skip = cell["k"] if mode == "ppo-offpolicy" else max(1, len(stamps) // 4)
    measured = (stamps[-1] - stamps[skip - 1]) / (len(stamps) - skip)
    if cell["mode"] == "sync":
        bound = ob.sync_step_seconds(generate_s, train_s)
    elif mode == "ppo-offpolicy":
        bound = ob.offpolicy_step_seconds(generate_s, train_s, n, k)
    else:
        bound = ob.async_step_seconds(generate_s, train_s, n)
    rows = result.rows[1:]
    lag_max = [int(r["policy_lag_max"]) for r in rows]
    return {**cell, "steps": steps, "generate_seconds": generate_s, "train_seconds": train_s,
            "sequences_per_step": sequences, "completion_tokens": completion_tokens,
            "measured_step_seconds": measured, "bound_step_seconds": bound,
            "lag_bound_step_seconds": ob.async_lag_step_seconds(generate_s, train_s, n, k)
            if mode == "async" else bound,
            "efficiency": ob.efficiency(measured, bound),
            "trainer_saturated": ob.trainer_saturated(generate_s, train_s, n),
            "policy_lag_max_counts": {str(v): lag_max.count(v) for v in sorted(set(lag_max))},
            "policy_lag_mean": statistics.fmean(float(r["policy_lag_mean"]) for r in rows),
            "publish_ms": 1e3 * statistics.median(probe.publish),
            "generator_fetch_ms": 1e3 * statistics.median(probe.fetch),
            "bookkeeping_ms": 1e3 * statistics.median(probe.bookkeeping),
            "wall_seconds": time.perf_counter() - started}


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ["RAY_worker_niceness"] = "0"  # actors at the driver's priority (Ray's default: 15)
    import ray

    from pipeline_efficiency_report import publication_costs, summarise, write_outputs

    workdir = Path(args.workdir)
    ray.init(num_cpus=max(2, os.cpu_count() or 1), include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    started = time.time()
    cells = []
    try:
        for cell in plan(args):
            result = run_cell(cell, args, workdir)
            cells.append(result)
            print(f"{cell['mode']:>13} k={cell['k']} {cell['ratio']}:1 n={cell['generators']}: "
                  f"{result['measured_step_seconds'] * 1e3:7.1f} ms/step, bound "
                  f"{result['bound_step_seconds'] * 1e3:7.1f} ms, efficiency "
                  f"{result['efficiency']:.3f}", flush=True)
        overhead_cell = {"mode": "async", "k": 8, "ratio": 1, "generators": 1}
        default_batch = run_cell(overhead_cell, args, workdir / "default_batch", DEFAULT_BATCH, 64)
        publication = publication_costs(args.param_sizes.split(","),
                                        workdir / "publication")
    finally:
        ray.shutdown()
    payload = {
        "benchmark": "pipeline_efficiency", "quick": args.quick,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "load_average_at_end": list(os.getloadavg())},
        "train_seconds": args.train_seconds, "cells": cells,
        "default_batch_cell": default_batch, "publication": publication,
        "summary": summarise(cells, default_batch),
        "total_seconds": time.time() - started,
        "command": "python benchmarks/pipeline_efficiency.py " + " ".join(argv or sys.argv[1:]),
    }
    for line in write_outputs(payload, Path(args.out), Path(args.figure)):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
