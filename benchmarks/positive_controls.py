"""Benchmark: positive controls of the paired verdict, on the built-in model and task. Two knobs
whose effect is known by construction, run over paired seeds with the same engine and rule as the
leave-one-out study (benchmarks/ablation_tiny.py, `scalerl ablate`). A script, not a test.

    python -m benchmarks.positive_controls            # 5 seeds x (base + 2 controls), 200 steps (resumable)
    python -m benchmarks.positive_controls --quick    # end-to-end check: 1 seed, a few steps

- Ceiling mover: `task.hard_fraction` 0.25 -> 0.5. A hard prompt has 12 operands, whose worked
  solution is longer than the thinking budget: no policy solves it but by a lucky guess of the final
  digit (1 in 10 for a uniform guess). The attainable pass rate of a validation pool with a share u
  of hard prompts is bound(u) = (1 - u) + u / 10, so the constructed difference of ceilings is
  bound(u_variant) - bound(u_base) = -(u_variant - u_base) * 9 / 10 (u: the pools' actual shares).
  Acceptance: the knob "moves the ceiling (down)" and dA_i within 0.03 of that in >= 4 of 5 pairs.
- Efficiency-only mover: `optim.lr` 1e-4 -> 5e-5. Half the step size slows the rise but changes
  nothing about which prompts can be solved; expected "moves efficiency only (down)", or
  "undecided" (with the reason the engine gives, e.g. a run not bent over), never "moves the ceiling".

Setting: the demo's (train/demo.py DEMO_OVERRIDES, as benchmarks.ablation_tiny), on one torch
thread per run, two runs at a time. Finished runs under --workdir are reused, partial ones resume:
rerun the same command to continue after a stop. Writes benchmarks/results/positive_controls.json
(--quick: positive_controls_quick.json), with the wall time of the training, and (not --quick) copies
every run's evaluations to benchmarks/data/positive_control_runs/KIND__VARIANT__seed-I.csv (KIND:
efficiency or ceiling; the ceiling mover's base is the efficiency study's base, kept once), which
benchmarks.from_logs_verdicts judges again with today's engine in seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchmarks.ablation_tiny import common_overrides, link_reused_runs, run_and_report
from benchmarks.common import DATA_DIR, RESULTS_DIR, command_line, write_result
from benchmarks.study_table import export_runs

BASE_HARD_FRACTION = 0.25  # the demo's (train/demo.py DEMO_OVERRIDES)
HARD_FRACTION = 0.5
LOW_LR = 5e-5  # half the preset's optim.lr (1e-4)
GUESS_RATE = 0.1  # a uniform guess of the one-digit answer of a hard prompt
DA_TOLERANCE = 0.03
PAIRS_NEEDED = 4
CURVES = DATA_DIR / "positive_control_runs"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 seed, a few steps")
    parser.add_argument("--steps", type=int, default=None, help="optimiser steps per run (default 200; quick 12)")
    parser.add_argument("--eval-every", type=int, default=None, help="default 10 (quick 3)")
    parser.add_argument("--seeds", type=int, default=None, help="default 5 (quick 1)")
    parser.add_argument(
        "--hard-fraction", type=float, default=HARD_FRACTION, help="the ceiling mover's task.hard_fraction"
    )
    parser.add_argument("--lr", type=float, default=LOW_LR, help="the efficiency mover's optim.lr")
    parser.add_argument("--margin", type=float, default=None, help="margin on A (default: the paper's 0.02)")
    parser.add_argument("--sequential", action="store_true", help="train one run at a time instead of on Ray")
    parser.add_argument("--parallel-runs", type=int, default=2, help="runs at once on Ray (1 CPU each)")
    parser.add_argument("--workdir", default=None, help="default runs/bench_positive_controls (quick: ..._quick)")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="JSON results (default benchmarks/results/positive_controls.json, quick: ..._quick.json)",
    )
    return parser.parse_args(argv)


QUICK_WARMSTART_STEPS = 40


def settings(args) -> dict:
    quick = args.quick
    return {
        "quick": quick,
        "steps": args.steps or (12 if quick else 200),
        "eval_every": args.eval_every or (3 if quick else 10),
        "seeds": args.seeds or (1 if quick else 5),
        "margin": args.margin,
        "hard_fraction": args.hard_fraction,
        "lr": args.lr,
        "parallel_runs": 0 if args.sequential else args.parallel_runs,
        "workdir": Path(
            args.workdir or ("runs/bench_positive_controls_quick" if quick else "runs/bench_positive_controls")
        ),
    }


def task_bound(hard_share: float, guess_rate: float = GUESS_RATE) -> float:
    """Attainable pass rate of a pool with a share u of hard prompts: (1 - u) + u * g (every
    solvable prompt solved, a hard one only by a lucky guess, rate g)."""
    return (1.0 - hard_share) + hard_share * guess_rate


def validation_hard_share(hard_fraction: float, num_val_prompts: int) -> float:
    """The validation pool's actual share of hard prompts: round(h * n) / n (tasks.arithmetic.hard_count)."""
    return round(hard_fraction * num_val_prompts) / num_val_prompts


