"""Ctrl-C (and SIGTERM, what schedulers and `kill` send) as a request to stop at the next safe
point, not an exception in the middle of a step.

The first SIGINT or SIGTERM sets `StopRequest.requested`; the training loop finishes the step it
is in, writes a checkpoint and returns, and the CLI exits with 128 + the signal's number (130
after Ctrl-C, 143 after SIGTERM: what shells and schedulers expect; scalerl.cli.errors). A second
signal raises KeyboardInterrupt at once (no checkpoint). Outside the main thread signals cannot
be caught: the request then never comes.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

STOPPING_NOTE = "Ctrl-C: stopping after this step, then writing a checkpoint (Ctrl-C again: stop at once)"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequest:
    """Set by the first Ctrl-C or SIGTERM; `on_first` says what happens next (called from the handler)."""

    def __init__(self, on_first: Callable[[], None] | None = None) -> None:
        self.requested = False
        self.signum = int(signal.SIGINT)
        self._on_first = on_first

    @property
    def exit_code(self) -> int:
        """128 + the signal that asked to stop: 130 (Ctrl-C) or 143 (SIGTERM)."""
        return 128 + self.signum

    def handle(self, signum: int, _frame: object) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self.signum = int(signum)
        if self._on_first is not None:
            self._on_first()


@contextlib.contextmanager
def stop_on_interrupt(on_first: Callable[[], None] | None = None) -> Iterator[StopRequest]:
    """A StopRequest that SIGINT or SIGTERM sets while the block runs (the previous handlers
    restored after)."""
    request = StopRequest(on_first)
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {signum: signal.signal(signum, request.handle) for signum in STOP_SIGNALS}
    try:
        yield request
    finally:
        _Deferral.pending = False
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class _Deferral:
    """How deep the driver is in bookkeeping that a stop must not cut in half, and whether a stop
    came meanwhile (main thread only: Python runs signal handlers there)."""

    depth = 0
    pending = False


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Within terminate_as_interrupt, a SIGINT or SIGTERM arriving in this block raises its
    KeyboardInterrupt when the block ends, not inside it: a step taken off the trainer's queue is
    booked and its row queued before the driver stops."""
    _Deferral.depth += 1
    try:
        yield
    finally:
        _Deferral.depth -= 1
    if _Deferral.depth == 0 and _Deferral.pending:
        _Deferral.pending = False
        raise KeyboardInterrupt


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[StopRequest]:
    """SIGINT and SIGTERM both raise KeyboardInterrupt while the block runs, for a loop that stops
    on KeyboardInterrupt (the pipeline's driver); the request records which signal came, for
    its `exit_code`. Ray's own SIGTERM handler (a stack dump, exit 15) is set aside meanwhile."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return

    def handle(signum: int, _frame: object) -> None:
        request.requested, request.signum = True, int(signum)
        if _Deferral.depth > 0:
            _Deferral.pending = True
            return
        raise KeyboardInterrupt

    previous = {signum: signal.signal(signum, handle) for signum in STOP_SIGNALS}
    try:
        yield request
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
