"""Benchmark: the pipeline's overlap efficiency on simulated devices, against the analytic bounds.

Runs the real Ray pipeline (driver, staleness rule, weight publication of the built-in model,
in-flight swaps, bookkeeping, metrics rows, checkpoints) with the simulated-device actors of
benchmarks.simulated_device: each generation / optimiser step sleeps for its tokens x a
per-token cost, so generators and trainer behave as if each had its own accelerator. For
generation : training time ratios 1:1, 3:1, 8:1 and 1, 2, 4, 8 generators it measures sync (the
pipeline with k = 0, one generator), async k = 1, 2, 4, 8 and PPO-off-policy-k, divides each
steady-state step rate by its bound (benchmarks.overlap_bounds: sync G + T, async
max(G / n, T), off-policy G / n + T) and records the policy-lag distribution and the per-step
overhead (publication, the trainer's hand-off between two steps, generator weight fetch, driver
bookkeeping). The steady state is the second half of a run, past twice the pipeline's depth, timed
between rows at the same phase of their rounds and without the last row, which waits for the run's
final validation and checkpoint (cell_steps, steady_step_seconds); PPO-off-policy-k is timed over
one whole round after the first. Each cell keeps its rows' arrival times (`row_seconds`), and
`--keep-partial` reuses the cells of an interrupted run. It then measures weight
publication (snapshot + ray.put, and a fetch from another process) for model sizes from the
built-in one to ~1 B parameters. Prints tables, writes benchmarks/results/pipeline_efficiency.json
(+ .md) and the figure docs/pipeline_efficiency.png (pipeline_efficiency_report.py; step timing in
pipeline_timing.py). A script,
not a test: it asserts nothing about time.

    python -m benchmarks.pipeline_efficiency            # full grid (about 25 minutes on 2 cores)
    python -m benchmarks.pipeline_efficiency --quick    # a few cells (about 3 minutes)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from benchmarks.common import DOCS_DIR, RESULTS_DIR, command_line
from benchmarks.pipeline_efficiency_report import publication_costs, summarise, write_outputs
from benchmarks.pipeline_timing import cell_steps, first_timed_row, reestimate, steady_step_seconds

RESULTS = RESULTS_DIR / "pipeline_efficiency.json"
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
    parser.add_argument(
        "--intervals", type=int, default=16, help="steady-state steps timed per async/sync cell (after the fill)"
    )
    parser.add_argument(
        "--param-sizes", default="builtin,xl,125e6,350e6,1e9", help="model sizes for the publication measurement"
    )
    parser.add_argument("--workdir", default="runs/bench_pipeline_efficiency")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--figure", default=str(DOCS_DIR / "pipeline_efficiency.png"))
    parser.add_argument(
        "--keep-partial",
        action="store_true",
        help="reuse the cells of an interrupted run (OUT.partial.jsonl) with the "
        "same settings instead of measuring them again",
    )
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
            cells.append({"mode": "ppo-offpolicy", "k": args.offpolicy_k, "ratio": r, "generators": n})
    return cells


class Instrument:
    """Driver-side timing of the session's bookkeeping (benchmark-only wrapper, restored after)."""

    def __init__(self) -> None:
        from scalerl.distributed.session import PipelineSession

        self.cls = PipelineSession
        self.original = (PipelineSession.complete_step, PipelineSession.flush)
        self.bookkeeping, self.publish, self.fetch = [], [], []
        self.train_spans, self.swaps = [], []

    def __enter__(self) -> Instrument:
        complete, flush = self.original
        me = self

        def timed_complete(session, result, batch, *rest, **kw):
            started = time.perf_counter()
            complete(session, result, batch, *rest, **kw)
            me.bookkeeping.append(time.perf_counter() - started)
            me.publish.append(result.publish_seconds)
            me.fetch.append(batch.weight_sync_seconds)
            me.train_spans.append((result.started_at, result.finished_at))
            me.swaps.append(batch.num_weight_swaps)

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
    from benchmarks import overlap_bounds as ob
    from benchmarks.simulated_device import DeviceCosts
    from benchmarks.simulated_trainer import simulated_workers
    from scalerl.distributed.pipeline import run_pipeline
    from scalerl.distributed.settings import PipelineConfig
    from scalerl.train.config.train_config import TrainConfig

    train_s = args.train_seconds
    generate_s = cell["ratio"] * train_s
    steps, skip = cell_steps(cell, generate_s, train_s, args.intervals)
    config = TrainConfig().with_overrides(
        [
            *batch,
            "model.warmstart_steps=0",
            f"max_steps={steps}",
            f"eval_every={steps}",
            f"checkpoint_every={steps}",
            f"max_new_tokens={max(64, completion_tokens + 1)}",
        ]
    )
    sequences = config.sampling.prompts_per_step * config.sampling.generations_per_prompt
    costs = DeviceCosts.for_step(generate_s, train_s, sequences, completion_tokens)
    n, k = cell["generators"], cell["k"]
    mode = "ppo-offpolicy" if cell["mode"] == "ppo-offpolicy" else "async"
    pipeline = PipelineConfig(
        mode=mode,
        max_lag=k if mode == "async" else 8,
        offpolicy_steps=max(k, 1),
        num_generators=n,
        generator_cpus=0.0,
        trainer_cpus=0.0,
        max_generator_restarts=0,
    )
    stamps: list[float] = []
    run_dir = workdir / f"{cell['mode']}_k{k}_r{cell['ratio']}_n{n}"
    shutil.rmtree(run_dir, ignore_errors=True)  # the benchmark's own scratch run of this cell
    started = time.perf_counter()
    with Instrument() as probe:
        result = run_pipeline(
            config,
            pipeline,
            run_dir,
            workers=simulated_workers(costs),
            log=lambda _m: None,
            on_row=lambda _row, _s: stamps.append(time.perf_counter()),
        )
    measured = steady_step_seconds(stamps, skip, mode, k, n)
    # the trainer's hand-off between two queued steps: return, next call's arguments, dispatch
    spans = probe.train_spans[first_timed_row(len(stamps), skip) :]
    gaps = [start - previous_end for (_, previous_end), (start, _) in zip(spans, spans[1:])]
    if cell["mode"] == "sync":
        bound = ob.sync_step_seconds(generate_s, train_s)
    elif mode == "ppo-offpolicy":
        bound = ob.offpolicy_step_seconds(generate_s, train_s, n, k)
    else:
        bound = ob.async_step_seconds(generate_s, train_s, n)
    rows = result.rows[1:]
    lag_max = [int(r["policy_lag_max"]) for r in rows]
    return {
        **cell,
        "steps": steps,
        "fill_steps": skip,
        "timed_from_step": k if mode == "ppo-offpolicy" else first_timed_row(len(stamps), skip),
        "generate_seconds": generate_s,
        "train_seconds": train_s,
        "sequences_per_step": sequences,
        "completion_tokens": completion_tokens,
        "measured_step_seconds": measured,
        "bound_step_seconds": bound,
        "lag_bound_step_seconds": ob.async_lag_step_seconds(generate_s, train_s, n, k) if mode == "async" else bound,
        "efficiency": ob.efficiency(measured, bound),
        "trainer_saturated": ob.trainer_saturated(generate_s, train_s, n),
        "policy_lag_max_counts": {str(v): lag_max.count(v) for v in sorted(set(lag_max))},
        "policy_lag_mean": statistics.fmean(float(r["policy_lag_mean"]) for r in rows),
        "publish_ms": 1e3 * statistics.median(probe.publish),
        "generator_fetch_ms": 1e3 * statistics.median(probe.fetch),
        "bookkeeping_ms": 1e3 * statistics.median(probe.bookkeeping),
        "trainer_gap_ms": 1e3 * statistics.median(gaps) if gaps else None,
        "weight_swaps_per_step": sum(probe.swaps) / len(probe.swaps),
        "row_seconds": [round(stamp - started, 4) for stamp in stamps],
        "wall_seconds": time.perf_counter() - started,
    }


