"""Writes of a run's files that a crash or a full disk cannot leave half done.

A file is written beside its final name, flushed and fsynced, then renamed over it (os.replace),
so a reader sees the old file or the new one. A failed write is one OutputError naming the path.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from safetensors import SafetensorError

from scalerl.errors import OutputError


@contextlib.contextmanager
def writing(path: str | os.PathLike) -> Iterator[None]:
    """Turn an OSError (or safetensors' write error) in the block into an OutputError naming `path`."""
    try:
        yield
    except (OSError, SafetensorError) as error:
        reason = getattr(error, "strerror", None) or " ".join(str(error).split()) or type(error).__name__
        raise OutputError(f"cannot write {path}: {reason}") from None


def fsync_path(path: str | os.PathLike) -> None:
    """Make a written file (or a directory's entries) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str | os.PathLike, data: bytes) -> None:
    """Replace `path` by `data` in one step: temporary file, fsync, os.replace."""
    path = Path(path)
    temp_path = path.with_name(f".{path.name}.tmp")
    try:
        with writing(path):
            with open(temp_path, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp_path, path)
    finally:
        temp_path.unlink(missing_ok=True)
