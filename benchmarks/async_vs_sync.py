"""Benchmark: synchronous trainer vs asynchronous PipelineRL (k = 1, 4, 8) vs PPO-off-policy-k.

Same built-in model and task (the demo's ScaleRL run), same batch and the same number of
optimiser steps (hence the same number of samples) in every mode, one after the other in one
process. Reports generated tokens per second of training wall time, training wall time to the
same number of samples, and the validation curve of each mode fitted with
scalerl.forecast.fitting.fit_sigmoid (x = device-hours, the paper's GPU-hours axis; A and B per
mode). Prints a table and writes benchmarks/results/async_vs_sync.json. A script, not a test: it
asserts nothing about wall time.

Batch: by default 8 prompts x 16 generations, the most generation-heavy shape measured for the
built-in task (generation 38 % of a one-thread synchronous step: the trainer's forward/backward
over prompt + completion costs more than KV-cached decoding at every batch tried on this CPU);
`--batch demo` uses the demo's 32 x 16. Before the modes run, the script measures the split of a
synchronous step into generation and training (one thread, a few steps) and reports it.

    python -m benchmarks.async_vs_sync            # full run (about 10 minutes on 2 CPU cores)
    python -m benchmarks.async_vs_sync --quick    # smoke run (a few minutes)
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

from benchmarks.common import RESULTS_DIR, command_line, write_result

RESULTS = RESULTS_DIR / "async_vs_sync.json"
A_MARGIN = 0.02  # the paper's margin within which two ceilings count as the same
THROUGHPUT_TARGET = 1.3  # async k = 8 vs sync, generated tokens per second
BATCHES = {  # prompts x generations per step
    "generation-heavy": ("sampling.prompts_per_step=8", "sampling.generations_per_prompt=16"),
    "demo": (),
}
QUICK_BATCH = ("sampling.prompts_per_step=4", "sampling.generations_per_prompt=8")  # --quick: 4 x 8

MODES = {
    "sync": None,
    "sync-1thread": None,  # the same trainer with torch.set_num_threads(1): a fairness reference
    "async-k1": {"mode": "async", "max_lag": 1},
    "async-k4": {"mode": "async", "max_lag": 4},
    "async-k8": {"mode": "async", "max_lag": 8},
    "ppo-offpolicy-k4": {"mode": "ppo-offpolicy", "offpolicy_steps": 4},
}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 steps of 4 x 8 per mode, small evaluations")
    parser.add_argument("--steps", type=int, default=None, help="optimiser steps per mode")
    parser.add_argument("--eval-every", type=int, default=None)
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated subset")
    parser.add_argument(
        "--batch",
        choices=sorted(BATCHES),
        default="generation-heavy",
        help="generation-heavy: 8 x 16 (default); demo: the demo's 32 x 16",
    )
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], help="extra TrainConfig override key=value (repeatable)"
    )
    parser.add_argument(
        "--generators",
        type=int,
        default=1,
        help="generator actors of the Ray modes (1 on a 2-core machine: one "
        "single-threaded generator and one single-threaded trainer)",
    )
    parser.add_argument(
        "--interleave",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="also run ROUNDS rounds of short throughput-only runs of sync, "
        "sync-1thread and async-k8 in alternation (fairer under a drifting "
        "shared load); with --modes '' they are added to the existing JSON",
    )
    parser.add_argument("--interleave-steps", type=int, default=15)
    parser.add_argument("--workdir", default="runs/bench_async_vs_sync")
    parser.add_argument("--out", default=str(RESULTS))
    return parser.parse_args(argv)


def bench_overrides(args) -> list[str]:
    """The ScaleRL preset at benchmark scale (the demo's greedy validation: one completion per
    prompt); --quick shrinks steps and evaluation."""
    steps = args.steps or (3 if args.quick else 120)
    eval_every = args.eval_every or (3 if args.quick else 10)
    common = [
        *BATCHES[args.batch],
        *(QUICK_BATCH if args.quick else ()),
        f"max_steps={steps}",
        f"eval_every={eval_every}",
        f"checkpoint_every={steps}",
        "eval_prompts=16" if args.quick else "eval_prompts=64",
    ]
    return [*common, *args.overrides]


def step_split(config, workdir: Path, steps: int = 6) -> dict:
    """Seconds of generation and of training per synchronous step (one torch thread, the
    benchmark's config, after one untimed step): which side dominates."""
    import torch

    from scalerl.train.step_rollouts import training_rewards
    from scalerl.train.train_step import train_step
    from scalerl.train.trainer import _generate, open_run, run_one_step

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        shutil.rmtree(workdir / "split", ignore_errors=True)
        run = open_run(config.with_overrides([f"max_steps={steps + 1}"]), workdir / "split", resume=False)
        run_one_step(run)
        generate_seconds = train_seconds = 0.0
        for _ in range(steps):
            started = time.perf_counter()
            rollouts = training_rewards(_generate(run), run.config)
            generated = time.perf_counter()
            train_step(run.model, run.optimizer, run.scheduler, rollouts, run.recipe)
            generate_seconds += generated - started
            train_seconds += time.perf_counter() - generated
    finally:
        torch.set_num_threads(threads)
    return {
        "steps": steps,
        "generate_seconds_per_step": generate_seconds / steps,
        "train_seconds_per_step": train_seconds / steps,
        "generation_share": generate_seconds / (generate_seconds + train_seconds),
    }


def run_mode(name: str, config, workdir: Path, generators: int) -> dict:
    """Train in one mode; return its metrics rows and wall-clock seconds."""
    from scalerl.distributed.pipeline import run_pipeline
    from scalerl.distributed.settings import PipelineConfig
    from scalerl.train.records.metrics_log import read_rows
    from scalerl.train.trainer import train

    run_dir = workdir / name
    shutil.rmtree(run_dir, ignore_errors=True)
    started = time.perf_counter()
    if MODES[name] is None:
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1 if name == "sync-1thread" else threads)
        try:
            train(config, run_dir, show_progress=False)
        finally:
            torch.set_num_threads(threads)
    else:
        cpus = os.cpu_count() or 2
        pipeline = PipelineConfig(
            **MODES[name], num_cpus=cpus, num_generators=generators, generator_cpus=max(0.1, (cpus - 1) / generators)
        )
        run_pipeline(config, pipeline, run_dir, log=lambda line: print(f"  [{name}] {line}"))
    wall_seconds = time.perf_counter() - started
    return {"rows": read_rows(run_dir / "metrics.jsonl"), "wall_seconds": wall_seconds}


