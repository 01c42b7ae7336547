"""A driver that dies takes the Ray processes it started with it.

`ray.init()` without an address starts a local Ray head (gcs_server, raylet, the dashboard and
runtime-env agents, the actors' workers) as descendants of the driver. Killed with SIGKILL, the
driver runs no cleanup, and Ray's own fate-sharing stops the raylet but leaves its agents
(ray::DashboardAgent, ray::RuntimeEnvAgent) alive, orphaned, ignoring SIGTERM.

`start_reaper()` starts one small watcher process per driver (`python -m
scalerl.distributed.ray_reaper DRIVER_PID`). Every `POLL_SECONDS` it records the driver's Ray
descendants (process id and start time, so a reused id is never touched); when the driver is gone
(the watcher's parent changes), it sends SIGTERM to those still running, then SIGKILL to any left
after `GRACE_SECONDS`, and exits. A driver that shuts Ray down itself leaves nothing to reap; the
watcher then exits with the driver.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

POLL_SECONDS = 0.5
GRACE_SECONDS = 3.0
_watcher: subprocess.Popen | None = None  # this process's watcher (one per driver process)
_watched: int | None = None  # the driver process it watches


def is_ray_process(name: str, arguments: list[str]) -> bool:
    """A Ray process by its name or command line: a worker or agent renames itself `ray::...`;
    the head's binaries and scripts live in the ray package (`.../ray/...`)."""
    return name.startswith("ray::") or any(
        argument.startswith("ray::") or f"{os.sep}ray{os.sep}" in argument for argument in arguments
    )


def ray_descendants(driver_pid: int, exclude: int) -> dict[int, float]:
    """{pid: start time} of the Ray processes below `driver_pid` (`exclude`, the watcher, left out)."""
    import psutil

    try:
        children = psutil.Process(driver_pid).children(recursive=True)
    except psutil.Error:
        return {}
    found = {}
    for child in children:
        try:
            if child.pid != exclude and is_ray_process(child.name(), child.cmdline()):
                found[child.pid] = child.create_time()
        except psutil.Error:
            continue
    return found


def _alive(recorded: dict[int, float]) -> list:
    """The recorded processes still running under the same id and start time."""
    import psutil

    alive = []
    for pid, created in recorded.items():
        try:
            process = psutil.Process(pid)
            if process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.Error:
            continue
    return alive


def reap(recorded: dict[int, float], grace_seconds: float = GRACE_SECONDS) -> int:
    """SIGTERM the recorded processes still alive, SIGKILL those left after `grace_seconds`;
    returns how many were signalled."""
    import psutil

    survivors = _alive(recorded)
    for process in survivors:
        try:
            process.send_signal(signal.SIGTERM)
        except psutil.Error:
            pass
    _, left = psutil.wait_procs(survivors, timeout=grace_seconds)
    for process in left:
        try:
            process.kill()
        except psutil.Error:
            pass
    return len(survivors)


def watch(driver_pid: int) -> None:
    """Record the driver's Ray descendants until the driver is gone, then reap them."""
    recorded: dict[int, float] = {}
    while os.getppid() == driver_pid:
        recorded.update(ray_descendants(driver_pid, exclude=os.getpid()))
        time.sleep(POLL_SECONDS)
    reap(recorded)


def start_reaper() -> None:
    """Start this process's watcher (once per process); it outlives nothing but the driver."""
    global _watcher, _watched
    if _watched == os.getpid():
        return
    _watcher = subprocess.Popen(
        [sys.executable, "-m", "scalerl.distributed.ray_reaper", str(os.getpid())],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    _watched = os.getpid()


if __name__ == "__main__":
    watch(int(sys.argv[1]))
