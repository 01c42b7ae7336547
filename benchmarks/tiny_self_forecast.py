"""Benchmark: does a run of the built-in setting predict its own second half?

The runs in benchmarks/data/tiny_runs (validation curves of the demo, the tiny leave-one-out study
and the batch sweep, all on the plain-sums setting, 4-operand one-digit addition; sources in SOURCES.md;
`--data benchmarks/data/tiny_mod10_runs` for the demo's setting, sums modulo 10) are each fitted on the
first half of their compute, as `scalerl demo` does (scalerl.train.demo.forecast_from_metrics), and
the later evaluations are compared with the extrapolated curve and its band. Per run: held-out
evaluations, how many the band holds, mean abs error. Overall: the share of all held-out
evaluations inside the band (an 80 % band should hold about 80 %), how many runs hold at least
70 % (the demo's target), the median and the lowest per-run share. None of these curves was used
to choose the forecaster's forms or its band scale (those come from the real curves of
`python -m benchmarks.forecast_accuracy`), so this is an out-of-sample check.

Known ceiling: the runs in benchmarks/data/tiny_capped_runs are on the built-in task with a hard
share (`task.hard_fraction=0.25`: 32 of the 128 validation prompts need a worked solution longer
than the thinking budget; the policy never solves them, so the validation pass rate can never
exceed 0.75). Each is fitted on all its evaluations, as `scalerl fit` does, and the fitted ceiling A
and its 80 % interval are checked against that bound: an honest interval must reach down to 0.75
or below. A script, not a test: prints tables, writes JSON.

    python -m benchmarks.tiny_self_forecast                       # ~20 s
    python -m benchmarks.tiny_self_forecast --fit-fraction 0.25   # forecast from the first quarter
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.common import DATA_DIR, REPO, RESULTS_DIR, accept_quick, command_line, interval_score, write_result

DATA = DATA_DIR / "tiny_runs"
CAPPED_DATA = DATA_DIR / "tiny_capped_runs"
# 96 of the 128 validation prompts are solvable: 1 - round(0.25 * 128) / 128 (SOURCES.md there)
KNOWN_CEILING = 0.75
RESULTS = RESULTS_DIR / "tiny_self_forecast.json"
TARGET_PER_RUN = 0.7


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--fit-fraction", type=float, default=0.5, help="share of the compute fitted (default 0.5, the demo's)"
    )
    parser.add_argument("--level", type=float, default=0.8, help="band level (default 0.8, the demo's)")
    parser.add_argument("--data", type=Path, default=DATA, help="folder of step,flops,val_pass_rate CSVs")
    parser.add_argument(
        "--capped-data",
        type=Path,
        default=CAPPED_DATA,
        help=f"runs whose validation pass rate cannot exceed {KNOWN_CEILING} (the A check)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"JSON results (default {RESULTS.relative_to(REPO)}; another name for another --fit-fraction)",
    )
    accept_quick(parser)
    return parser.parse_args(argv)


def score_run(path: Path, fit_fraction: float, level: float) -> dict:
    """The demo's first-part forecast of one run and how its band held the rest; and the fit on
    every evaluation (as `scalerl fit`) with its ceiling."""
    from scalerl.errors import ScaleRLError
    from scalerl.forecast.readers import read_curve
    from scalerl.train.demo import forecast_from_metrics

    group = path.stem.split("__", 1)[0]
    try:
        report = forecast_from_metrics(path, fit_fraction=fit_fraction, level=level)
        curve = read_curve(path, x="flops", y="val_pass_rate")
    except ScaleRLError as error:
        return {"run": path.stem, "group": group, "error": str(error)}
    whole = report.whole  # the fit on every evaluation, as `scalerl fit` gives it
    if whole is None:
        return {"run": path.stem, "group": group, "error": "the whole run cannot be fitted"}
    inside = int(sum(point.inside_band for point in report.held_out))
    scores = [float(interval_score(p.lower, p.upper, p.observed, level)) for p in report.held_out]
    return {
        "run": path.stem,
        "group": group,
        "error": None,
        "held_out": len(report.held_out),
        "inside": inside,
        "coverage": report.band_coverage,
        "mean_abs_error": report.mean_abs_error,
        "interval_score_sum": float(sum(scores)),
        "A_all_points": whole.a,
        "A_interval_all_points": list(whole.conf_int(level)["A"]),
        "B_all_points": whole.b,
        "ceiling_identified_all_points": bool(whole.ceiling_identified),
        "ceiling_at_bound_all_points": bool(whole.ceiling_at_bound),
        "last_value": float(curve.reward[-1]),
        "max_value": float(curve.reward.max()),
    }


def ceiling_check(run: dict, known_ceiling: float = KNOWN_CEILING) -> dict:
    """A scored run's all-point ceiling against a known bound: does the A interval admit it?"""
    if run["error"]:
        return {"run": run["run"], "error": run["error"]}
    low, high = run["A_interval_all_points"]
    return {
        "run": run["run"],
        "error": None,
        "A": run["A_all_points"],
        "A_interval": [low, high],
        "B": run["B_all_points"],
        "known_ceiling": known_ceiling,
        "interval_admits_bound": bool(low <= known_ceiling),
        "ceiling_identified": run["ceiling_identified_all_points"],
        "last_value": run["last_value"],
        "max_value": run["max_value"],
    }


