"""Turn expected failures into one `error: ...` line on stderr and exit code 2, never a traceback
(a MemoryError included); Ctrl-C ends a command with exit code 130.

Every `scalerl` command (forecasting here, training in scalerl.cli.train) wraps its body with
`user_errors()` or decorates itself with `@exits_on_user_error`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import typer

from scalerl.errors import ScaleRLError
from scalerl.escaping import plain

USER_ERROR_EXIT_CODE = 2
INTERRUPTED_EXIT_CODE = 130  # 128 + SIGINT: what shells and schedulers expect after Ctrl-C


def fail(message: object) -> None:
    """Print `error: message` as one line on stderr and leave with exit code 2."""
    one_line = plain(" ".join(str(message).split()))
    typer.echo(f"error: {one_line}", err=True)
    raise typer.Exit(code=USER_ERROR_EXIT_CODE)


def describe_os_error(error: OSError) -> str:
    """`cannot open runs/x.csv: No such file or directory` rather than errno noise."""
    reason = error.strerror or str(error)
    if not error.filename:
        return reason
    name = str(error.filename)  # a hostile path may be 100 K characters long: quote ~200 of them
    return f"{reason}: {name if len(name) <= 200 else name[:200] + f'... ({len(name)} characters)'}"


@contextmanager
def user_errors() -> Iterator[None]:
    """Context in which ScaleRLError and OSError (bad input files) end the command cleanly, and
    Ctrl-C with exit code 130."""
    try:
        yield
    except ScaleRLError as error:
        fail(str(error) or type(error).__name__)
    except OSError as error:
        fail(describe_os_error(error))
    except MemoryError:
        fail(
            "out of memory: the command needed more memory than there is (an input far larger than it "
            "should be, or a setting that asks for too much)"
        )
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        raise typer.Exit(code=INTERRUPTED_EXIT_CODE) from None


def exits_on_user_error(command: Callable) -> Callable:
    """Decorator form of `user_errors()` for typer commands (keeps the signature typer reads)."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        with user_errors():
            return command(*args, **kwargs)

    return wrapper
