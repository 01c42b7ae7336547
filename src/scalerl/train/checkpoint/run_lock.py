"""One writer per run folder: two advisory locks (fcntl.flock) held by the training process (the
synchronous trainer, or the pipeline's driver) from the moment it opens the run until it closes it:
one on the run folder itself, which no one deletes by accident, and one on RUN/.scalerl-lock, which
holds the holder's PID for the message. Deleting the lock file under a live run therefore lets no
second writer in: the folder's lock still refuses it (where the file system cannot lock a folder,
NFS, the lock file's lock alone stands).

A second `scalerl train` or `--resume` on the folder fails at once with one error naming that
PID (or "another process" when the lock file is gone), before it reads or writes anything.
Readers (`scalerl fit`, `report`, `export`) take no lock: checkpoints appear by an atomic rename
and metrics rows by whole-line appends, so they see a complete state. The operating system drops
both locks when the process dies, however it dies.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from scalerl.errors import ConfigError, OutputError

LOCK_FILE_NAME = ".scalerl-lock"


class RunLock:
    """The held locks of one run folder (its lock file's and the folder's own); `release()`
    (idempotent) lets the next writer in."""

    def __init__(self, run_dir: Path, fd: int, created_dir: bool, dir_fd: int = -1) -> None:
        self.run_dir, self._fd, self.created_dir, self._dir_fd = run_dir, fd, created_dir, dir_fd

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
        if self._dir_fd >= 0:
            fcntl.flock(self._dir_fd, fcntl.LOCK_UN)
            os.close(self._dir_fd)
            self._dir_fd = -1


def _holder(path: Path) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return "another process"
    return f"process {text}" if text.isdigit() else "another process"


def _try_flock(fd: int, path: Path, run_dir: Path, holder: Path, *, optional: bool = False) -> bool:
    """An exclusive flock on `fd` (of `path`): True when taken; ConfigError naming the holder (its
    PID from the lock file `holder`) when another process holds it. A file system that cannot lock
    it (a directory over NFS: EBADF, ENOLCK) is an OutputError, or False when `optional`. `fd` is
    closed whenever the lock is not taken."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as error:
        os.close(fd)
        if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            if optional:
                return False
            raise OutputError(f"cannot lock {path}: {error.strerror or error}") from None
        raise ConfigError(
            f"{run_dir} is being trained by {_holder(holder)} (it holds {holder}); one process "
            "writes a run folder at a time: wait for it to end, or choose another --out"
        ) from None


def acquire_run_lock(run_dir: str | os.PathLike) -> RunLock:
    """Lock `run_dir` for this process (creating the folder if needed): the folder's own lock, then
    its lock file's; ConfigError naming the holder's PID when another process holds either."""
    run_dir = Path(run_dir)
    created_dir = not run_dir.exists()
    path = run_dir / LOCK_FILE_NAME
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        dir_fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as error:
        raise OutputError(f"cannot open {run_dir}: {error.strerror or error}") from None
    if not _try_flock(dir_fd, run_dir, run_dir, path, optional=True):
        dir_fd = -1  # the lock file's lock alone
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as error:
        if dir_fd >= 0:
            os.close(dir_fd)
        raise OutputError(f"cannot write {path}: {error.strerror or error}") from None
    try:
        _try_flock(fd, path, run_dir, path)
    except BaseException:
        if dir_fd >= 0:
            os.close(dir_fd)
        raise
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return RunLock(run_dir, fd, created_dir, dir_fd)
