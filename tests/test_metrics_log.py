import json
import math

import pytest

from scalerl.errors import InputError
from scalerl.train.records.metrics_log import MetricsLog, append_row, read_rows, truncate_after_step


def test_append_writes_one_strict_json_line_per_row(tmp_path):
    path = tmp_path / "metrics.jsonl"
    append_row(path, {"step": 0, "val_pass_rate": 0.1})
    append_row(path, {"step": 1, "loss": math.nan, "flops": 2.0e9})
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    assert json.loads(lines[1]) == {"step": 1, "loss": None, "flops": 2.0e9}
    assert "NaN" not in path.read_text()


def test_torn_last_line_is_ignored_and_removed_by_truncate(tmp_path):
    path = tmp_path / "metrics.jsonl"
    for step in range(5):
        append_row(path, {"step": step, "loss": float(step)})
    with open(path, "ab") as handle:  # a crash in the middle of a write
        handle.write(b'{"step": 5, "lo')
    assert [row["step"] for row in read_rows(path)] == [0, 1, 2, 3, 4]
    assert truncate_after_step(path, 2) == 3
    assert [row["step"] for row in read_rows(path)] == [0, 1, 2]
    assert path.read_text().endswith("\n")
    append_row(path, {"step": 3, "loss": 3.0})
    assert [row["step"] for row in read_rows(path)] == [0, 1, 2, 3]


def test_corrupt_complete_line_is_an_input_error(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 0}\nnot json\n')
    with pytest.raises(InputError, match="line 2"):
        read_rows(path)


def test_metrics_log_mirrors_to_tensorboard(tmp_path):
    pytest.importorskip("tensorboard")
    pytest.importorskip("torch")
    log = MetricsLog(tmp_path, tensorboard=True)
    log.append({"step": 0, "val_pass_rate": 0.25})
    log.append({"step": 1, "loss": 0.5})
    log.close()
    assert [row["step"] for row in log.rows()] == [0, 1]
    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
