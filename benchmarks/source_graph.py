"""scalerl's source read with `ast` (nothing imported): module names, the imports of each file,
the layers and rooms an import may not run up, import cycles and crowded folders. The layering
test (tests/test_layering.py) asserts on these; benchmarks/code_map.py counts them.

Layers, lowest first: errors < forecast < report < rl < models < tasks < train < distributed <
study < integrations < cli. A module may import its own layer or a lower one. Inside a layer its
sub-packages (rooms) are ordered too, lowest first (ROOMS), and the layer's own top-level modules
sit above all its rooms.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

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
BASE_MODULES = ("errors", "checks", "escaping", "parsing_limits", "__main__")  # layer 0 with errors
ROOMS = {
    "train": ("records", "config", "batch", "parallel", "guards", "checkpoint"),
    "distributed": ("weight_sync",),
    "forecast": ("readers",),
}
MAX_MODULES = 20


def sources(src: Path = SRC) -> list[Path]:
    """Every .py file of the package, sorted."""
    return sorted(src.rglob("*.py"))


def module_name(path: Path, src: Path = SRC) -> str:
    """Dotted module name of a source file under src/scalerl."""
    parts = list(path.relative_to(src.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str, src: Path = SRC) -> bool:
    """Whether a dotted scalerl name is a module or a package (not an attribute of one)."""
    rel = Path(*name.split(".")[1:])
    return (src / rel).with_suffix(".py").exists() or (src / rel / "__init__.py").exists()


def import_target(node: ast.ImportFrom, package: str) -> str:
    """The module a `from ... import` names, a relative one resolved against `package`."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    base = parts[: len(parts) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def package_of(path: Path, src: Path = SRC) -> str:
    """The package a file's relative imports start from."""
    name = module_name(path, src)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def imports_of(path: Path, src: Path = SRC) -> list[tuple[str, int]]:
    """Every scalerl module the file imports (anywhere in it), with the line number; `from
    scalerl.x import y` names the submodule scalerl.x.y too when y is one."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = package_of(path, src)
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names if alias.name.startswith("scalerl")]
        elif isinstance(node, ast.ImportFrom):
            target = import_target(node, package)
            if target.startswith("scalerl"):
                found.append((target, node.lineno))
                found += [
                    (f"{target}.{alias.name}", node.lineno)
                    for alias in node.names
                    if is_module(f"{target}.{alias.name}", src)
                ]
    return found


def layer_of(name: str) -> int | None:
    """Index of a module's layer (errors.py, checks.py and the package root are the lowest)."""
    parts = name.split(".")
    if len(parts) < 2 or parts[1] in BASE_MODULES:
        return 0
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else None


def room_of(name: str) -> tuple[str, int] | None:
    """(layer, rank of the module's room in ROOMS[layer]; the layer's top-level modules rank above
    every room), or None outside a layer with rooms."""
    parts = name.split(".")
    if len(parts) < 3 or parts[1] not in ROOMS:
        return None
    rooms = ROOMS[parts[1]]
    return parts[1], rooms.index(parts[2]) if parts[2] in rooms else len(rooms)


def layer_crossings(paths: Iterable[Path], src: Path = SRC) -> list[str]:
    """`file:line imports module` for every import of a higher layer."""
    crossed = []
    for path in paths:
        here = module_name(path, src)
        if here == "scalerl.__main__":
            continue
        for target, line in imports_of(path, src):
            if (layer_of(target) or 0) > (layer_of(here) or 0):
                crossed.append(f"{path.relative_to(src.parent)}:{line} imports {target}")
    return crossed


def room_crossings(paths: Iterable[Path], src: Path = SRC) -> list[str]:
    """`file:line imports module` for every import of a higher room of the same layer."""
    crossed = []
    for path in paths:
        here = room_of(module_name(path, src))
        for target, line in imports_of(path, src):
            there = room_of(target)
            if here and there and here[0] == there[0] and there[1] > here[1]:
                crossed.append(f"{path.relative_to(src.parent)}:{line} imports {target}")
    return crossed


def import_cycles(paths: Iterable[Path], src: Path = SRC) -> list[str]:
    """Each cycle of the import graph found by a depth-first walk, as `a -> b -> a` (a package's
    __init__ importing its own submodules is not a cycle)."""
    graph = {module_name(p, src): {t for t, _ in imports_of(p, src) if is_module(t, src)} for p in paths}
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
    return cycles


def modules_per_folder(paths: Iterable[Path], src: Path = SRC) -> dict[str, int]:
    """{folder under src/: its modules, __init__.py not counted}."""
    counts: dict[str, int] = {}
    for path in paths:
        if path.name != "__init__.py":
            folder = str(path.parent.relative_to(src.parent))
            counts[folder] = counts.get(folder, 0) + 1
    return counts


def line_counts(paths: Iterable[Path], src: Path = SRC) -> dict[str, int]:
    """{file under src/: its lines}."""
    return {str(p.relative_to(src.parent)): len(p.read_text(encoding="utf-8").splitlines()) for p in paths}
