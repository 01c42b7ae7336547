"""Shared CLI test helpers: run `scalerl` in-process and check the one-line error contract."""

from __future__ import annotations

from typer.testing import CliRunner

from scalerl.cli.app import app

runner = CliRunner()


def invoke(*args):
    """`scalerl ARGS...` in-process (paths and numbers turned into strings)."""
    return runner.invoke(app, [str(arg) for arg in args])


def assert_one_line_error(result, *fragments: str) -> None:
    """Exit code 2, exactly one stderr line starting `error: `, no traceback, each fragment in it."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
