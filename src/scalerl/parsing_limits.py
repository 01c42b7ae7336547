"""Bounded parsing of the JSON, YAML and TOML that users hand in (config and task files): nesting
depth, YAML alias expansion and number ranges are capped, so a hostile file ends in one short
ValueError (the caller names the file) instead of a RecursionError, a MemoryError or minutes of
work; `shown()` quotes at most ~200 characters of a value in a message.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any

MAX_DEPTH = 64  # nesting of objects/lists; real configs and task rows use fewer than 6
MAX_NODES = 100_000  # values of one document, YAML aliases expanded
MAX_INT = 2**63  # |integer| must stay below: every integer knob fits an int64
MAX_QUOTE_CHARS = 200


def shown(value: Any, limit: int = MAX_QUOTE_CHARS) -> str:
    """repr(value) cut to `limit` characters ('...' and the full length appended), without ever
    building the full repr of a huge integer or container."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * limit:
        return f"<an integer of {value.bit_length()} bits>"
    if isinstance(value, (dict, list, tuple)) and len(value) > limit:
        return f"<a {type(value).__name__} of {len(value)} items>"
    if isinstance(value, (dict, list, tuple)):
        import reprlib

        short = reprlib.Repr()
        short.maxlevel, short.maxdict, short.maxlist, short.maxtuple = 3, 8, 8, 8
        short.maxstring = short.maxother = limit
        text = short.repr(value)
    else:
        text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def check_values(value: Any, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> Any:
    """`value` (parsed JSON/YAML/TOML) unchanged when its nesting is at most `max_depth`, it holds
    at most `max_nodes` values, every integer has |n| < 2**63 and every float is finite; else
    ValueError saying which bound it breaks. Iterative: safe on any depth."""
    stack, nodes = [(value, 0)], 0
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            raise ValueError(f"holds more than {max_nodes} values")
        if depth > max_depth:
            raise ValueError(f"is nested deeper than {max_depth} levels")
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for pair in item.items() for child in pair)
        elif isinstance(item, (list, tuple)):
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, int) and not isinstance(item, bool) and not -MAX_INT < item < MAX_INT:
            raise ValueError(f"holds an integer out of range ({shown(item)}; |n| must be < 2**63)")
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"holds a non-finite number ({item!r})")
    return value


def _refuse_constant(name: str) -> float:
    raise ValueError(f"holds {name}, which is not a JSON number")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 19:
        raise ValueError(f"holds an integer of {len(text.lstrip('-'))} digits (|n| must be < 2**63)")
    return int(text)


def _digits_error(error: ValueError) -> ValueError:
    """Python's own refusal of a many-thousand-digit integer, said in a short sentence."""
    if "integer string conversion" in str(error):
        return ValueError("holds an integer of thousands of digits (|n| must be < 2**63)")
    return error


def load_json(text: str) -> Any:
    """json.loads with the bounds of `check_values`; NaN/Infinity tokens refused. ValueError
    (json.JSONDecodeError for syntax) on a bad or unbounded document."""
    try:
        value = json.loads(text, parse_int=_bounded_int, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError(f"is nested deeper than {MAX_DEPTH} levels") from None
    return check_values(value)


def load_toml(text: str) -> Any:
    """tomllib.loads with the bounds of `check_values` (ValueError, tomllib.TOMLDecodeError included)."""
    import tomllib

    try:
        value = tomllib.loads(text)
    except RecursionError:
        raise ValueError(f"is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as error:
        raise _digits_error(error) from None
    return check_values(value)


@functools.lru_cache(maxsize=1)
def _yaml_loader() -> type:
    import yaml

    class BoundedSafeLoader(yaml.SafeLoader):
        """SafeLoader that refuses a document nested deeper than MAX_DEPTH or expanding (aliases
        followed) to more than MAX_NODES values, before any Python object is built."""

        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self._depth = 0

        def fetch_flow_collection_start(self, TokenClass):  # noqa: ANN001, N803 - PyYAML's signature
            # Refused while scanning: the scanner would otherwise read every `[` of the file first.
            if self.flow_level >= MAX_DEPTH:
                raise ValueError(f"is nested deeper than {MAX_DEPTH} levels")
            return super().fetch_flow_collection_start(TokenClass)

        def compose_node(self, parent, index):  # noqa: ANN001 - PyYAML's signature
            self._depth += 1
            try:
                if self._depth > MAX_DEPTH:
                    raise ValueError(f"is nested deeper than {MAX_DEPTH} levels")
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

        def compose_document(self):  # noqa: ANN201
            node = super().compose_document()
            if _expanded_size(node) > MAX_NODES:
                raise ValueError(f"expands to more than {MAX_NODES} values (YAML aliases); write the values out")
            return node

    return BoundedSafeLoader


def _expanded_size(root: Any) -> int:
    """Values in a YAML node graph with every alias expanded: size(n) = 1 + sum of its children's,
    memoised per node, so a shared node costs once to count (and the count stops early)."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        value = node.value if isinstance(node.value, list) else []
        children = [child for item in value for child in (item if isinstance(item, tuple) else (item,))]
        if children_done:
            visiting.discard(id(node))
            sizes[id(node)] = min(MAX_NODES + 1, 1 + sum(sizes[id(child)] for child in children))
            continue
        if id(node) in visiting:
            raise ValueError("holds a recursive alias (a value that contains itself)")
        visiting.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def load_yaml(text: str) -> Any:
    """yaml.safe_load with aliases' expansion and nesting capped, then the bounds of `check_values`
    (ValueError, yaml.YAMLError included)."""
    loader = _yaml_loader()(text)
    try:
        value = loader.get_single_data()
    except ValueError as error:
        raise _digits_error(error) from None
    finally:
        loader.dispose()
    return check_values(value)
