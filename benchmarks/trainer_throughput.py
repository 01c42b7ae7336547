"""Benchmark: scalerl's synchronous trainer vs TRL's GRPOTrainer on the same tiny model and task.

Both trainers start from the same weights (the built-in model warm-started as the demo does, or a
fresh one with --fresh), saved once to a temporary directory; both see P prompts x G generations
per optimiser step from the built-in arithmetic task, sample at temperature 1 up to the same
number of new tokens, reward with the task's verifier (+1 / -1) and run the same number of steps
on CPU with the same torch thread count. TRL runs with use_vllm=False, beta=0, no eval, no saving.
Each trainer runs in its own subprocess (`--mode scalerl|trl`), so peak RSS is per trainer; the
parent collects their JSON, prints a table and writes benchmarks/results/trainer_throughput.json
(+ .md). Only the steps after the warm-up steps are timed. A script, not a test. Each trainer's
side (the shared setup, the timed and profiled runs, what is measured) is in benchmarks/trainer_runs/;
this module is the command, the children's orchestration in rounds and the report.

    python -m benchmarks.trainer_throughput --quick      # smoke run (about a minute)
    python -m benchmarks.trainer_throughput              # the measured run
    python -m benchmarks.trainer_throughput --profile    # also cProfile a few steps of each
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO, RESULTS_DIR, command_line, machine, write_result, write_text
from benchmarks.render.throughput import TOKENS_PER_SECOND_TARGET, report_markdown
from benchmarks.trainer_runs.matched_setup import LEARNING_RATE, MATCHED_OVERRIDES, save_starting_model
from benchmarks.trainer_runs.scalerl_run import profile_scalerl, run_scalerl
from benchmarks.trainer_runs.trl_run import profile_trl, run_trl


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--mode",
        default="compare",
        choices=("compare", "scalerl", "trl", "profile-scalerl", "profile-trl"),
        help="compare: run both as subprocesses (default); the others are the children",
    )
    parser.add_argument("--steps", type=int, default=None, help="timed optimiser steps per trainer")
    parser.add_argument("--warmup-steps", type=int, default=2, help="untimed steps before the timed ones")
    parser.add_argument("--prompts", type=int, default=16, help="prompts per optimiser step (P)")
    parser.add_argument("--generations", type=int, default=8, help="generations per prompt (G)")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each trainer")
    parser.add_argument(
        "--fresh", action="store_true", help="start both from the freshly initialised model instead of the warm start"
    )
    parser.add_argument(
        "--recipe",
        choices=("matched", "scalerl", "both"),
        default="both",
        help="scalerl's config: 'matched' does TRL's work (no filter, truncation; the "
        "ratio uses it); 'scalerl' is the ScaleRL preset (its zero-variance "
        "filter skips the update of constant-reward groups); 'both' runs each",
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="runs of each trainer, alternating order; the median is reported"
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: few steps")
    parser.add_argument(
        "--profile", action="store_true", help="also cProfile a few steps of each trainer (separate runs, untimed)"
    )
    parser.add_argument("--model-dir", default=None, help="(children) the shared starting model")
    parser.add_argument("--child-out", default=None, help="(children) where to write the JSON")
    parser.add_argument(
        "--out-dir",
        default=None,
        help="where trainer_throughput.{json,md} go (default benchmarks/results; a --quick run "
        "writes only when given one)",
    )
    args = parser.parse_args(argv)
    if args.steps is None:
        args.steps = 5 if args.quick else 40
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    if min(args.warmup_steps, args.steps, args.rounds) < 1:
        parser.error("--warmup-steps, --steps and --rounds must be >= 1")
    return args


def child_command(args, mode: str, model_dir: Path, out_path: Path, recipe: str) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "benchmarks.trainer_throughput",
        "--mode",
        mode,
        "--model-dir",
        str(model_dir),
        "--child-out",
        str(out_path),
        "--steps",
        str(min(args.steps, 10) if mode.startswith("profile") else args.steps),
        "--warmup-steps",
        str(args.warmup_steps),
        "--prompts",
        str(args.prompts),
        "--generations",
        str(args.generations),
        "--max-new-tokens",
        str(args.max_new_tokens),
        "--threads",
        str(args.threads),
        "--recipe",
        recipe,
    ]
    return command + (["--fresh"] if args.fresh else [])


def run_child(args, mode: str, model_dir: Path, workdir: Path, recipe: str = "matched") -> dict:
    """One trainer in its own process (equal thread settings); its JSON plus the load around it."""
    out_path = workdir / f"{mode}-{recipe}.json"
    env = dict(
        os.environ,
        OMP_NUM_THREADS=str(args.threads),
        MKL_NUM_THREADS=str(args.threads),
        TOKENIZERS_PARALLELISM="false",
        WANDB_DISABLED="true",
        HF_HUB_OFFLINE="1",
    )
    load_before = os.getloadavg()
    started = time.perf_counter()
    completed = subprocess.run(
        child_command(args, mode, model_dir, out_path, recipe), env=env, cwd=REPO, capture_output=True, text=True
    )
    if completed.returncode != 0:
        sys.stderr.write(completed.stdout[-4000:] + completed.stderr[-4000:])
        raise SystemExit(f"error: the {mode} child failed with exit code {completed.returncode}")
    result = json.loads(out_path.read_text())
    result.update(
        process_seconds=time.perf_counter() - started,
        load_average_before=list(load_before),
        load_average_after=list(os.getloadavg()),
    )
    return result


def trainer_runs(recipe: str) -> dict[str, tuple[str, str]]:
    """Result name -> (child mode, scalerl recipe) of the trainers to compare."""
    runs = {"scalerl": ("scalerl", "scalerl" if recipe == "scalerl" else "matched"), "trl": ("trl", "matched")}
    if recipe == "both":
        runs["scalerl (ScaleRL recipe)"] = ("scalerl", "scalerl")
    return runs


def median_round(rounds: list[dict]) -> dict:
    """The round with the median generated tokens/s, plus every round's tokens/s."""
    ordered = sorted(rounds, key=lambda r: r["generated_tokens_per_second"])
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    chosen["rounds_generated_tokens_per_second"] = [r["generated_tokens_per_second"] for r in rounds]
    chosen["rounds_steps_per_second"] = [r["steps_per_second"] for r in rounds]
    return chosen


