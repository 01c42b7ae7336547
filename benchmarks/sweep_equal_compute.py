"""The tiny batch sweep read at equal compute: each smaller-batch run against the base run of the
same RL seed (batch 32, `study__scalerl__seed-I.csv`) at the compute where the smaller run stops.

A run of batch b costs b/32 of the base's compute per step, so at equal steps the two are not
comparable; at equal compute they are. For setting s and seed i, over the last k evaluations of the
smaller run (compute c_j, pass rate y_j):

    level_s,i   = mean_j y_j
    level_ref,i = mean_j y_ref(c_j)          y_ref linearly interpolated in compute on the base's curve
    gain_i      = level_s,i - level_ref,i     (paired: the same RL seed, so the same prompt order)

and over the seeds mean(gain) +- t_q(n - 1) sd(gain) / sqrt(n), q = (1 + level) / 2. Curves come
from benchmarks/data/tiny_mod10_runs (kept by `python -m benchmarks.study_table --export`). Prints
the markdown table and writes benchmarks/results/sweep_equal_compute.json. A script, not a test.

    python -m benchmarks.sweep_equal_compute
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np

from benchmarks.common import DATA_DIR, REPO, RESULTS_DIR, accept_quick, command_line, paired_interval, write_result
from scalerl.errors import InputError
from scalerl.forecast.readers import read_curve as read_logged_curve

CURVES = DATA_DIR / "tiny_mod10_runs"
OUT = RESULTS_DIR / "sweep_equal_compute.json"
SWEEP_FILE = re.compile(r"sweep__(?P<setting>.+)__seed-(?P<seed>\d+)\.csv")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--curves", type=Path, default=CURVES, help="folder of sweep__SETTING__seed-I.csv curves")
    parser.add_argument("--reference", default="study__scalerl", help="file stem of the reference runs (seed-I added)")
    parser.add_argument("--last", type=int, default=4, help="evaluations at the end of the smaller run (default 4)")
    parser.add_argument("--level", type=float, default=0.9, help="level of the paired interval (default 0.9)")
    parser.add_argument("--out", type=Path, default=OUT, help="JSON written here")
    accept_quick(parser)
    return parser.parse_args(argv)


def read_curve(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(flops, val_pass_rate) of a step,flops,val_pass_rate CSV, by the forecaster's reader (which
    names a missing column, a non-finite value or a compute that does not increase)."""
    try:
        curve = read_logged_curve(path, x="flops", y="val_pass_rate")
    except InputError as error:
        raise SystemExit(f"{path}: {error}") from None
    return curve.compute, curve.reward


def equal_compute_levels(compute, values, ref_compute, ref_values, last: int) -> tuple[float, float]:
    """(mean of the last `last` values, mean of the reference interpolated at their computes).

    level = mean_j y_j,  level_ref = mean_j y_ref(c_j), j over the last `last` evaluations; y_ref is
    the linear interpolation of the reference curve in compute, which must reach max_j c_j."""
    tail_compute, tail_values = np.asarray(compute)[-last:], np.asarray(values)[-last:]
    if tail_compute[-1] > ref_compute[-1]:
        raise ValueError(f"the reference stops at {ref_compute[-1]:.3g} FLOPs, before {tail_compute[-1]:.3g}")
    return float(tail_values.mean()), float(np.interp(tail_compute, ref_compute, ref_values).mean())


def setting_order(path: Path) -> tuple:
    """Settings in the order of their value where it is a number (batch 8 before 16), then by name."""
    match = SWEEP_FILE.fullmatch(path.name)
    if not match:
        return (2, path.name)
    value = match["setting"].rsplit("-", 1)[-1]
    try:
        return (0, float(value), int(match["seed"]))
    except ValueError:
        return (1, match["setting"], int(match["seed"]))


def sweep_files(curves: Path) -> dict[str, dict[int, Path]]:
    """{setting: {seed index: path}} of the sweep curves in the folder."""
    found: dict[str, dict[int, Path]] = {}
    for path in sorted(curves.glob("sweep__*__seed-*.csv"), key=setting_order):
        match = SWEEP_FILE.fullmatch(path.name)
        if match:
            found.setdefault(match["setting"], {})[int(match["seed"])] = path
    return found


def setting_rows(curves: Path, reference: str, last: int, level: float) -> list[dict]:
    rows = []
    for setting, paths in sweep_files(curves).items():
        seeds = []
        for seed_index, path in sorted(paths.items()):
            ref_path = curves / f"{reference}__seed-{seed_index}.csv"
            if not ref_path.is_file():
                raise SystemExit(f"no reference run {ref_path.name} for {path.name}")
            compute, values = read_curve(path)
            ref_compute, ref_values = read_curve(ref_path)
            try:
                mine, theirs = equal_compute_levels(compute, values, ref_compute, ref_values, last)
            except ValueError as error:
                raise SystemExit(f"{path.name}: {error}") from None
            seeds.append(
                {
                    "seed": seed_index,
                    "end_flops": float(compute[-1]),
                    "level": mine,
                    "reference_level": theirs,
                    "gain": mine - theirs,
                }
            )
        gains = [s["gain"] for s in seeds]
        rows.append(
            {
                "setting": setting,
                "seeds": seeds,
                "gain": paired_interval(gains, level),
                "ahead": sum(g > 0 for g in gains),
            }
        )
    return rows


def markdown(rows: list[dict], level: float, last: int) -> str:
    pct = int(round(100 * level))
    lines = [
        f"| setting | stops at (FLOPs, seed mean) | its last {last} evaluations (per seed) | batch 32 at the same "
        f"compute (per seed) | paired gain [{pct} %] | ahead in |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        seeds = row["seeds"]
        end = float(np.mean([s["end_flops"] for s in seeds]))
        gain = row["gain"]
        interval = (
            f"{gain['mean']:+.3f}"
            if gain["lo"] is None
            else f"{gain['mean']:+.3f} [{gain['lo']:+.3f}, {gain['hi']:+.3f}]"
        )
        levels = " / ".join(f"{s['level']:.3f}" for s in seeds)
        reference_levels = " / ".join(f"{s['reference_level']:.3f}" for s in seeds)
        lines.append(
            f"| `{row['setting']}` | {end:.2e} | {levels} | {reference_levels} | {interval} | "
            f"{row['ahead']} of {len(seeds)} seeds |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.last < 1:
        print("--last must be at least 1", file=sys.stderr)
        return 2
    rows = setting_rows(args.curves, args.reference, args.last, args.level)
    if not rows:
        print(f"no sweep__SETTING__seed-I.csv curves in {args.curves}", file=sys.stderr)
        return 2
    print(markdown(rows, args.level, args.last))
    curves = args.curves.resolve()
    curves_text = str(curves.relative_to(REPO)) if curves.is_relative_to(REPO) else str(curves)
    write_result(
        args.out,
        {"curves": curves_text, "reference": args.reference, "last": args.last, "level": args.level, "rows": rows},
        command_line("sweep_equal_compute", argv),
    )
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
