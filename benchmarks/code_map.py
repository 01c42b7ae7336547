"""Benchmark: the shape of the code, read from the source with `ast` (nothing imported, no torch).

Measures what issue-level reviews of the layout ask for: modules per package folder (the most,
and every folder over MAX_MODULES), files over LONG_FILE lines, imports that run up a layer or a
room and import cycles (benchmarks/source_graph.py, the layering test's own checks), and one
step's trace: the src files holding the functions reachable by direct calls from each step entry
(benchmarks/call_graph.py: calls resolved by name through imports and annotated types; calls
through a registry, a callback or a duck-typed object are not followed, so it is a lower bound),
in total and by package. With the `duplicates` command on PATH, its pair count over the tree
(`duplicates --seconds 120`). Prints a table and writes benchmarks/results/code_map.json.

    python -m benchmarks.code_map
    python -m benchmarks.code_map --baseline 661f04f                  # and the same at an older commit
    python -m benchmarks.code_map --quick --out /tmp/code_map.json   # no duplicates run
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from benchmarks.call_graph import CallGraph
from benchmarks.common import REPO, RESULTS_DIR, command_line, machine, write_result
from benchmarks.source_graph import (
    MAX_MODULES,
    SRC,
    import_cycles,
    layer_crossings,
    line_counts,
    modules_per_folder,
    room_crossings,
    sources,
)

RESULTS = RESULTS_DIR / "code_map.json"
LONG_FILE = 450
# Where one step starts: what the synchronous loop calls per step, and the pipeline's two actors.
STEP_ENTRIES = {
    "sync_step": ("scalerl.train.trainer:run_one_step",),
    "async_trainer_step": ("scalerl.distributed.actors:TrainerWorker.train",),
    "async_generator_step": ("scalerl.distributed.actors:GeneratorWorker.generate",),
}
DUPLICATES_SECONDS = 120
DUPLICATES_LINE = re.compile(r"^(\d+) pairs? of places \((\d+) files read\)")


def package_of_file(file: str) -> str:
    """`scalerl/train/batch/x.py` -> `train/batch`; a top-level module -> `scalerl`."""
    parts = Path(file).parts[1:-1]
    return "/".join(parts) if parts else "scalerl"


def step_trace(graph: CallGraph, entries: tuple[str, ...]) -> dict:
    """{"functions", "files", "by_package": {package: files}, "file_list": {file: [functions]}}."""
    reached = graph.reachable(*entries)
    by_file: dict[str, list[str]] = {}
    for key in reached:
        by_file.setdefault(graph.file_of(key), []).append(key.partition(":")[2])
    by_package: dict[str, int] = {}
    for file in by_file:
        by_package[package_of_file(file)] = by_package.get(package_of_file(file), 0) + 1
    return {
        "entries": list(entries),
        "functions": len(reached),
        "files": len(by_file),
        "by_package": dict(sorted(by_package.items())),
        "file_list": {file: sorted(names) for file, names in sorted(by_file.items())},
    }


def duplicate_pairs(seconds: int) -> dict | None:
    """{"pairs", "files", "command"} from `duplicates --seconds N` over the repository, or None
    when the command is not on PATH or its first line does not count pairs."""
    if shutil.which("duplicates") is None:
        return None
    command = ["duplicates", "--seconds", str(seconds)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=seconds + 120)
    first = done.stdout.splitlines()[0] if done.stdout else ""
    match = DUPLICATES_LINE.match(first)
    if match is None:
        return None
    incomplete = any(line.startswith("incomplete:") for line in done.stdout.splitlines())
    return {
        "pairs": int(match.group(1)),
        "files": int(match.group(2)),
        "incomplete": incomplete,
        "command": " ".join(command),
    }


def measure(duplicates: bool, src: Path = SRC) -> dict:
    """Every measure of the tree under `src` (the duplicates run covers the repository)."""
    paths = sources(src)
    folders = modules_per_folder(paths, src)
    lines = line_counts(paths, src)
    graph = CallGraph(src)
    return {
        "modules_per_folder": dict(sorted(folders.items())),
        "max_modules_in_a_folder": max(folders.values()),
        "folders_over_max_modules": {k: v for k, v in sorted(folders.items()) if v > MAX_MODULES},
        "max_modules": MAX_MODULES,
        "long_file_lines": LONG_FILE,
        "files_over_long_file_lines": {k: v for k, v in sorted(lines.items(), key=lambda kv: -kv[1]) if v > LONG_FILE},
        "source_files": len(paths),
        "source_lines": sum(lines.values()),
        "layer_crossings": layer_crossings(paths, src),
        "room_crossings": room_crossings(paths, src),
        "import_cycles": import_cycles(paths, src),
        "step_traces": {name: step_trace(graph, entries) for name, entries in STEP_ENTRIES.items()},
        "duplicates": duplicate_pairs(DUPLICATES_SECONDS) if duplicates else None,
    }


def baseline(revision: str) -> dict:
    """The same measures (no duplicates run) of src/scalerl at git `revision`, read from a copy
    of its tree (`git archive`), for a before / after."""
    commit = subprocess.run(
        ["git", "rev-parse", revision], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "archive", commit, "src"], cwd=REPO, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
        result = measure(duplicates=False, src=Path(folder) / "src" / "scalerl")
    return {"commit": commit, **result}


def print_table(result: dict) -> None:
    print(f"{'measure':<48} {'value':>12}")
    rows = [
        ("source files / lines under src/scalerl", f"{result['source_files']} / {result['source_lines']}"),
        ("most modules in one folder", result["max_modules_in_a_folder"]),
        (f"folders over {result['max_modules']} modules", len(result["folders_over_max_modules"])),
        (f"files over {result['long_file_lines']} lines", len(result["files_over_long_file_lines"])),
        ("imports that run up a layer", len(result["layer_crossings"])),
        ("imports that run up a room", len(result["room_crossings"])),
        ("import cycles", len(result["import_cycles"])),
    ]
    for name, trace in result["step_traces"].items():
        rows.append((f"{name}: files (functions)", f"{trace['files']} ({trace['functions']})"))
    if result["duplicates"] is not None:
        dup = result["duplicates"]
        rows.append(("duplicates: pairs (files read)", f"{dup['pairs']} ({dup['files']})"))
    for name, value in rows:
        print(f"{name:<48} {value!s:>12}")
    for file, count in result["files_over_long_file_lines"].items():
        print(f"  over {result['long_file_lines']}: {file} {count}")
    for name, trace in result["step_traces"].items():
        split = ", ".join(f"{package} {count}" for package, count in trace["by_package"].items())
        print(f"  {name} ({', '.join(trace['entries'])}) by package: {split}")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--quick", action="store_true", help="skip the duplicates run; pair with --out")
    parser.add_argument("--baseline", metavar="REV", help="also measure src/ at git revision REV (before / after)")
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    result = measure(duplicates=not args.quick)
    print_table(result)
    if args.baseline:
        result["baseline"] = baseline(args.baseline)
        print(f"\nbaseline at {args.baseline} ({result['baseline']['commit'][:12]}):")
        print_table(result["baseline"])
    write_result(args.out, result, command_line("code_map", argv), machine_block=machine())


if __name__ == "__main__":
    main()