def constructed_delta_a(base_hard: float, variant_hard: float, num_val_prompts: int) -> float:
    """bound(u_variant) - bound(u_base) on the validation pool's actual shares."""
    return task_bound(validation_hard_share(variant_hard, num_val_prompts)) - task_bound(
        validation_hard_share(base_hard, num_val_prompts)
    )


def ceiling_check(effect: dict, expected: float, tolerance: float = DA_TOLERANCE) -> dict:
    """Pairs whose own verdict is 'moves the ceiling' with the expected sign and |dA_i - expected| <=
    tolerance; passes when the knob's verdict is that too and >= PAIRS_NEEDED pairs (or all, if fewer) do."""
    sign = "down" if expected < 0 else "up"
    good = [
        pair["seed"]
        for pair in effect["pairs"]
        if pair["verdict"] == "moves the ceiling"
        and pair["direction"] == sign
        and pair["delta_A"] is not None
        and abs(pair["delta_A"] - expected) <= tolerance
    ]
    needed = min(PAIRS_NEEDED, len(effect["pairs"]))
    passed = effect["effect"] == "moves the ceiling" and effect["direction"] == sign and len(good) >= needed
    return {
        "expected_delta_A": expected,
        "tolerance": tolerance,
        "pairs_within": len(good),
        "pairs": len(effect["pairs"]),
        "pairs_needed": needed,
        "passed": passed,
    }


def efficiency_check(effect: dict) -> dict:
    """Passes unless the knob or any pair says 'moves the ceiling'; 'exact' when the knob's verdict
    is 'moves efficiency only'."""
    ceiling_pairs = sum(pair["verdict"] == "moves the ceiling" for pair in effect["pairs"])
    return {
        "verdict": effect["label"],
        "exact": effect["effect"] == "moves efficiency only",
        "ceiling_pairs": ceiling_pairs,
        "reason": effect["reason"],
        "passed": effect["effect"] != "moves the ceiling",
    }


def run_device_hours(workdir: Path) -> dict:
    """Each run's own device time (`device_hours` of its last metrics row), every run folder under
    `workdir` counted once (the ceiling mover's base setting links the base's runs): what training
    took whatever the sessions a resumed design was spread over."""
    hours = {}
    for path in sorted(workdir.rglob("metrics.jsonl")):
        lines = path.read_text().strip().splitlines()
        if lines:
            hours[str(path.resolve())] = float(json.loads(lines[-1]).get("device_hours") or 0.0)
    return {"runs": len(hours), "total": sum(hours.values())}


SETTLED_EVALUATIONS = 3  # a run's settled level: the mean of its last three evaluations
GROUP_COLUMNS = ("val_pass_rate", "val_pass_rate_easy", "val_pass_rate_hard")


def settled_level(rows: list[dict], column: str, last: int = SETTLED_EVALUATIONS) -> float | None:
    """Mean of `column` over the last `last` metrics rows that hold it (None when none does)."""
    values = [row[column] for row in rows if row.get(column) is not None]
    return float(sum(values[-last:]) / len(values[-last:])) if values else None


def read_rows(metrics_path: Path) -> list[dict]:
    """The rows of a metrics.jsonl file."""
    return [json.loads(line) for line in metrics_path.read_text().splitlines() if line.strip()]


def settled_by_difficulty(sweep_dir: Path) -> dict:
    """Per setting of the ceiling sweep: the settled pass rate, in all and on easy and hard prompts
    (train.validation logs one per difficulty group), averaged over its seeds. It checks the
    construction: easy prompts near 1, hard ones near the guess rate GUESS_RATE."""
    out = {}
    for setting in sorted(path for path in sweep_dir.iterdir() if path.is_dir()):
        runs = [read_rows(path) for path in sorted(setting.glob("seed-*/metrics.jsonl"))]
        levels = {column: [settled_level(rows, column) for rows in runs] for column in GROUP_COLUMNS}
        out[setting.name] = {
            "seeds": len(runs),
            **{
                column: (sum(values) / len(values) if values and None not in values else None)
                for column, values in levels.items()
            },
        }
    return out


def hard_fraction_of(overrides) -> float:
    for item in overrides:
        key, _, value = item.partition("=")
        if key == "task.hard_fraction":
            return float(value)
    raise SystemExit("error: the demo setting no longer sets task.hard_fraction")


