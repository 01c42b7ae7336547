"""Benchmark: `scalerl ablate --from-logs` on the shared real curves (benchmarks/data/curves),
grouped by source into variants and seeds, with the time it takes per run fitted. A script, not a test.

    python -m benchmarks.from_logs_verdicts
    python -m benchmarks.from_logs_verdicts --quick --out DIR/x.json   # the path end to end: 4 runs and the refusals

Each group below is written as a manifest, benchmarks/data/from_logs/<group>.csv (path, variant,
seed, unit: the x_unit of the curves' manifest.csv), and judged exactly as the command does
(scalerl.study.from_logs): `scalerl ablate --from-logs benchmarks/data/from_logs/FILE --base B --out DIR`.
Run from the repository root. The curves have
no repeated seeds, so a "seed" is a setting both arms of a comparison were run in (a model, a
backend), which is how a paired block is used: the setting's own level cancels in each pair.

- verl-asyncreward, off-policy correction (`off_ppl`) against the synchronous baseline, paired by
  setting (Qwen2-7B on Megatron and FSDP, Qwen2.5-3B on FSDP and Megatron): 4 pairs;
- the same runs with the seed labels of the variant renamed, so no seed has a partner: the
  unpaired (Welch) interval, to show what pairing buys;
- verl-asyncreward, Megatron against FSDP (same arms, same models), paired by (model, arm): 4 pairs;
- shibuki-a5, the learning-rate sweep runs as variants: one run per learning rate, so the
  command refuses it (a variant with one seed has no interval) -- the line it prints is recorded;
- shibuki-a5, two runs logged in GPU-hours against two logged in rollout samples (a refusal
  check, not an ablation): refused, the compute units differ;
- the tiny leave-one-out study's own curves (benchmarks/data/tiny_mod10_runs, exported by
  `python -m benchmarks.study_table --export`), 5 knobs x 5 paired seeds, judged again by today's
  engine: the published study table is what the engine said when the study ran;
- the positive controls' curves (benchmarks/data/positive_control_runs, copied by
  `python -m benchmarks.positive_controls`), 5 paired seeds of the efficiency mover (optim.lr) and of
  the ceiling mover (task.hard_fraction 0.25 -> 0.5) against the same base runs, judged again.

Writes benchmarks/results/from_logs_verdicts.json (verdicts, intervals, refusals, seconds per run fitted).
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
import time
from pathlib import Path

from benchmarks.common import DATA_DIR, REPO, RESULTS_DIR, command_line, write_result, write_text

CURVES = DATA_DIR / "curves"
TINY = "tiny_mod10_runs"  # a folder of DATA_DIR; its curves' compute is the trainer's FLOPs
CONTROLS = "positive_control_runs"  # the same, written by benchmarks.positive_controls
MANIFESTS = DATA_DIR / "from_logs"  # the groups as manifests: `scalerl ablate --from-logs FILE --base B` reads them
VERL = "verl-asyncreward__"
SHIBUKI = "shibuki-a5__"

# name -> (base variant, rows of (file stem, variant, seed)), what each group asks
GROUPS = {
    "verl off-policy correction vs base (paired by setting)": (
        "base",
        [
            (f"{VERL}gsm8k_qwen2_7b_base", "base", "q7b-megatron"),
            (f"{VERL}gsm8k_qwen2_7b_off_ppl", "off_ppl", "q7b-megatron"),
            (f"{VERL}q7b_fsdp_base", "base", "q7b-fsdp"),
            (f"{VERL}q7b_fsdp_off_ppl", "off_ppl", "q7b-fsdp"),
            (f"{VERL}q3b_fsdp_base", "base", "q3b-fsdp"),
            (f"{VERL}q3b_fsdp_off_ppl", "off_ppl", "q3b-fsdp"),
            (f"{VERL}q3b_mcore_base", "base", "q3b-megatron"),
            (f"{VERL}q3b_mcore_off_ppl", "off_ppl", "q3b-megatron"),
        ],
    ),
    "verl off-policy correction vs base (seeds unpaired: Welch)": (
        "base",
        [
            (f"{VERL}gsm8k_qwen2_7b_base", "base", "q7b-megatron"),
            (f"{VERL}gsm8k_qwen2_7b_off_ppl", "off_ppl", "a"),
            (f"{VERL}q7b_fsdp_base", "base", "q7b-fsdp"),
            (f"{VERL}q7b_fsdp_off_ppl", "off_ppl", "b"),
            (f"{VERL}q3b_fsdp_base", "base", "q3b-fsdp"),
            (f"{VERL}q3b_fsdp_off_ppl", "off_ppl", "c"),
            (f"{VERL}q3b_mcore_base", "base", "q3b-megatron"),
            (f"{VERL}q3b_mcore_off_ppl", "off_ppl", "d"),
        ],
    ),
    "verl Megatron vs FSDP (paired by model and arm)": (
        "fsdp",
        [
            (f"{VERL}q7b_fsdp_base", "fsdp", "q7b-base"),
            (f"{VERL}gsm8k_qwen2_7b_base", "megatron", "q7b-base"),
            (f"{VERL}q7b_fsdp_off_ppl", "fsdp", "q7b-off_ppl"),
            (f"{VERL}gsm8k_qwen2_7b_off_ppl", "megatron", "q7b-off_ppl"),
            (f"{VERL}q3b_fsdp_base", "fsdp", "q3b-base"),
            (f"{VERL}q3b_mcore_base", "megatron", "q3b-base"),
            (f"{VERL}q3b_fsdp_off_ppl", "fsdp", "q3b-off_ppl"),
            (f"{VERL}q3b_mcore_off_ppl", "megatron", "q3b-off_ppl"),
        ],
    ),
    "shibuki learning-rate sweep (one run per learning rate)": (
        "lr3e-5",
        [
            (f"{SHIBUKI}lr3e-5", "lr3e-5", "0"),
            (f"{SHIBUKI}lr5e-5", "lr5e-5", "0"),
            (f"{SHIBUKI}lr5e-6", "lr5e-6", "0"),
            (f"{SHIBUKI}lr7e-5", "lr7e-5", "0"),
        ],
    ),
    "shibuki GPU-hours runs vs sample-count runs (refusal check)": (
        "gpu-hours",
        [
            (f"{SHIBUKI}ref_lr4e-5", "gpu-hours", "0"),
            (f"{SHIBUKI}no_std_normalization", "gpu-hours", "1"),
            (f"{SHIBUKI}lr3e-5", "samples", "0"),
            (f"{SHIBUKI}lr5e-5", "samples", "1"),
        ],
    ),
}


def exported_rows(folder: str, kind: str, names: dict[str, str] | None = None) -> list[tuple[str, str, str]]:
    """(folder/stem, variant, seed) of every <kind>__<variant>__seed-<i>.csv in DATA_DIR/folder
    (curves a benchmark exported from its runs); `names`: keep only these variants, renamed."""
    rows = []
    for path in sorted((DATA_DIR / folder).glob(f"{kind}__*__seed-*.csv")):
        variant, seed = re.fullmatch(rf"{kind}__(.+)__seed-(\d+)", path.stem).groups()
        if names is None or variant in names:
            rows.append((f"{folder}/{path.stem}", variant if names is None else names[variant], seed))
    return rows


def tiny_study_rows() -> list[tuple[str, str, str]]:
    """(TINY/stem, variant, seed) of every study__<variant>__seed-<i>.csv the tiny study exported."""
    return exported_rows(TINY, "study")


def positive_control_groups() -> dict:
    """The positive controls' curves (benchmarks.positive_controls), judged again: the efficiency
    mover against its base, and the ceiling mover against the same base runs (task.hard_fraction
    0.25, the demo's); none when the folder holds no curves."""
    base = exported_rows(CONTROLS, "efficiency", {"scalerl": "scalerl"})
    efficiency = exported_rows(CONTROLS, "efficiency")
    ceiling = exported_rows(CONTROLS, "efficiency", {"scalerl": "hard_fraction-0.25"}) + exported_rows(
        CONTROLS, "ceiling"
    )
    if not base:
        return {}
    return {
        "positive controls, the efficiency mover (optim.lr), its curves judged again": ("scalerl", efficiency),
        "positive controls, the ceiling mover (task.hard_fraction), its curves judged again": (
            "hard_fraction-0.25",
            ceiling,
        ),
    }


GROUPS["tiny leave-one-out study, its curves judged again"] = ("scalerl", tiny_study_rows())
GROUPS.update(positive_control_groups())


def quick_groups() -> dict:
    """The Megatron vs FSDP group cut to its two Qwen2.5-3B pairs, and the two refused groups."""
    name = "verl Megatron vs FSDP (paired by model and arm)"
    base, rows = GROUPS[name]
    quick = {f"{name}, Qwen2.5-3B only": (base, [row for row in rows if row[2].startswith("q3b")])}
    return {**quick, **{key: value for key, value in GROUPS.items() if key.startswith("shibuki")}}


def curve_units() -> dict[str, str]:
    """file stem -> the unit of its compute column (first word of x_unit in the curves' manifest.csv);
    TINY/stem and CONTROLS/stem (scalerl's own runs) -> flops."""
    with (CURVES / "manifest.csv").open(newline="") as handle:
        units = {row["file"].removesuffix(".csv"): row["x_unit"].split()[0] for row in csv.DictReader(handle)}
    own = {
        f"{folder}/{path.stem}": "flops" for folder in (TINY, CONTROLS) for path in (DATA_DIR / folder).glob("*.csv")
    }
    return {**units, **own}


def manifest_name(group: str) -> str:
    """'verl Megatron vs FSDP (paired by model and arm)' -> 'verl_megatron_vs_fsdp_paired_by_model_and_arm.csv'."""
    return re.sub(r"[^a-z0-9]+", "_", group.lower()).strip("_") + ".csv"


def write_manifest(group: str, rows, units: dict[str, str], folder: Path = MANIFESTS) -> Path:
    """<folder>/<group>.csv: path (relative to the folder when it is the default), variant, seed, unit."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / manifest_name(group)
    data = Path("..") if folder == MANIFESTS else DATA_DIR
    lines = ["path,variant,seed,unit"] + [
        f"{data / (stem if '/' in stem else f'curves/{stem}')}.csv,{variant},{seed},{units[stem]}"
        for stem, variant, seed in rows
    ]
    write_text(path, "\n".join(lines) + "\n")
    return path


def interval(item) -> dict | None:
    if item is None:
        return None
    return {"mean": item.mean, "lo": item.lo, "hi": item.hi, "n": item.n, "source": item.source}


def judge(manifest: Path, base: str, margin: float | None) -> dict:
    """The command's report of one manifest, or the one error line it refuses it with; fit seconds."""
    from scalerl.errors import ScaleRLError
    from scalerl.study.from_logs import build_from_logs_report
    from scalerl.study.log_manifest import read_manifest

    started = time.perf_counter()
    rows = read_manifest(manifest)
    try:
        report = build_from_logs_report(rows, base, margin=margin)
    except ScaleRLError as error:
        return {"runs": len(rows), "refused": f"error: {error}", "seconds": time.perf_counter() - started}
    seconds = time.perf_counter() - started
    variants = []
    for item in report.variants:
        verdict = item.verdict
        variants.append(
            {
                "variant": item.run.slug,
                "is_base": item.run.is_base,
                "seeds": [
                    {
                        "label": seed.label,
                        "A": None if seed.fit is None else seed.fit.a,
                        "ceiling_identified": None if seed.fit is None else bool(seed.fit.ceiling_identified),
                        "error": seed.error,
                    }
                    for seed in item.seeds
                ],
                "verdict": None if verdict is None else verdict.label,
                "delta_A": None if verdict is None else interval(verdict.delta_a),
                "delta_B": None if verdict is None else interval(verdict.delta_b),
                "compute_saved_to_half_gain": None if verdict is None else interval(verdict.delta_speed),
                "pairs_agree": None
                if verdict is None or not verdict.agreement.pairs
                else f"{verdict.agreement.agreeing}/{verdict.agreement.pairs}",
                "reason": None if verdict is None else verdict.reason,
            }
        )
    return {
        "runs": len(rows),
        "x": report.x_name,
        "y": report.y_name,
        "margin": report.margin,
        "variants": variants,
        "seconds": seconds,
        "seconds_per_run": seconds / len(rows),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--margin", type=float, default=None, help="margin on A (default: the paper's 0.02)")
    parser.add_argument("--quick", action="store_true", help="two pairs of one group, and the refusals")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="JSON results (default benchmarks/results/from_logs_verdicts.json); with --out the "
        "manifests go next to it, not into benchmarks/data/from_logs",
    )
    args = parser.parse_args(argv)
    units = curve_units()
    folder = MANIFESTS if args.out is None else args.out.parent
    results = {}
    for name, (base, rows) in quick_groups().items() if args.quick else GROUPS.items():
        manifest = write_manifest(name, rows, units, folder)
        manifest = manifest.relative_to(REPO) if manifest.is_relative_to(REPO) else manifest
        results[name] = {"base": base, "manifest": str(manifest), **judge(manifest, base, args.margin)}
        print(
            f"{name}: {results[name].get('refused') or [v['verdict'] for v in results[name]['variants']]} "
            f"({results[name]['seconds']:.1f} s)",
            flush=True,
        )
    fitted = [group for group in results.values() if "refused" not in group]
    total_runs = sum(group["runs"] for group in fitted)
    summary = {
        "runs_fitted": total_runs,
        "seconds": sum(group["seconds"] for group in fitted),
        "seconds_per_run": sum(group["seconds"] for group in fitted) / max(total_runs, 1),
    }
    path = write_result(
        args.out or RESULTS_DIR / "from_logs_verdicts.json",
        {"groups": results, "summary": summary},
        command_line("from_logs_verdicts", argv),
    )
    print(f"{summary['runs_fitted']} runs fitted, {summary['seconds_per_run']:.2f} s per run; written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
