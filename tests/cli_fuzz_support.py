"""Shared helpers of the `scalerl` fuzz tests (tests/test_cli_fuzz*.py): run the command in
process, check its outcome (a valid result or exactly one `error:` line with exit code 2), damage
a generated file's bytes, and the folder the generated files are written to.
"""

import contextlib
import io
import json
import sys
import warnings

import pytest
from hypothesis import event
from hypothesis import strategies as st

from scalerl.cli.app import main

ENCODINGS = ["utf-8", "utf-8", "utf-8", "utf-8-sig", "utf-16", "latin-1", "cp1252"]


@st.composite
def file_bytes(draw, text):
    """`text` encoded, then maybe with a NUL byte, a cut tail or a flipped byte."""
    encoding = draw(st.sampled_from(ENCODINGS))
    data = text.encode(encoding, errors="replace")
    damage = draw(st.sampled_from(["none", "none", "none", "nul", "cut", "flip"]))
    if damage == "nul":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + b"\x00" + data[at:]
    elif damage == "cut" and data:
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif damage == "flip" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([data[at] ^ (1 << draw(st.integers(0, 7)))]) + data[at + 1 :]
    event(f"encoding {encoding}, damage {damage}")
    return data


def run_scalerl(argv: list[str]) -> tuple[int, str, str]:
    """`scalerl ARGV` in process: (exit code, stdout, stderr); Python warnings count as stderr lines."""
    stdout, stderr = io.StringIO(), io.StringIO()
    saved_argv = sys.argv
    sys.argv = ["scalerl", *argv]
    exit_code = 0
    try:
        with (
            warnings.catch_warnings(record=True) as caught,
            contextlib.redirect_stdout(stdout),
            contextlib.redirect_stderr(stderr),
        ):
            warnings.simplefilter("always")
            try:
                main()
            except SystemExit as exit_signal:
                exit_code = exit_signal.code if isinstance(exit_signal.code, int) else 1
    finally:
        sys.argv = saved_argv
    warning_lines = "".join(f"{w.category.__name__}: {w.message}\n" for w in caught)
    return exit_code, stdout.getvalue(), stderr.getvalue() + warning_lines


def check_outcome(argv: list[str], exit_code: int, stdout: str, stderr: str) -> None:
    """A valid result or one `error:` line with exit code 2; nothing else."""
    shown = f"argv={argv!r}\nexit={exit_code}\nstdout={stdout[-2000:]!r}\nstderr={stderr[-2000:]!r}"
    assert "Traceback" not in stdout + stderr, shown
    assert "\x1b" not in stdout + stderr, shown  # user text reached the terminal unescaped
    event(f"exit code {exit_code}")
    if exit_code == 0:
        if "--json" in argv:
            assert stdout.count("\n") == 1 and stdout.endswith("\n"), shown
            payload = json.loads(
                stdout, parse_constant=lambda token: pytest.fail(f"non-standard JSON {token}\n{shown}")
            )
            assert {"params", "intervals", "n_points", "warnings"} <= set(payload), shown
            assert stderr == "", shown
        else:
            assert stdout.strip(), shown
            said = [line for line in stderr.splitlines() if line.strip()]
            assert all(line.startswith(("note: ", "figure written to ")) for line in said), shown
        return
    assert exit_code == 2, shown
    lines = [line for line in stderr.splitlines() if line.strip()]
    event(f"error: {' '.join(lines[0].split()[1:4]) if lines else ''}")
    assert len(lines) == 1 and lines[0].startswith("error: "), shown
    assert stdout == "", shown