def plans(config: dict):
    """The efficiency mover as a leave-one-out study (base: the demo setting, variant: optim.lr), the
    ceiling mover as a sweep of task.hard_fraction from the base's share (its first setting is the
    base's runs, linked, not retrained): one engine, one rule, 3 x seeds runs."""
    from scalerl.study.ablate_plan import plan_leave_one_out, plan_sweep

    overrides = common_overrides(config)
    if config["quick"]:  # a path check: short warm starts (two are needed: the ceiling mover's prompts differ)
        overrides.append(f"model.warmstart_steps={QUICK_WARMSTART_STEPS}")
    base_hard = hard_fraction_of(overrides)
    efficiency = plan_leave_one_out(
        "scalerl", [f"optim.lr={config['lr']:g}"], common_overrides=overrides, seeds=config["seeds"]
    )
    others = [item for item in overrides if not item.startswith("task.hard_fraction=")]
    ceiling = plan_sweep(
        "scalerl",
        f"task.hard_fraction={base_hard:g},{config['hard_fraction']:g}",
        common_overrides=others,
        seeds=config["seeds"],
    )
    return base_hard, efficiency, ceiling


def export_curves(result: dict, curves: Path = CURVES) -> list[Path]:
    """Copy each run's evaluations (step, flops, val_pass_rate) named in `result` (this benchmark's
    JSON; metrics paths relative to the working directory) to curves/KIND__SLUG__seed-I.csv, the
    ceiling mover's base runs (the efficiency study's base, linked) once, as efficiency__scalerl."""
    exported = export_runs(result["efficiency_study"], curves, "efficiency")
    export_runs(result["ceiling_study"], curves, "ceiling", skip=exported)
    return sorted(curves.glob("*__seed-*.csv"))


def main(argv=None) -> int:
    from scalerl.study.ablation_payload import report_payload
    from scalerl.study.study_runs import variant_config

    args = parse_args(argv)
    config = settings(args)
    command = command_line("positive_controls", argv).strip()
    workdir = config["workdir"]
    base_hard, efficiency_plan, ceiling_plan = plans(config)
    num_val = variant_config(efficiency_plan, efficiency_plan.variants[0], 0).task.num_val_prompts
    expected = constructed_delta_a(base_hard, config["hard_fraction"], num_val)
    print(
        f"positive controls: base + optim.lr={config['lr']:g} + task.hard_fraction={config['hard_fraction']:g}, "
        f"{config['seeds']} seeds, {config['steps']} steps each; constructed dA of the ceiling mover "
        f"{expected:+.3f}",
        flush=True,
    )
    started = time.perf_counter()
    efficiency, efficiency_md, _, efficiency_seconds = run_and_report(efficiency_plan, workdir / "loo", config, command)
    print(efficiency_md, flush=True)
    for slug in link_reused_runs(ceiling_plan, efficiency_plan, workdir):
        print(f"setting {slug} is the base: its runs are reused", flush=True)
    ceiling, ceiling_md, _, ceiling_seconds = run_and_report(ceiling_plan, workdir / "sweep", config, command)
    print(ceiling_md, flush=True)
    efficiency_payload = report_payload(efficiency, efficiency_plan.design())
    ceiling_payload = report_payload(ceiling, ceiling_plan.design())
    efficiency_effect = next(item["effect"] for item in efficiency_payload["variants"] if not item["is_base"])
    ceiling_effect = next(item["effect"] for item in ceiling_payload["variants"] if not item["is_base"])
    controls = {
        "ceiling_mover": {
            "knob": f"task.hard_fraction={base_hard:g}->{config['hard_fraction']:g}",
            "bound_base": task_bound(validation_hard_share(base_hard, num_val)),
            "bound_variant": task_bound(validation_hard_share(config["hard_fraction"], num_val)),
            "verdict": ceiling_effect["label"],
            **ceiling_check(ceiling_effect, expected),
            "settled_by_difficulty": settled_by_difficulty(workdir / "sweep"),
        },
        "efficiency_mover": {"knob": f"optim.lr={config['lr']:g}", **efficiency_check(efficiency_effect)},
    }
    result = {
        "settings": {**config, "workdir": str(workdir)},
        "train_seconds": {"efficiency_study": efficiency_seconds, "ceiling_study": ceiling_seconds},
        "total_seconds": time.perf_counter() - started,
        "runs": 3 * config["seeds"],
        "controls": controls,
        "run_device_hours": run_device_hours(workdir),
        "efficiency_study": efficiency_payload,
        "ceiling_study": ceiling_payload,
    }
    path = args.out or RESULTS_DIR / ("positive_controls_quick.json" if config["quick"] else "positive_controls.json")
    write_result(path, result, command)
    if not config["quick"]:
        print(f"curves copied: {len(export_curves(result))} files in {CURVES}", flush=True)
    mover = controls["ceiling_mover"]
    print(
        f"ceiling mover: {mover['verdict']}, {mover['pairs_within']}/{mover['pairs']} pairs within "
        f"{DA_TOLERANCE} of {expected:+.3f}; efficiency mover: {controls['efficiency_mover']['verdict']}"
    )
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
