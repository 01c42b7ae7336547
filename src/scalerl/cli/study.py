"""`scalerl study`: an alias of `scalerl ablate` (one engine, one rule). It says so on stderr, then
runs `scalerl ablate` with the same arguments.
"""

from __future__ import annotations

import functools

import typer

from scalerl.cli.ablate import ablate_command

ALIAS_NOTE = "note: `scalerl study` is an alias of `scalerl ablate` (same options, same engine and rule)"


@functools.wraps(ablate_command)
def study_command(*args, **kwargs):
    from rich.console import Console

    Console(stderr=True).print(ALIAS_NOTE, highlight=False, markup=False)
    return ablate_command(*args, **kwargs)


study_command.__doc__ = "Alias of `scalerl ablate`: the same options, engine and paired rule."


def register(app: typer.Typer) -> None:
    """Add `study` (the alias) to the `scalerl` app."""
    app.command("study")(study_command)
