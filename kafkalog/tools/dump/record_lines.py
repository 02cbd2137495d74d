"""The deep-iteration text lines of many v2 batches at once: the batches decoded to Arrow by the
accelerated decoder (``format.decoder``), then every batch line and record line written as UTF-8
bytes into one buffer by a numba kernel — byte for byte what ``log_segment.record_output`` prints
one record at a time, at millions of lines per second instead of tens of thousands.

A record line, as DumpLogSegments.printRecordMetadata / printRecordContents print it::

    | offset: O <TimestampType>: T keySize: K valueSize: V sequence: S headerKeys: [k1,k2] key: ... payload: ...

(``--skip-record-metadata``: only ``| key: ... payload: ...``; the first of key and payload gets the
``| ``). Kafka prints keys, values and header keys through ``new String(bytes, UTF_8)``: valid UTF-8
comes out as the same bytes, ill-formed bytes as U+FFFD by Java's rule (``_put_java_utf8``, the same
rule as ``output.string_decoder``); a run with a header key that is not UTF-8 is printed by the
per-record path instead (``BulkLines.utf8_ok`` False).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

_CACHE = os.path.isfile(__file__)
INT32_MAX = (1 << 31) - 1

# the constant parts of a record line
_OFFSET = np.frombuffer(b"| offset: ", np.uint8)
_KEY_SIZE = np.frombuffer(b" keySize: ", np.uint8)
_VALUE_SIZE = np.frombuffer(b" valueSize: ", np.uint8)
_SEQUENCE = np.frombuffer(b" sequence: ", np.uint8)
_HEADER_KEYS = np.frombuffer(b" headerKeys: [", np.uint8)
_KEY = np.frombuffer(b"key: ", np.uint8)
_PAYLOAD = np.frombuffer(b"payload: ", np.uint8)
MAX_FIXED_LINE = 200       # bytes of a record line besides its key, value and header keys (at most ~170)


@njit(cache=_CACHE, nogil=True)
def _put(out, pos, src):
    n = src.shape[0]
    out[pos:pos + n] = src
    return pos + n


@njit(cache=_CACHE, nogil=True)
def _put_int(out, pos, value):
    """Long.toString: decimal, '-' for negatives (int64 min included)."""
    if value == 0:
        out[pos] = 48
        return pos + 1
    neg = value < 0
    digits = np.empty(20, np.uint8)
    n = 0
    if neg:        # work on negatives: -(int64 min) does not fit
        while value != 0:
            q = -(value // -10) if value % 10 != 0 else value // 10
            r = q * 10 - value
            digits[n] = 48 + r
            n += 1
            value = q
        out[pos] = 45
        pos += 1
    else:
        while value != 0:
            digits[n] = 48 + value % 10
            n += 1
            value //= 10
    for i in range(n):
        out[pos + i] = digits[n - 1 - i]
    return pos + n


@njit(cache=_CACHE, nogil=True)
def _utf8_valid(data, start, end):
    """Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF), as Java's decoder
    accepts it without replacement."""
    i = start
    while i < end:
        c = data[i]
        if c < 0x80:
            i += 1
            continue
        if 0xC2 <= c <= 0xDF:
            n = 1
        elif 0xE0 <= c <= 0xEF:
            n = 2
        elif 0xF0 <= c <= 0xF4:
            n = 3
        else:
            return False
        if i + n >= end:
            return False
        c1 = data[i + 1]
        if c1 < 0x80 or c1 > 0xBF:
            return False
        if c == 0xE0 and c1 < 0xA0:
            return False
        if c == 0xED and c1 > 0x9F:
            return False
        if c == 0xF0 and c1 < 0x90:
            return False
        if c == 0xF4 and c1 > 0x8F:
            return False
        for k in range(2, n + 1):
            ck = data[i + k]
            if ck < 0x80 or ck > 0xBF:
                return False
        i += n + 1
    return True


@njit(cache=_CACHE, nogil=True)
def _put_java_utf8(out, pos, data, start, end):
    """Copy data[start:end] as Java's new String(bytes, UTF_8) then getBytes(UTF_8) gives it back: valid
    UTF-8 unchanged, each maximal ill-formed subpart as U+FFFD (EF BF BD), and ED A0..BF xx (a UTF-16
    surrogate) as one U+FFFD for its 2 or 3 bytes (output.string_decoder's rule)."""
    i = start
    while i < end:
        c = data[i]
        if c < 0x80:
            out[pos] = c
            pos += 1
            i += 1
            continue
        n = 0          # continuation bytes a valid sequence needs
        lo = 0x80      # the first continuation byte's range
        hi = 0xBF
        if 0xC2 <= c <= 0xDF:
            n = 1
        elif 0xE0 <= c <= 0xEF:
            n = 2
            if c == 0xE0:
                lo = 0xA0
        elif 0xF0 <= c <= 0xF4:
            n = 3
            if c == 0xF0:
                lo = 0x90
            elif c == 0xF4:
                hi = 0x8F
        good = 0       # bytes of the sequence that are well formed so far (the lead included)
        if n > 0:
            good = 1
            if i + 1 < end and lo <= data[i + 1] <= hi:
                good = 2
                while good <= n and i + good < end and 0x80 <= data[i + good] <= 0xBF:
                    good += 1
        if n > 0 and good == n + 1 and not (c == 0xED and data[i + 1] >= 0xA0):
            for k in range(good):
                out[pos + k] = data[i + k]
            pos += good
            i += good
            continue
        out[pos] = 0xEF
        out[pos + 1] = 0xBF
        out[pos + 2] = 0xBD
        pos += 3
        i += good if good > 0 else 1
    return pos


@njit(cache=_CACHE, nogil=True)
def _put_data_field(out, pos, first, label, data, start, end):
    """" key: …" or " payload: …" (label holds the name and ": "), led by "|" when it opens the record's
    line (--skip-record-metadata), the bytes as Java's UTF-8 decoder prints them."""
    if first:
        out[pos] = 124
        pos += 1
    out[pos] = 32
    pos += 1
    pos = _put(out, pos, label)
    return _put_java_utf8(out, pos, data, start, end)


@njit(cache=_CACHE, nogil=True)
def all_utf8_kernel(data, offsets, valid):
    """True when every valid element data[offsets[i]:offsets[i+1]] is strict UTF-8 on its own."""
    for i in range(offsets.shape[0] - 1):
        if valid[i] and not _utf8_valid(data, offsets[i], offsets[i + 1]):
            return False
    return True


@njit(cache=_CACHE, nogil=True)
def format_lines_kernel(out, batch_text, batch_text_off, batch_counts, batch_ts_name, ts_names, ts_name_off,
                        batch_base_offset, batch_base_seq, offsets, timestamps, key_off, key_data, key_valid,
                        val_off, val_data, val_valid, hdr_off, hk_off, hk_data, print_data, skip_meta,
                        with_batch_lines):
    """Write each batch's line (unless not ``with_batch_lines``: a later slice of one batch), then its
    records' lines, each ending in '\\n'; returns the bytes written."""
    pos = 0
    r = 0
    for b in range(batch_counts.shape[0]):
        if with_batch_lines:
            pos = _put(out, pos, batch_text[batch_text_off[b]:batch_text_off[b + 1]])
            out[pos] = 10
            pos += 1
        name = ts_names[ts_name_off[batch_ts_name[b]]:ts_name_off[batch_ts_name[b] + 1]]
        base_seq = batch_base_seq[b]
        for _ in range(batch_counts[b]):
            has_key = key_valid[r]
            has_value = val_valid[r]
            first = True
            if not skip_meta:
                pos = _put(out, pos, _OFFSET)
                pos = _put_int(out, pos, offsets[r])
                out[pos] = 32
                pos += 1
                pos = _put(out, pos, name)
                out[pos] = 58
                out[pos + 1] = 32
                pos += 2
                pos = _put_int(out, pos, timestamps[r])
                pos = _put(out, pos, _KEY_SIZE)
                pos = _put_int(out, pos, key_off[r + 1] - key_off[r] if has_key else -1)
                pos = _put(out, pos, _VALUE_SIZE)
                pos = _put_int(out, pos, val_off[r + 1] - val_off[r] if has_value else -1)
                pos = _put(out, pos, _SEQUENCE)
                if base_seq < 0:
                    seq = -1
                else:
                    delta = offsets[r] - batch_base_offset[b]
                    if base_seq > INT32_MAX - delta:
                        seq = delta - (INT32_MAX - base_seq) - 1
                    else:
                        seq = base_seq + delta
                pos = _put_int(out, pos, seq)
                pos = _put(out, pos, _HEADER_KEYS)
                for h in range(hdr_off[r], hdr_off[r + 1]):
                    if h > hdr_off[r]:
                        out[pos] = 44
                        pos += 1
                    pos = _put(out, pos, hk_data[hk_off[h]:hk_off[h + 1]])
                out[pos] = 93
                pos += 1
                first = False
            if print_data:
                if has_key:
                    pos = _put_data_field(out, pos, first, _KEY, key_data, key_off[r], key_off[r + 1])
                    first = False
                if has_value:
                    pos = _put_data_field(out, pos, first, _PAYLOAD, val_data, val_off[r], val_off[r + 1])
            out[pos] = 10
            pos += 1
            r += 1
    return pos


def _binary_parts(arr: pa.Array):
    """(offsets int64 array of len+1, data uint8 array, validity bool array) of a binary/string array."""
    n = len(arr)
    _, offsets_buf, data_buf = arr.buffers()[:3]
    offsets = np.frombuffer(offsets_buf, np.int32)[arr.offset:arr.offset + n + 1].astype(np.int64)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    valid = arr.is_valid().to_numpy(zero_copy_only=False) if arr.null_count else np.ones(n, np.bool_)
    return offsets, data, valid


@dataclass
class BulkLines:
    """The formatted lines of a run of batches: ``data`` (UTF-8, every line ending in '\\n'),
    ``offsets`` (the record offsets, for the non-consecutive report), ``utf8_ok`` False when the
    run must be printed record by record instead."""
    data: Optional[bytes]
    offsets: np.ndarray
    utf8_ok: bool


def format_run(batch_lines: List[str], counts: np.ndarray, ts_name_index: np.ndarray, ts_names: List[str],
               base_offsets: np.ndarray, base_sequences: np.ndarray, records: pa.RecordBatch, *,
               print_data: bool, skip_metadata: bool, batch_line_first: bool = True) -> BulkLines:
    """Lines of the decoded ``records`` of a run of batches (``counts[b]`` records each, in order).

    Parameters: ``batch_lines`` the batch-level lines (printBatchLevel) in order; ``ts_name_index[b]``
    indexes ``ts_names`` (the timestamp type each batch prints); ``base_offsets``/``base_sequences``
    per batch for the record sequences; ``print_data`` / ``skip_metadata`` as the options say;
    ``batch_line_first`` False: one batch continued (``batch_lines`` empty, no batch line printed)."""
    col = records.column
    offsets = col("offset").to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    timestamps = pc.fill_null(col("timestamp").cast(pa.int64()), -1).to_numpy(zero_copy_only=False)
    key_off, key_data, key_valid = _binary_parts(col("key"))
    val_off, val_data, val_valid = _binary_parts(col("value"))
    headers = col("headers")
    hdr_off = np.frombuffer(headers.buffers()[1], np.int32)[headers.offset:headers.offset + len(headers) + 1]
    hdr_off = hdr_off.astype(np.int64)
    hk_off, hk_data, hk_valid = _binary_parts(headers.values.field(0))
    if not all_utf8_kernel(hk_data, hk_off, hk_valid):
        return BulkLines(None, offsets, False)
    batch_text = np.frombuffer("".join(batch_lines).encode("ascii"), np.uint8)   # printBatchLevel is ASCII
    batch_bounds = np.zeros(max(len(batch_lines), len(counts)) + 1, np.int64)
    if batch_lines:
        np.cumsum([len(line) for line in batch_lines], out=batch_bounds[1:])
    names = np.frombuffer("".join(ts_names).encode("ascii"), np.uint8)
    name_bounds = np.zeros(len(ts_names) + 1, np.int64)
    np.cumsum([len(name) for name in ts_names], out=name_bounds[1:])
    cap = (len(offsets) * MAX_FIXED_LINE + len(batch_text) + len(batch_lines) + len(hk_data)
           + int(hdr_off[-1] - hdr_off[0]) + 16
           + (3 * (int(key_off[-1] - key_off[0]) + int(val_off[-1] - val_off[0])) if print_data else 0))
    out = np.empty(cap, np.uint8)
    used = format_lines_kernel(out, batch_text, batch_bounds, counts.astype(np.int64), ts_name_index.astype(np.int64),
                               names, name_bounds, base_offsets.astype(np.int64),
                               base_sequences.astype(np.int64), offsets, timestamps.astype(np.int64), key_off,
                               key_data, key_valid, val_off, val_data, val_valid, hdr_off, hk_off, hk_data,
                               print_data, skip_metadata, batch_line_first)
    return BulkLines(out[:used].tobytes(), offsets, True)
