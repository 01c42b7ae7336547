"""The issue's reproducers through the command line: user text is escaped, runs are never mixed,
corrupt TensorBoard files are refused, odd options give one `error:` line with exit code 2."""

import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from scalerl.cli.app import app

runner = CliRunner()
FAST = ["--n-draws", "30"]
RISING = [(1, 0.1), (2, 0.2), (3, 0.3), (4, 0.4), (5, 0.5), (6, 0.55)]


def invoke(*args):
    return runner.invoke(app, [str(arg) for arg in args])


def g_csv(path, y_name="val_pass_rate", pairs=RISING):
    path.write_text(f"step,{y_name}\n" + "".join(f"{x},{y}\n" for x, y in pairs), encoding="utf-8")
    return path


def assert_one_error(result, *fragments):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert result.stdout == ""
    return lines[0]


# --- user text is escaped --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["[/x]", "[red]", "[bold red]boom[/]"])
def test_column_names_are_not_rich_markup(tmp_path, name):
    result = invoke("fit", g_csv(tmp_path / "g.csv", name), "--y", name, *FAST)
    assert result.exit_code == 0, result.output
    assert name in result.stdout  # shown literally, never interpreted


def test_column_name_with_mathtext_is_drawn_literally(tmp_path):
    figure = tmp_path / "t.png"
    result = invoke("fit", g_csv(tmp_path / "g.csv", "$\\foo$"), "--y", "$\\foo$", "--plot", figure, *FAST)
    assert result.exit_code == 0, result.output
    assert figure.stat().st_size > 1000


def test_plot_command_with_markup_and_mathtext_run_names(tmp_path):
    first = g_csv(tmp_path / "[red]$a$.csv")
    second = g_csv(tmp_path / "b.csv", pairs=[(x, y * 0.9) for x, y in RISING])
    result = invoke("plot", first, second, "-o", tmp_path / "c.png", *FAST)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_terminal_escape_sequences_in_a_column_name_are_shown_escaped(tmp_path):
    result = invoke("fit", g_csv(tmp_path / "g.csv"), "--y", "\x1b[31mred\nline")
    line = assert_one_error(result, "column '\\x1b[31mred line' not found")
    assert "\x1b" not in line


def test_error_naming_a_non_utf8_file_name(tmp_path):
    name = os.fsdecode(b"bad\xff.csv")
    result = invoke("fit", tmp_path / name)
    assert_one_error(result, "file not found", "bad\\udcff.csv")


# --- options ---------------------------------------------------------------------------------------


def test_huge_reward_range_is_refused(tmp_path):
    assert_one_error(invoke("fit", g_csv(tmp_path / "g.csv"), "--reward-range", "0", "1e200"), "--reward-range")


def test_compare_a_file_with_itself(tmp_path):
    path = g_csv(tmp_path / "a.csv")
    assert_one_error(invoke("compare", path, path), "given twice")


