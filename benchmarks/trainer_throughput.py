"""Benchmark: scalerl's synchronous trainer vs TRL's GRPOTrainer on the same tiny model and task.

Both trainers start from the same weights (the built-in model warm-started as the demo does, or a
fresh one with --fresh), saved once to a temporary directory; both see P prompts x G generations
per optimiser step from the built-in arithmetic task, sample at temperature 1 up to the same
number of new tokens, reward with the task's verifier (+1 / -1) and run the same number of steps
on CPU with the same torch thread count. TRL runs with use_vllm=False, beta=0, no eval, no saving.
Each trainer runs in its own subprocess (`--mode scalerl|trl`), so peak RSS is per trainer; the
parent collects their JSON, prints a table and writes benchmarks/results/trainer_throughput.json
(+ .md). Only the steps after the warm-up steps are timed. A script, not a test.

    python -m benchmarks.trainer_throughput --quick      # smoke run (about a minute)
    python -m benchmarks.trainer_throughput              # the measured run
    python -m benchmarks.trainer_throughput --profile    # also cProfile a few steps of each
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO, RESULTS_DIR, command_line, machine, write_result, write_text
from benchmarks.render.throughput import TOKENS_PER_SECOND_TARGET, report_markdown

LEARNING_RATE = 1e-4
WEIGHT_DECAY = 0.01
GRAD_CLIP = 1.0

# scalerl configured to do the same work as TRL's GRPOTrainer defaults (loss_type "dapo": token-level
# aggregation, symmetric clip 0.2, group-std advantages, no filter, no curriculum, plain truncation).
MATCHED_OVERRIDES = (
    "rl.loss=grpo",
    "rl.grpo_eps=0.2",
    "rl.aggregation=token",
    "rl.advantage_norm=prompt",
    "rl.zero_variance_filter=false",
    "rl.npr=false",
    "sampling.length_control=truncate",
    f"optim.lr={LEARNING_RATE}",
    f"optim.weight_decay={WEIGHT_DECAY}",
    "optim.warmup_steps=0",
    f"optim.grad_clip={GRAD_CLIP}",
)


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


def scalerl_config(args, model_path: str):
    """The benchmark's TrainConfig: P x G, max new tokens, model path, the chosen recipe."""
    from scalerl.train.config.train_config import TrainConfig

    overrides = [
        f"model.path={model_path}",
        f"sampling.prompts_per_step={args.prompts}",
        f"sampling.generations_per_prompt={args.generations}",
        f"sampling.max_new_tokens={args.max_new_tokens}",
        f"max_steps={args.warmup_steps + args.steps}",
        f"eval_every={args.warmup_steps + args.steps}",
        f"checkpoint_every={args.warmup_steps + args.steps}",
    ]
    if args.recipe == "matched":
        overrides += list(MATCHED_OVERRIDES)
    budget_max = min(48, args.max_new_tokens - 1)
    overrides += [
        f"sampling.thinking_budget_max={budget_max}",
        f"sampling.thinking_budget_min={min(40, budget_max)}",
        f"sampling.penalty_cache_tokens={min(16, args.max_new_tokens)}",
    ]
    return TrainConfig().with_overrides(overrides)