def fit_curve(rows: list[dict]) -> dict:
    """fit_sigmoid on (device_hours, val_pass_rate); the error message when it cannot fit."""
    from scalerl.errors import ScaleRLError
    from scalerl.forecast.fitting import fit_sigmoid

    points = [(r["device_hours"], r["val_pass_rate"]) for r in rows if r.get("val_pass_rate") is not None]
    try:
        fit = fit_sigmoid([p[0] for p in points], [p[1] for p in points], n_draws=100)
    except ScaleRLError as error:
        return {"a": None, "b": None, "c_mid_hours": None, "error": str(error), "points": points}
    return {
        "a": fit.a,
        "b": fit.b,
        "c_mid_hours": fit.c_mid,
        "r0": fit.r0,
        "a_interval": list(fit.conf_int(0.8)["A"]),
        "ceiling_identified": fit.ceiling_identified,
        "warnings": list(fit.warnings),
        "points": points,
    }


def summarise(name: str, outcome: dict) -> dict:
    rows = outcome["rows"]
    last = rows[-1]
    train_seconds = last["device_hours"] * 3600.0  # num_devices = 1: training wall-clock time
    lags = [r["policy_lag_max"] for r in rows if "policy_lag_max" in r]
    return {
        "mode": name,
        "steps": last["step"],
        "samples": last["samples"],
        "tokens_generated": last["tokens_generated"],
        "train_seconds": train_seconds,
        "wall_seconds": outcome["wall_seconds"],
        "tokens_per_second": last["tokens_generated"] / train_seconds,
        "final_val_pass_rate": [r["val_pass_rate"] for r in rows if "val_pass_rate" in r][-1],
        "policy_lag_max": max(lags) if lags else 0,
        "generator_idle_fraction_mean": _mean(r.get("generator_idle_fraction") for r in rows[1:]),
        "trainer_idle_fraction_mean": _mean(r.get("trainer_idle_fraction") for r in rows[1:]),
        "weight_sync_seconds_mean": _mean(r.get("weight_sync_seconds") for r in rows[1:]),
        "fit": fit_curve(rows),
    }


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def compare_with_sync(results: dict[str, dict]) -> None:
    """Speed-up and ceiling difference of every mode against the synchronous run (in place)."""
    sync = results.get("sync")
    if sync is None:
        return
    for result in results.values():
        result["throughput_vs_sync"] = result["tokens_per_second"] / sync["tokens_per_second"]
        result["time_to_same_samples_vs_sync"] = result["train_seconds"] / sync["train_seconds"]
        a, a_sync = result["fit"]["a"], sync["fit"]["a"]
        result["a_minus_sync_a"] = None if a is None or a_sync is None else a - a_sync


