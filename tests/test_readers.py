"""Log readers: each format on a file written here, with known values; every bad input names its problem."""

import json
import time

import numpy as np
import pytest

from scalerl.errors import InputError
from scalerl.forecast.readers import Curve, merge_duplicate_compute, read_curve


def write(path, text):
    path.write_text(text)
    return path


def write_event_file(run_dir, scalars_by_step):
    """A real TensorBoard event file of v1 `simple_value` scalars: {step: {tag: value}}."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(run_dir))
    for step, tag_values in scalars_by_step.items():
        values = [summary_pb2.Summary.Value(tag=tag, simple_value=value) for tag, value in tag_values.items()]
        event = event_pb2.Event(wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=values))
        writer.add_event(event)
    writer.close()
    return run_dir


# --- CSV and W&B -------------------------------------------------------------------------------


def test_csv_defaults_pick_compute_and_reward(tmp_path):
    path = write(tmp_path / "run.csv", "step,compute,reward\n0,0,0.1\n10,1280,0.3\n20,2560,0.45\n")
    curve = read_curve(path)
    assert isinstance(curve, Curve)
    assert (curve.x_name, curve.y_name, curve.source) == ("compute", "reward", str(path))
    np.testing.assert_array_equal(curve.compute, [0.0, 1280.0, 2560.0])
    np.testing.assert_array_equal(curve.reward, [0.1, 0.3, 0.45])
    assert len(curve) == 3
    with pytest.raises(ValueError):
        curve.compute[0] = 5.0  # read-only


def test_default_x_prefers_gpu_hours_over_step_and_y_prefers_val_pass_rate(tmp_path):
    path = write(tmp_path / "m.csv", "step,gpu_hours,reward,val_pass_rate\n1,0.5,0.0,0.2\n2,1.0,0.1,0.4\n")
    curve = read_curve(path)
    assert (curve.x_name, curve.y_name) == ("gpu_hours", "val_pass_rate")
    np.testing.assert_array_equal(curve.reward, [0.2, 0.4])


def test_explicit_columns(tmp_path):
    path = write(tmp_path / "m.csv", "step,flops,acc\n1,1e18,0.2\n2,2e18,0.4\n")
    curve = read_curve(path, x="step", y="acc")
    np.testing.assert_array_equal(curve.compute, [1.0, 2.0])
    np.testing.assert_array_equal(curve.reward, [0.2, 0.4])


def test_wandb_history_export_with_sparse_eval_rows(tmp_path):
    text = (
        '"_step","train/loss","val/pass_rate","_runtime"\n'
        "0,1.2,0.05,10\n1,1.1,,20\n2,1.0,,30\n3,0.9,0.25,40\n4,0.8,,50\n5,0.7,0.4,60\n"
    )
    curve = read_curve(write(tmp_path / "wandb_export.csv", text))
    assert (curve.x_name, curve.y_name) == ("_step", "val/pass_rate")
    np.testing.assert_array_equal(curve.compute, [0.0, 3.0, 5.0])
    np.testing.assert_array_equal(curve.reward, [0.05, 0.25, 0.4])


def test_repeated_evaluations_at_one_compute_are_averaged_with_a_note(tmp_path):
    path = write(tmp_path / "d.csv", "compute,reward\n100,0.2\n100,0.4\n200,0.5\n200,0.7\n")
    curve = read_curve(path)
    np.testing.assert_array_equal(curve.compute, [100.0, 200.0])
    np.testing.assert_allclose(curve.reward, [0.3, 0.6])
    assert any("averaged" in note for note in curve.notes)


def test_compute_going_back_to_its_start_is_not_averaged(tmp_path):
    path = write(tmp_path / "d.csv", "compute,reward\n200,0.5\n100,0.2\n200,0.7\n100,0.4\n")
    with pytest.raises(InputError, match="3 runs appended.*--segment N"):
        read_curve(path)


def test_merge_duplicate_compute_known_answer():
    compute, reward = merge_duplicate_compute(np.array([3.0, 1.0, 3.0, 3.0]), np.array([0.1, 0.5, 0.2, 0.6]))
    np.testing.assert_array_equal(compute, [1.0, 3.0])
    np.testing.assert_allclose(reward, [0.5, 0.3])
    assert np.all(np.diff(compute) > 0)


# --- JSONL ---------------------------------------------------------------------------------------


def test_jsonl_keeps_only_rows_with_both_columns(tmp_path):
    rows = [
        {"step": 0, "flops": 0.0, "loss": 2.0, "val_pass_rate": 0.1},
        {"step": 1, "flops": 1e18, "loss": 1.9},
        {"step": 2, "flops": 2e18, "loss": 1.8, "val_pass_rate": None},
        {"step": 3, "flops": 3e18, "loss": 1.7, "val_pass_rate": 0.3},
        {"step": 4, "loss": 1.6, "val_pass_rate": 0.9},  # no x: dropped
    ]
    path = write(tmp_path / "metrics.jsonl", "\n".join(json.dumps(row) for row in rows) + "\n\n")
    curve = read_curve(path, x="flops")
    np.testing.assert_array_equal(curve.compute, [0.0, 3e18])
    np.testing.assert_array_equal(curve.reward, [0.1, 0.3])


def test_jsonl_nested_objects_give_slash_names(tmp_path):
    rows = [{"step": 1, "val": {"pass_rate": 0.2}}, {"step": 2, "val": {"pass_rate": 0.4, "n": 100}}]
    curve = read_curve(write(tmp_path / "m.jsonl", "\n".join(json.dumps(row) for row in rows)))
    assert (curve.x_name, curve.y_name) == ("step", "val/pass_rate")
    np.testing.assert_array_equal(curve.reward, [0.2, 0.4])


def test_json_array_of_objects(tmp_path):
    path = write(tmp_path / "m.json", json.dumps([{"tokens": 10, "reward": 0.1}, {"tokens": 20, "reward": 0.2}]))
    curve = read_curve(path)
    assert curve.x_name == "tokens"
    np.testing.assert_array_equal(curve.reward, [0.1, 0.2])


# --- TensorBoard ---------------------------------------------------------------------------------


def test_tensorboard_directory_joins_tags_on_step(tmp_path):
    run_dir = write_event_file(
        tmp_path / "tb",
        {
            0: {"train/loss": 2.0, "val/pass_rate": 0.125},
            10: {"train/loss": 1.5},
            20: {"train/loss": 1.0, "val/pass_rate": 0.5, "gpu_hours": 4.0},
            30: {"train/loss": 0.5, "val/pass_rate": 0.625, "gpu_hours": 6.0},
        },
    )
    curve = read_curve(run_dir)
    assert (curve.x_name, curve.y_name) == ("gpu_hours", "val/pass_rate")
    # the evaluation at step 0 logged no GPU-hours: before training, so R0 at compute 0
    np.testing.assert_array_equal(curve.compute, [0.0, 4.0, 6.0])
    np.testing.assert_array_equal(curve.reward, [0.125, 0.5, 0.625])
    assert any("at step 0 without 'gpu_hours'" in note and "R0 at compute 0" in note for note in curve.notes)
    by_step = read_curve(run_dir, x="step", y="val/pass_rate")
    np.testing.assert_array_equal(by_step.compute, [0.0, 20.0, 30.0])
    np.testing.assert_array_equal(by_step.reward, [0.125, 0.5, 0.625])


def test_tensorboard_single_event_file_and_float32_values(tmp_path):
    run_dir = write_event_file(tmp_path / "tb", {1: {"reward": 0.1}, 2: {"reward": 0.3}})
    event_file = next(run_dir.iterdir())
    curve = read_curve(event_file)
    assert curve.x_name == "step"
    np.testing.assert_array_equal(curve.reward, [0.1, 0.3])  # exact, not 0.10000000149


def test_tensorboard_v2_tensor_scalars(tmp_path):
    from tensorboard.summary import Writer

    writer = Writer(str(tmp_path / "v2"))
    for step, pass_rate in [(5, 0.2), (10, 0.35)]:
        writer.add_scalar("val_pass_rate", pass_rate, step)
    writer.close()
    curve = read_curve(tmp_path / "v2")
    np.testing.assert_array_equal(curve.compute, [5.0, 10.0])
    np.testing.assert_allclose(curve.reward, [0.2, 0.35], rtol=1e-6)


def test_tensorboard_directory_with_two_runs_is_ambiguous(tmp_path):
    write_event_file(tmp_path / "logs" / "a", {1: {"reward": 0.1}})
    write_event_file(tmp_path / "logs" / "b", {1: {"reward": 0.2}})
    with pytest.raises(InputError, match="several TensorBoard runs"):
        read_curve(tmp_path / "logs")


def test_directory_without_event_files(tmp_path):
    with pytest.raises(InputError, match="no TensorBoard event files"):
        read_curve(tmp_path)


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "kwargs", "message"),
    [
        ("m.csv", "compute,reward\n1,0.1\n2,nan\n", {}, r"non-finite value \(nan\) at row 2"),
        ("m.csv", "compute,reward\n1,0.1\ninf,0.2\n", {}, "non-finite"),
        ("m.csv", "compute,reward\n1,0.1\n-2,0.2\n", {}, "negative compute -2"),
        ("m.csv", "compute,reward\n1,0.1\n2,abc\n", {}, "non-numeric value 'abc'"),
        ("m.csv", "compute,reward\n1,0.1\n2,0.2,9\n", {}, "row 3 has 3 fields"),
        (
            "m.csv",
            "compute,reward\n1,0.1\n",
            {"y": "pass"},
            "column 'pass' not found.*available columns: compute, reward",
        ),
        ("m.csv", "a,b\n1,0.1\n", {}, "none of the default y columns.*available columns: a, b"),
        ("m.csv", "compute,reward\n", {}, "no row where both 'compute' and 'reward'"),
        ("m.csv", "  \n", {}, "is empty"),
        ("m.jsonl", '{"compute": 1, "reward": 0.1}\n{"compute": 2, "rew\n', {}, "line 2 of .* not valid JSON"),
        ("m.jsonl", '{"compute": 1, "reward": NaN}\n', {}, "non-finite"),
        ("m.jsonl", "[1, 2]\n", {}, "line 1 .* not a JSON object"),
        ("m.jsonl", '{"compute": true, "reward": 0.1}\n', {}, "non-numeric value True"),
        ("m.txt", "compute,reward\n1,0.1\n", {}, "unknown log format"),
    ],
)
def test_bad_input_raises_input_error_naming_the_problem(tmp_path, name, text, kwargs, message):
    with pytest.raises(InputError, match=message):
        read_curve(write(tmp_path / name, text), **kwargs)


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        read_curve(tmp_path / "nope.csv")


def test_binary_file_with_csv_suffix(tmp_path):
    path = tmp_path / "m.csv"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    with pytest.raises(InputError, match="not a UTF-8 or UTF-16 text file"):
        read_curve(path)


def test_corrupt_event_file(tmp_path):
    path = tmp_path / "events.out.tfevents.123.host"
    path.write_bytes(b"this is not a record stream at all" * 3)
    with pytest.raises(InputError, match="TensorBoard"):
        read_curve(path)


def test_rewards_outside_unit_range_are_passed_through(tmp_path):
    curve = read_curve(write(tmp_path / "m.csv", "compute,reward\n1,-0.5\n2,1.5\n"))
    np.testing.assert_array_equal(curve.reward, [-0.5, 1.5])


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8-sig", "utf-16-be"])
def test_utf16_and_bom_files_are_read_as_text(tmp_path, encoding):
    text = "step,val_pass_rate\n1,0.1\n2,0.25\n"
    data = text.encode(encoding) if encoding != "utf-16-be" else b"\xfe\xff" + text.encode("utf-16-be")
    path = tmp_path / "m.csv"
    path.write_bytes(data)
    curve = read_curve(path)
    np.testing.assert_allclose(curve.reward, [0.1, 0.25])
    assert curve.notes == ()


def test_latin1_file_is_read_with_a_note(tmp_path):
    path = tmp_path / "m.csv"
    path.write_bytes("step,val_pass_rate,café\n1,0.1,x\n2,0.25,y\n".encode("latin-1"))
    curve = read_curve(path)
    np.testing.assert_allclose(curve.reward, [0.1, 0.25])
    assert any("not UTF-8 (byte 22): read as Latin-1" in note for note in curve.notes)


def test_bad_utf16_after_its_bom_is_refused(tmp_path):
    path = tmp_path / "m.csv"
    path.write_bytes(b"\xff\xfes\x00t\x00\x00\xd8")  # a lone high surrogate
    with pytest.raises(InputError, match="not valid UTF-16"):
        read_curve(path)


def test_scalerls_own_tensorboard_tag_is_a_default_y_column():
    from scalerl.forecast.readers.columns import choose_y

    assert choose_y(["step", "train/loss", "eval/pass_rate"], None, "a scalerl TensorBoard folder") == "eval/pass_rate"
