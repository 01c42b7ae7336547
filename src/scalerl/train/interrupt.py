"""Ctrl-C as a request to stop at the next safe point, not an exception in the middle of a step.

The first SIGINT sets `StopRequest.requested`; the training loop finishes the step it is in,
writes a checkpoint and returns, and the CLI exits with code 130 (what shells and schedulers
expect after Ctrl-C; scalerl.cli.errors). A second SIGINT raises KeyboardInterrupt at once (no
checkpoint). Outside the main thread signals cannot be caught: the request then never comes.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Callable, Iterator

STOPPING_NOTE = "Ctrl-C: stopping after this step, then writing a checkpoint (Ctrl-C again: stop at once)"


class StopRequest:
    """Set by the first Ctrl-C; `on_first` says what happens next (called from the handler)."""

    def __init__(self, on_first: Callable[[], None] | None = None) -> None:
        self.requested = False
        self._on_first = on_first

    def handle(self, _signum: int, _frame: object) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        if self._on_first is not None:
            self._on_first()


@contextlib.contextmanager
def stop_on_interrupt(on_first: Callable[[], None] | None = None) -> Iterator[StopRequest]:
    """A StopRequest that SIGINT sets while the block runs (the previous handler restored after)."""
    request = StopRequest(on_first)
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = signal.signal(signal.SIGINT, request.handle)
    try:
        yield request
    finally:
        signal.signal(signal.SIGINT, previous)