def save_starting_model(args, directory: Path) -> dict:
    """Build the starting policy once (warm-started unless --fresh) and save it for both trainers."""
    import torch

    from scalerl.models.policy import save_model
    from scalerl.train.run_setup import build_policy, build_task, fresh_policy

    torch.set_num_threads(args.threads)
    config = scalerl_config(args, "builtin")
    task = build_task(config)
    model, tokenizer = fresh_policy(config) if args.fresh else build_policy(config, task)
    save_model(model, tokenizer, directory)
    return {
        "start": "fresh" if args.fresh else "warm-started (cached demo warm start)",
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def peak_rss_mib() -> float:
    """Peak resident set size of this process (Linux ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def throughput(step_end_times: list[float], step_tokens: list[int], warmup_steps: int, sequences_per_step: int) -> dict:
    """Steps/s and generated tokens/s over the steps after the warm-up.

    The window runs from the end of the last warm-up step to the end of the last step, so it holds
    every timed step's generation, reward, update and the trainer's own overhead between steps."""
    timed_tokens = sum(step_tokens[warmup_steps:])
    timed_steps = len(step_end_times) - warmup_steps
    wall_seconds = step_end_times[-1] - step_end_times[warmup_steps - 1]
    return {
        "timed_steps": timed_steps,
        "wall_seconds": wall_seconds,
        "steps_per_second": timed_steps / wall_seconds,
        "generated_tokens": timed_tokens,
        "generated_tokens_per_second": timed_tokens / wall_seconds,
        "mean_completion_tokens": timed_tokens / (timed_steps * sequences_per_step),
    }


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


def trl_dataset(args):
    """The task's training prompts as a datasets.Dataset of {"prompt", "answer"}."""
    from datasets import Dataset

    from scalerl.train.run_setup import build_task

    task = build_task(scalerl_config(args, "builtin"))
    return task, Dataset.from_dict({"prompt": [e.prompt for e in task.train], "answer": [e.answer for e in task.train]})


def run_trl(args, profiler=None) -> dict:
    """TRL's GRPOTrainer (transformers generate, no vLLM) on the same model, prompts and batch."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from scalerl.tasks.types import TaskExample

    torch.set_num_threads(args.threads)
    task, dataset = trl_dataset(args)
    step_tokens: list[int] = []
    end_times: list[float] = []
    rewards_seen: list[float] = []

    def verifier_reward(prompts, completions, completion_ids, answer, **_):
        step_tokens.append(sum(len(ids) for ids in completion_ids))
        rewards = [
            task.reward(text, TaskExample(prompt=p, answer=a)) for p, text, a in zip(prompts, completions, answer)
        ]
        rewards_seen.extend(rewards)
        return rewards

    class StepClock(TrainerCallback):
        def on_step_end(self, *_, **__):
            end_times.append(time.perf_counter())
            if profiler is not None and len(end_times) == args.warmup_steps:
                profiler.enable()

    batch_size = args.prompts * args.generations
    with tempfile.TemporaryDirectory(prefix="bench_trl_") as output_dir:
        grpo_args = GRPOConfig(
            output_dir=output_dir,
            max_steps=args.warmup_steps + args.steps,
            per_device_train_batch_size=batch_size,
            num_generations=args.generations,
            generation_batch_size=batch_size,
            gradient_accumulation_steps=1,
            max_completion_length=args.max_new_tokens,
            temperature=1.0,
            top_p=1.0,
            beta=0.0,
            num_iterations=1,
            epsilon=0.2,
            loss_type="dapo",
            scale_rewards="group",
            learning_rate=LEARNING_RATE,
            weight_decay=WEIGHT_DECAY,
            max_grad_norm=GRAD_CLIP,
            lr_scheduler_type="constant",
            warmup_steps=0,
            use_vllm=False,
            use_cpu=True,
            bf16=False,
            fp16=False,
            report_to=[],
            save_strategy="no",
            eval_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            dataloader_num_workers=0,
            seed=0,
        )
        model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
        tokenizer.padding_side = "left"
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[verifier_reward],
            args=grpo_args,
            train_dataset=dataset,
            processing_class=tokenizer,
            callbacks=[StepClock()],
        )
        trainer.train()
        if profiler is not None:
            profiler.disable()
    result = throughput(end_times, step_tokens, args.warmup_steps, batch_size)
    result.update(
        trainer="trl",
        trl_version=_version("trl"),
        mean_train_reward=sum(rewards_seen) / max(1, len(rewards_seen)),
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
    "_to_rollout",
    "train_step",
    "run_backward",
)
TRL_PHASES = (
    "_generate",
    "generate",
    "_calculate_rewards",
    "compute_loss",
    "_get_per_token_logps_and_entropies",
    "run_backward",
)


def profile_summary(profiler, steps: int, phase_names: tuple[str, ...], top: int = 25) -> dict:
    """Cumulative seconds of the named phases and the functions with the most own time."""
    import pstats

    stats = pstats.Stats(profiler)
    total = stats.total_tt
    by_own = sorted(stats.stats.items(), key=lambda item: item[1][2], reverse=True)[:top]
    by_cumulative = sorted(stats.stats.items(), key=lambda item: item[1][3], reverse=True)
    phases = {
        name: next(
            (cum for (_, _, n), (_, _, _, cum, _) in by_cumulative if n == name or f"'{name}'" in n), 0.0
        )  # builtins: "<method 'name' ...>"
        for name in phase_names
    }
    hot = [
        {
            "function": f"{Path(file).name}:{line}({name})",
            "calls": calls,
            "own_seconds": own,
            "cumulative_seconds": cumulative,
            "own_fraction": own / total,
        }
        for (file, line, name), (_, calls, own, cumulative, _) in by_own
    ]
    return {
        "profiled_steps": steps,
        "total_seconds": total,
        "phase_cumulative_seconds": phases,
        "hot_spots_by_own_time": hot,
    }


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


def profile_trl(args) -> dict:
    """cProfile of TRL's steps after the warm-up (switched on by the step callback)."""
    import cProfile

    profiler = cProfile.Profile()
    result = run_trl(args, profiler=profiler)
    return {**profile_summary(profiler, args.steps, TRL_PHASES), "wall_seconds": result["wall_seconds"]}


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


# ---------------------------------------------------------------- parent: orchestration, report


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
