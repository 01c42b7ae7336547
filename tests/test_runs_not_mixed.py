"""Runs are never averaged into one curve: long-format files, resumed runs, appended runs, and
repeated evaluations of one run (the only rows that are averaged, with a note)."""

import numpy as np
import pytest

from scalerl.errors import InputError
from scalerl.forecast.readers import read_curve


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def rows(pairs):
    return "".join(f"{x},{y}\n" for x, y in pairs)


def test_resumed_run_keeps_the_later_rows_and_names_the_range(tmp_path):
    first = [(step, 0.001 * step) for step in range(240, 280)]  # logged up to 279, then a crash
    resumed = [(step, 0.5 + 0.001 * step) for step in range(251, 300)]  # restarted from the step-250 checkpoint
    path = write(tmp_path / "m.csv", "step,val_pass_rate\n" + rows(first + resumed))
    curve = read_curve(path)
    np.testing.assert_array_equal(curve.compute, np.arange(240, 300))
    expected = [0.001 * s for s in range(240, 251)] + [0.5 + 0.001 * s for s in range(251, 300)]
    np.testing.assert_allclose(curve.reward, expected)
    assert any("251-279 was logged twice" in note and "later rows replace" in note for note in curve.notes)


def test_appended_runs_are_an_error_naming_the_segments(tmp_path):
    run_1 = [(step, 0.1 + 0.01 * step) for step in range(1, 11)]
    run_2 = [(step, 0.3 + 0.02 * step) for step in range(1, 16)]
    path = write(tmp_path / "m.csv", "step,val_pass_rate\n" + rows(run_1 + run_2))
    with pytest.raises(InputError) as error:
        read_curve(path)
    message = str(error.value)
    assert "2 runs appended" in message and "--segment N" in message
    assert "segment 1: rows 1-10, x 1-10" in message and "segment 2: rows 11-25, x 1-15" in message
    second = read_curve(path, segment=2)
    np.testing.assert_array_equal(second.compute, [s for s, _ in run_2])
    np.testing.assert_allclose(second.reward, [r for _, r in run_2])
    assert any("using segment 2" in note for note in second.notes)
    np.testing.assert_allclose(read_curve(path, segment=1).reward, [r for _, r in run_1])
    with pytest.raises(InputError, match="--segment must be between 1 and 2"):
        read_curve(path, segment=3)


def test_four_appended_runs(tmp_path):
    text = "step,val_pass_rate\n" + rows([(s, 0.1 * s) for _ in range(4) for s in range(1, 6)])
    with pytest.raises(InputError, match="holds 4 runs appended"):
        read_curve(write(tmp_path / "m.csv", text))


def test_segment_on_a_single_run_is_an_error(tmp_path):
    path = write(tmp_path / "m.csv", "step,val_pass_rate\n" + rows([(1, 0.1), (2, 0.2)]))
    with pytest.raises(InputError, match="holds one run"):
        read_curve(path, segment=2)


def test_long_format_with_a_run_column_lists_the_runs(tmp_path):
    lines = [f"{run},{step},{0.1 * step + offset}" for run, offset in (("a", 0.0), ("b", 0.05)) for step in range(1, 4)]
    path = write(tmp_path / "m.csv", "run,step,val_pass_rate\n" + "\n".join(lines) + "\n")
    with pytest.raises(InputError, match="2 runs in column 'run' \\(a, b\\).*--run NAME"):
        read_curve(path)
    np.testing.assert_allclose(read_curve(path, run="b").reward, [0.15, 0.25, 0.35])
    with pytest.raises(InputError, match="no run 'c'.*runs: a, b"):
        read_curve(path, run="c")


def test_six_series_stacked_under_a_custom_group_column(tmp_path):
    lines = [f"seed{k},{step},{0.01 * k + 0.1 * step}" for k in range(6) for step in range(1, 5)]
    path = write(tmp_path / "m.csv", "config,step,val_pass_rate\n" + "\n".join(lines) + "\n")
    with pytest.raises(InputError, match="6 runs appended"):  # without --group the step restarts 5 times
        read_curve(path)
    with pytest.raises(InputError, match="6 runs in column 'config'"):
        read_curve(path, group="config")
    np.testing.assert_allclose(read_curve(path, group="config", run="seed3").reward, [0.13, 0.23, 0.33, 0.43])
    with pytest.raises(InputError, match="--group column 'nope' not found"):
        read_curve(path, group="nope")


def test_run_without_a_run_column_is_an_error(tmp_path):
    path = write(tmp_path / "m.csv", "step,val_pass_rate\n1,0.1\n2,0.2\n")
    with pytest.raises(InputError, match="no run column"):
        read_curve(path, run="a")


def test_repeated_evaluations_at_one_step_are_averaged_with_a_note(tmp_path):
    path = write(tmp_path / "m.csv", "step,val_pass_rate\n1,0.1\n2,0.2\n2,0.4\n3,0.5\n")
    curve = read_curve(path)
    np.testing.assert_array_equal(curve.compute, [1, 2, 3])
    np.testing.assert_allclose(curve.reward, [0.1, 0.3, 0.5])
    assert any("averaged (4 rows -> 3 points)" in note for note in curve.notes)


def test_resume_in_json_lines_with_a_step_column_and_accumulated_tokens(tmp_path):
    """verl resumed from step 2: per-step tokens are accumulated over the kept steps only."""
    logged = ((1, 0.1), (2, 0.2), (3, 0.3), (4, 0.9), (3, 0.35), (4, 0.45), (5, 0.5))
    lines = ['{"step": %d, "perf/total_num_tokens": 100, "val-core/d/reward/mean@1": %s}' % pair for pair in logged]
    curve = read_curve(write(tmp_path / "m.jsonl", "\n".join(lines) + "\n"))
    np.testing.assert_array_equal(curve.compute, [100, 200, 300, 400, 500])
    np.testing.assert_allclose(curve.reward, [0.1, 0.2, 0.35, 0.45, 0.5])
    assert any("'step' 3-4 was logged twice" in note for note in curve.notes)


def test_a_step_logged_on_two_rows_counts_its_tokens_once(tmp_path):
    logged = ((1, 100, ""), (2, 100, ""), (2, "", 0.3), (3, 100, 0.4), (3, 100, 0.5))
    text = "step,perf/total_num_tokens,val_pass_rate\n" + "".join(f"{s},{t},{r}\n" for s, t, r in logged)
    curve = read_curve(write(tmp_path / "m.csv", text))
    np.testing.assert_array_equal(curve.compute, [200, 300])
    np.testing.assert_allclose(curve.reward, [0.3, 0.45])
