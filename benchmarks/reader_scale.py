"""Benchmark: time and memory of `scalerl fit` on long logs (10^4, 10^5, 10^6 rows).

For each size and format (CSV, JSON lines, a TensorBoard event file) a log of a noisy ScaleRL
sigmoid is written to a temp dir (gpu_hours, step, loss, val_pass_rate, as a W&B export has extra
columns; TensorBoard: one event per step with the three scalars), then
`scalerl fit LOG --json` runs in a fresh subprocess: its wall time and peak resident memory are
recorded (the child's own getrusage ru_maxrss, printed as it exits: RUSAGE_CHILDREN in the parent
would keep the largest child so far, hiding smaller runs after a large one). The target: 10^6 rows read
and fitted in under ~30 s and 1 GB. Prints a table and writes benchmarks/results/reader_scale.json.
A script, not a test: it asserts nothing.

    python -m benchmarks.reader_scale                  # all sizes, both formats (about a minute)
    python -m benchmarks.reader_scale --sizes 10000    # quicker
    python -m benchmarks.reader_scale --hostile --out benchmarks/results/reader_hostile.json

`--hostile` times the refusals instead: a CSV whose header has 10^6 columns (~10 MB) and a 2 GB
sparse CSV (a header line, then NUL bytes; no disk used), refused by its size and, with the size
limit raised, by its first bytes, must each be one error in seconds and bounded memory.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import RESULTS_DIR, command_line, write_result

RESULTS = RESULTS_DIR / "reader_scale.json"
SIZES = (10_000, 100_000, 1_000_000)
FORMATS = ("csv", "jsonl", "tensorboard")
A, B, C_MID, R0 = 0.61, 1.92, 2542.0, 0.1  # ScaleRL 8B dense (paper table)
CHILD_SCRIPT = (
    "import resource, sys\n"
    "from scalerl.cli.app import main\n"
    "try:\n"
    "    main()\n"
    "finally:\n"
    "    sys.stderr.write(f'maxrss_kb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n')\n"
)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="rows per log")
    parser.add_argument("--formats", nargs="+", default=list(FORMATS), choices=FORMATS)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: one log of 2,000 rows per format; pair with --out"
    )
    parser.add_argument(
        "--hostile", action="store_true", help="time the refusals of a 10^6-column CSV and a 2 GB sparse CSV instead"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes = [2_000]
    return args


def curve_columns(n_rows: int, seed: int = 0) -> dict[str, np.ndarray]:
    """The log's columns: compute up to 16,000 GPU-hours, the sigmoid plus noise, a step and a loss."""
    rng = np.random.default_rng(seed)
    gpu_hours = np.linspace(0.0, 16_000.0, n_rows)
    clean = R0 + (A - R0) / (1.0 + (C_MID / np.maximum(gpu_hours, 1e-9)) ** B)
    reward = np.clip(clean + rng.normal(0.0, 0.02, n_rows), 0.0, 1.0)
    return {"step": np.arange(n_rows), "gpu_hours": gpu_hours, "loss": rng.random(n_rows), "val_pass_rate": reward}


def write_log(directory: Path, fmt: str, n_rows: int) -> Path:
    """Write the log in `fmt`; returns its path."""
    columns = curve_columns(n_rows)
    if fmt == "tensorboard":
        return write_event_file(directory / f"tb_{n_rows}", columns)
    path = directory / f"run_{n_rows}.{fmt}"
    names = list(columns)
    with path.open("w", encoding="utf-8") as handle:
        if fmt == "csv":
            handle.write(",".join(names) + "\n")
            for row in zip(*(columns[name].tolist() for name in names)):
                handle.write(",".join(repr(value) for value in row) + "\n")
        else:
            for row in zip(*(columns[name].tolist() for name in names)):
                handle.write(json.dumps(dict(zip(names, row))) + "\n")
    return path