def run_rounds(args, model_dir: Path, workdir: Path) -> dict:
    """Each trainer once per round, the order reversed every other round (a drifting shared load
    then hits both alike); each trainer's median round is reported."""
    runs = trainer_runs(args.recipe)
    rounds: dict[str, list[dict]] = {name: [] for name in runs}
    for round_index in range(args.rounds):
        names = list(runs) if round_index % 2 == 0 else list(reversed(runs))
        for name in names:
            mode, recipe = runs[name]
            rounds[name].append(run_child(args, mode, model_dir, workdir, recipe=recipe))
    return {name: median_round(results) for name, results in rounds.items()}


def paired_ratios(results: dict, name: str) -> list[float]:
    """Round-by-round tokens/s of `name` over TRL's in the same round (adjacent runs: a drifting
    load cancels out better than in the ratio of the two medians)."""
    return [
        ours / theirs
        for ours, theirs in zip(
            results[name]["rounds_generated_tokens_per_second"], results["trl"]["rounds_generated_tokens_per_second"]
        )
    ]


def compare(args) -> dict:
    """Save the shared starting model, run each trainer in a subprocess, build the report."""
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench_trainer_throughput_") as workdir:
        model_dir = Path(workdir) / "start_model"
        model_info = save_starting_model(args, model_dir)
        results = run_rounds(args, model_dir, Path(workdir))
        profiles = {
            trainer: run_child(args, f"profile-{trainer}", model_dir, Path(workdir))
            for trainer in (("scalerl", "trl") if args.profile else ())
        }
    ratios = paired_ratios(results, "scalerl")
    recipe_name = "scalerl (ScaleRL recipe)"
    recipe_ratios = paired_ratios(results, recipe_name) if recipe_name in results else None
    ratio = statistics.median(ratios)
    return {
        "benchmark": "trainer_throughput",
        "quick": args.quick,
        "setup": {
            "prompts": args.prompts,
            "generations": args.generations,
            "max_new_tokens": args.max_new_tokens,
            "timed_steps": args.steps,
            "warmup_steps": args.warmup_steps,
            "threads": args.threads,
            "recipe": args.recipe,
            "rounds": args.rounds,
            "matched_scalerl_overrides": list(MATCHED_OVERRIDES),
            "learning_rate": LEARNING_RATE,
            "temperature": 1.0,
            "device": "cpu",
            "dtype": "float32",
            **model_info,
        },
        "machine": machine(load_before, packages=("transformers", "trl")),
        "results": results,
        "tokens_per_second_ratio": ratio,  # median over rounds of the paired ratios
        "rounds_tokens_per_second_ratio": ratios,
        "ratio_of_median_rounds": (
            results["scalerl"]["generated_tokens_per_second"] / results["trl"]["generated_tokens_per_second"]
        ),
        "steps_per_second_ratio": results["scalerl"]["steps_per_second"] / results["trl"]["steps_per_second"],
        "recipe_tokens_per_second_ratio": statistics.median(recipe_ratios) if recipe_ratios else None,
        "rounds_recipe_tokens_per_second_ratio": recipe_ratios,
        "target_tokens_per_second_ratio": TOKENS_PER_SECOND_TARGET,
        "target_met": ratio >= TOKENS_PER_SECOND_TARGET,
        "profiles": profiles,
    }


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.mode != "compare":
        runner = {
            "scalerl": run_scalerl,
            "trl": run_trl,
            "profile-scalerl": profile_scalerl,
            "profile-trl": profile_trl,
        }[args.mode]
        Path(args.child_out).write_text(json.dumps(runner(args), indent=1))
        return
    report = compare(args)
    markdown = report_markdown(report)
    print(markdown)
    if args.quick and args.out_dir is None:  # a smoke run never overwrites the measured results
        return
    out_dir = Path(args.out_dir or RESULTS_DIR)
    write_result(
        out_dir / "trainer_throughput.json",
        report,
        command_line("trainer_throughput", argv),
        machine_block=report["machine"],
    )
    write_text(out_dir / "trainer_throughput.md", markdown)


if __name__ == "__main__":
    main()
