"""The `scalerl` command line (typer): one module per command group, `main` in `scalerl.cli.app`."""

from scalerl.cli.app import app, main

__all__ = ["app", "main"]
