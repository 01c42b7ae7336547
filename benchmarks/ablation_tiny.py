"""Benchmark: the paper's leave-one-out study and a batch-size sweep in miniature, on the built-in
model and task, with paired seeds (one shared warm start; seed i of every variant on the same RL
seed), classified by the paired rule of `scalerl ablate` (moves the ceiling / moves efficiency only
/ no measurable effect at the margin / undecided, with the agreement of the seed pairs; --margin,
default the paper's 0.02). A script, not a test.

    python -m benchmarks.ablation_tiny --sweep none   # the leave-one-out study: about 1.5 h on 2 free CPU cores
    python -m benchmarks.ablation_tiny --steps 200 --seeds 5 --workdir DIR   # the published one, with the sweep: ~2.5 h
    python -m benchmarks.ablation_tiny --quick    # end-to-end check: 1 seed, 2 knobs, a few steps (~3 min)

Setting: the demo's (train/demo.py DEMO_OVERRIDES: sums modulo 10 with an unsolvable quarter,
greedy validation of 512 held-out prompts, 32 prompts x 16 generations) and its 250 steps, whose
curves level off from step ~80-100, so each run's ceiling can be read. Budget: the base and 5
leave-one-out variants x 3 seeds = 18 runs, plus batch sizes 8 and 16 x 3 seeds (batch 32 is the
base's runs, linked, not retrained) = 6 runs costing a quarter and a half of a base run: about 20
base-run equivalents of 250 steps at ~2 s per single-thread step two at a time (~1 s alone), run
two at a time on Ray (1 CPU each): about 80 min for the leave-one-out study, plus one warm start.
Writes docs/ablation_tiny.{md,png}, docs/ablation_tiny_sweep.{md,png} and
benchmarks/results/ablation_tiny.json (--quick: only the JSON, as ablation_tiny_quick.json).
Finished runs under --workdir are reused: rerun the same command to continue after a stop.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from benchmarks.common import DOCS_DIR, RESULTS_DIR, command_line, copy_file, write_result, write_text

# The paper's leave-one-out knobs. model.fp32_head=false is left out: in float32 it
# repeats the base exactly, and bfloat16 on a CPU is several times slower.
KNOBS = ("loss=dapo", "aggregation=sample", "adv_norm=none", "zero_var_filter=false", "no_positive_resampling=false")
QUICK_KNOBS = ("loss=dapo", "adv_norm=none")
SWEEP = "batch_prompts=8,16,32"
QUICK_SWEEP = "batch_prompts=8,32"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 seed, 2 knobs, 2 batch sizes, a few steps")
    parser.add_argument(
        "--steps", type=int, default=None, help="optimiser steps per run (default: the demo's max_steps; quick 12)"
    )
    parser.add_argument("--eval-every", type=int, default=None, help="default 10, the demo's (quick 3)")
    parser.add_argument("--seeds", type=int, default=None, help="default 3 (quick 1)")
    parser.add_argument("--knobs", default=None, help="comma-separated knob=value list of the leave-one-out study")
    parser.add_argument(
        "--sweep",
        default=None,
        help=f"the sweep (default {SWEEP}; quick {QUICK_SWEEP}; 'none' for the leave-one-out study alone)",
    )
    parser.add_argument("--margin", type=float, default=None, help="margin on A (default: the paper's 0.02)")
    parser.add_argument("--sequential", action="store_true", help="train one run at a time instead of on Ray")
    parser.add_argument("--parallel-runs", type=int, default=2, help="runs at once on Ray (1 CPU each)")
    parser.add_argument("--workdir", default=None, help="default runs/bench_ablation_tiny (quick: ..._quick)")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="JSON results (default benchmarks/results/ablation_tiny.json, quick: ablation_tiny_quick.json); "
        "the docs pages are published only by a full run to the default place",
    )
    return parser.parse_args(argv)


def settings(args) -> dict:
    """The study's settings, quick or full, with the command-line overrides applied."""
    quick = args.quick
    return {
        "quick": quick,
        "steps": args.steps or (12 if quick else demo_steps()),
        "eval_every": args.eval_every or (3 if quick else 10),
        "seeds": args.seeds or (1 if quick else 3),
        "margin": args.margin,
        "knobs": tuple(args.knobs.split(",")) if args.knobs else (QUICK_KNOBS if quick else KNOBS),
        "sweep": args.sweep or (QUICK_SWEEP if quick else SWEEP),
        "parallel_runs": 0 if args.sequential else args.parallel_runs,
        "workdir": Path(args.workdir or ("runs/bench_ablation_tiny_quick" if quick else "runs/bench_ablation_tiny")),
    }


SCHEDULE_KEYS = ("max_steps", "eval_every", "checkpoint_every")


def demo_steps() -> int:
    """The demo's run length (train/demo.py DEMO_OVERRIDES)."""
    from scalerl.train.demo import demo_config

    return demo_config().max_steps


def demo_setting() -> list[str]:
    """The demo's model, warm start, task and evaluation (train/demo.py DEMO_OVERRIDES), without
    its schedule: the study's base is the run `scalerl demo` makes."""
    from scalerl.train.demo import DEMO_OVERRIDES

    return [item for item in DEMO_OVERRIDES if item.split("=", 1)[0] not in SCHEDULE_KEYS]


def common_overrides(config: dict) -> list[str]:
    """Shared by every run: the demo's setting, steps, evaluation schedule, checkpoints, one torch thread."""
    every = config["eval_every"]
    return [
        *demo_setting(),
        f"max_steps={config['steps']}",
        f"eval_every={every}",
        f"checkpoint_every={max(every, 20)}",
        "torch_threads=1",
    ]


