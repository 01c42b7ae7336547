"""docs/ARCHITECTURE.md is checked against the code: every `path.py:function` or
`path.py:Class.method` it names is defined there (read with ast), and in "One step, in order"
every `a` -> `b` is a direct call (b is called by name inside a's body) and each step's first
function is called by name inside a function of an earlier step.

Paths are under src/scalerl/ (or the repository root: benchmarks/, tests/). A bare `name` or
`Class.method` in a step is looked up in the file of the reference before it.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "scalerl"
MAP = REPO / "docs" / "ARCHITECTURE.md"
REFERENCE = re.compile(r"`((?:[\w]+/)*[\w]+\.py):([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)?)`")
SPAN = re.compile(r"`([^`]+)`")
STEP = re.compile(r"^(\d+)\. ", re.M)


def source_file(path: str) -> Path | None:
    """The file a map path names: under src/scalerl, else under the repository root."""
    for root in (SRC, REPO):
        if (root / path).is_file():
            return root / path
    return None


@functools.cache
def definitions(file: Path) -> dict[str, ast.AST]:
    """Every function (nested ones too) and class method of a file: {'name': node,
    'Class.name': node, 'Class': node}."""
    found: dict[str, ast.AST] = {}
    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.setdefault(node.name, node)  # a command defined inside its registering function too
        elif isinstance(node, ast.ClassDef):
            found[node.name] = node
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found[f"{node.name}.{item.name}"] = item
    return found


def calls_in(node: ast.AST) -> set[str]:
    """The names called inside a function's body: f(...) gives f, x.y.f(...) gives f, and a Ray
    actor call x.f.remote(...) gives f too."""
    names = set()
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call):
            func = inner.func
            if isinstance(func, ast.Name):
                names.add(func.id)
            elif isinstance(func, ast.Attribute):
                names.add(func.attr)
                if func.attr == "remote" and isinstance(func.value, ast.Attribute):
                    names.add(func.value.attr)
    return names


def resolve(name: str, file: Path | None) -> ast.AST | None:
    """A bare `name` or `Class.method` looked up in `file`; a bare method name also as any class's."""
    if file is None:
        return None
    found = definitions(file)
    if name in found:
        return found[name]
    methods = [node for key, node in found.items() if key.endswith(f".{name}")]
    return methods[0] if len(methods) == 1 else None


def called_name(name: str) -> str:
    """The name a call of `name` uses: a method's own name, `__init__` as its class's."""
    cls, _, method = name.rpartition(".")
    return cls if method == "__init__" else method


def step_section(title: str) -> list[str]:
    """The numbered steps under the paragraph starting with `title` in "One step, in order"."""
    text = MAP.read_text(encoding="utf-8")
    section = text.split("## One step, in order", 1)[1].split("\n## ", 1)[0]
    block = section.split(title, 1)[1].split("\n\n", 2)[1]
    starts = [m.start() for m in STEP.finditer(block)]
    return [block[a:b] for a, b in zip(starts, starts[1:] + [len(block)])]


def outside_parentheses(text: str) -> str:
    """`text` with every parenthesised part removed (nested ones too)."""
    depth, kept = 0, []
    for char in text:
        depth += char == "("
        if depth == 0:
            kept.append(char)
        depth -= char == ")" and depth > 0
    return "".join(kept)


def step_functions(step: str) -> list[tuple[str, str, ast.AST | None, bool]]:
    """(span, the name it calls, its definition, whether an arrow leads to it) for each code span
    naming a function, outside parentheses, in order; a bare name resolves in the file of the
    reference before it."""
    result, file = [], None
    text = outside_parentheses(step)
    for match in SPAN.finditer(text):
        span = match.group(1)
        ref = REFERENCE.fullmatch(f"`{span}`")
        if ref:
            file, name = source_file(ref.group(1)), ref.group(2)
        elif re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)?", span):
            name = span
        else:
            continue
        arrowed = text[: match.start()].rstrip().endswith("->")
        result.append((span, called_name(name), resolve(name, file), arrowed))
    return result


def all_functions(step: str) -> list[ast.AST]:
    """Every reference of a step with a path (inside parentheses too), resolved."""
    found = []
    for path, name in REFERENCE.findall(step):
        node = resolve(name, source_file(path))
        if node is not None:
            found.append(node)
    return found


PATHS = ("Synchronous (", "Asynchronous (")


def test_every_reference_in_the_map_is_defined() -> None:
    references = REFERENCE.findall(MAP.read_text(encoding="utf-8"))
    assert len(references) > 40
    missing = [
        f"{path}:{name}"
        for path, name in references
        if source_file(path) is None or name not in definitions(source_file(path))
    ]
    assert missing == []


@pytest.mark.parametrize("title", PATHS)
def test_every_arrow_is_a_direct_call(title: str) -> None:
    broken = []
    for step in step_section(title):
        functions = step_functions(step)
        assert functions, step
        for (before, _, caller, _), (after, name, callee, arrowed) in zip(functions, functions[1:]):
            if not arrowed:
                continue
            if caller is None or callee is None or name not in calls_in(caller):
                broken.append(f"{before} -> {after}")
    assert broken == []


@pytest.mark.parametrize("title", PATHS)
def test_each_step_is_called_from_an_earlier_step(title: str) -> None:
    steps = step_section(title)
    assert len(steps) >= 8
    out_of_order, earlier = [], all_functions(steps[0])
    for step in steps[1:]:
        _, first, node, _ = step_functions(step)[0]
        if node is None or not any(first in calls_in(caller) for caller in earlier):
            out_of_order.append(step.split("\n")[0])
        earlier += all_functions(step)
    assert out_of_order == []


def test_the_checks_fail_on_a_wrong_map() -> None:
    trainer = source_file("train/trainer.py")
    assert called_name("step_rollouts.generate_step") in calls_in(resolve("_generate", trainer))
    assert "train_step" not in calls_in(resolve("_generate", trainer))
    assert resolve("validation_pass_rate", source_file("train/held_out.py")) is None
    assert [
        span
        for span, _, _, arrowed in step_functions(
            "`train/trainer.py:run_one_step` -> `_generate` (`train/x.py:y` -> `z`)"
        )
        if arrowed
    ] == ["_generate"]
