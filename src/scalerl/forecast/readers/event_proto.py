"""The scalars of a TensorBoard `Event` record, decoded from the protobuf wire format without the
tensorboard or protobuf packages (the forecaster's install stays light).

Only the fields a compute-performance curve needs are read; every other field is skipped by its
wire type. Field numbers (tensorboard/compat/proto: event.proto, summary.proto, tensor.proto):

    Event:      wall_time = 1 (double), step = 2 (int64), summary = 5, session_log = 7
    SessionLog: status = 1 (START = 1)
    Summary:    value = 1 (repeated Value)
    Value:      tag = 1, simple_value = 2 (float), tensor = 8 (TensorProto)
    TensorProto: dtype = 1, tensor_shape = 2 (dim = 2, Dim.size = 1), tensor_content = 4,
                 float_val = 5, double_val = 6, int_val = 7, int64_val = 10, half_val = 13

A wire key is a varint `field << 3 | wire type` (0 varint, 1 fixed64, 2 length-delimited,
5 fixed32); a varint holds 7 bits per byte, low group first, the high bit saying "more follows".
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

SESSION_START = 1
# TensorFlow DataType -> numpy dtype of the numeric types a scalar summary can hold.
NUMERIC_DTYPES: dict[int, str] = {
    1: "<f4",
    2: "<f8",
    3: "<i4",
    4: "u1",
    5: "<i2",
    6: "i1",
    9: "<i8",
    17: "<u2",
    19: "<f2",
    22: "<u4",
    23: "<u8",
}
DT_BFLOAT16 = 14


class WireError(ValueError):
    """Bytes that are not a well-formed protobuf message."""


@dataclass
class Event:
    """What a curve needs of one Event: its time and step, whether it is a session START, and its
    values as (tag, number or None); None marks a tensor that is not one number."""

    wall_time: float = 0.0
    step: int = 0
    session_start: bool = False
    values: list[tuple[str, float | None]] = field(default_factory=list)


def read_varint(data: bytes, offset: int, end: int) -> tuple[int, int]:
    """(value, offset after it) of the varint at `offset`; WireError when cut short or over 10 bytes."""
    value, shift = 0, 0
    while offset < end and shift < 70:
        byte = data[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, offset
        shift += 7
    raise WireError("bad varint")


def fields(data: bytes, start: int, end: int):
    """Yield (field number, wire type, value) of each field in data[start:end]: an int for varints,
    (start, end) for length-delimited fields, the raw bytes' offset for fixed32 / fixed64."""
    offset = start
    while offset < end:
        number, wire_type, value, field_end = next_field(data, offset, end)
        yield number, wire_type, (value, field_end) if wire_type == 2 else value
        offset = field_end


def decode_event(data: bytes, start: int, end: int) -> Event:
    """The Event record in data[start:end]; WireError when its bytes are not a protobuf message.

    Written as flat loops with a one-byte fast path for keys and lengths: a log holds 10^6 events.
    """
    event = Event()
    offset = start
    while offset < end:
        number, wire_type, value, offset = next_field(data, offset, end)
        if number == 1 and wire_type == 1:
            (event.wall_time,) = struct.unpack_from("<d", data, value)
        elif number == 2 and wire_type == 0:
            event.step = value - (1 << 64) if value >= 1 << 63 else value  # int64 in two's complement
        elif number == 5 and wire_type == 2:
            _add_summary_values(data, value, offset, event.values)
        elif number == 7 and wire_type == 2:
            event.session_start = any(
                n == 1 and w == 0 and v == SESSION_START for n, w, v in fields(data, value, offset)
            )
    return event


def next_field(data: bytes, offset: int, end: int) -> tuple[int, int, int, int]:
    """(field number, wire type, value, offset after the field) of the field at `offset`; value as
    in `fields`, but a length-delimited field's value is its start (the returned offset its end)."""
    key = data[offset]
    if key < 0x80:
        offset += 1
    else:
        key, offset = read_varint(data, offset, end)
    wire_type = key & 7
    if wire_type == 0:
        value = data[offset] if offset < end else 0x80
        if value < 0x80:
            offset += 1
        else:
            value, offset = read_varint(data, offset, end)
        return key >> 3, 0, value, offset
    if wire_type == 2:
        length = data[offset] if offset < end else 0x80
        if length < 0x80:
            offset += 1
        else:
            length, offset = read_varint(data, offset, end)
        value, offset = offset, offset + length
    elif wire_type in (1, 5):
        value, offset = offset, offset + (8 if wire_type == 1 else 4)
    else:
        raise WireError(f"unsupported wire type {wire_type}")
    if offset > end:
        raise WireError("a field runs past its message")
    return key >> 3, wire_type, value, offset


