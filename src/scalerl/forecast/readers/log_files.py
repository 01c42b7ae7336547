"""Which paths a reader may open: regular files of a size that can be held in memory."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from scalerl.errors import InputError

# A log is read whole into memory (text, then columns: several times its size); beyond this it is
# refused before reading, as one line, rather than ending in a MemoryError or minutes of parsing.
# 1 GiB holds ~10^7 rows of a W&B export; the environment variable raises the limit.
MAX_LOG_BYTES = 2**30
MAX_LOG_BYTES_VARIABLE = "SCALERL_MAX_LOG_BYTES"


def max_log_bytes() -> int:
    """The largest log a reader opens: $SCALERL_MAX_LOG_BYTES (a positive integer) or MAX_LOG_BYTES."""
    text = os.environ.get(MAX_LOG_BYTES_VARIABLE, "").strip()
    if not text:
        return MAX_LOG_BYTES
    if not text.isdigit() or int(text) <= 0 or len(text) > 20:
        raise InputError(f"{MAX_LOG_BYTES_VARIABLE}={text[:50]!r} is not a positive number of bytes")
    return int(text)


def check_regular_file(path: Path, max_bytes: int | None = None) -> None:
    """InputError unless `path` is a regular file of at most `max_bytes` (max_log_bytes()): a device
    (/dev/zero) never ends and a FIFO blocks its reader, so neither is opened."""
    limit = max_log_bytes() if max_bytes is None else max_bytes
    try:
        status = path.stat()
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror or error}") from None
    if not stat.S_ISREG(status.st_mode):
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(status.st_mode)
            else "a device"
            if (stat.S_ISCHR(status.st_mode) or stat.S_ISBLK(status.st_mode))
            else "not a regular file"
        )
        raise InputError(f"{path} is {kind}: scalerl fit reads log files and folders only")
    if status.st_size > limit:
        raise InputError(
            f"{path} holds {status.st_size / 2**30:.1f} GiB, over the {limit / 2**30:.1f} GiB a log "
            "may hold here; keep the rows to fit (e.g. the evaluation rows) in a smaller file, or "
            f"raise the limit: {MAX_LOG_BYTES_VARIABLE}=BYTES"
        )
