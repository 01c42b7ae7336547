"""The README's table of the tiny leave-one-out study, built from its results and its curves.

Reads the leave-one-out part of benchmarks/results/ablation_tiny.json (the paired rule's verdicts,
paired dA and dB with their intervals, per-seed fits) and each run's validation curve, and adds
what the report leaves out: the plateau of each run (the mean of the last quarter of its
evaluations, ceil(n / 4) of them) and the paired difference of plateaus, variant minus base on the
same RL seed, with its paired t-interval at the study's verdict level:

    d_i = plateau(variant, seed i) - plateau(base, seed i),   mean(d) +- t_q(n - 1) sd(d) / sqrt(n)

(q = (1 + level) / 2). Curves come from --curves (study__SLUG__seed-I.csv, step,flops,val_pass_rate);
--export first copies them there from the runs' metrics.jsonl named in the results (the workdir of
`python -m benchmarks.ablation_tiny`), with the batch sweep's (sweep__SLUG__seed-I.csv; the batch
setting that is the base's runs is not copied twice), so a clone keeps the curves behind the table. Prints the
markdown table and writes JSON. A script, not a test.

    python -m benchmarks.study_table --export     # after ablation_tiny, while its workdir exists
    python -m benchmarks.study_table              # from the curves kept in benchmarks/data
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
from pathlib import Path

import numpy as np

from benchmarks.common import (
    DATA_DIR,
    REPO,
    RESULTS_DIR,
    accept_quick,
    command_line,
    paired_interval,
    write_result,
    write_text,
)

RESULTS = RESULTS_DIR / "ablation_tiny.json"
CURVES = DATA_DIR / "tiny_mod10_runs"
OUT = RESULTS_DIR / "ablation_tiny_table.json"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="ablation_tiny.py's JSON results")
    parser.add_argument("--curves", type=Path, default=CURVES, help="folder of study__SLUG__seed-I.csv curves")
    parser.add_argument(
        "--export", action="store_true", help="first copy each run's evaluations from its metrics.jsonl"
    )
    parser.add_argument("--out", type=Path, default=OUT, help="JSON written here")
    accept_quick(parser)
    return parser.parse_args(argv)


def curve_file(curves: Path, slug: str, seed_index: int, kind: str = "study") -> Path:
    return curves / f"{kind}__{slug}__seed-{seed_index}.csv"


def export_runs(study: dict, curves: Path, kind: str, skip: set[Path] = frozenset()) -> set[Path]:
    """Copy every run's evaluations to curves/KIND__SLUG__seed-I.csv, except runs whose
    metrics.jsonl (resolved) is in `skip`: a sweep setting that is the leave-one-out base, linked,
    is kept once, as the study's curve. Returns the resolved metrics paths exported."""
    exported = set()
    for variant in study["variants"]:
        for index, seed in enumerate(variant["seeds"]):
            metrics = Path(seed["metrics"]).resolve()
            if metrics in skip:
                continue
            export_curve(metrics, curve_file(curves, variant["slug"], index, kind))
            exported.add(metrics)
    return exported


def evaluation_rows(metrics_path: Path) -> list[tuple[int, float, float]]:
    """(step, flops, val_pass_rate) of every evaluation row of a run's metrics.jsonl."""
    rows = []
    with open(metrics_path) as handle:
        for line_number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise SystemExit(f"{metrics_path}:{line_number}: not JSON ({error})") from None
            if "val_pass_rate" in record:
                rows.append((int(record["step"]), float(record["flops"]), float(record["val_pass_rate"])))
    return rows


def export_curve(metrics_path: Path, target: Path) -> None:
    rows = evaluation_rows(metrics_path)
    if not rows:
        raise SystemExit(f"{metrics_path}: no evaluation rows (val_pass_rate)")
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["step", "flops", "val_pass_rate"])
    writer.writerows([step, repr(flops), repr(value)] for step, flops, value in rows)
    write_text(target, text.getvalue())


def read_values(path: Path) -> np.ndarray:
    if not path.is_file():
        raise SystemExit(f"missing curve {path}: run with --export while the study's workdir exists")
    with open(path, newline="") as handle:
        return np.array([float(row["val_pass_rate"]) for row in csv.DictReader(handle)])


