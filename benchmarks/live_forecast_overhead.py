"""Benchmark: what the live forecast costs a training run.

Two measurements, one process, one torch thread:
1. a short real run of the demo config (ScaleRL preset, 32 prompts x 16 generations, warm start
   from the cache) with the live forecast on: wall time of each training step (rows without a
   validation), of each validation, and of each live refit + plot inside it (the trainer's
   `scalerl.train.run_state.add_live_forecast`, timed by wrapping it);
2. the live refit + plot on validation curves as long as the demo's (5 to 61 evaluations, a
   sigmoid with the demo's binomial evaluation noise, 64 prompts x 4 samples), median of repeats.

Overhead = (refit + plot) / (eval_every x median step time): the share of training time the live
forecast adds with the demo's eval_every. Prints a table and writes
benchmarks/results/live_forecast_overhead.json. A script, not a test: it asserts nothing.

    python -m benchmarks.live_forecast_overhead              # 30 steps, repeats 5 (about 2 minutes)
    python -m benchmarks.live_forecast_overhead --steps 12   # quicker
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import RESULTS_DIR, command_line, write_result

RESULTS = RESULTS_DIR / "live_forecast_overhead.json"
CURVE_LENGTHS = (5, 10, 20, 40, 61)  # the demo makes 61 evaluations (steps 0, 10, ..., 600)
EVAL_SAMPLES = 64 * 4
QUICK_OVERRIDES = ("model.warmstart_steps=10", "eval_prompts=16")  # a short warm start when none is cached


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="optimiser steps of the real run")
    parser.add_argument("--eval-every", type=int, default=10, help="the demo's eval_every")
    parser.add_argument("--repeats", type=int, default=5, help="repeats per synthetic curve length")
    parser.add_argument("--n-draws", type=int, default=None, help="default: the config's")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 4 steps, an evaluation every 2, one repeat; pair with --out"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.eval_every, args.repeats = 4, 2, 1
    return args


def timed_real_run(steps: int, eval_every: int, n_draws: int | None, extra_overrides=()) -> dict:
    """Run the demo config for `steps` steps; per-row wall times and the live refits' times."""
    import scalerl.train.run_state as run_state_module
    import scalerl.train.trainer as trainer_module
    from scalerl.train.demo import demo_config

    overrides = [f"max_steps={steps}", f"eval_every={eval_every}", "torch_threads=1", f"checkpoint_every={steps}"]
    overrides += [f"forecast.n_draws={n_draws}"] if n_draws else []
    overrides += list(extra_overrides)
    config = demo_config(overrides)
    refit_seconds, row_times = [], []
    original = run_state_module.add_live_forecast

    def timed_forecast(*args, **kwargs):
        started = time.perf_counter()
        forecast = original(*args, **kwargs)
        refit_seconds.append(time.perf_counter() - started)
        return forecast

    run_state_module.add_live_forecast = timed_forecast
    run_dir = Path(tempfile.mkdtemp(prefix="live_forecast_bench_"))
    try:
        started = time.perf_counter()
        trainer_module.train(
            config,
            run_dir / "run",
            show_progress=False,
            on_row=lambda row: row_times.append((row["step"], "val_pass_rate" in row, time.perf_counter())),
        )
    finally:
        run_state_module.add_live_forecast = original
        shutil.rmtree(run_dir, ignore_errors=True)
    previous = [started] + [t for _, _, t in row_times[:-1]]
    durations = [(step, has_val, t - before) for (step, has_val, t), before in zip(row_times, previous)]
    step_seconds = [d for step, has_val, d in durations if step > 0 and not has_val]
    val_step_seconds = [d for step, has_val, d in durations if step > 0 and has_val]
    return {
        "config": {
            "steps": steps,
            "eval_every": eval_every,
            "n_draws": config.forecast.n_draws,
            "prompts_per_step": config.sampling.prompts_per_step,
            "generations_per_prompt": config.sampling.generations_per_prompt,
        },
        "median_step_seconds": statistics.median(step_seconds),
        "median_step_with_validation_seconds": statistics.median(val_step_seconds) if val_step_seconds else None,
        "refit_seconds": refit_seconds,
    }


