"""Benchmark: does the built-in demo predict itself whatever the RL seed and the thread count?

Runs `scalerl demo` for each RL seed (`--set seed=i`) and each torch thread count, every run from
an empty cache in its own HOME (a fresh temporary directory, so each run pays for its own warm
start, as a new user would), one after another. Per run: R0 (the step-0 evaluation), the final
plateau (mean of the last quarter of the evaluations), the fitted A with its 80 % interval (fit on
all evaluations), the first-half forecast's coverage of the second half (share of the held-out
evaluations inside the 80 % band of the fit on the first half of the compute, from the demo's
forecast.json), the warm start's cache key and weights-file digest, and the seconds. Then the
spread of A over all runs. A script, not a test: prints a table, writes JSON.

    python -m benchmarks.demo_robustness --seeds 5 --threads 1,2                 # the full benchmark (hours on 2 cores)
    python -m benchmarks.demo_robustness --runs 0x1,1x1,2x1,3x1,4x1,0x2,1x2 --parallel 2   # two demos at a time
    python -m benchmarks.demo_robustness --seeds 1 --threads 1 --max-steps 20 --set eval_every=2 \
        --out /tmp/demo_robustness_smoke.json                                    # a smoke check of the path
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import numpy as np

from benchmarks.common import REPO, RESULTS_DIR, command_line, write_result

RESULTS = RESULTS_DIR / "demo_robustness.json"
LEVEL = 0.8
QUICK_STEPS = 4
QUICK_OVERRIDES = ("model.warmstart_steps=10", "eval_every=2", "eval_prompts=16")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="RL seeds 0..N-1 (default 5)")
    parser.add_argument("--threads", default="1,2", help="comma-separated torch thread counts (default 1,2)")
    parser.add_argument("--max-steps", type=int, default=None, help="override the demo's max_steps, 250 (smoke checks)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        help="extra config override for every run, key=value (repeatable)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"JSON results (default {RESULTS.relative_to(REPO)})")
    parser.add_argument("--keep", type=Path, default=None, help="keep each run's directory under this folder")
    parser.add_argument(
        "--runs", default=None, help="explicit SEEDxTHREADS list instead of --seeds x --threads, e.g. 0x1,1x1,0x2"
    )
    parser.add_argument(
        "--parallel",
        type=int,
        default=1,
        help="demos at once, each in its own empty HOME (default 1; seconds then include the sharing)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: one demo (seed 0, 1 thread) of {QUICK_STEPS} steps with a short warm "
        "start and small evaluations; pair with --out",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.threads = 1, "1"
        args.max_steps = args.max_steps or QUICK_STEPS
        args.overrides = [*QUICK_OVERRIDES, *args.overrides]
    try:
        args.thread_counts = [int(item) for item in args.threads.split(",") if item.strip()]
    except ValueError:
        parser.error(f"--threads: expected integers such as 1,2, got {args.threads!r}")
    if args.seeds < 1 or not args.thread_counts or min(args.thread_counts) < 1:
        parser.error("--seeds and every --threads value must be >= 1")
    if args.parallel < 1:
        parser.error("--parallel must be >= 1")
    args.plan = [(seed, threads) for threads in args.thread_counts for seed in range(args.seeds)]
    if args.runs:
        try:
            args.plan = [tuple(int(part) for part in item.split("x")) for item in args.runs.split(",") if item.strip()]
        except ValueError:
            parser.error(f"--runs: expected SEEDxTHREADS items such as 0x1,1x2, got {args.runs!r}")
        if not args.plan or any(len(item) != 2 or item[0] < 0 or item[1] < 1 for item in args.plan):
            parser.error(f"--runs: expected SEEDxTHREADS items with seed >= 0 and threads >= 1, got {args.runs!r}")
    return args


def demo_command(run_dir: Path, seed: int, threads: int, args: argparse.Namespace) -> list[str]:
    """`scalerl demo` through this checkout's sources, with the run's seed and thread count."""
    sets = [f"seed={seed}", f"torch_threads={threads}", *args.overrides]
    if args.max_steps is not None:
        sets.append(f"max_steps={args.max_steps}")
    launcher = "import sys; from scalerl.cli.app import main; sys.argv[0] = 'scalerl'; main()"
    return [
        sys.executable,
        "-c",
        launcher,
        "demo",
        "--out",
        str(run_dir),
        "--no-progress",
        *[arg for item in sets for arg in ("--set", item)],
    ]


def clean_environment(home: Path) -> dict:
    """An empty HOME (and cache) for one run; this checkout's sources first on the path."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("XDG_")}
    env["HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def warm_start_entry(home: Path) -> dict:
    """The warm start the run built in its empty cache: its key and the sha256 of its weights file."""
    root = home / ".cache" / "scalerl" / "warmstart"
    entries = (
        [entry for entry in root.iterdir() if entry.is_dir() and not entry.name.startswith(".")]
        if root.is_dir()
        else []
    )
    if len(entries) != 1:
        return {"key": None, "weights_file_sha256": None, "entries": len(entries)}
    weights = sorted(entries[0].glob("*.safetensors"))
    digest = hashlib.sha256(b"".join(path.read_bytes() for path in weights)).hexdigest() if weights else None
    return {"key": entries[0].name, "weights_file_sha256": digest, "entries": 1}


def validation_curve(metrics_path: Path) -> tuple[np.ndarray, np.ndarray]:
    rows = [json.loads(line) for line in metrics_path.read_text().splitlines() if line.strip()]
    points = [(row["flops"], row["val_pass_rate"]) for row in rows if row.get("val_pass_rate") is not None]
    return np.array([p[0] for p in points], dtype=float), np.array([p[1] for p in points], dtype=float)


def curve_numbers(run_dir: Path) -> dict:
    """R0, final plateau, A [interval] fitted on all evaluations, and the demo's first-half coverage."""
    from scalerl.errors import ScaleRLError
    from scalerl.forecast.fitting import fit_sigmoid

    numbers: dict = {
        "R0": None,
        "final_plateau": None,
        "A": None,
        "A_interval": None,
        "ceiling_identified": None,
        "ceiling_at_bound": None,
        "first_half_coverage": None,
        "held_out_points": None,
        "n_evaluations": 0,
        "fit_error": None,
    }
    metrics = run_dir / "metrics.jsonl"
    if not metrics.is_file():
        return numbers
    flops, pass_rate = validation_curve(metrics)
    numbers["n_evaluations"] = int(pass_rate.size)
    if pass_rate.size:
        numbers["R0"] = float(pass_rate[0])
        numbers["final_plateau"] = float(pass_rate[-max(1, pass_rate.size // 4) :].mean())
    try:
        fit = fit_sigmoid(flops, pass_rate, level=LEVEL)
        numbers.update(
            A=fit.a,
            A_interval=list(fit.conf_int(LEVEL)["A"]),
            ceiling_identified=bool(fit.ceiling_identified),
            ceiling_at_bound=bool(fit.ceiling_at_bound),
        )
    except ScaleRLError as error:
        numbers["fit_error"] = str(error)
    forecast = run_dir / "forecast.json"
    if forecast.is_file():
        saved = json.loads(forecast.read_text())
        numbers["first_half_coverage"] = saved.get("band_coverage")
        numbers["held_out_points"] = len(saved.get("held_out") or [])
    return numbers


def run_once(seed: int, threads: int, args: argparse.Namespace) -> dict:
    """One demo from an empty HOME; its numbers, its warm start and its seconds."""
    home = Path(tempfile.mkdtemp(prefix=f"demo-s{seed}-t{threads}-"))
    run_dir = home / "run"
    started = time.perf_counter()
    try:
        completed = subprocess.run(
            demo_command(run_dir, seed, threads, args),
            env=clean_environment(home),
            cwd=home,
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - started
        result = {
            "seed": seed,
            "threads": threads,
            "seconds": seconds,
            "exit_code": completed.returncode,
            "stderr_tail": completed.stderr.strip().splitlines()[-3:] if completed.returncode else [],
            **curve_numbers(run_dir),
            "warm_start": warm_start_entry(home),
        }
        if args.keep is not None:
            shutil.copytree(run_dir, args.keep / f"seed{seed}-threads{threads}", dirs_exist_ok=True)
        return result
    finally:
        shutil.rmtree(home, ignore_errors=True)


def spread(results: list[dict]) -> dict:
    """A over the runs with a fit: mean, sample SD, range; and whether every run built the same warm start."""
    values = np.array([r["A"] for r in results if r["A"] is not None], dtype=float)
    digests = {r["warm_start"]["weights_file_sha256"] for r in results}
    summary = {
        "runs": len(results),
        "runs_fitted": int(values.size),
        "warm_start_digests": len(digests - {None}),
        "one_warm_start": len(digests) == 1 and None not in digests,
    }
    if values.size:
        summary.update(
            A_mean=float(values.mean()),
            A_min=float(values.min()),
            A_max=float(values.max()),
            A_sd=float(values.std(ddof=1)) if values.size > 1 else None,
        )
    return summary


def number(value, fmt: str = ".3f") -> str:
    return "-" if value is None else format(value, fmt)


def table(results: list[dict]) -> str:
    header = ("seed", "threads", "R0", "plateau", "A [80 %]", "1st-half band holds", "warm start", "seconds", "exit")
    lines = [" | ".join(header), " | ".join("---" for _ in header)]
    for r in results:
        interval = "-" if r["A_interval"] is None else f"[{r['A_interval'][0]:.3f}, {r['A_interval'][1]:.3f}]"
        coverage = (
            "-" if r["first_half_coverage"] is None else f"{r['first_half_coverage']:.0%} of {r['held_out_points']}"
        )
        lines.append(
            " | ".join(
                [
                    str(r["seed"]),
                    str(r["threads"]),
                    number(r["R0"]),
                    number(r["final_plateau"]),
                    f"{number(r['A'])}{' (limit)' if r['ceiling_at_bound'] else ''} {interval}",
                    coverage,
                    (r["warm_start"]["weights_file_sha256"] or "-")[:12],
                    f"{r['seconds']:.0f}",
                    str(r["exit_code"]),
                ]
            )
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    print(f"{len(args.plan)} demos, {args.parallel} at a time, each from an empty cache ...", flush=True)
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        futures = [pool.submit(run_once, seed, threads, args) for seed, threads in args.plan]
        for future in as_completed(futures):
            print(table([future.result()]).splitlines()[-1], flush=True)
    results = [future.result() for future in futures]
    summary = spread(results)
    print()
    print(table(results))
    print()
    print(json.dumps(summary, indent=2))
    payload = {
        "settings": {
            "runs": [list(item) for item in args.plan],
            "parallel": args.parallel,
            "max_steps": args.max_steps,
            "overrides": args.overrides,
            "level": LEVEL,
        },
        "runs": results,
        "summary": summary,
    }
    write_result(args.out, payload, command_line("demo_robustness", argv), indent=2)
    print(f"written: {args.out}")
    return 0 if all(r["exit_code"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
