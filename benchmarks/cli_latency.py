"""Benchmark: how fast the `scalerl` command starts, as CPU seconds of the whole process.

Runs `scalerl --help`, `scalerl fit --help`, `scalerl fit RUN.csv` and `scalerl fit RUN.csv --json`
on a 50-point CSV of a noisy ScaleRL sigmoid, each in a fresh process (interpreter start and
imports included), several times, and records the median user + system CPU seconds of the child
(getrusage RUSAGE_CHILDREN before and after each run) and its wall seconds. CPU time, not wall
time: on a shared machine the wall clock counts the other processes' turns. One more run of each
command lists which heavy modules (numpy, scipy, pandas, matplotlib, emcee) it imported. Bytecode
is cached, as from a user's second run on (steady_state_environment). The floor:
a bare interpreter importing only the libraries the fit needs (numpy, scipy.optimize, scipy.special,
emcee), on one BLAS thread as `scalerl fit` runs them. Targets:
`--help` <= 0.25 s and `fit` <= 0.6 s of CPU. Prints a table and writes
benchmarks/results/cli_latency.json. A script, not a test: it asserts nothing.

    python -m benchmarks.cli_latency                  # 7 repeats of each command (about half a minute)
    python -m benchmarks.cli_latency --quick --out /tmp/cli_latency.json
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import RESULTS_DIR, command_line, machine, write_result

RESULTS = RESULTS_DIR / "cli_latency.json"
N_POINTS = 50
A, B, C_MID, R0 = 0.61, 1.92, 2542.0, 0.1  # ScaleRL 8B dense (paper table)
HEAVY_MODULES = ("numpy", "scipy", "pandas", "matplotlib", "emcee")
TARGET_CPU_SECONDS = {"--help": 0.25, "fit": 0.6}
# Runs the command as the console script does, then names the heavy modules it imported.
MODULES_SCRIPT = (
    "import sys\n"
    "from scalerl.cli import main\n"
    "try:\n"
    "    main()\n"
    "finally:\n"
    f"    heavy = [name for name in {HEAVY_MODULES!r} if name in sys.modules]\n"
    "    sys.stderr.write('heavy_modules=' + ','.join(heavy) + '\\n')\n"
)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="runs of each command (the median is reported)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 repeats; pair with --out")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats = 2
    return args


def write_run_csv(path: Path, n_points: int = N_POINTS, seed: int = 0) -> Path:
    """A CSV of one run: gpu_hours from 0 to 8,000 and val_pass_rate, the ScaleRL sigmoid

        R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)

    plus Gaussian noise of sd 0.01 (the first row is R0 at compute 0)."""
    rng = np.random.default_rng(seed)
    compute = np.linspace(0.0, 8000.0, n_points)
    with np.errstate(divide="ignore"):
        reward = R0 + (A - R0) / (1.0 + (C_MID / compute) ** B)
    reward = np.clip(reward + rng.normal(0.0, 0.01, n_points) * (compute > 0), 0.0, 1.0)
    path.write_text("gpu_hours,val_pass_rate\n" + "".join(f"{c:.3f},{r:.5f}\n" for c, r in zip(compute, reward)))
    return path


def scalerl_command() -> list[str]:
    """The console script beside this interpreter (what users type), else `python -m scalerl.cli`."""
    script = Path(sys.executable).parent / "scalerl"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "scalerl.cli"]


def cpu_and_wall_seconds(argv: list[str], cwd: Path, env: dict | None = None) -> tuple[float, float]:
    """(user + system CPU seconds, wall seconds) of one run of `argv` in a fresh process (`env`:
    its environment, default this one's)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=300
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def heavy_modules(args: list[str], cwd: Path) -> list[str]:
    """The heavy modules one run of `scalerl ARGS` imports."""
    done = subprocess.run(
        [sys.executable, "-c", MODULES_SCRIPT, *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )
    line = next((line for line in done.stderr.splitlines() if line.startswith("heavy_modules=")), "heavy_modules=")
    return [name for name in line.split("=", 1)[1].split(",") if name]


# What `scalerl fit` cannot go below: the libraries it fits with, imported by a bare interpreter
# the way the fit imports them (emcee without scipy.stats: posterior._import_emcee).
FLOOR_SCRIPT = (
    "import sys, numpy, scipy.optimize, scipy.special; sys.modules['scipy.stats'] = None; "
    "import emcee; del sys.modules['scipy.stats']"
)


def library_floor(repeats: int, cwd: Path) -> dict:
    """Median CPU seconds of a fresh interpreter that only imports FLOOR_SCRIPT's libraries, with
    OPENBLAS_NUM_THREADS=1 (as the curve-fitting commands set it)."""
    argv = [sys.executable, "-c", FLOOR_SCRIPT]
    environment = {**steady_state_environment(), "OPENBLAS_NUM_THREADS": "1"}
    cpu_and_wall_seconds(argv, cwd, environment)  # warm the file cache; not counted
    cpu = [round(cpu_and_wall_seconds(argv, cwd, environment)[0], 3) for _ in range(repeats)]
    return {"script": FLOOR_SCRIPT, "cpu_seconds": cpu, "median_cpu_seconds": round(statistics.median(cpu), 3)}


def steady_state_environment() -> dict:
    """This environment without PYTHONDONTWRITEBYTECODE: the untimed first run writes the bytecode
    of scalerl's own modules, as a user's first run does, and the timed runs read it. With the
    variable set (as on some build machines) every run would compile those ~70 modules from
    source again, about 0.07 s that no user pays twice."""
    return {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


def measure(name: str, args: list[str], repeats: int, cwd: Path) -> dict:
    """Median CPU and wall seconds of `scalerl ARGS` over `repeats` fresh processes."""
    command = scalerl_command()
    environment = steady_state_environment()
    cpu_and_wall_seconds([*command, *args], cwd, environment)  # warm the file and bytecode caches; not counted
    runs = [cpu_and_wall_seconds([*command, *args], cwd, environment) for _ in range(repeats)]
    cpu = [round(seconds, 3) for seconds, _ in runs]
    target = TARGET_CPU_SECONDS.get(name)
    median_cpu = statistics.median(cpu)
    return {
        "name": name,
        "command": "scalerl " + " ".join(args),
        "cpu_seconds": cpu,
        "median_cpu_seconds": round(median_cpu, 3),
        "median_wall_seconds": round(statistics.median(wall for _, wall in runs), 3),
        "target_cpu_seconds": target,
        "meets_target": None if target is None else bool(median_cpu <= target),
        "heavy_modules": heavy_modules(args, cwd),
    }


def main(argv=None) -> None:
    args = parse_args(argv)
    load_at_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        write_run_csv(folder / "run.csv")
        commands = [
            ("--help", ["--help"]),
            ("fit --help", ["fit", "--help"]),
            ("fit", ["fit", "run.csv"]),
            ("fit --json", ["fit", "run.csv", "--json"]),
        ]
        rows = [measure(name, command, args.repeats, folder) for name, command in commands]
        floor = library_floor(args.repeats, folder)
    print(f"{'command':<30} {'median CPU s':>12} {'wall s':>8} {'target':>7}  heavy modules imported")
    for row in rows:
        target = "" if row["target_cpu_seconds"] is None else f"{row['target_cpu_seconds']:.2f}"
        print(
            f"{row['command']:<30} {row['median_cpu_seconds']:>12.3f} {row['median_wall_seconds']:>8.3f} "
            f"{target:>7}  {', '.join(row['heavy_modules']) or '-'}"
        )
    print(f"floor: `python -c '{floor['script']}'` on one BLAS thread: {floor['median_cpu_seconds']:.3f} s of CPU")
    payload = {
        "n_points": N_POINTS,
        "repeats": args.repeats,
        "launcher": " ".join(Path(p).name for p in scalerl_command()),
        "bytecode": "cached: an untimed first run writes it (PYTHONDONTWRITEBYTECODE unset for the runs)",
        "commands": rows,
        "library_floor": floor,
    }
    block = machine(load_at_start, packages=("typer", "rich", "numpy", "scipy", "pandas", "emcee"))
    write_result(args.out, payload, command_line("cli_latency", argv), machine_block=block)


if __name__ == "__main__":
    main()
