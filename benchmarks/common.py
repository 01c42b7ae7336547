"""What every benchmark shares: where results go, the command and machine block stored with a
result, the atomic writer, the paired t-interval as a JSON-ready dict, and the `--quick` flag of a
benchmark that is quick already.

Every benchmark runs from the repository root as `python -m benchmarks.<name>`.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shlex
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO / "benchmarks" / "results"
DATA_DIR = REPO / "benchmarks" / "data"
DOCS_DIR = REPO / "docs"


def accept_quick(parser, run: str = "the same run (it takes under a minute)") -> None:
    """`--quick` on a benchmark that is quick already: accepted, so that every benchmark has a
    quick mode, and changing nothing (`run` says what it runs then)."""
    parser.add_argument(
        "--quick", action="store_true", help=f"{run}; accepted so that every benchmark has a quick mode"
    )


def interval_score(lo, hi, truth, level):
    """S = (hi - lo) + (2 / alpha) (lo - y)_+ + (2 / alpha) (y - hi)_+, alpha = 1 - level: the
    interval score of a central band (Gneiting & Raftery 2007, eq. 43; lower is better)."""
    import numpy as np

    alpha = 1.0 - level
    return (hi - lo) + (2.0 / alpha) * (np.maximum(lo - truth, 0.0) + np.maximum(truth - hi, 0.0))


def command_line(module: str, argv=None) -> str:
    """`python -m benchmarks.<module> ARGS`: the command that reproduces a result (argv default:
    this process's arguments)."""
    args = sys.argv[1:] if argv is None else list(argv)
    return " ".join(["python", "-m", f"benchmarks.{module}", *(shlex.quote(str(a)) for a in args)])


def _torch_threads() -> int | None:
    """torch's intra-op threads when this process has imported torch (never imports it)."""
    torch = sys.modules.get("torch")
    return int(torch.get_num_threads()) if torch is not None else None


def _git_commit() -> dict:
    """{"commit": HEAD or None, "dirty": uncommitted changes under src/ or benchmarks/, its
    results/ excepted (what a benchmark writes is not code it measured)}."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--", "src", "benchmarks", ":(exclude)benchmarks/results") if commit else None
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine(load_average_before=None, packages=()) -> dict:
    """The machine block of every result, always these keys: python, platform, architecture,
    cpus, torch (version or None), torch_threads (None unless torch was imported),
    omp_num_threads (the environment variable or None), packages ({name: version} of the
    other packages a benchmark names, e.g. the baseline it compares with), load_average_before
    (what the benchmark measured before it started, or None), load_average_after (now),
    git_commit, git_dirty."""
    git = _git_commit()
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "architecture": platform.machine(),
        "cpus": os.cpu_count(),
        "torch": _version("torch"),
        "torch_threads": _torch_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "packages": {name: _version(name) for name in packages},
        "load_average_before": list(load_average_before) if load_average_before is not None else None,
        "load_average_after": list(os.getloadavg()),
        "git_commit": git["commit"],
        "git_dirty": git["dirty"],
    }


def plain(value):
    """JSON-ready copy: numpy scalars and arrays as Python numbers and lists, tuples as lists,
    NaN and infinities as None (strict JSON has no token for them)."""
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return plain(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _replace(path: Path, mode: str, content) -> Path:
    """Write `content` to a temporary file in `path`'s folder, then rename it over `path`: a
    reader never sees half a file, and an interrupted run leaves the previous one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, mode, **({"newline": ""} if mode == "w" else {})) as out:
            out.write(content)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return path


def write_text(path: Path, text: str) -> Path:
    """Write a text file atomically (see _replace)."""
    return _replace(path, "w", text)


def copy_file(source: Path, target: Path) -> Path:
    """Copy `source` over `target` atomically (see _replace)."""
    return _replace(target, "wb", Path(source).read_bytes())


ALLOW_DIRTY_VARIABLE = "SCALERL_BENCH_ALLOW_DIRTY"


class DirtyTreeError(SystemExit):
    """A new result for the repository measured on uncommitted code: no commit reproduces it."""


def dirty_refusal(path: Path, block: dict) -> str | None:
    """Why a new result may not be written to `path`, or None when it may: refused when the
    machine block says the tree had uncommitted changes under src/ or benchmarks/ (git_dirty
    true) and `path` lies inside the repository, unless SCALERL_BENCH_ALLOW_DIRTY=1. A result
    written outside the repository (a quick run into a temporary folder) is never refused."""
    if block.get("git_dirty") is not True or os.environ.get(ALLOW_DIRTY_VARIABLE) == "1":
        return None
    if not Path(path).resolve().is_relative_to(REPO):
        return None
    return (
        f"{path} would record a measurement of uncommitted code (changes under src/ or benchmarks/ "
        f"on top of {block.get('git_commit')}): commit them and rerun, or set "
        f"{ALLOW_DIRTY_VARIABLE}=1 to write it marked dirty"
    )


def write_result(
    path: Path,
    payload: dict,
    command: str,
    load_average_before=None,
    indent: int = 1,
    machine_block: dict | None = None,
    new_measurement: bool = True,
) -> Path:
    """Write a benchmark's JSON result atomically, with `command` (command_line's text) and the
    machine block set on it (`machine_block` when the benchmark built it already, else
    machine(load_average_before)); NaN and infinities are written as null. A new measurement
    from a dirty tree into the repository is refused (dirty_refusal): the document is kept in a
    temporary file that the DirtyTreeError names, so the run is not lost. `new_measurement=False`
    (a re-render keeping the block of the run that measured it) skips the check."""
    block = machine_block if machine_block is not None else machine(load_average_before)
    document = {**payload, "command": command, "machine": block}
    text = json.dumps(plain(document), indent=indent, allow_nan=False) + "\n"
    refusal = dirty_refusal(path, block) if new_measurement else None
    if refusal is not None:
        handle, kept = tempfile.mkstemp(prefix=f"{Path(path).stem}.", suffix=".json")
        with os.fdopen(handle, "w") as out:
            out.write(text)
        raise DirtyTreeError(f"error: {refusal} (this run's result is kept at {kept})")
    return write_text(path, text)


def paired_interval(differences, level: float) -> dict:
    """scalerl.study.paired.paired_t_interval as a dict:

        mean(d) +- t_q(n - 1) sd(d) / sqrt(n),   q = (1 + level) / 2,

    with lo and hi None when fewer than two pairs give no spread."""
    from scalerl.study.paired import paired_t_interval

    interval = paired_t_interval(list(differences), level)
    bounded = math.isfinite(interval.lo)
    return {
        "mean": interval.mean,
        "lo": interval.lo if bounded else None,
        "hi": interval.hi if bounded else None,
        "n": interval.n,
    }
