"""Which paths a reader may open: regular files of a size that can be held in memory."""

from __future__ import annotations

import stat
from pathlib import Path

from scalerl.errors import InputError

# A log is read whole into memory (text, then columns: several times its size); beyond this it is
# refused before reading, as one line, rather than ending in a MemoryError.
MAX_LOG_BYTES = 4 * 2**30


def check_regular_file(path: Path, max_bytes: int | None = None) -> None:
    """InputError unless `path` is a regular file of at most `max_bytes` (MAX_LOG_BYTES): a device
    (/dev/zero) never ends and a FIFO blocks its reader, so neither is opened."""
    limit = MAX_LOG_BYTES if max_bytes is None else max_bytes
    try:
        status = path.stat()
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror or error}") from None
    if not stat.S_ISREG(status.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(status.st_mode) else "a device" if (
            stat.S_ISCHR(status.st_mode) or stat.S_ISBLK(status.st_mode)) else "not a regular file"
        raise InputError(f"{path} is {kind}: scalerl fit reads log files and folders only")
    if status.st_size > limit:
        raise InputError(f"{path} holds {status.st_size / 2**30:.1f} GiB, over the {limit / 2**30:.0f} GiB a log "
                         "may hold here; keep the rows to fit (e.g. the evaluation rows) in a smaller file")
