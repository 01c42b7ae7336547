"""Benchmark: the forecaster-only install (`pip install scalerl`, no extras), for real.

Creates a fresh virtual environment, installs this repository into it without extras (from
PyPI: the network is needed), and records how many distributions it holds and how many MB its
site-packages take. Then checks the install works as the README says: `scalerl fit` on a CSV and
on a TensorBoard event file (written here by the development environment's tensorboard, read
there without it) succeeds, `scalerl train --out run` and `scalerl demo` end with one `error:`
line naming the extra (exit 2), and `scalerl config keys` (torch-free) lists the keys. Writes benchmarks/results/install_size.json.
A script, not a test: it asserts nothing.

    python -m benchmarks.install_size                       # a temporary venv (about 2-5 minutes)
    python -m benchmarks.install_size --venv /tmp/light     # keep the venv there
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import REPO, RESULTS_DIR, command_line, write_result

RESULTS = RESULTS_DIR / "install_size.json"
BOOTSTRAP = ("pip", "setuptools", "wheel")  # what `python -m venv` brings, not what scalerl pulls in
# The training commands end with one `error:` line naming the extra; `config keys` needs no extra
# (the configuration is torch-free) and lists the keys.
TRAINING_COMMANDS = (("train", "--out", "run", "--max-steps", "1"), ("demo",), ("config", "keys"))


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=None, help="where to create the venv (default: a temp dir)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    return parser.parse_args(argv)


def install(venv: Path) -> float:
    """Create `venv` and install the repository without extras; the seconds it took."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", "-e", str(REPO)], check=True
    )
    return time.perf_counter() - started


def distributions(venv: Path) -> list[str]:
    """The distributions installed in `venv` besides pip's own bootstrap and scalerl itself."""
    listed = subprocess.run(
        [str(venv / "bin" / "pip"), "list", "--format", "json", "--disable-pip-version-check"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    names = sorted(item["name"].lower() for item in json.loads(listed))
    return [name for name in names if name not in BOOTSTRAP and name != "scalerl"]


def site_packages_mb(venv: Path) -> float:
    """MB of every file under the venv's site-packages (links not followed)."""
    total = 0
    for site in venv.glob("lib/python*/site-packages"):
        for root, _, files in os.walk(site):
            total += sum(os.lstat(os.path.join(root, name)).st_size for name in files)
    return total / 2**20


def write_logs(folder: Path) -> dict[str, Path]:
    """A CSV and a TensorBoard event file of one noisy ScaleRL sigmoid (40 evaluations)."""
    rng = np.random.default_rng(0)
    steps = np.arange(1, 41)
    reward = 0.1 + 0.5 / (1 + (12.0 / steps) ** 1.8) + rng.normal(0, 0.005, steps.size)
    csv = folder / "run.csv"
    csv.write_text("step,val_pass_rate\n" + "".join(f"{s},{r:.5f}\n" for s, r in zip(steps, reward)))
    from torch.utils.tensorboard import SummaryWriter  # the development environment's writer

    writer = SummaryWriter(str(folder / "tb"))
    for step, value in zip(steps.tolist(), reward.tolist()):
        writer.add_scalar("eval/reward", value, step)
    writer.close()
    return {"csv": csv, "tensorboard": folder / "tb"}


def run_scalerl(venv: Path, *args: str, cwd: Path) -> dict:
    """Run the venv's `scalerl ARGS`: exit code, the first stderr line and, for `--json`, A."""
    done = subprocess.run(
        [str(venv / "bin" / "scalerl"), *args], capture_output=True, text=True, cwd=cwd, timeout=600, check=False
    )
    lines = done.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    result = {
        "command": "scalerl " + " ".join(args),
        "exit_code": done.returncode,
        "error": errors[0] if errors else None,
        "stderr_lines": len(lines),
    }
    if "--json" in args and done.returncode == 0:
        result["A"] = json.loads(done.stdout)["params"]["A"]
    return result


def main(argv=None) -> None:
    args = parse_args(argv)
    load_at_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as scratch:
        venv = args.venv if args.venv is not None else Path(scratch) / "light"
        seconds = install(venv)
        installed = distributions(venv)
        size_mb = site_packages_mb(venv)
        logs = write_logs(Path(scratch))
        checks = [run_scalerl(venv, "fit", str(logs[name]), "--json", cwd=Path(scratch)) for name in logs]
        checks += [run_scalerl(venv, *command, cwd=Path(scratch)) for command in TRAINING_COMMANDS]
    payload = {
        "install": "pip install -e . (no extras) into a fresh venv",
        "install_seconds": round(seconds, 1),
        "n_distributions": len(installed),
        "site_packages_mb": round(size_mb, 1),
        "distributions": installed,
        "checks": checks,
    }
    print(f"{len(installed)} distributions, {size_mb:.0f} MB of site-packages ({seconds:.0f} s to install)")
    for check in checks:
        print(f"  {check['command']}: exit {check['exit_code']}  {check.get('error') or check.get('A', '')}")
    write_result(args.out, payload, command_line("install_size", argv), load_average_before=load_at_start)


if __name__ == "__main__":
    main()