def summary(scored: list[dict]) -> dict:
    """Pooled coverage (held-in evaluations / held-out evaluations), per-run coverage spread."""
    fitted = [run for run in scored if run["error"] is None and run["held_out"]]
    if not fitted:
        return {"runs": len(scored), "runs_fitted": 0}
    per_run = np.array([run["coverage"] for run in fitted])
    inside, total = sum(run["inside"] for run in fitted), sum(run["held_out"] for run in fitted)
    return {
        "runs": len(scored),
        "runs_fitted": len(fitted),
        "held_out": total,
        "inside": inside,
        "pooled_coverage": inside / total,
        "runs_at_least_target": int((per_run >= TARGET_PER_RUN).sum()),
        "target_per_run": TARGET_PER_RUN,
        "median_run_coverage": float(np.median(per_run)),
        "lowest_run_coverage": float(per_run.min()),
        "mean_abs_error_median": float(np.median([run["mean_abs_error"] for run in fitted])),
        "mean_interval_score": sum(run["interval_score_sum"] for run in fitted) / total,
    }


def table(scored: list[dict]) -> str:
    lines = [
        "run | held out | inside band | coverage | mean abs error | A [80 %], all points",
        "--- | --- | --- | --- | --- | ---",
    ]
    for run in scored:
        if run["error"]:
            lines.append(f"{run['run']} | - | - | - | no fit: {run['error']} | -")
        else:
            low, high = run["A_interval_all_points"]
            limit = " (limit)" if run["ceiling_at_bound_all_points"] else ""
            lines.append(
                f"{run['run']} | {run['held_out']} | {run['inside']} | {run['coverage']:.0%} | "
                f"{run['mean_abs_error']:.3f} | {run['A_all_points']:.3f}{limit} [{low:.3f}, {high:.3f}]"
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    paths = sorted(args.data.glob("*.csv"))
    capped_paths = sorted(args.capped_data.glob("*.csv")) if args.capped_data.is_dir() else []
    if not paths:
        print(f"no run CSVs in {args.data}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    scored = [score_run(path, args.fit_fraction, args.level) for path in [*paths, *capped_paths]]
    ceilings = [ceiling_check(run) for run in scored[len(paths) :]]
    seconds = time.perf_counter() - started
    groups = sorted({run["group"] for run in scored})
    result = {
        "fit_fraction": args.fit_fraction,
        "level": args.level,
        "seconds": seconds,
        "summary": summary(scored),
        "by_group": {group: summary([r for r in scored if r["group"] == group]) for group in groups},
        "runs": scored,
        "known_ceiling": {
            "bound": KNOWN_CEILING,
            "runs": ceilings,
            "intervals_admitting_bound": sum(bool(c.get("interval_admits_bound")) for c in ceilings),
            "fitted": sum(c["error"] is None for c in ceilings),
        },
    }
    print(table(scored))
    print()
    if ceilings:
        print(f"known ceiling {KNOWN_CEILING} (validation pass rate cannot exceed it); fit on every evaluation:")
        print("run | A [80 %] | B | identified | interval reaches the bound | highest value seen")
        print("--- | --- | --- | --- | --- | ---")
        for check in ceilings:
            if check["error"]:
                print(f"{check['run']} | no fit: {check['error']} | | | |")
                continue
            low, high = check["A_interval"]
            print(
                f"{check['run']} | {check['A']:.3f} [{low:.3f}, {high:.3f}] | {check['B']:.2f} | "
                f"{'yes' if check['ceiling_identified'] else 'no'} | {'yes' if check['interval_admits_bound'] else 'NO'} | "
                f"{check['max_value']:.3f}"
            )
        print()
    for name, part in [("all", result["summary"]), *result["by_group"].items()]:
        if part.get("runs_fitted"):
            print(
                f"{name}: {part['inside']} of {part['held_out']} held-out evaluations inside the {args.level:.0%} band "
                f"({part['pooled_coverage']:.0%}); {part['runs_at_least_target']} of {part['runs_fitted']} runs hold "
                f">= {TARGET_PER_RUN:.0%}; per run median {part['median_run_coverage']:.0%}, lowest {part['lowest_run_coverage']:.0%}"
            )
    out = args.out or (
        RESULTS if args.fit_fraction == 0.5 else RESULTS.with_name(f"tiny_self_forecast_fit{args.fit_fraction:g}.json")
    )
    write_result(out, result, command_line("tiny_self_forecast", argv))
    print(f"written: {out.relative_to(REPO) if out.is_relative_to(REPO) else out} ({seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