def link_reused_runs(sweep_plan, loo_plan, workdir: Path) -> list[str]:
    """A sweep setting whose config is the leave-one-out base's (batch 32 = the default) is not
    trained again: workdir/sweep/<setting> becomes a link to workdir/loo/<base>."""
    from scalerl.study.study_runs import variant_config

    base = loo_plan.variants[0]
    linked = []
    for variant in sweep_plan.variants:
        link = workdir / "sweep" / variant.slug
        same = all(
            variant_config(sweep_plan, variant, k) == variant_config(loo_plan, base, k) for k in range(sweep_plan.seeds)
        )
        if same and not link.exists() and sweep_plan.seeds == loo_plan.seeds:
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(Path("..") / "loo" / base.slug, target_is_directory=True)
            linked.append(variant.slug)
    return linked


def run_and_report(plan, out_dir: Path, config: dict, command: str):
    """Train the plan's runs (skip finished, resume partial), then fit, classify and write outputs."""
    from scalerl.study.ablate_analysis import build_ablation_report
    from scalerl.study.ablation_markdown import markdown_text
    from scalerl.study.ablation_views import write_ablation_outputs
    from scalerl.study.study_runs import RayOptions, report_runs, run_study

    ray_options = RayOptions(1.0, "", config["parallel_runs"]) if config["parallel_runs"] else None
    started = time.perf_counter()
    run_study(
        plan,
        out_dir,
        show_progress=ray_options is None,
        ray_options=ray_options,
        log=lambda line: print(line, flush=True),
    )
    train_seconds = time.perf_counter() - started
    report = build_ablation_report(
        report_runs(plan, out_dir),
        kind=plan.kind,
        sweep_knob=plan.sweep_knob,
        seeds=plan.seeds,
        margin=config["margin"],
    )
    written = write_ablation_outputs(report, out_dir, command, design=plan.design())
    return report, markdown_text(report, command, plan.design()), written, train_seconds


def publish(written: list[Path], stem: str) -> list[Path]:
    """Copy <out>/{ablation,sweep}.md/.png to docs/<stem>.md/.png (atomically)."""
    published = []
    for path in written:
        if path.suffix in (".md", ".png"):
            target = DOCS_DIR / f"{stem}{path.suffix}"
            published.append(copy_file(path, target))
    return published


def fix_figure_links(markdown_path: Path, figure_name: str) -> None:
    """The published markdown shows its figure (docs/<stem>.png) under the title."""
    text = markdown_path.read_text()
    lines = text.split("\n", 2)
    write_text(markdown_path, f"{lines[0]}\n\n![all curves with their fits]({figure_name})\n{lines[1]}\n{lines[2]}")


def main(argv=None) -> int:
    from scalerl.study.ablate_plan import plan_leave_one_out, plan_sweep
    from scalerl.study.ablation_payload import report_payload

    args = parse_args(argv)
    config = settings(args)
    command = command_line("ablation_tiny", argv)
    workdir = config["workdir"]
    loo_plan = plan_leave_one_out(
        "scalerl", config["knobs"], common_overrides=common_overrides(config), seeds=config["seeds"]
    )
    sweep_plan = (
        None
        if config["sweep"] == "none"
        else plan_sweep("scalerl", config["sweep"], common_overrides=common_overrides(config), seeds=config["seeds"])
    )
    sweep_size = (
        "no sweep"
        if sweep_plan is None
        else f"sweep {config['sweep']}: {len(sweep_plan.variants)} settings x {config['seeds']} seeds"
    )
    print(
        f"leave-one-out: {len(loo_plan.variants)} variants x {config['seeds']} seeds; {sweep_size}; "
        f"{config['steps']} steps each",
        flush=True,
    )
    loo, loo_md, loo_written, loo_seconds = run_and_report(loo_plan, workdir / "loo", config, command.strip())
    print(loo_md, flush=True)
    sweep = sweep_written = sweep_seconds = None
    if sweep_plan is not None:
        for slug in link_reused_runs(sweep_plan, loo_plan, workdir):
            print(f"sweep setting {slug} is the leave-one-out base: its runs are reused", flush=True)
        sweep, sweep_md, sweep_written, sweep_seconds = run_and_report(
            sweep_plan, workdir / "sweep", config, command.strip()
        )
        print(sweep_md, flush=True)
    payload = {
        "settings": {**config, "workdir": str(workdir), "knobs": list(config["knobs"])},
        "train_seconds": {"leave_one_out": loo_seconds, "sweep": sweep_seconds},
        "leave_one_out": report_payload(loo, loo_plan.design()),
        "sweep": None if sweep_plan is None else report_payload(sweep, sweep_plan.design()),
    }
    results = args.out or RESULTS_DIR / ("ablation_tiny_quick.json" if config["quick"] else "ablation_tiny.json")
    write_result(results, payload, command)
    print(f"written: {results}")
    if not config["quick"] and args.out is None:
        for written, stem in ((loo_written, "ablation_tiny"), (sweep_written or [], "ablation_tiny_sweep")):
            published = publish(written, stem)
            if (DOCS_DIR / f"{stem}.png") in published:
                fix_figure_links(DOCS_DIR / f"{stem}.md", f"{stem}.png")
            print("written:", ", ".join(str(path) for path in published))
    return 0


if __name__ == "__main__":
    sys.exit(main())
