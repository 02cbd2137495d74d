"""The offsets and timestamps of one v2 batch's records, without building record columns: what a
timestamp search needs (``FileRecords.searchForTimestamp`` iterates a batch's records only for their
offset and timestamp).

Record layout (``DefaultRecord``), the fields walked here::

    length          varint   bytes of the record after this field
    attributes      int8     unused
    timestampDelta  varlong  timestamp = batch baseTimestamp + delta (LogAppendTime: batch maxTimestamp)
    offsetDelta     varint   offset = batch baseOffset + delta
    key             varint length (negative = null) + bytes
    value           varint length (negative = null) + bytes
    headers         varint count, then (varint key length + key, varint value length + value) each

The walk checks the same structure the record decoder checks (lengths inside the record, the record
ending exactly at its length, the batch ending after its last record) and answers None when anything
is off, so that the caller falls back to the full decoder, which raises the precise error.
"""
from __future__ import annotations

import os
from typing import Optional, Tuple

import numpy as np
from numba import njit

from kafkalog.format import record_batch as rb
from kafkalog.format.compression import decompress
from kafkalog.format.records_accel import read_varint, read_varlong

_CACHE = os.path.isfile(__file__)


@njit(cache=_CACHE, inline="always")
def _skip_nullable(src, q, rend):
    """Past a varint length and that many bytes (a negative length is null); -1 when malformed."""
    if q < 0:
        return q
    n, q = read_varint(src, q, rend)
    if q < 0 or (n > 0 and q + n > rend):
        return -1
    return q + n if n > 0 else q


@njit(cache=_CACHE, nogil=True)
def stamps_kernel(src, start, end, count, base_offset, base_ts, out_offsets, out_ts):
    """Walk ``count`` records in src[start:end]; 0 when well formed, 1 otherwise."""
    p = start
    for i in range(count):
        if p >= end:
            return 1
        length, q = read_varint(src, p, end)
        if q < 0 or length <= 0 or q + length > end:
            return 1
        rend = q + length
        q += 1
        tsd, q = read_varlong(src, q, rend)
        if q < 0:
            return 1
        od, q = read_varint(src, q, rend)
        if q < 0:
            return 1
        q = _skip_nullable(src, _skip_nullable(src, q, rend), rend)     # key, value
        if q < 0:
            return 1
        nh, q = read_varint(src, q, rend)
        if q < 0 or nh < 0 or nh > rend - q:
            return 1
        for _h in range(nh):
            n, q = read_varint(src, q, rend)
            if q < 0 or n < 0 or q + n > rend:
                return 1
            q = _skip_nullable(src, q + n, rend)       # header value
            if q < 0:
                return 1
        if q != rend:
            return 1
        out_offsets[i] = base_offset + od
        out_ts[i] = base_ts + tsd
        p = rend
    return 0 if p == end else 1


def batch_stamps(buf: np.ndarray, position: int, *,
                 max_batch_bytes: int) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """(offsets, timestamps) of the records of the v2 batch at ``position`` of ``buf`` (timestamps
    -1 where a record has none), or None when its records are not well formed (decode them with the
    record decoder to get the error)."""
    header = rb.parse_header(buf, position)
    count = header.records_count
    if count <= 0:
        empty = np.empty(0, dtype=np.int64)
        return (empty, empty) if count == 0 else None
    start = position + rb.RECORDS_OFFSET
    end = position + header.size_in_bytes
    if count > (end - start) // rb.MIN_RECORD_SIZE and header.codec == 0:
        return None
    if header.codec == 0:
        src, s, e = buf, start, end
    else:
        try:
            data = decompress(header.codec, memoryview(buf)[start:end], magic=2, max_bytes=max_batch_bytes)  # type: ignore[arg-type, unused-ignore]
        except Exception:                              # the decoder reports it precisely
            return None
        src = np.frombuffer(data, dtype=np.uint8)
        s, e = 0, len(src)
    offsets = np.empty(count, dtype=np.int64)
    stamps = np.empty(count, dtype=np.int64)
    if stamps_kernel(src, s, e, count, header.base_offset, header.base_timestamp, offsets, stamps) != 0:
        return None
    if header.timestamp_type == rb.LOG_APPEND_TIME:
        stamps[:] = header.max_timestamp
    return offsets, stamps