def demo_like_curve(n_points: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n evaluations of a sigmoid shaped like the demo's (R0 0.08 rising to ~0.25 over 600
    steps), with binomial noise of 256 samples per evaluation."""
    from scalerl.forecast.curves import sigmoid_reward

    flops = np.linspace(0.0, 6e12, n_points)
    mean = sigmoid_reward(flops, 0.3, 1.5, 2.5e12, 0.08)
    rng = np.random.default_rng(seed)
    reward = rng.binomial(EVAL_SAMPLES, mean) / EVAL_SAMPLES
    reward[0] = 0.08
    return flops, reward


def timed_synthetic_refits(n_draws: int, repeats: int) -> list[dict]:
    """Median seconds of live_forecast and of write_live_plot for each curve length."""
    from scalerl.forecast.live import live_forecast
    from scalerl.report.live_plot import write_live_plot

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for n_points in CURVE_LENGTHS:
            fit_times, plot_times, fitted = [], [], 0
            for seed in range(repeats):
                flops, reward = demo_like_curve(n_points, seed)
                started = time.perf_counter()
                forecast = live_forecast(flops, reward, budget=6e12, n_draws=n_draws)
                fit_times.append(time.perf_counter() - started)
                if forecast is not None:
                    fitted += 1
                    started = time.perf_counter()
                    write_live_plot(forecast, flops, reward, Path(folder) / "forecast_live.png")
                    plot_times.append(time.perf_counter() - started)
            rows.append(
                {
                    "n_points": n_points,
                    "fitted": fitted,
                    "repeats": repeats,
                    "median_fit_seconds": statistics.median(fit_times),
                    "median_plot_seconds": statistics.median(plot_times) if plot_times else 0.0,
                }
            )
    return rows


def main(argv=None) -> None:
    args = parse_args(argv)
    import torch

    torch.set_num_threads(1)
    real = timed_real_run(args.steps, args.eval_every, args.n_draws, QUICK_OVERRIDES if args.quick else ())
    n_draws = real["config"]["n_draws"]
    synthetic = timed_synthetic_refits(n_draws, args.repeats)
    interval_seconds = args.eval_every * real["median_step_seconds"]
    for row in synthetic:
        row["overhead_percent"] = 100.0 * (row["median_fit_seconds"] + row["median_plot_seconds"]) / interval_seconds
    real_refits = real["refit_seconds"]
    real["overhead_percent_of_real_refits"] = [100.0 * s / interval_seconds for s in real_refits]
    payload = {
        "n_draws": n_draws,
        "real_run": real,
        "synthetic_curves": synthetic,
        "max_overhead_percent": max(row["overhead_percent"] for row in synthetic),
    }
    print(
        f"demo config, {args.steps} steps, one torch thread: median step {real['median_step_seconds']:.3f} s, "
        f"eval every {args.eval_every} steps -> {interval_seconds:.2f} s between validations"
    )
    print("live refits inside the run (s): " + ", ".join(f"{s:.3f}" for s in real_refits))
    print(f"\n| evaluations | fitted | refit s | plot s | overhead (% of {args.eval_every} steps) |")
    print("|---|---|---|---|---|")
    for row in synthetic:
        print(
            f"| {row['n_points']} | {row['fitted']}/{row['repeats']} | {row['median_fit_seconds']:.3f} | "
            f"{row['median_plot_seconds']:.3f} | {row['overhead_percent']:.2f} |"
        )
    out = write_result(Path(args.out), payload, command_line("live_forecast_overhead", argv), indent=2)
    print(f"\nwritten: {out}")


if __name__ == "__main__":
    main()
