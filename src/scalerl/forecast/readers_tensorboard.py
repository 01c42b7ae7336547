"""Read scalar summaries from TensorBoard event files into a raw table joined on `step`.

Uses tensorboard's own EventAccumulator (imported lazily: it is slow to import). Tags become
column names; `step` is always a column. When a run restarted and re-logged earlier steps, the
accumulator discards the orphaned later events, as TensorBoard itself displays them.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from scalerl.errors import InputError


def read_tensorboard_table(path: Path) -> dict[str, list]:
    """Scalar tags of one TensorBoard run (an event file, or a directory holding one run).

    Returns {"step": [...], tag: [...]} with one row per step and None where a tag was not
    logged at that step (the last value wins when a step was logged twice).
    """
    target = _single_run_target(path)
    values_by_tag = _scalar_values_by_tag(target, path)
    steps = sorted({step for by_step in values_by_tag.values() for step in by_step})
    table: dict[str, list] = {"step": [float(step) for step in steps]}
    for tag, by_step in values_by_tag.items():
        if tag == "step":
            continue  # the global step is the join key; a scalar named "step" would shadow it
        table[tag] = [by_step.get(step) for step in steps]
    return table


def _single_run_target(path: Path) -> Path:
    """The event file itself, or the one directory under `path` that holds event files."""
    if path.is_file():
        return path
    event_dirs = sorted({file.parent for file in path.rglob("*tfevents*") if file.is_file()})
    if not event_dirs:
        raise InputError(f"no TensorBoard event files (events.out.tfevents.*) under {path}")
    if len(event_dirs) > 1:
        runs = ", ".join(str(directory.relative_to(path)) or "." for directory in event_dirs)
        raise InputError(f"{path} holds several TensorBoard runs ({runs}): pass one of them")
    return event_dirs[0]


def _scalar_values_by_tag(target: Path, source: Path) -> dict[str, dict[int, float]]:
    from tensorboard.backend.event_processing import event_accumulator

    size_guidance = {event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0}
    accumulator = event_accumulator.EventAccumulator(str(target), size_guidance=size_guidance)
    quiet_logger = logging.getLogger("tensorboard")
    previous_level = quiet_logger.level
    quiet_logger.setLevel(logging.ERROR)
    try:
        accumulator.Reload()
    except Exception as error:  # tensorboard raises its own DataLossError and friends
        raise InputError(f"cannot read TensorBoard events in {source}: {error}") from None
    finally:
        quiet_logger.setLevel(previous_level)
    tags = accumulator.Tags()
    values_by_tag: dict[str, dict[int, float]] = {}
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
        array = tensor_util.make_ndarray(event.tensor_proto)
        if array.size != 1 or not np.issubdtype(array.dtype, np.number):
            return {}
        values[event.step] = float(array.reshape(()))
    return values
