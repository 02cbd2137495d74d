"""Kafka's zigzag varints (protobuf style), as in ByteUtils: the reference codec in plain Python.

varint = zigzag int32, at most 5 bytes; varlong = zigzag int64, at most 10 bytes. The numba
record walk (records_accel) inlines the same rules; tests run both against these functions.
"""
from __future__ import annotations

from kafkalog.errors import InvalidRecordError
from kafkalog.java_types import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10


def wrap_int64(x: int) -> int:
    """Java long arithmetic: wrap to a signed 64-bit value (offsets and timestamps near the limits)."""
    return ((x + (1 << 63)) & 0xFFFFFFFFFFFFFFFF) - (1 << 63)


def _read_unsigned(buf, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    value = 0
    shift = 0
    for i in range(max_bytes):
        if pos >= end:
            raise InvalidRecordError("varint runs past the end of the record data", position=pos)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    raise InvalidRecordError(f"varint longer than {max_bytes} bytes", position=pos - 1)


def read_varint(buf, pos: int, end: int | None = None) -> tuple[int, int]:
    """Decode a zigzag int32 at ``pos``; returns (value, next position).

    As ByteUtils.readVarint: a 5th byte with its high bit set is an error; bits beyond 32 in the
    5th byte are dropped (Java int arithmetic), not rejected."""
    raw, pos = _read_unsigned(buf, pos, len(buf) if end is None else end, MAX_VARINT_BYTES)
    raw &= 0xFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf, pos: int, end: int | None = None) -> tuple[int, int]:
    """Decode a zigzag int64 at ``pos``; returns (value, next position). Bits beyond 64 are dropped."""
    raw, pos = _read_unsigned(buf, pos, len(buf) if end is None else end, MAX_VARLONG_BYTES)
    raw &= 0xFFFFFFFFFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def _write_unsigned(raw: int, out: bytearray) -> None:
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def write_varint(value: int, out: bytearray) -> None:
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"{value} does not fit a varint (int32)")
    _write_unsigned(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF, out)


def write_varlong(value: int, out: bytearray) -> None:
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{value} does not fit a varlong (int64)")
    _write_unsigned(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF, out)