def print_table(results: dict[str, dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="sync vs async PipelineRL vs PPO-off-policy-k (same batch, same steps)")
    for column in (
        "mode",
        "tok/s",
        "x sync",
        "train s",
        "wall s",
        "lag max",
        "gen idle",
        "trainer idle",
        "final val",
        "A",
        "B",
        "A - A_sync",
    ):
        table.add_column(column, justify="right")
    fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    for r in results.values():
        table.add_row(
            r["mode"],
            fmt(r["tokens_per_second"], ".0f"),
            fmt(r.get("throughput_vs_sync"), ".2f"),
            fmt(r["train_seconds"], ".0f"),
            fmt(r["wall_seconds"], ".0f"),
            str(r["policy_lag_max"]),
            fmt(r["generator_idle_fraction_mean"], ".2f"),
            fmt(r["trainer_idle_fraction_mean"], ".2f"),
            fmt(r["final_val_pass_rate"], ".3f"),
            fmt(r["fit"]["a"], ".3f"),
            fmt(r["fit"]["b"], ".2f"),
            fmt(r.get("a_minus_sync_a"), "+.3f"),
        )
    Console().print(table)


def targets(results: dict[str, dict]) -> dict:
    k8, sync = results.get("async-k8"), results.get("sync")
    if not (k8 and sync):
        return {}
    delta = k8.get("a_minus_sync_a")
    return {
        "async_k8_throughput_vs_sync": k8["throughput_vs_sync"],
        "throughput_target": THROUGHPUT_TARGET,
        "throughput_target_met": k8["throughput_vs_sync"] >= THROUGHPUT_TARGET,
        "a_difference": delta,
        "a_margin": A_MARGIN,
        "a_target_met": None if delta is None else abs(delta) <= A_MARGIN,
    }


def benchmark_config(overrides: list[str]):
    """The demo's ScaleRL run (tuned to show a rise on 2 cores) with the benchmark's overrides."""
    try:
        from scalerl.train.demo import demo_config
    except ImportError:  # no demo module: the plain preset
        from scalerl.train.config.presets import preset_config

        return preset_config("scalerl", overrides)
    return demo_config(overrides)


def interleaved_throughput(config, workdir: Path, generators: int, rounds: int, steps: int) -> dict:
    """Tokens per second of sync, sync-1thread and async-k8 in alternation, `rounds` times."""
    short = config.with_overrides([f"max_steps={steps}", f"eval_every={steps}", f"checkpoint_every={steps}"])
    names = ("sync", "sync-1thread", "async-k8")
    measured: dict[str, list] = {name: [] for name in names}
    for round_index in range(rounds):
        for name in names:
            outcome = run_mode(name, short, workdir / f"interleaved{round_index}", generators)
            last = outcome["rows"][-1]
            measured[name].append(
                {
                    "tokens_per_second": last["tokens_generated"] / (last["device_hours"] * 3600.0),
                    "load_average": os.getloadavg()[0],
                }
            )
            print(f"  round {round_index} {name}: {measured[name][-1]['tokens_per_second']:.0f} tokens/s", flush=True)
    medians = {name: statistics.median(m["tokens_per_second"] for m in runs) for name, runs in measured.items()}
    return {
        "steps": steps,
        "rounds": rounds,
        "runs": measured,
        "median_tokens_per_second": medians,
        "async_k8_vs_sync": medians["async-k8"] / medians["sync"],
        "async_k8_vs_sync_1thread": medians["async-k8"] / medians["sync-1thread"],
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    overrides = bench_overrides(args)
    config = benchmark_config(overrides)
    workdir = Path(args.workdir)
    load_before = os.getloadavg()
    results = {}
    split = step_split(config, workdir, steps=2 if args.quick else 6) if args.modes else None
    if split:
        print(
            f"synchronous step, 1 thread: generation {split['generate_seconds_per_step']:.3f} s, "
            f"training {split['train_seconds_per_step']:.3f} s "
            f"(generation share {split['generation_share']:.0%})",
            flush=True,
        )
    for name in [m for m in args.modes.split(",") if m]:
        print(f"running {name} ...", flush=True)
        results[name] = summarise(name, run_mode(name, config, workdir, args.generators))
        print(
            f"  {name}: {results[name]['tokens_per_second']:.0f} generated tokens/s, "
            f"train {results[name]['train_seconds']:.0f} s",
            flush=True,
        )
    out = Path(args.out)
    if not results and args.interleave:
        report = json.loads(out.read_text())
        report["interleaved"] = interleaved_throughput(
            config, workdir, args.generators, args.interleave, args.interleave_steps
        )
        commands = [report["command"]] if report.get("command") else []  # the modes' run, then this one
        write_result(
            out,
            report,
            " && ".join([*commands, command_line("async_vs_sync", argv)]),
            (report.get("machine") or {}).get("load_average_before"),
        )
        print(f"added interleaved throughput to {out}: {report['interleaved']['median_tokens_per_second']}")
        return 0
    compare_with_sync(results)
    print_table(results)
    report = {
        "benchmark": "async_vs_sync",
        "quick": args.quick,
        "preset": "scalerl (demo run)",
        "batch": args.batch,
        "overrides": overrides,
        "sync_step_split": split,
        "x_axis": "device_hours",
        "generators": args.generators,
        "results": results,
        "targets": targets(results),
    }
    if args.interleave:
        report["interleaved"] = interleaved_throughput(
            config, workdir, args.generators, args.interleave, args.interleave_steps
        )
    write_result(out, report, command_line("async_vs_sync", argv), load_before)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