def write_event_file(directory: Path, columns: dict[str, np.ndarray]) -> Path:
    """One TensorBoard event per step holding the non-step columns as scalars; returns the file."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(directory), max_queue_size=10_000)
    tags = [name for name in columns if name != "step"]
    for step, row in enumerate(zip(*(columns[tag].tolist() for tag in tags))):
        values = [summary_pb2.Summary.Value(tag=tag, simple_value=value) for tag, value in zip(tags, row)]
        writer.add_event(event_pb2.Event(wall_time=1.0, step=step, summary=summary_pb2.Summary(value=values)))
    writer.close()
    return next(directory.glob("events.out.tfevents.*"))


def run_fit(path: Path, env: dict | None = None) -> dict:
    """Run `scalerl fit PATH --json` in a fresh interpreter (`env` added to the environment);
    wall seconds, peak MB, exit code."""
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-c", CHILD_SCRIPT, "fit", str(path), "--json"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    seconds = time.perf_counter() - started
    rss_lines = [line for line in completed.stderr.splitlines() if line.startswith("maxrss_kb=")]
    peak_kb = int(rss_lines[-1].split("=")[1]) if rss_lines else resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    payload = json.loads(completed.stdout) if completed.returncode == 0 else {}
    return {
        "exit_code": completed.returncode,
        "seconds": round(seconds, 2),
        "peak_mb": round(peak_kb / 1024.0, 1),
        "n_points": payload.get("n_points"),
        "A": payload.get("params", {}).get("A"),
        "notes": [w for w in payload.get("warnings", []) if "binned" in w],
        "error": None if completed.returncode == 0 else completed.stderr.strip().splitlines()[:1],
    }


def write_hostile_log(directory: Path, kind: str) -> Path:
    """A log scalerl fit must refuse quickly: `wide` (a header of 10^6 columns and one row) or
    `sparse` (a header line, then NUL bytes up to 2 GB, as a sparse file)."""
    path = directory / f"{kind}.csv"
    if kind == "wide":
        columns = 10**6
        path.write_text(",".join(f"c{i}" for i in range(columns)) + "\n" + ",".join("1" for _ in range(columns)) + "\n")
    else:
        with path.open("wb") as handle:
            handle.write(b"gpu_hours,val_pass_rate\n")
            handle.truncate(2 * 10**9)
    return path


def hostile_main(args, argv) -> None:
    """Time `scalerl fit` on each hostile log; each must exit 2 with one error line."""
    load_at_start = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for kind, env in (("wide", None), ("sparse", None), ("sparse", {"SCALERL_MAX_LOG_BYTES": str(4 * 10**9)})):
            path = write_hostile_log(Path(scratch), kind)
            kind = kind if env is None else f"{kind}, limit raised to 4 GB"
            result = {"log": kind, "file_mb": round(path.stat().st_size / 2**20, 1), **run_fit(path, env)}
            rows.append(result)
            path.unlink()
            print(
                f"{kind:<30} {result['file_mb']:>8.1f} MB file  {result['seconds']:>6.2f} s  "
                f"{result['peak_mb']:>7.1f} MB peak  exit {result['exit_code']}  {result['error']}",
                flush=True,
            )
    write_result(
        args.out,
        {"target": "each refused (exit 2) in seconds and < 1024 MB", "runs": rows},
        command_line("reader_scale", argv),
        load_at_start,
        indent=2,
    )
    print(f"\nwrote {args.out}")


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.hostile:
        hostile_main(args, argv)
        return
    load_at_start = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for n_rows in args.sizes:
            for fmt in args.formats:
                path = write_log(Path(scratch), fmt, n_rows)
                result = {
                    "rows": n_rows,
                    "format": fmt,
                    "file_mb": round(path.stat().st_size / 2**20, 1),
                    **run_fit(path),
                }
                rows.append(result)
                path.unlink()  # a TensorBoard file's folder stays, empty
                print(
                    f"{n_rows:>9} {fmt:<6} {result['file_mb']:>7.1f} MB file  {result['seconds']:>7.2f} s  "
                    f"{result['peak_mb']:>7.1f} MB peak  exit {result['exit_code']}  points {result['n_points']}",
                    flush=True,
                )
    print("\n| rows | format | file MB | seconds | peak RSS MB | points fitted |\n|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['rows']:,} | {row['format']} | {row['file_mb']} | {row['seconds']} | {row['peak_mb']} "
            f"| {row['n_points']} |"
        )
    write_result(
        args.out,
        {"target": "1e6 rows: < 30 s and < 1024 MB", "runs": rows},
        command_line("reader_scale", argv),
        load_at_start,
        indent=2,
    )
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
