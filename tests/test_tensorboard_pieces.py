"""TensorBoard logs read without the tensorboard package: the protobuf-free Event decoder agrees
with tensorboard's own protobuf classes, and a run written in two pieces (a resumed run: the same
tags in two folders, the second starting later at a later step) reads as one run, while runs that
restart from their first step or overlap in time still need --run."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalerl.errors import InputError
from scalerl.forecast.readers import read_curve
from scalerl.forecast.readers.event_proto import decode_event

pytest.importorskip("tensorboard")
from tensorboard.compat.proto import event_pb2, summary_pb2  # noqa: E402
from tensorboard.util import tensor_util  # noqa: E402


def scalar_writer(folder):
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(str(folder))


def write_piece(folder, steps, wall_start, tag="eval/reward", offset=0.0):
    """One launch's event folder: `tag` = 0.01 * step + offset at each step, one second apart."""
    writer = scalar_writer(folder)
    for index, step in enumerate(steps):
        writer.add_scalar(tag, 0.01 * step + offset, step, walltime=wall_start + index)
    writer.close()
    return folder


# --- the decoder --------------------------------------------------------------------------------------

FINITE = st.floats(allow_nan=False, allow_infinity=False, width=32)
SMALL = st.floats(-1e4, 1e4, width=32)  # castable to every tensor type below
TENSORS = st.sampled_from(["float32", "float64", "int32", "int64", "float16", "vector", "string"])


@given(
    step=st.integers(-(2**40), 2**62),
    wall_time=st.floats(0, 2e9),
    values=st.lists(st.tuples(st.text(max_size=20), FINITE, SMALL, TENSORS, st.booleans()), max_size=4),
    start=st.booleans(),
)
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_decoder_agrees_with_tensorboards_protobuf(step, wall_time, values, start):
    summary_values, expected = [], []
    for tag, number, small, kind, as_tensor in values:
        if not as_tensor:
            summary_values.append(summary_pb2.Summary.Value(tag=tag, simple_value=number))
            expected.append((tag, float(str(np.float32(number)))))
            continue
        if kind == "vector":
            array = np.array([small, small], dtype=np.float32)
        else:
            array = np.array(b"text") if kind == "string" else np.array(small).astype(kind)
        proto = tensor_util.make_tensor_proto(array)
        summary_values.append(summary_pb2.Summary.Value(tag=tag, tensor=proto))
        made = tensor_util.make_ndarray(proto)
        numeric = made.size == 1 and np.issubdtype(made.dtype, np.number)
        expected.append((tag, float(made.reshape(())) if numeric else None))
    event = event_pb2.Event(wall_time=wall_time, step=step, summary=summary_pb2.Summary(value=summary_values))
    if start:
        event = event_pb2.Event(
            wall_time=wall_time, step=step, session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START)
        )
        expected = []
    data = event.SerializeToString()
    decoded = decode_event(data, 0, len(data))
    assert (decoded.step, decoded.wall_time, decoded.session_start) == (step, wall_time, start)
    assert len(decoded.values) == len(expected)
    for (tag, number), (want_tag, want) in zip(decoded.values, expected):
        assert tag == want_tag
        assert (number is None) == (want is None)
        if want is not None:
            assert number == pytest.approx(want, rel=1e-6, abs=1e-30)


def test_scalar_tensors_from_typed_lists_and_half_precision():
    for proto, want in [
        (tensor_util.make_tensor_proto(2.5, dtype="float32"), 2.5),
        (tensor_util.make_tensor_proto(np.float16(0.333)), float(np.float16(0.333))),
        (tensor_util.make_tensor_proto(-7, dtype="int64"), -7.0),
        (tensor_util.make_tensor_proto([[3.0]], dtype="float64"), 3.0),
    ]:
        event = event_pb2.Event(
            step=1, summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="t", tensor=proto)])
        )
        data = event.SerializeToString()
        assert decode_event(data, 0, len(data)).values == [("t", want)]


# --- a run in two pieces -------------------------------------------------------------------------------


def test_a_resumed_run_in_two_folders_is_joined_in_wall_time_order(tmp_path):
    runs = tmp_path / "runs"
    write_piece(runs / "Nov27_10-00-00_host", range(0, 11), wall_start=1000.0)  # crashed after step 10
    write_piece(runs / "Nov27_11-00-00_host", range(8, 16), wall_start=5000.0, offset=0.5)  # resumed at step 8
    curve = read_curve(runs, x="step")
    np.testing.assert_array_equal(curve.compute, np.arange(16.0))
    expected = [0.01 * s for s in range(8)] + [0.01 * s + 0.5 for s in range(8, 16)]  # the resumed values win
    np.testing.assert_allclose(curve.reward, expected, rtol=1e-6)
    assert any("joined 2 TensorBoard folders as one resumed run" in note for note in curve.notes)


def test_the_folder_names_do_not_decide_the_order(tmp_path):
    runs = tmp_path / "runs"
    write_piece(runs / "b_first", range(0, 6), wall_start=1000.0)
    write_piece(runs / "a_second", range(6, 12), wall_start=2000.0)
    curve = read_curve(runs, x="step")
    np.testing.assert_array_equal(curve.compute, np.arange(12.0))
    assert any("b_first, a_second" in note for note in curve.notes)


@pytest.mark.parametrize(
    ("second_steps", "second_start"),
    [
        (range(0, 10), 5000.0),  # a new run: starts again from step 0
        (range(5, 15), 1004.0),  # overlaps the first in time: two runs side by side
    ],
)
def test_different_runs_still_need_run(tmp_path, second_steps, second_start):
    runs = tmp_path / "runs"
    write_piece(runs / "seed0", range(0, 10), wall_start=1000.0)
    write_piece(runs / "seed1", second_steps, wall_start=second_start)
    with pytest.raises(InputError, match=r"several TensorBoard runs \(seed0, seed1\).*--run NAME"):
        read_curve(runs)
    assert read_curve(runs, x="step", run="seed1").compute[0] == second_steps[0]


def test_pieces_without_shared_tags_are_different_runs(tmp_path):
    runs = tmp_path / "runs"
    write_piece(runs / "a", range(0, 10), wall_start=1000.0, tag="eval/reward")
    write_piece(runs / "b", range(10, 20), wall_start=5000.0, tag="val/pass_rate")
    with pytest.raises(InputError, match="several TensorBoard runs"):
        read_curve(runs)
