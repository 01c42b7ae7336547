"""Every benchmark's quick mode runs end to end, so that a refactor cannot break one silently.

A module of benchmarks/ with a `__main__` block is a benchmark unless NOT_BENCHMARKS names it
(helpers; the renderers live in benchmarks/render/); each must offer `--quick` unless NO_QUICK says why it cannot. QUICK_ARGS says how each is run quickly and
where it writes ({tmp}: the test's temporary folder); a benchmark it does not list runs with
DEFAULT_ARGS, so adding a benchmark whose `--out` takes a file needs no line here. No run may
touch benchmarks/results or the docs.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCHMARKS = REPO / "benchmarks"
NOT_BENCHMARKS = {  # modules with a __main__ block that measure nothing themselves
    "pipeline_efficiency_report": "re-renders pipeline_efficiency's table and figure from its JSON",
}
NO_QUICK = {  # benchmarks that cannot have a quick mode, and why (their run is skipped, saying so)
    "install_size": "builds a fresh virtual environment from PyPI: it needs the network",
}
DEFAULT_ARGS = ("--quick", "--out", "{tmp}/{name}.json")
QUICK_ARGS: dict[str, tuple[str, ...]] = {
    "ablation_tiny": (
        "--quick",
        "--steps",
        "6",
        "--eval-every",
        "2",
        "--knobs",
        "loss=dapo",
        "--sweep",
        "none",
        "--sequential",
        "--workdir",
        "{tmp}/work",
        "--out",
        "{tmp}/ablation_tiny.json",
    ),
    "async_vs_sync": (
        "--quick",
        "--modes",
        "sync,async-k8",
        "--workdir",
        "{tmp}/work",
        "--out",
        "{tmp}/async_vs_sync.json",
    ),
    "forecast_accuracy": ("--quick", "--out", "{tmp}", "--figure", "{tmp}/forecast_calibration.png"),
    "forecast_seed_spread": ("--quick", "--seeds", "0", "1", "--out", "{tmp}/forecast_seed_spread.json"),
    "pipeline_efficiency": (
        "--quick",
        "--ratios",
        "1",
        "--generators",
        "1",
        "--lags",
        "8",
        "--param-sizes",
        "builtin",
        "--workdir",
        "{tmp}/work",
        "--out",
        "{tmp}/pipeline_efficiency.json",
        "--figure",
        "{tmp}/pipeline_efficiency.png",
    ),
    "positive_controls": (
        "--quick",
        "--steps",
        "4",
        "--eval-every",
        "2",
        "--sequential",
        "--workdir",
        "{tmp}/work",
        "--out",
        "{tmp}/positive_controls.json",
    ),
    "pipeline_transport": ("--quick", "--workdir", "{tmp}/work", "--out", "{tmp}/pipeline_transport.json"),
    "report_render": ("--quick", "-o", "{tmp}/report.png"),
    "trainer_throughput": (
        "--quick",
        "--recipe",
        "matched",
        "--steps",
        "2",
        "--warmup-steps",
        "1",
        "--out-dir",
        "{tmp}",
    ),
}
NEEDS_PACKAGES = {"trainer_throughput": ("trl", "datasets")}  # the `bench` extra
GUARDED = (REPO / "benchmarks" / "results", REPO / "docs")


def runnable_modules() -> list[str]:
    """benchmarks/*.py with an `if __name__ == "__main__":` block."""
    names = []
    for path in sorted(BENCHMARKS.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body):
            names.append(path.stem)
    return names


def benchmark_modules() -> list[str]:
    return [name for name in runnable_modules() if name not in NOT_BENCHMARKS]


def quick_command(name: str, tmp: Path) -> list[str]:
    args = QUICK_ARGS.get(name, DEFAULT_ARGS)
    return [sys.executable, "-m", f"benchmarks.{name}", *(a.format(tmp=tmp, name=name) for a in args)]


def guarded_files() -> dict[Path, tuple[int, int]]:
    """(mtime, size) of every file a quick run must leave alone."""
    files = {}
    for root in GUARDED:
        for path in [root] if root.is_file() else root.rglob("*"):
            if path.is_file():
                stat = path.stat()
                files[path] = (stat.st_mtime_ns, stat.st_size)
    return files


def has_quick_flag(source: str) -> bool:
    """The module adds --quick itself, or through benchmarks.common.accept_quick."""
    return '"--quick"' in source or "accept_quick(parser" in source


def test_every_benchmark_has_a_quick_mode():
    benchmarks = benchmark_modules()
    assert {"async_vs_sync", "pipeline_efficiency", "trainer_throughput", "forecast_accuracy"} <= set(benchmarks)
    missing = [
        name
        for name in benchmarks
        if name not in NO_QUICK and not has_quick_flag((BENCHMARKS / f"{name}.py").read_text())
    ]
    assert missing == [], f"benchmarks without a --quick flag: {missing}"
    assert set(QUICK_ARGS) <= set(benchmarks), "QUICK_ARGS names a module that is not a benchmark"


def test_quick_command_fills_the_folder(tmp_path):
    assert quick_command("reader_scale", tmp_path)[-2:] == ["--out", f"{tmp_path}/reader_scale.json"]
    assert quick_command("forecast_accuracy", tmp_path)[3:6] == ["--quick", "--out", str(tmp_path)]


@pytest.mark.slow
@pytest.mark.parametrize("name", benchmark_modules())
def test_quick_mode_runs(name, tmp_path):
    if name in NO_QUICK:
        pytest.skip(f"{name} has no quick mode: {NO_QUICK[name]}")
    absent = [p for p in NEEDS_PACKAGES.get(name, ()) if importlib.util.find_spec(p) is None]
    if absent:
        pytest.skip(f"{name} needs {', '.join(absent)} (pip install -e '.[bench]')")
    if name == "report_render" and not any(
        shutil.which(b) for b in ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")
    ):
        pytest.skip("report_render needs a headless Chromium on PATH")
    before = guarded_files()
    env = dict(os.environ, MPLBACKEND="Agg", TOKENIZERS_PARALLELISM="false", WANDB_MODE="disabled")
    done = subprocess.run(quick_command(name, tmp_path), cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{name} --quick failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    written = [p for p in tmp_path.iterdir() if p.is_file()]
    assert written, f"{name} --quick wrote nothing into {tmp_path}"
    changed = sorted(str(p.relative_to(REPO)) for p, stamp in guarded_files().items() if before.get(p) != stamp)
    assert changed == [], f"{name} --quick changed {changed}"