def test_power_law_on_subnormal_compute_keeps_stdout_one_json_object(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("compute,val_pass_rate\n1e-320,0.1\n1e-310,0.2\n1,0.3\n2,0.4\n3,0.5\n")
    code = "import sys; from scalerl.cli import main; sys.argv = ['scalerl'] + sys.argv[1:]; main()"
    completed = subprocess.run(
        [sys.executable, "-c", code, "fit", str(path), "--power-law", "--json", *FAST],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")},
    )
    assert completed.returncode == 0, completed.stderr
    payload = json.loads(completed.stdout)
    assert payload["n_points"] == 4
    assert "power_law" not in payload or payload["power_law"] is None or "too many decades" in completed.stdout


def test_power_law_prediction_at_zero_compute_prints_no_numpy_warning(tmp_path):
    # Found by tests/test_cli_fuzz.py: the power law's band at C = 0 divided by zero and numpy
    # printed a RuntimeWarning after the result.
    path = g_csv(tmp_path / "g.csv", pairs=[(0, 0.1), (1, 0.2), (2, 0.3), (3, 0.35), (4, 0.4), (5, 0.42)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = invoke("fit", path, "--power-law", "--predict-at", "0", "--json", *FAST)
    assert result.exit_code == 0, result.output
    assert result.stderr == "" and result.stdout.count("\n") == 1
    prediction = json.loads(result.stdout)["power_law"]["predictions"][0]
    assert prediction["x"] == 0.0 and prediction["lo"] is None and prediction["hi"] is None


# --- runs are never mixed --------------------------------------------------------------------------


def test_appended_runs_through_the_cli(tmp_path):
    first = [(s, 0.1 + 0.01 * s) for s in range(1, 9)]
    second = [(s, 0.1 + 0.05 * s) for s in range(1, 10)]
    path = g_csv(tmp_path / "m.csv", pairs=first + second)
    assert_one_error(invoke("fit", path, *FAST), "2 runs appended", "--segment N")
    result = invoke("fit", path, "--segment", "2", "--json", *FAST)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["n_points"] == len(second) - 1  # the first point sets R0
    assert payload["params"]["R0"] == pytest.approx(0.15)
    assert any("using segment 2" in warning for warning in payload["warnings"])


def test_resume_warning_reaches_json_and_the_console(tmp_path):
    pairs = [(s, 0.05 * s) for s in range(1, 9)] + [(s, 0.06 * s) for s in range(5, 13)]
    path = g_csv(tmp_path / "m.csv", pairs=pairs)
    result = invoke("fit", path, "--json", "--reward-range", "0", "1", *FAST)
    assert result.exit_code == 0, result.output
    warnings = json.loads(result.stdout)["warnings"]
    assert any("5-8 was logged twice" in warning for warning in warnings)
    assert result.stderr == ""
    shown = invoke("fit", path, *FAST)
    assert shown.exit_code == 0 and "warning: " in shown.stdout and "5-8 was logged twice" in shown.stdout


def test_compare_two_runs_of_one_long_format_file(tmp_path):
    lines = [f"{run},{s},{0.1 + slope * s}" for run, slope in (("a", 0.05), ("b", 0.03)) for s in range(1, 10)]
    path = tmp_path / "runs.csv"
    path.write_text("run,step,val_pass_rate\n" + "\n".join(lines) + "\n")
    assert_one_error(invoke("fit", path), "2 runs in column 'run' (a, b)", "--run NAME")
    result = invoke("compare", path, "--run", "a", "--run", "b", "--json", *FAST)
    assert result.exit_code == 0, result.output
    assert set(json.loads(result.stdout)["runs"]) == {"a", "b"}


# --- corrupt TensorBoard files ---------------------------------------------------------------------


def write_events(directory, n_steps=16):
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(directory))
    for step in range(n_steps):
        value = summary_pb2.Summary.Value(tag="eval/reward", simple_value=0.1 + 0.8 * step / (step + 4))
        writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=[value])))
    writer.close()
    return next(directory.glob("events.out.tfevents.*"))


def test_bit_flipped_event_file_is_refused_with_the_readable_count(tmp_path):
    path = write_events(tmp_path)
    data = bytearray(path.read_bytes())
    data[len(data) * 3 // 4] ^= 0x10
    path.write_bytes(bytes(data))
    line = assert_one_error(invoke("fit", path, *FAST), "is corrupt after", "readable records", "--allow-partial")
    readable = int(line.split("after ")[1].split(" readable")[0])
    assert 1 <= readable < 17  # 16 scalar events plus the file-version record
    result = invoke("fit", path, "--allow-partial", "--json", *FAST)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert any("readable part" in warning for warning in payload["warnings"])
    assert payload["n_points"] < 15


def test_truncated_event_file_is_refused(tmp_path):
    path = write_events(tmp_path)
    path.write_bytes(path.read_bytes()[:-7])
    assert_one_error(invoke("fit", path, *FAST), "is truncated after 16 readable records")


def test_event_folder_read_with_defaults(tmp_path):
    write_events(tmp_path / "runs" / "Nov24_host")
    result = invoke("fit", tmp_path, "--json", *FAST)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["n_points"] == 15 and np.isclose(payload["params"]["R0"], 0.1)
