"""Make user text (column names, file names, run names) safe wherever it is printed or drawn.

Lowest layer (imports nothing of scalerl). Three dangers: control characters (terminal escape
sequences, newlines that break the one-line `error:` contract), rich markup (`[red]`, `[/x]`
raise or restyle) and matplotlib mathtext (`$\\foo$` fails to render). File names that are not
valid UTF-8 arrive as lone surrogates and cannot be encoded for printing: they are shown escaped.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def plain(text: object) -> str:
    """`text` with control characters as `\\xNN` and undecodable bytes as `\\udcNN` (printable, one line)."""
    value = str(text).encode("utf-8", "backslashreplace").decode("utf-8")
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", value)


def for_rich(text: object) -> str:
    """`plain(text)` with rich markup escaped, for interpolation into a rich markup string."""
    from rich.markup import escape

    return escape(plain(text))


def for_mathtext(text: object) -> str:
    """`plain(text)` safe as a matplotlib label: `$` escaped so no mathtext is parsed."""
    return plain(text).replace("$", r"\$")
