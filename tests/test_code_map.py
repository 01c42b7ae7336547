"""benchmarks/source_graph.py and benchmarks/call_graph.py on a small package written here: the
known upward import, cycle and crowded folder are found, and the call graph follows exactly the
calls its rules name (imports, module attributes, annotated objects, constructors, properties)
and no call through a registry."""

from __future__ import annotations

from pathlib import Path

from benchmarks.call_graph import CallGraph
from benchmarks.code_map import package_of_file, step_trace
from benchmarks.source_graph import import_cycles, layer_crossings, modules_per_folder, room_crossings, sources

FILES = {
    "__init__.py": "",
    "errors.py": "class ScaleRLError(Exception):\n    pass\n",
    "rl/__init__.py": "",
    "rl/maths.py": (
        "def square(x):\n    return x * x\n\ndef unused():\n    return 0\n\nREGISTRY = {'square': square}\n"
    ),
    "rl/upward.py": "from scalerl.train.step import step\n",
    "train/__init__.py": "",
    "train/batch/__init__.py": "",
    "train/batch/rows.py": (
        "from scalerl.rl import maths\n\n"
        "class Rows:\n"
        "    def __post_init__(self):\n        self.n = 0\n\n"
        "    @property\n    def size(self):\n        return maths.square(self.n)\n\n"
        "    def total(self):\n        return self.size\n"
    ),
    "train/config/__init__.py": "",
    "train/config/settings.py": "from scalerl.train.batch.rows import Rows\n",
    "train/state.py": (
        "from scalerl.train.batch.rows import Rows\n\n"
        "class State:\n"
        "    rows: Rows\n\n"
        "    def book(self):\n        return self.rows.total()\n"
    ),
    "train/step.py": (
        "from typing import Protocol\n\n"
        "from scalerl.rl.maths import REGISTRY\n"
        "from scalerl.train import state as state_module\n"
        "from scalerl.train.batch.rows import Rows\n\n"
        "def step(state: 'state_module.State'):\n"
        "    rows = Rows()\n"
        "    REGISTRY['square'](2)\n"
        "    return state.book() + helper(rows, None)\n\n"
        "def helper(rows: Rows | None, scorer: 'Scorer'):\n    scorer.score()\n    return rows.size\n\n"
        "class Scorer(Protocol):\n    def score(self): ...\n"
    ),
    "train/a.py": "import scalerl.train.b\n",
    "train/b.py": "from scalerl.train import a\n",
}


def write_package(root: Path) -> Path:
    src = root / "scalerl"
    for name, text in FILES.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    return src


def test_source_graph_finds_the_known_crossings_and_cycle(tmp_path: Path) -> None:
    src = write_package(tmp_path)
    paths = sources(src)
    assert layer_crossings(paths, src) == ["scalerl/rl/upward.py:1 imports scalerl.train.step"]
    # config ranks below batch among train's rooms: importing it runs up a room
    assert room_crossings(paths, src) == ["scalerl/train/config/settings.py:1 imports scalerl.train.batch.rows"]
    assert import_cycles(paths, src) == ["scalerl.train.a -> scalerl.train.b -> scalerl.train.a"]
    assert modules_per_folder(paths, src)["scalerl/train"] == 4


def test_an_import_down_a_room_is_allowed(tmp_path: Path) -> None:
    src = write_package(tmp_path)
    (src / "train/config/settings.py").write_text("")
    (src / "train/batch/rows.py").write_text("from scalerl.train.config import settings\n")
    assert room_crossings(sources(src), src) == []


def test_the_call_graph_follows_named_calls_only(tmp_path: Path) -> None:
    graph = CallGraph(write_package(tmp_path))
    reached = graph.reachable("scalerl.train.step:step")
    assert reached == {
        "scalerl.train.step:step",
        "scalerl.train.step:helper",  # a plain call of the same file
        "scalerl.train.batch.rows:Rows.__post_init__",  # the constructor
        "scalerl.train.batch.rows:Rows.size",  # a property of an annotated `Rows | None`
        "scalerl.train.state:State.book",  # a method of a parameter annotated through a module
        "scalerl.train.batch.rows:Rows.total",  # a method of a class-annotated field
        "scalerl.rl.maths:square",  # through the module attribute maths.square
    }  # REGISTRY['square'](2) is not followed, nor the Protocol's `score`, nor `unused`
    trace = step_trace(graph, ("scalerl.train.step:step",))
    assert trace["files"] == 4 and trace["functions"] == 7
    assert trace["by_package"] == {"rl": 1, "train": 2, "train/batch": 1}


def test_package_of_file() -> None:
    assert package_of_file("scalerl/train/batch/rows.py") == "train/batch"
    assert package_of_file("scalerl/errors.py") == "scalerl"
