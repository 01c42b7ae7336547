"""Readers keep what was logged: an evaluation before training without the compute counter is R0 at
compute 0 (verl's TensorBoard and console layouts, a CSV), every evaluation left out is counted and
named, and a training reward used as y is said to be one."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from cli_invocation import invoke

from scalerl.errors import InputError
from scalerl.forecast.readers import read_curve
from scalerl.forecast.readers.kept_rows import UnusedRows

VAL = "val-core/openai/gsm8k/reward/mean@1"


def verl_rows(n_steps: int = 10, test_freq: int = 5):
    """verl's layout: validation before training at step 0 (val metrics only, no token count and no
    training/global_step), then per-step training metrics, the validation every `test_freq` steps."""
    yield 0, {VAL: 0.21}
    for step in range(1, n_steps + 1):
        row = {
            "training/global_step": float(step),
            "perf/total_num_tokens": 1000.0 + 10 * step,
            "critic/score/mean": 0.3 + 0.03 * step,
        }
        if step % test_freq == 0:
            row[VAL] = 0.5 + 0.02 * step
        yield step, row


def expected_verl_curve(n_steps: int = 10, test_freq: int = 5):
    """Running token totals at the validation steps, with R0 at 0."""
    totals = np.cumsum([1000.0 + 10 * step for step in range(1, n_steps + 1)])
    steps = np.arange(test_freq, n_steps + 1, test_freq)
    return np.r_[0.0, totals[steps - 1]], np.r_[0.21, 0.5 + 0.02 * steps]


def write_verl_console(path):
    lines = ["(TaskRunner pid=2811) Training Progress:   0%|          | 0/10"]
    for step, row in verl_rows():
        fields = " - ".join(
            f"{key}:np.float64({value})" if key == VAL else f"{key}:{value:g}" for key, value in row.items()
        )
        lines.append(f"(TaskRunner pid=2811) step:{step} - {fields}")
    path.write_text("\n".join(lines) + "\n")
    return path


def write_verl_tensorboard(folder):
    tensorboard = pytest.importorskip("tensorboard")
    del tensorboard
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(folder), filename_suffix=f".{time.monotonic_ns()}")
    for step, row in verl_rows():
        values = [summary_pb2.Summary.Value(tag=tag, simple_value=value) for tag, value in row.items()]
        writer.add_event(event_pb2.Event(wall_time=1.0 + step, step=step, summary=summary_pb2.Summary(value=values)))
    writer.close()
    return folder


@pytest.mark.parametrize("layout", ["console", "tensorboard"])
def test_verl_validation_before_training_is_r0_at_compute_0(tmp_path, layout):
    path = (
        write_verl_console(tmp_path / "train.log") if layout == "console" else write_verl_tensorboard(tmp_path / "tb")
    )
    curve = read_curve(path)
    compute, reward = expected_verl_curve()
    assert curve.x_name == "perf/total_num_tokens" and curve.y_name == VAL
    np.testing.assert_allclose(curve.compute, compute)
    np.testing.assert_allclose(curve.reward, reward)
    assert any(
        "at step 0 without 'perf/total_num_tokens'" in note and "R0 at compute 0" in note for note in curve.notes
    )
    assert curve.rows_not_used == ()


@pytest.mark.parametrize("layout", ["console", "tensorboard"])
def test_verl_step_axis_keeps_the_validation_before_training(tmp_path, layout):
    path = (
        write_verl_console(tmp_path / "train.log") if layout == "console" else write_verl_tensorboard(tmp_path / "tb")
    )
    curve = read_curve(path, x="training/global_step")
    np.testing.assert_array_equal(curve.compute, [0.0, 5.0, 10.0])
    np.testing.assert_allclose(curve.reward, [0.21, 0.6, 0.7])


def test_csv_evaluation_at_step_0_without_compute_is_r0_and_a_later_one_is_counted(tmp_path):
    path = tmp_path / "run.csv"
    path.write_text("step,gpu_hours,val_pass_rate\n0,,0.1\n1,2,\n2,4,0.3\n3,,0.35\n4,8,0.4\n5,,0.42\n")
    curve = read_curve(path)
    np.testing.assert_array_equal(curve.compute, [0.0, 4.0, 8.0])
    np.testing.assert_allclose(curve.reward, [0.1, 0.3, 0.4])
    assert curve.rows_not_used == (UnusedRows("without 'gpu_hours'", 2, "steps 3, 5"),)
    assert "2 evaluations of 'val_pass_rate' not used: 2 without 'gpu_hours' (steps 3, 5)" in curve.notes


def test_rows_replaced_by_a_resume_are_counted(tmp_path):
    path = tmp_path / "run.csv"
    path.write_text("step,val_pass_rate\n10,0.1\n20,0.2\n30,0.3\n20,0.25\n30,0.33\n40,0.4\n")
    curve = read_curve(path)
    np.testing.assert_allclose(curve.reward, [0.1, 0.25, 0.33, 0.4])
    assert curve.rows_not_used == (UnusedRows("replaced by the rows logged after a resume", 2, "steps 20, 30"),)


def test_an_appended_run_with_its_own_r0_is_one_segment(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text("step,tokens,val_pass_rate\n0,,0.1\n1,10,0.2\n2,20,0.3\n0,,0.15\n1,10,0.25\n2,20,0.35\n")
    with pytest.raises(InputError, match="2 runs appended"):
        read_curve(path)
    second = read_curve(path, segment=2)
    np.testing.assert_array_equal(second.compute, [0.0, 10.0, 20.0])
    np.testing.assert_allclose(second.reward, [0.15, 0.25, 0.35])
    assert second.rows_not_used[0].count == 3 and "another segment" in second.rows_not_used[0].reason


@pytest.mark.parametrize(
    ("header", "row", "training"),
    [
        ("step,loss,reward", "{s},1.0,{r}", True),  # TRL's log: `reward` is the rollouts'
        ("step,compute,reward", "{s},{s},{r}", False),  # a table of evaluations named `reward`
        ("step,train/reward", "{s},{r}", True),
        ("step,val_pass_rate,train/reward", "{s},{r},{r}", False),  # y is the evaluation
    ],
)
def test_a_training_reward_as_y_is_said_to_be_one(tmp_path, header, row, training):
    path = tmp_path / "run.csv"
    path.write_text(header + "\n" + "".join(row.format(s=s, r=0.1 * s) + "\n" for s in range(1, 6)))
    curve = read_curve(path)
    assert any("a training reward" in note for note in curve.notes) == training


def test_fit_says_r0_and_the_rows_not_used_in_text_and_json(tmp_path):
    path = tmp_path / "run.csv"
    rows = [f"{s},{'' if s in (0, 7) else s * 10},{0.1 + 0.5 * s / (s + 4):.4f}" for s in range(16)]
    path.write_text("step,gpu_hours,val_pass_rate\n" + "\n".join(rows) + "\n")
    result = invoke("fit", path, "--json", "--n-draws", "50")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["n_points"] >= 14
    assert any("R0 at compute 0" in warning for warning in payload["warnings"])
    assert "1 evaluation of 'val_pass_rate' not used: 1 without 'gpu_hours' (step 7)" in payload["warnings"]
    text = invoke("fit", path, "--n-draws", "50")
    assert text.exit_code == 0, text.output
    assert "R0 at compute 0" in text.output and "without 'gpu_hours' (step 7)" in text.output
