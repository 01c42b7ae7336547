"""Import layering of scalerl: every import (module level and inside functions) goes one way.

Layers, lowest first: errors < forecast < report < rl < models < tasks < train < distributed < study
< integrations < cli. A module may import its own layer or a lower one, never a higher one, and the
module-level import graph between modules has no cycle.

Inside a layer, its sub-packages (rooms) are ordered too, lowest first (ROOMS), and the layer's own
top-level modules (train's step and loop, distributed's actors and pipeline) sit above all its
rooms: a room imports itself or a lower room, never a higher one and never the top. No folder
holds more than MAX_MODULES modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "scalerl"
LAYERS = (
    "errors",
    "forecast",
    "report",
    "rl",
    "models",
    "tasks",
    "train",
    "distributed",
    "study",
    "integrations",
    "cli",
)
ROOMS = {
    "train": ("records", "config", "batch", "parallel", "guards", "checkpoint"),
    "distributed": ("weight_sync",),
    "forecast": ("readers",),
}
MAX_MODULES = 20


def module_name(path: Path) -> str:
    """Dotted module name of a source file under src/scalerl."""
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[tuple[str, int]]:
    """Every scalerl module the file imports (anywhere in it), with the line number."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names if alias.name.startswith("scalerl")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("scalerl"):
                found.append((target, node.lineno))
                # `from scalerl.x import y` may name a submodule y
                found += [
                    (f"{target}.{alias.name}", node.lineno)
                    for alias in node.names
                    if _is_module(f"{target}.{alias.name}")
                ]
    return found


def _is_module(name: str) -> bool:
    rel = Path(*name.split(".")[1:])
    return (SRC / rel).with_suffix(".py").exists() or (SRC / rel / "__init__.py").exists()


def layer_of(name: str) -> int | None:
    """Index of a module's layer (errors.py, checks.py and the package root are the lowest)."""
    parts = name.split(".")
    if len(parts) < 2 or parts[1] in ("errors", "checks", "escaping", "parsing_limits", "__main__"):
        return 0
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else None


SOURCES = sorted(SRC.rglob("*.py"))


def test_every_top_level_module_has_a_layer() -> None:
    unknown = [module_name(p) for p in SOURCES if layer_of(module_name(p)) is None]
    assert unknown == []


def test_no_import_crosses_a_layer_upwards() -> None:
    crossed = []
    for path in SOURCES:
        here = module_name(path)
        if here == "scalerl.__main__":
            continue
        for target, line in imports_of(path):
            if (layer_of(target) or 0) > (layer_of(here) or 0):
                crossed.append(f"{path.relative_to(SRC.parent)}:{line} imports {target}")
    assert crossed == []


def test_no_import_cycle() -> None:
    graph = {module_name(p): {t for t, _ in imports_of(p) if _is_module(t)} for p in SOURCES}
    # a package's __init__ importing its own submodules is not a cycle
    for name in graph:
        graph[name] = {t for t in graph[name] if t != name and not name.startswith(t + ".")}
    state: dict[str, int] = {}
    cycles: list[str] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(
                    " -> ".join(stack[stack.index(nxt) :] + [node, nxt]) if nxt in stack else f"{node} -> {nxt}"
                )
            elif nxt not in state:
                visit(nxt, stack + [node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    assert cycles == []


def room_of(name: str) -> tuple[str, int] | None:
    """(layer, rank of the module's room in ROOMS[layer]; the layer's top-level modules rank above
    every room), or None outside a layer with rooms."""
    parts = name.split(".")
    if len(parts) < 3 or parts[1] not in ROOMS:
        return None
    rooms = ROOMS[parts[1]]
    return parts[1], rooms.index(parts[2]) if parts[2] in rooms else len(rooms)


def test_every_sub_package_is_a_room_in_the_order() -> None:
    packages = {module_name(p) for p in SOURCES if p.name == "__init__.py"}
    unplaced = [
        name
        for name in packages
        if name.count(".") == 2 and name.split(".")[2] not in ROOMS.get(name.split(".")[1], ())
    ]
    nested = [name for name in packages if name.count(".") > 2]
    assert unplaced == [] and nested == []


def test_no_import_runs_up_a_room() -> None:
    crossed = []
    for path in SOURCES:
        here = room_of(module_name(path))
        for target, line in imports_of(path):
            there = room_of(target)
            if here and there and here[0] == there[0] and there[1] > here[1]:
                crossed.append(f"{path.relative_to(SRC.parent)}:{line} imports {target}")
    assert crossed == []


def test_no_folder_holds_more_than_max_modules() -> None:
    counts: dict[Path, int] = {}
    for path in SOURCES:
        if path.name != "__init__.py":
            counts[path.parent] = counts.get(path.parent, 0) + 1
    crowded = {str(folder.relative_to(SRC.parent)): n for folder, n in counts.items() if n > MAX_MODULES}
    assert crowded == {}


def test_the_room_order_sees_an_upward_import() -> None:
    assert room_of("scalerl.train.records.safe_writes") < room_of("scalerl.train.config.config_io")
    assert room_of("scalerl.train.guards.finite_checks") < room_of("scalerl.train.checkpoint.save_load")
    assert room_of("scalerl.train.checkpoint.save_load") < room_of("scalerl.train.trainer")
    assert room_of("scalerl.rl.losses") is None and room_of("scalerl.errors") is None


def test_the_checker_sees_a_crossing_and_a_cycle(tmp_path: Path) -> None:
    source = "def f():\n    from scalerl.cli.app import app\n    return app\n"
    tree = ast.parse(source)
    names = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert names == ["scalerl.cli.app"]
    assert layer_of("scalerl.cli.app") > layer_of("scalerl.rl.losses")
    assert layer_of("scalerl.errors") == 0


def test_no_find_spec_guard_for_shipped_modules() -> None:
    offenders = [
        str(p.relative_to(SRC.parent))
        for p in SOURCES
        if 'find_spec("scalerl' in p.read_text(encoding="utf-8")
        or "find_spec('scalerl" in p.read_text(encoding="utf-8")
    ]
    assert offenders == []


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(pytest.main([__file__, "-q"]))