def _add_summary_values(data: bytes, offset: int, end: int, values: list) -> None:
    """Append (tag, number or None) for each Summary.Value in data[offset:end]."""
    while offset < end:
        number, wire_type, value_start, offset = next_field(data, offset, end)
        if number != 1 or wire_type != 2:
            continue
        tag, number_value, is_tensor, inner = "", None, False, value_start
        while inner < offset:
            field_number, inner_type, value, inner = next_field(data, inner, offset)
            if field_number == 1 and inner_type == 2:
                tag = data[value:inner].decode("utf-8", errors="replace")
            elif field_number == 2 and inner_type == 5:
                number_value, is_tensor = float32_value(struct.unpack_from("<f", data, value)[0]), False
            elif field_number == 8 and inner_type == 2:
                number_value, is_tensor = tensor_scalar(data, value, inner), True
        if number_value is not None or is_tensor:
            values.append((tag, number_value))


def float32_value(value: float) -> float:
    """`simple_value` is stored as float32: 0.1 comes back as 0.10000000149; undo that."""
    return float(str(np.float32(value)))


def tensor_scalar(data: bytes, start: int, end: int) -> float | None:
    """The number of a TensorProto holding exactly one numeric element, else None.

    As tensorflow's make_ndarray: `tensor_content` holds the raw little-endian element; otherwise
    the typed list (`float_val`, ...) holds it, an empty list meaning zero.
    """
    dtype, n_elements, content, typed = 0, 1, None, []
    for number, wire_type, value in fields(data, start, end):
        if number == 1 and wire_type == 0:
            dtype = value
        elif number == 2 and wire_type == 2:
            n_elements = _shape_elements(data, *value)
        elif number == 4 and wire_type == 2:
            content = data[value[0] : value[1]]
        elif number in (5, 6, 7, 10, 13):
            typed.extend(_typed_values(data, number, wire_type, value))
    if n_elements != 1:
        return None
    if dtype == DT_BFLOAT16:  # the upper 16 bits of a float32
        bits = (
            int.from_bytes(content, "little")
            if content is not None and len(content) == 2
            else (int(typed[0]) if typed else 0)
        )
        return float(np.frombuffer(struct.pack("<I", (bits & 0xFFFF) << 16), dtype="<f4")[0])
    numpy_dtype = NUMERIC_DTYPES.get(dtype)
    if numpy_dtype is None:
        return None
    if content is not None:
        if len(content) != np.dtype(numpy_dtype).itemsize:
            return None
        return float(np.frombuffer(content, dtype=numpy_dtype)[0])
    if not typed:
        return 0.0
    if dtype == 19:  # half_val holds the float16's bits
        return float(np.frombuffer(struct.pack("<H", int(typed[0]) & 0xFFFF), dtype="<f2")[0])
    return float(typed[0])


def _shape_elements(data: bytes, start: int, end: int) -> int:
    """Product of a TensorShapeProto's dim sizes (1 for a scalar)."""
    count = 1
    for number, wire_type, span in fields(data, start, end):
        if number == 2 and wire_type == 2:
            size = next((v for n, w, v in fields(data, *span) if n == 1 and w == 0), 0)
            count *= size - (1 << 64) if size >= 1 << 63 else size
    return count


def _typed_values(data: bytes, number: int, wire_type: int, value) -> list[float]:
    """The elements of a repeated numeric field, packed or not."""
    if number == 5:  # float
        if wire_type == 5:
            return [struct.unpack_from("<f", data, value)[0]]
        return list(np.frombuffer(data[value[0] : value[1]], dtype="<f4"))
    if number == 6:  # double
        if wire_type == 1:
            return [struct.unpack_from("<d", data, value)[0]]
        return list(np.frombuffer(data[value[0] : value[1]], dtype="<f8"))
    if wire_type == 0:
        return [_signed(number, value)]
    values, offset = [], value[0]
    while offset < value[1]:
        item, offset = read_varint(data, offset, value[1])
        values.append(_signed(number, item))
    return values


def _signed(number: int, value: int) -> int:
    """int32 / int64 varints are two's complement in 64 bits; half_val holds raw bits."""
    if number in (7, 10) and value >= 1 << 63:
        return value - (1 << 64)
    return value
