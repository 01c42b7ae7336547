"""A static call graph of scalerl read with `ast` (nothing imported): which functions a function
calls directly, each call resolved by name through the file's imports.

A call is followed when its target can be named from the source alone:

- `f(...)`: a function or class of the same file, or one imported (through package re-exports);
- `module.f(...)` with `module` an imported scalerl module, `Class.f(...)` with `Class` a scalerl class;
- `x.f(...)` where `x` has a known scalerl class: `self` / `cls` in a method, a parameter or a
  variable annotated with the class, a variable assigned `Class(...)` or the result of a function
  annotated to return it, and attributes of such objects whose class is annotated (dataclass
  fields, `self.x: T`) or assigned `self.x = Class(...)`;
- `Class(...)` runs `__init__` and `__post_init__` where the class defines them; a read of a
  `@property` of a known class runs it.

A method of a `typing.Protocol` class is an interface whose body never runs (the code that runs is
the implementing class's, which the source does not name): a call of one is not followed.
Everything else (calls through a registry, a callback, a duck-typed task, torch) is not followed
either: the graph is a lower bound of what runs.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.source_graph import SRC, import_target, is_module, module_name, package_of, sources

Key = tuple[str, str]  # (module, "function" or "Class.method")


@dataclass
class ModuleInfo:
    """One file: its top-level functions and classes, and the names its imports bind."""

    name: str
    path: Path
    functions: dict[str, ast.AST] = field(default_factory=dict)  # "f", "Class.m"
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)  # local name -> dotted scalerl target


def _read(path: Path, src: Path) -> ModuleInfo:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    info = ModuleInfo(module_name(path, src), path)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            info.functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            info.classes[node.name] = node
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    info.functions[f"{node.name}.{item.name}"] = item
    package = package_of(path, src)
    for node in ast.walk(tree):  # imports inside functions bind names too
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("scalerl"):
                    info.imports[alias.asname or alias.name.split(".")[0]] = alias.asname and alias.name or "scalerl"
        elif isinstance(node, ast.ImportFrom):
            target = import_target(node, package)
            if target.startswith("scalerl"):
                for alias in node.names:
                    info.imports[alias.asname or alias.name] = f"{target}.{alias.name}"
    return info


class CallGraph:
    """The functions of src/scalerl and the direct calls between them."""

    def __init__(self, src: Path = SRC) -> None:
        self.src = src
        self.modules = {info.name: info for info in (_read(p, src) for p in sources(src))}
        self._callees: dict[str, frozenset[str]] = {}

    # names -------------------------------------------------------------------------------------

    def resolve_dotted(self, dotted: str, depth: int = 0) -> tuple[str, str] | None:
        """("module", name), ("function", key) or ("class", key) for a dotted scalerl name,
        following re-exports."""
        if depth > 8:
            return None
        if dotted in self.modules and is_module(dotted, self.src):
            return ("module", dotted)
        module, _, attr = dotted.rpartition(".")
        info = self.modules.get(module)
        if info is None:
            return None
        return self.resolve_in(info, attr, depth + 1)

    def resolve_in(self, info: ModuleInfo, name: str, depth: int = 0) -> tuple[str, str] | None:
        """What `name` means at the top of a file."""
        if name in info.classes:
            return ("class", f"{info.name}:{name}")
        if name in info.functions:
            return ("function", f"{info.name}:{name}")
        if name in info.imports:
            return self.resolve_dotted(info.imports[name], depth)
        return None

    def class_def(self, key: str) -> tuple[ModuleInfo, ast.ClassDef]:
        module, _, name = key.partition(":")
        info = self.modules[module]
        return info, info.classes[name]

    def method(self, class_key: str, name: str, depth: int = 0) -> str | None:
        """`Class.name` as a function key, looked up on the class, then on its scalerl bases."""
        info, node = self.class_def(class_key)
        if f"{node.name}.{name}" in info.functions:
            return f"{info.name}:{node.name}.{name}"
        for base in node.bases:
            resolved = self.annotation_class(info, base)
            if resolved and depth < 8:
                found = self.method(resolved, name, depth + 1)
                if found:
                    return found
        return None

    # types -------------------------------------------------------------------------------------

    def annotation_class(self, info: ModuleInfo, node: ast.AST | None) -> str | None:
        """The scalerl class an annotation names (`T`, `mod.T`, `"T"`, `T | None`), or None."""
        if node is None:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                node = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self.annotation_class(info, node.left) or self.annotation_class(info, node.right)
        resolved = self.expression(info, node, {}, None)
        return resolved[1] if resolved and resolved[0] == "class" else None

    def attribute_class(self, class_key: str, attr: str) -> str | None:
        """The class of `obj.attr` for an object of `class_key`: a class-level annotation, a
        `self.attr: T` or `self.attr = T(...)` in a method, or a property's return annotation."""
        info, node = self.class_def(class_key)
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.target.id == attr:
                return self.annotation_class(info, item.annotation)
            if isinstance(item, ast.FunctionDef) and item.name == attr and _is_property(item):
                return self.annotation_class(info, item.returns)
        for item in ast.walk(node):
            if isinstance(item, ast.AnnAssign) and _is_self_attr(item.target, attr):
                return self.annotation_class(info, item.annotation)
            if isinstance(item, ast.Assign) and any(_is_self_attr(t, attr) for t in item.targets):
                found = self.value_class(info, item.value, {}, class_key)
                if found:
                    return found
        return None

    def value_class(self, info: ModuleInfo, node: ast.AST, local: dict[str, str], owner: str | None) -> str | None:
        """The scalerl class of an expression's value, where the source says it."""
        if isinstance(node, ast.Call):
            resolved = self.expression(info, node.func, local, owner)
            if resolved and resolved[0] == "class":
                return resolved[1]
            if resolved and resolved[0] == "function":
                module, _, name = resolved[1].partition(":")
                target = self.modules[module]
                returns = target.functions[name].returns
                if isinstance(returns, ast.Name) and returns.id == "Self" and "." in name:
                    return f"{module}:{name.split('.')[0]}"
                return self.annotation_class(target, returns)
            return None
        resolved = self.expression(info, node, local, owner)
        return resolved[1] if resolved and resolved[0] == "instance" else None

    def expression(self, info: ModuleInfo, node: ast.AST, local: dict[str, str], owner: str | None):
        """("module" | "class" | "function" | "instance", key) for a name or an attribute chain."""
        if isinstance(node, ast.Name):
            if node.id in local:
                return ("instance", local[node.id])
            if node.id in ("self", "cls") and owner:
                return ("instance", owner)
            return self.resolve_in(info, node.id)
        if isinstance(node, ast.Attribute):
            base = self.expression(info, node.value, local, owner)
            if base is None:
                return None
            kind, key = base
            if kind == "module":
                return self.resolve_dotted(f"{key}.{node.attr}")
            if kind in ("class", "instance"):
                found = self.method(key, node.attr)
                if found:
                    return ("function", found)
                if kind == "instance":
                    attr_class = self.attribute_class(key, node.attr)
                    return ("instance", attr_class) if attr_class else None
        return None

    # calls -------------------------------------------------------------------------------------

    def callees(self, key: str) -> frozenset[str]:
        """The function keys `key` calls directly (nested functions' calls count as its own)."""
        if key not in self._callees:
            self._callees[key] = self._find_callees(key)
        return self._callees[key]

    def _find_callees(self, key: str) -> frozenset[str]:
        module, _, name = key.partition(":")
        info = self.modules[module]
        node = info.functions[name]
        owner = f"{module}:{name.split('.')[0]}" if "." in name else None
        local = self._local_types(info, node, owner)
        found: set[str] = set()
        for inner in ast.walk(node):
            if isinstance(inner, ast.Call):
                resolved = self.expression(info, inner.func, local, owner)
                if resolved and resolved[0] == "function" and not self._in_protocol(resolved[1]):
                    found.add(resolved[1])
                elif resolved and resolved[0] == "class":
                    found |= {
                        m
                        for m in (self.method(resolved[1], "__init__"), self.method(resolved[1], "__post_init__"))
                        if m
                    }
            elif isinstance(inner, ast.Attribute) and isinstance(inner.ctx, ast.Load):
                base = self.expression(info, inner.value, local, owner)
                if base and base[0] == "instance":
                    prop = self.method(base[1], inner.attr)
                    if prop and _is_property(self._node(prop)):
                        found.add(prop)
        found.discard(key)
        return frozenset(found)

    def _in_protocol(self, key: str) -> bool:
        """Whether `key` is a method of a class that derives from typing.Protocol."""
        module, _, name = key.partition(":")
        if "." not in name:
            return False
        node = self.modules[module].classes[name.split(".")[0]]
        return any(
            (isinstance(base, ast.Name) and base.id == "Protocol")
            or (isinstance(base, ast.Attribute) and base.attr == "Protocol")
            for base in node.bases
        )

    def _node(self, key: str) -> ast.AST:
        module, _, name = key.partition(":")
        return self.modules[module].functions[name]

    def _local_types(self, info: ModuleInfo, node: ast.AST, owner: str | None) -> dict[str, str]:
        """{variable: scalerl class} from parameter annotations and assignments, in source order."""
        local: dict[str, str] = {}
        args = node.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            found = self.annotation_class(info, arg.annotation)
            if found:
                local[arg.arg] = found
        for inner in ast.walk(node):
            if isinstance(inner, ast.AnnAssign) and isinstance(inner.target, ast.Name):
                found = self.annotation_class(info, inner.annotation)
            elif isinstance(inner, ast.Assign) and len(inner.targets) == 1 and isinstance(inner.targets[0], ast.Name):
                found = self.value_class(info, inner.value, local, owner)
            else:
                continue
            if found:
                local[(inner.target if isinstance(inner, ast.AnnAssign) else inner.targets[0]).id] = found
        return local

    def reachable(self, *entries: str) -> set[str]:
        """Every function reachable from `entries` by direct calls, the entries included."""
        seen, todo = set(entries), list(entries)
        while todo:
            for callee in self.callees(todo.pop()):
                if callee not in seen:
                    seen.add(callee)
                    todo.append(callee)
        return seen

    def file_of(self, key: str) -> str:
        """The function's file, relative to src/."""
        return str(self.modules[key.partition(":")[0]].path.relative_to(self.src.parent))


def _is_property(node: ast.AST) -> bool:
    return any(
        (isinstance(d, ast.Name) and d.id in ("property", "cached_property"))
        or (isinstance(d, ast.Attribute) and d.attr == "cached_property")
        for d in getattr(node, "decorator_list", ())
    )


def _is_self_attr(target: ast.AST, attr: str) -> bool:
    return (
        isinstance(target, ast.Attribute)
        and target.attr == attr
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    )