def plateau(values: np.ndarray) -> float:
    """Mean of the last quarter of the evaluations: ceil(n / 4) of them."""
    return float(np.mean(values[-math.ceil(values.size / 4) :]))


def signed(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:+.{digits}f}"


def interval_text(stats: dict | None, digits: int = 3) -> str:
    if not stats or stats.get("lo") is None:
        return "-"
    return f"{signed(stats['mean'], digits)} [{signed(stats['lo'], digits)}, {signed(stats['hi'], digits)}]"


def variant_rows(study: dict, curves: Path) -> list[dict]:
    level = float(study.get("verdict_level", 0.9))
    plateaus = {
        v["slug"]: [plateau(read_values(curve_file(curves, v["slug"], i))) for i in range(len(v["seeds"]))]
        for v in study["variants"]
    }
    base = next(v for v in study["variants"] if v["is_base"])
    rows = []
    for variant in study["variants"]:
        seeds = variant["seeds"]
        identified = sum(bool(s.get("ceiling_identified")) for s in seeds)
        row = {
            "slug": variant["slug"],
            "knob": variant["knob"],
            "is_base": variant["is_base"],
            "A": variant["params"]["A"],
            "B": variant["params"]["B"],
            "identified": identified,
            "seeds": len(seeds),
            "plateaus": plateaus[variant["slug"]],
            "plateau_mean": float(np.mean(plateaus[variant["slug"]])),
            "paper": variant.get("paper", "-"),
            "effect": variant.get("effect"),
        }
        if not variant["is_base"]:
            pairs = min(len(seeds), len(base["seeds"]))
            row["paired_d_plateau"] = paired_interval(
                [plateaus[variant["slug"]][i] - plateaus[base["slug"]][i] for i in range(pairs)], level
            )
        rows.append(row)
    return rows


def markdown(rows: list[dict], study: dict) -> str:
    level = int(round(100 * float(study.get("verdict_level", 0.9))))
    fit_level = int(round(100 * float(study.get("level", 0.8))))
    lines = [
        f"| knob flipped | A (seed mean) [{fit_level} %] | B (seed mean) | plateau (last quarter, seed mean) | "
        f"paired d plateau [{level} %] | paired dA [{level} %] | paired dB at shared A [{level} %] | verdict | "
        "pairs agree | paper |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        a = row["A"]
        a_text = f"{a['mean']:.3f} [{a['lo']:.3f}, {a['hi']:.3f}] ({row['identified']}/{row['seeds']} identified)"
        if row["is_base"]:
            lines.append(
                f"| (base: ScaleRL) | {a_text} | {row['B']['mean']:.2f} | {row['plateau_mean']:.3f} "
                "| - | - | - | - | - | - |"
            )
            continue
        effect = row["effect"] or {}
        agreement = effect.get("agreement") or {}
        agree = f"{agreement.get('agreeing', '-')}/{agreement.get('pairs', '-')}"
        lines.append(
            f"| `{row['knob']}` | {a_text} | {row['B']['mean']:.2f} | {row['plateau_mean']:.3f} | "
            f"{interval_text(row['paired_d_plateau'])} | {interval_text(effect.get('paired_delta_A'))} | "
            f"{interval_text(effect.get('paired_delta_B'))} | {effect.get('label', '-')} | {agree} | "
            f"{row['paper']} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    if not args.results.is_file():
        print(f"no results at {args.results}: run python -m benchmarks.ablation_tiny first", file=sys.stderr)
        return 2
    study = json.loads(args.results.read_text()).get("leave_one_out")
    if not study:
        print(f"{args.results} has no leave-one-out study", file=sys.stderr)
        return 2
    if args.export:
        exported = export_runs(study, args.curves, "study")
        sweep = json.loads(args.results.read_text()).get("sweep")
        if sweep:
            export_runs(sweep, args.curves, "sweep", skip=exported)
    rows = variant_rows(study, args.curves)
    print(markdown(rows, study))
    results = args.results.resolve()
    write_result(
        args.out,
        {"results": str(results.relative_to(REPO)) if results.is_relative_to(REPO) else str(results), "rows": rows},
        command_line("study_table", argv),
    )
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
