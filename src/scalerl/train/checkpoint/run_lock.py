"""One writer per run folder: an advisory lock (fcntl.flock) on RUN/.scalerl-lock, held by the
training process (the synchronous trainer, or the pipeline's driver) from the moment it opens the
run until it closes it; the lock file holds the holder's PID.

A second `scalerl train` or `--resume` on the folder fails at once with one error naming that
PID, before it reads or writes anything. Readers (`scalerl fit`, `report`, `export`) take no lock:
checkpoints appear by an atomic rename and metrics rows by whole-line appends, so they see a
complete state. The operating system drops the lock when the process dies, however it dies.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from scalerl.errors import ConfigError, OutputError

LOCK_FILE_NAME = ".scalerl-lock"


class RunLock:
    """The held lock of one run folder; `release()` (idempotent) lets the next writer in."""

    def __init__(self, run_dir: Path, fd: int, created_dir: bool) -> None:
        self.run_dir, self._fd, self.created_dir = run_dir, fd, created_dir

    @property
    def path(self) -> Path:
        return self.run_dir / LOCK_FILE_NAME

    def release(self, *, remove_empty_dir: bool = False) -> None:
        """Unlock; with `remove_empty_dir`, a folder this lock created that holds nothing else is
        removed too (a run that failed to start leaves nothing behind)."""
        if self._fd < 0:
            return
        if remove_empty_dir and self.created_dir and [p.name for p in self.run_dir.iterdir()] == [LOCK_FILE_NAME]:
            self.path.unlink(missing_ok=True)
            self.run_dir.rmdir()
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = -1


def _holder(path: Path) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return "another process"
    return f"process {text}" if text.isdigit() else "another process"


def acquire_run_lock(run_dir: str | os.PathLike) -> RunLock:
    """Lock `run_dir` for this process (creating the folder if needed); ConfigError naming the
    holder's PID when another process holds it."""
    run_dir = Path(run_dir)
    created_dir = not run_dir.exists()
    path = run_dir / LOCK_FILE_NAME
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as error:
        raise OutputError(f"cannot write {path}: {error.strerror or error}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        os.close(fd)
        if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise OutputError(f"cannot lock {path}: {error.strerror or error}") from None
        raise ConfigError(f"{run_dir} is being trained by {_holder(path)} (it holds {path}); one process "
                          "writes a run folder at a time: wait for it to end, or choose another --out") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return RunLock(run_dir, fd, created_dir)
