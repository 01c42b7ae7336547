"""Import layering of scalerl: every import (module level and inside functions) goes one way.

Layers, lowest first: errors < forecast < report < rl < models < tasks < train < distributed < study
< integrations < cli. A module may import its own layer or a lower one, never a higher one, and the
module-level import graph between modules has no cycle.

Inside a layer, its sub-packages (rooms) are ordered too, lowest first (ROOMS), and the layer's own
top-level modules (train's step and loop, distributed's actors and pipeline) sit above all its
rooms: a room imports itself or a lower room, never a higher one and never the top. No folder
holds more than MAX_MODULES modules. The rules and the readers of the source live in
benchmarks/source_graph.py, which benchmarks/code_map.py counts with.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from benchmarks.source_graph import (
    MAX_MODULES,
    ROOMS,
    SRC,
    import_cycles,
    layer_crossings,
    layer_of,
    module_name,
    modules_per_folder,
    room_crossings,
    room_of,
)

SOURCES = sorted(SRC.rglob("*.py"))


def test_every_top_level_module_has_a_layer() -> None:
    unknown = [module_name(p) for p in SOURCES if layer_of(module_name(p)) is None]
    assert unknown == []


def test_no_import_crosses_a_layer_upwards() -> None:
    assert layer_crossings(SOURCES) == []


def test_no_import_cycle() -> None:
    assert import_cycles(SOURCES) == []


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
    assert room_crossings(SOURCES) == []


def test_no_folder_holds_more_than_max_modules() -> None:
    crowded = {folder: n for folder, n in modules_per_folder(SOURCES).items() if n > MAX_MODULES}
    assert crowded == {}


def test_the_room_order_sees_an_upward_import() -> None:
    assert room_of("scalerl.train.records.safe_writes") < room_of("scalerl.train.config.config_io")
    assert room_of("scalerl.train.guards.divergence_guard") < room_of("scalerl.train.checkpoint.save_load")
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
