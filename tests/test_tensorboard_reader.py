"""TensorBoard event files read without tensorboard's EventAccumulator: the vectorised CRC32C
against tensorboard's own, the record checks against a record-by-record reference on cut and
bit-flipped files, and a resumed run's repeated steps (later values win, as TensorBoard shows)."""

import struct
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalerl.errors import InputError
from scalerl.forecast.readers import read_curve
from scalerl.forecast.readers.tfrecord import masked_crc32c_rows, read_records

tensorboard = pytest.importorskip("tensorboard")
from tensorboard.compat.proto import event_pb2, summary_pb2  # noqa: E402
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c  # noqa: E402
from tensorboard.summary.writer.event_file_writer import EventFileWriter  # noqa: E402


def mask(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def test_crc32c_check_value_and_tensorboards_masked_crc():
    check = np.frombuffer(b"123456789", dtype=np.uint8)[None, :]
    assert int(masked_crc32c_rows(check)[0]) == mask(0xE3069283)  # the CRC-32C check value
    rng = np.random.default_rng(0)
    for length in (0, 1, 8, 41, 300):
        rows = rng.integers(0, 256, size=(6, length), dtype=np.uint8)
        assert masked_crc32c_rows(rows).tolist() == [masked_crc32c(row.tobytes()) for row in rows]


def write_events(directory, values_by_step, tag="eval/reward", start=None):
    """One event file: `values_by_step` in order ({step: value}); optional session START first."""
    writer = EventFileWriter(str(directory), filename_suffix=f".{time.monotonic_ns()}")
    if start is not None:
        session = event_pb2.SessionLog(status=event_pb2.SessionLog.START)
        writer.add_event(event_pb2.Event(wall_time=1.0, step=start, session_log=session))
    for step, value in values_by_step:
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
        writer.add_event(event_pb2.Event(wall_time=1.0, step=step, summary=summary))
    writer.close()
    return directory


def reference_count(data: bytes):
    """Record by record, as TFRecord readers do: (records that check out, what is wrong after them)."""
    offset, count = 0, 0
    while offset < len(data):
        if len(data) - offset < 12:
            return count, "truncated"
        if masked_crc32c(data[offset : offset + 8]) != struct.unpack("<I", data[offset + 8 : offset + 12])[0]:
            return count, "corrupt"
        (length,) = struct.unpack("<Q", data[offset : offset + 8])
        end = offset + 12 + length + 4
        if end > len(data):
            return count, "truncated"
        if masked_crc32c(data[offset + 12 : end - 4]) != struct.unpack("<I", data[end - 4 : end])[0]:
            return count, "corrupt"
        offset, count = end, count + 1
    return count, None


@pytest.fixture(scope="module")
def event_bytes(tmp_path_factory):
    directory = write_events(tmp_path_factory.mktemp("tb"), [(s, 0.01 * s) for s in range(40)])
    return next(directory.glob("*tfevents*")).read_bytes()


@given(cut=st.integers(0, 4000), flips=st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 7)), max_size=2))
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_read_records_agrees_with_a_record_by_record_reference(event_bytes, cut, flips):
    data = bytearray(event_bytes[:cut])
    for at, bit in flips:
        if at < len(data):
            data[at] ^= 1 << bit
    records = read_records(bytes(data))
    assert (len(records), records.problem) == reference_count(bytes(data))
    assert np.all(records.ends <= len(data))


def test_resumed_run_keeps_the_later_values_and_drops_the_orphaned_steps(tmp_path):
    first = [(step, 0.01 * step) for step in range(1, 11)]  # logged up to step 10, then a crash
    resumed = [(step, 0.5 + 0.01 * step) for step in range(6, 9)]  # restarted from the step-5 checkpoint
    write_events(tmp_path, first + resumed)
    curve = read_curve(tmp_path)
    np.testing.assert_array_equal(curve.compute, [1, 2, 3, 4, 5, 6, 7, 8])
    np.testing.assert_allclose(curve.reward, [0.01, 0.02, 0.03, 0.04, 0.05, 0.56, 0.57, 0.58])


def test_resume_in_a_second_event_file_with_a_session_start(tmp_path):
    write_events(tmp_path, [(step, 0.01 * step) for step in range(1, 11)])
    write_events(tmp_path, [(7, 0.9), (8, 0.95)], start=7)  # a new file, as a restarted writer makes
    curve = read_curve(tmp_path)
    np.testing.assert_array_equal(curve.compute, [1, 2, 3, 4, 5, 6, 7, 8])
    np.testing.assert_allclose(curve.reward[-3:], [0.06, 0.9, 0.95])


def test_a_tag_with_non_scalar_tensors_is_not_a_column(tmp_path):
    from tensorboard.util import tensor_util

    writer = EventFileWriter(str(tmp_path))
    for step in range(1, 5):
        values = [
            summary_pb2.Summary.Value(tag="eval/reward", simple_value=0.1 * step),
            summary_pb2.Summary.Value(tag="histogram", tensor=tensor_util.make_tensor_proto([1.0, 2.0])),
        ]
        writer.add_event(event_pb2.Event(wall_time=1.0, step=step, summary=summary_pb2.Summary(value=values)))
    writer.close()
    with pytest.raises(InputError, match="column 'histogram' not found"):
        read_curve(tmp_path, y="histogram")
    np.testing.assert_allclose(read_curve(tmp_path).reward, [0.1, 0.2, 0.3, 0.4])


def test_a_nan_logged_to_tensorboard_is_an_error_not_a_missing_value(tmp_path):
    write_events(tmp_path, [(1, 0.1), (2, float("nan")), (3, 0.3), (4, 0.4)])
    with pytest.raises(InputError, match=r"non-finite value \(nan\) at row 2"):
        read_curve(tmp_path)


def test_tags_logged_at_different_steps_are_joined_on_step(tmp_path):
    write_events(tmp_path, [(0, 0.1), (10, 0.3)], tag="eval/reward")
    write_events(tmp_path, [(0, 0.0), (5, 50.0), (10, 100.0)], tag="tokens")
    curve = read_curve(tmp_path, x="step", y="tokens")
    np.testing.assert_array_equal(curve.compute, [0, 5, 10])
    by_tokens = read_curve(tmp_path)
    assert (by_tokens.x_name, by_tokens.y_name) == ("tokens", "eval/reward")
    np.testing.assert_array_equal(by_tokens.compute, [0.0, 100.0])
    np.testing.assert_allclose(by_tokens.reward, [0.1, 0.3])


def test_event_files_of_one_second_are_read_in_writer_order(tmp_path):
    """A restarted writer in the same second: its file's count (10) sorts before 9 as text."""
    from scalerl.forecast.readers.tensorboard import event_file_order

    names = [f"events.out.tfevents.1700000000.host.42.{count}" for count in (9, 10)]
    assert sorted(names) == names[::-1]
    assert sorted((tmp_path / name for name in names), key=event_file_order) == [tmp_path / n for n in names]
    assert event_file_order(tmp_path / "events.out.tfevents.1700000001.host.42.0") > event_file_order(
        tmp_path / names[1]
    )
