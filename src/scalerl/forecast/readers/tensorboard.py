"""Read scalar summaries from TensorBoard event files into a table joined on `step`.

Layouts: an event file, a run directory, or a folder of runs (TRL / transformers write
`output_dir/runs/<date>_<host>/events.out.tfevents.*`): with several runs, `--run NAME` picks one
(NAME is the run's folder relative to the given one, or its last part). Every event file is first
checked record by record (TFRecord framing and CRC32C): a corrupt or truncated file is refused,
saying how many records were readable, unless `allow_partial` (then its readable part is used
with a note). Tags become columns; the accumulator (tensorboard's own) discards events orphaned
by a restart, as TensorBoard displays them.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import numpy as np

from scalerl.errors import InputError
from scalerl.forecast.readers.table import LogTable


def read_tensorboard_table(path: Path, run: str | None = None, allow_partial: bool = False) -> LogTable:
    """Scalar tags of one TensorBoard run as {"step": [...], tag: [...]} (None where not logged)."""
    target = single_run_target(path, run)
    notes = check_event_files(target, allow_partial)
    values_by_tag = _scalar_values_by_tag(target, path)
    steps = sorted({step for by_step in values_by_tag.values() for step in by_step})
    columns: dict[str, list] = {"step": [float(step) for step in steps]}
    for tag, by_step in values_by_tag.items():
        if tag == "step":
            continue  # the global step is the join key; a scalar named "step" would shadow it
        columns[tag] = [by_step.get(step) for step in steps]
    return LogTable(columns, notes=notes)


def single_run_target(path: Path, run: str | None = None) -> Path:
    """The event file itself, or the one directory under `path` holding event files (or `run`'s)."""
    if path.is_file():
        return path
    event_dirs = sorted({file.parent for file in path.rglob("*tfevents*") if file.is_file()})
    if not event_dirs:
        raise InputError(f"no TensorBoard event files (events.out.tfevents.*) under {path}")
    names = {directory: str(directory.relative_to(path).as_posix()) or "." for directory in event_dirs}
    if run is not None:
        chosen = [d for d, name in names.items() if run in (name, d.name)]
        if len(chosen) != 1:
            raise InputError(f"no single TensorBoard run named '{run}' under {path}; runs: {', '.join(names.values())}")
        return chosen[0]
    if len(event_dirs) > 1:
        raise InputError(
            f"{path} holds several TensorBoard runs ({', '.join(names.values())}): pass one of them or --run NAME"
        )
    return event_dirs[0]


def check_event_files(target: Path, allow_partial: bool) -> list[str]:
    """Refuse a corrupt or truncated event file (or return notes on it when `allow_partial`)."""
    files = [target] if target.is_file() else sorted(f for f in target.glob("*tfevents*") if f.is_file())
    notes = []
    for file in files:
        readable, problem = count_readable_records(file.read_bytes())
        if problem is None:
            continue
        message = f"TensorBoard event file {file} is {problem} after {readable} readable records"
        if not allow_partial:
            raise InputError(f"{message}; pass --allow-partial to fit the readable part")
        notes.append(f"{message}: fitting the readable part only (--allow-partial)")
    return notes


def count_readable_records(data: bytes) -> tuple[int, str | None]:
    """(records whose framing and CRC32C check out, None or what is wrong after them).

    TFRecord framing: uint64 length, uint32 masked CRC of the length, the data, uint32 masked CRC
    of the data (all little-endian).
    """
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    offset, count = 0, 0
    while offset < len(data):
        if len(data) - offset < 12:
            return count, "truncated"
        header = data[offset:offset + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[offset + 8:offset + 12])
        if masked_crc32c(header) != length_crc:
            return count, "corrupt"
        end = offset + 12 + length + 4
        if end > len(data):
            return count, "truncated"
        body = data[offset + 12:offset + 12 + length]
        (body_crc,) = struct.unpack("<I", data[end - 4:end])
        if masked_crc32c(body) != body_crc:
            return count, "corrupt"
        offset, count = end, count + 1
    return count, None


def _scalar_values_by_tag(target: Path, source: Path) -> dict[int, dict]:
    from tensorboard.backend.event_processing import event_accumulator

    size_guidance = {event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0}
    accumulator = event_accumulator.EventAccumulator(str(target), size_guidance=size_guidance)
    quiet_logger = logging.getLogger("tensorboard")
    previous_level = quiet_logger.level
    quiet_logger.setLevel(logging.CRITICAL)
    try:
        accumulator.Reload()
    except Exception as error:  # tensorboard raises its own DataLossError and friends
        raise InputError(f"cannot read TensorBoard events in {source}: {str(error)[:200]}") from None
    finally:
        quiet_logger.setLevel(previous_level)
    tags = accumulator.Tags()
    values_by_tag: dict = {}
    for tag in tags.get("scalars", []):
        values_by_tag[tag] = {event.step: _float32_value(event.value) for event in accumulator.Scalars(tag)}
    for tag in tags.get("tensors", []):
        scalars = _scalar_tensor_values(accumulator.Tensors(tag))
        if scalars:
            values_by_tag.setdefault(tag, scalars)
    if not values_by_tag:
        raise InputError(f"no scalar summaries in the TensorBoard events of {source}")
    return values_by_tag


def _float32_value(value: float) -> float:
    """`simple_value` is stored as float32: 0.1 comes back as 0.10000000149; undo that."""
    return float(str(np.float32(value)))


def _scalar_tensor_values(tensor_events) -> dict[int, float]:
    """Values of tensor summaries that hold one number each (tf.summary v2 scalars)."""
    from tensorboard.util import tensor_util

    values = {}
    for event in tensor_events:
        try:
            array = tensor_util.make_ndarray(event.tensor_proto)
        except Exception:  # a tensor of a type this reader does not know: not a scalar curve
            return {}
        if array.size != 1 or not np.issubdtype(array.dtype, np.number):
            return {}
        values[event.step] = float(array.reshape(()))
    return values