def _key(cell: dict) -> tuple:
    return cell["mode"], cell["k"], cell["ratio"], cell["generators"]


def _settings(args) -> dict:
    return {"train_seconds": args.train_seconds, "intervals": args.intervals}


def _partial_cells(path: Path, args) -> dict:
    """Cells an interrupted run measured with the same settings, by (mode, k, ratio, n)."""
    if not path.exists():
        return {}
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {_key(line["cell"]): line["cell"] for line in lines if line["settings"] == _settings(args)}


def expected_run_seconds(cell: dict, args) -> float:
    """Device time a cell will take (its steps at its own pace), for the progress line."""
    from benchmarks import overlap_bounds as ob

    train_s = args.train_seconds
    generate_s = cell["ratio"] * train_s
    steps, _ = cell_steps(cell, generate_s, train_s, args.intervals)
    if cell["mode"] == "ppo-offpolicy":
        return steps * ob.offpolicy_step_seconds(generate_s, train_s, cell["generators"], cell["k"])
    return steps * ob.async_lag_step_seconds(generate_s, train_s, cell["generators"], cell["k"])


def progress(done: int, todo: list[dict], cells: list[dict], args, elapsed: float) -> str:
    """'[done/total mm:ss, ~mm:ss left]': the rest at its device time plus the mean start-up
    (actors, model) the finished cells paid."""
    startup = statistics.fmean(c["wall_seconds"] - expected_run_seconds(c, args) for c in cells)
    left = sum(expected_run_seconds(c, args) + max(0.0, startup) for c in todo[done:])
    return (
        f"[{done:2d}/{len(todo)} {int(elapsed) // 60:02d}:{int(elapsed) % 60:02d}, "
        f"~{int(left) // 60:02d}:{int(left) % 60:02d} left]"
    )


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ["RAY_worker_niceness"] = "0"  # actors at the driver's priority (Ray's default: 15)
    import ray

    workdir = Path(args.workdir)
    ray.init(
        num_cpus=max(2, os.cpu_count() or 1), include_dashboard=False, log_to_driver=False, configure_logging=False
    )
    started = time.time()
    cells = []
    todo = plan(args)
    if args.quick:
        args.intervals = min(args.intervals, 8)
    partial = Path(args.out).with_suffix(".partial.jsonl")
    done = _partial_cells(partial, args) if args.keep_partial else {}
    partial.unlink(missing_ok=True)
    try:
        for index, cell in enumerate(todo):
            key = _key(cell)
            result = reestimate(done[key]) if key in done else run_cell(cell, args, workdir)
            result.setdefault("load_average_1min", os.getloadavg()[0])
            cells.append(result)
            with partial.open("a") as out:  # an interrupted run keeps what it measured
                out.write(json.dumps({"settings": _settings(args), "cell": result}) + "\n")
            print(
                f"{progress(index + 1, todo, cells, args, time.time() - started)} "
                f"{cell['mode']:>13} k={cell['k']} {cell['ratio']}:1 n={cell['generators']}: "
                f"{result['measured_step_seconds'] * 1e3:7.1f} ms/step, bound "
                f"{result['bound_step_seconds'] * 1e3:7.1f} ms, efficiency "
                f"{result['efficiency']:.3f}",
                flush=True,
            )
        overhead_cell = {"mode": "async", "k": 8, "ratio": 1, "generators": 1}
        default_batch = run_cell(overhead_cell, args, workdir / "default_batch", DEFAULT_BATCH, 64)
        publication = publication_costs(args.param_sizes.split(","), workdir / "publication")
    finally:
        ray.shutdown()
    payload = {
        "benchmark": "pipeline_efficiency",
        "quick": args.quick,
        "intervals": args.intervals,
        "train_seconds": args.train_seconds,
        "cells": cells,
        "default_batch_cell": default_batch,
        "publication": publication,
        "summary": summarise(cells, default_batch),
        "total_seconds": time.time() - started,
    }
    for line in write_outputs(payload, Path(args.out), Path(args.figure), command_line("pipeline_efficiency", argv)):
        print(line)
    partial.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
