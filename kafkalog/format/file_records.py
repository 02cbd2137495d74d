"""Walking a .log file batch by batch (FileRecords / FileLogInputStream): batch headers as Arrow,
CRC checks, and Kafka's recovery rule for where the valid bytes end.

The walk reads each entry's offset and size, dispatches on the magic byte at +16 and jumps
12 + size bytes. It never decompresses. Two engines produce the same arrays: a plain Python
reference and a numba kernel (``kafkalog.engine``: reference | compiled); tests run both.
"""
from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pyarrow as pa

from kafkalog.engine import REFERENCE, resolve as resolve_engine
from kafkalog.errors import (BatchSizeError, CorruptRecordError, CrcMismatchError, InvalidRecordError, KafkalogError,
                             TruncatedBatchError, UnknownMagicError)
from kafkalog.format import legacy_record as legacy
from kafkalog.format import record_batch as rb
from kafkalog.format.buffer_pool import release_pages
from kafkalog.format.native import native_functions
from kafkalog.format.schema import BATCH_SCHEMA
from kafkalog.format.varint import wrap_int64
from kafkalog.fs.filesystem import MappedFile, open_view

MIN_ENTRY_SIZE = legacy.RECORD_OVERHEAD_V0   # Kafka: "smaller than minimum record overhead (14)"

# walk status codes (shared by both engines)
OK_END = 0          # reached the end of the buffer exactly
OK_WINDOW = 1       # stopped after the requested number of bytes; more batches follow
ERR_SIZE_SMALL = 2  # size field < 14
ERR_TRUNCATED = 3   # the batch (or its header) runs past the end of the file
ERR_V2_SMALL = 4    # v2 batch shorter than its 61-byte header
ERR_LEGACY_SMALL = 5
ERR_MAGIC = 6
ERR_COUNT = 7       # negative recordsCount

# A mapped file is walked and CRC-checked this many bytes at a time, each window's pages dropped from
# the process's resident set once checked: a scan's RSS stays near one window, not the file's size
# (a 1 GB segment's CRC check would otherwise leave 1 GB of file pages counted in the RSS until unmapped).
SCAN_WINDOW_BYTES = 8 << 20

_FIELDS = ("position", "size", "baseOffset", "lastOffset", "magic", "attributes", "baseTimestamp",
           "maxTimestamp", "producerId", "producerEpoch", "baseSequence", "recordsCount",
           "partitionLeaderEpoch", "crc")
_DTYPES = (np.int64, np.int32, np.int64, np.int64, np.int8, np.int16, np.int64, np.int64, np.int64, np.int16,
           np.int32, np.int32, np.int32, np.uint32)


@dataclass
class HeaderArrays:
    """Per-batch header fields as numpy arrays, one element per batch, in file order."""

    position: np.ndarray
    size: np.ndarray
    baseOffset: np.ndarray
    lastOffset: np.ndarray
    magic: np.ndarray
    attributes: np.ndarray
    baseTimestamp: np.ndarray
    maxTimestamp: np.ndarray
    producerId: np.ndarray
    producerEpoch: np.ndarray
    baseSequence: np.ndarray
    recordsCount: np.ndarray
    partitionLeaderEpoch: np.ndarray
    crc: np.ndarray

    def __len__(self) -> int:
        return len(self.position)

    @staticmethod
    def empty(n: int) -> "HeaderArrays":
        return HeaderArrays(*(np.empty(n, dtype=d) for d in _DTYPES))

    def head(self, n: int) -> "HeaderArrays":
        return HeaderArrays(*(getattr(self, f)[:n] for f in _FIELDS))

    def slice(self, start: int, stop: int) -> "HeaderArrays":
        return HeaderArrays(*(getattr(self, f)[start:stop] for f in _FIELDS))

    def take(self, index) -> "HeaderArrays":
        return HeaderArrays(*(getattr(self, f)[index] for f in _FIELDS))

    @staticmethod
    def concat(parts) -> "HeaderArrays":
        parts = list(parts)
        if len(parts) == 1:
            return parts[0]
        return HeaderArrays(*(np.concatenate([getattr(p, f) for p in parts]) for f in _FIELDS))


@dataclass
class ScanResult:
    """What a walk found: the batches, where the valid bytes end, and why it stopped."""

    path: Optional[str]
    batches: pa.Table                   # BATCH_SCHEMA
    # End of the last valid batch: where Kafka's recovery truncates, with one difference: a batch
    # whose magic byte is > 2 stops our walk (UnknownMagicError) while Kafka's file walker treats it
    # as v2 and, since the CRC does not cover the magic byte, keeps it.
    valid_bytes: int
    file_size: int
    headers: HeaderArrays = field(repr=False)
    error: Optional[KafkalogError] = None   # the first invalid thing, when on_corrupt="stop"

    @property
    def invalid_bytes(self) -> int:
        return self.file_size - self.valid_bytes


# --- engines -------------------------------------------------------------------------------

def _scan_python(buf, start: int, end: int, window: int, out: HeaderArrays):
    """Reference walk. Returns (number of batches, status, position where it stopped)."""
    n = 0
    pos = start
    cap = len(out)
    while True:
        if pos == end:
            return n, OK_END, pos
        if pos - start >= window or n == cap:
            return n, OK_WINDOW, pos
        if end - pos < rb.LOG_OVERHEAD:
            return n, ERR_TRUNCATED, pos
        offset, size = struct.unpack_from(">qi", buf, pos)
        if size < MIN_ENTRY_SIZE:
            return n, ERR_SIZE_SMALL, pos
        if pos + rb.LOG_OVERHEAD + size > end:
            return n, ERR_TRUNCATED, pos
        magic = buf[pos + rb.MAGIC_OFFSET]
        if magic == 2:
            if size + rb.LOG_OVERHEAD < rb.RECORD_BATCH_OVERHEAD:
                return n, ERR_V2_SMALL, pos
            h = rb.HEADER.unpack_from(buf, pos)
            if h[12] < 0:
                return n, ERR_COUNT, pos
            out.baseOffset[n] = h[0]
            out.partitionLeaderEpoch[n] = h[2]
            out.crc[n] = h[4]
            out.attributes[n] = h[5] & 0xFF
            out.lastOffset[n] = wrap_int64(h[0] + h[6])
            out.baseTimestamp[n] = h[7]
            out.maxTimestamp[n] = h[8]
            out.producerId[n] = h[9]
            out.producerEpoch[n] = h[10]
            out.baseSequence[n] = h[11]
            out.recordsCount[n] = h[12]
        elif magic in (0, 1):
            if size < legacy.overhead(magic):
                return n, ERR_LEGACY_SMALL, pos
            m = pos + rb.LOG_OVERHEAD
            attributes = buf[m + legacy.ATTRIBUTES_OFFSET]
            out.baseOffset[n] = offset
            out.lastOffset[n] = offset
            out.partitionLeaderEpoch[n] = -1
            out.crc[n] = struct.unpack_from(">I", buf, m)[0]
            out.attributes[n] = attributes
            ts = struct.unpack_from(">q", buf, m + legacy.TIMESTAMP_OFFSET)[0] if magic == 1 else -1
            out.baseTimestamp[n] = ts
            out.maxTimestamp[n] = ts
            out.producerId[n] = -1
            out.producerEpoch[n] = -1
            out.baseSequence[n] = -1
            out.recordsCount[n] = 1 if attributes & legacy.CODEC_MASK == 0 else -1
        else:
            return n, ERR_MAGIC, pos
        out.position[n] = pos
        out.size[n] = size + rb.LOG_OVERHEAD
        out.magic[n] = magic
        n += 1
        pos += rb.LOG_OVERHEAD + size


def scan_window(buf, start: int, end: int, window: int, out: HeaderArrays, engine: Optional[str] = None):
    """Walk at most ``window`` batch headers of ``buf[start:end]`` into ``out`` with ``engine``
    (``kafkalog.engine``: the Python walk or the compiled kernel): ``(headers read, status, position
    where the walk stopped)``."""
    if resolve_engine(engine) == REFERENCE:
        return _scan_python(buf, start, end, window, out)
    from kafkalog.format import records_accel
    arr = buf if isinstance(buf, np.ndarray) else np.frombuffer(buf, dtype=np.uint8)
    return records_accel.scan_kernel(arr, start, end, window, out.position, out.size, out.baseOffset,
                                      out.lastOffset, out.magic, out.attributes, out.baseTimestamp,
                                      out.maxTimestamp, out.producerId, out.producerEpoch, out.baseSequence,
                                      out.recordsCount, out.partitionLeaderEpoch, out.crc)


# --- errors --------------------------------------------------------------------------------

def walk_error(status: int, buf, pos: int, end: int, path) -> KafkalogError:
    """The exception for a walk status, naming the file and byte position."""
    if status == ERR_TRUNCATED:
        if end - pos < rb.LOG_OVERHEAD:
            return TruncatedBatchError(f"{end - pos} trailing bytes do not hold a batch header", path=path,
                                       position=pos)
        size = struct.unpack_from(">i", buf, pos + 8)[0]
        return TruncatedBatchError(f"batch of {size + 12} bytes runs past the end of the file ({end - pos} bytes left)",
                                   path=path, position=pos)
    size = struct.unpack_from(">i", buf, pos + 8)[0]
    if status == ERR_SIZE_SMALL:
        return BatchSizeError(f"record size {size} is smaller than the minimum record overhead ({MIN_ENTRY_SIZE})",
                              path=path, position=pos)
    if status == ERR_V2_SMALL:
        return BatchSizeError(f"v2 batch of {size + 12} bytes is smaller than its {rb.RECORD_BATCH_OVERHEAD}-byte "
                              "header", path=path, position=pos)
    if status == ERR_LEGACY_SMALL:
        return BatchSizeError(f"legacy message of {size} bytes is smaller than its header", path=path, position=pos)
    if status == ERR_MAGIC:
        return UnknownMagicError(f"unknown magic {buf[pos + rb.MAGIC_OFFSET]} (expected 0, 1 or 2)", path=path,
                                 position=pos)
    if status == ERR_COUNT:
        count = struct.unpack_from(">i", buf, pos + rb.RECORDS_COUNT_OFFSET)[0]
        return InvalidRecordError(f"negative record count {count}", path=path, position=pos)
    return CorruptRecordError(f"walk stopped with status {status}", path=path, position=pos)


def check_crcs(buf, h: HeaderArrays, n: int) -> np.ndarray:
    """CRC-32C of each v2 batch's [21, end), CRC-32 of each legacy message's [magic, end)."""
    valid = np.empty(n, dtype=np.bool_)
    pos, size, magic, crc = h.position, h.size, h.magic, h.crc
    first = 0
    fn = native_functions().crc32c_update
    if fn and n:
        from kafkalog.format import records_accel as acc

        array = buf if isinstance(buf, np.ndarray) else np.frombuffer(buf, dtype=np.uint8)
        first = acc.crc_kernel(array, pos, size, magic, crc, n, np.uintp(fn), valid)   # v2 batches, no GIL
    mv = memoryview(buf)
    for i in range(first, n):
        p = int(pos[i])
        e = p + int(size[i])
        if magic[i] == 2:
            valid[i] = rb.crc32c(mv[p + rb.ATTRIBUTES_OFFSET:e]) == crc[i]
        else:
            valid[i] = (zlib.crc32(mv[p + rb.LOG_OVERHEAD + legacy.MAGIC_OFFSET:e]) & 0xFFFFFFFF) == crc[i]
    return valid


def crc_error(buf, h: HeaderArrays, i: int, path) -> CrcMismatchError:
    p = int(h.position[i])
    e = p + int(h.size[i])
    mv = memoryview(buf)
    if h.magic[i] == 2:
        actual = rb.crc32c(mv[p + rb.ATTRIBUTES_OFFSET:e])
        kind = "CRC-32C"
    else:
        actual = zlib.crc32(mv[p + rb.LOG_OVERHEAD + legacy.MAGIC_OFFSET:e]) & 0xFFFFFFFF
        kind = "CRC-32"
    return CrcMismatchError(f"batch at offset {int(h.baseOffset[i])}: stored {kind} {int(h.crc[i])}, computed {actual}",
                            path=path, position=p)


# --- the walk ------------------------------------------------------------------------------

def header_table(h: HeaderArrays, crc_valid: Optional[np.ndarray]) -> pa.Table:
    attrs = h.attributes.astype(np.int16)
    is_v2 = h.magic == 2
    codec = (attrs & rb.COMPRESSION_CODEC_MASK).astype(np.int8)
    ts_type = np.where(h.magic == 0, -1, (attrs & rb.TIMESTAMP_TYPE_MASK) >> 3).astype(np.int8)
    has_horizon = is_v2 & ((attrs & rb.DELETE_HORIZON_FLAG_MASK) != 0)
    cols = {
        "position": h.position, "size": h.size, "baseOffset": h.baseOffset, "lastOffset": h.lastOffset,
        "magic": h.magic, "attributes": attrs, "codec": codec, "timestampType": ts_type,
        "baseTimestamp": h.baseTimestamp, "maxTimestamp": h.maxTimestamp, "producerId": h.producerId,
        "producerEpoch": h.producerEpoch, "baseSequence": h.baseSequence, "recordsCount": h.recordsCount,
        "partitionLeaderEpoch": h.partitionLeaderEpoch,
        "isTransactional": is_v2 & ((attrs & rb.TRANSACTIONAL_FLAG_MASK) != 0),
        "isControl": is_v2 & ((attrs & rb.CONTROL_FLAG_MASK) != 0),
        "deleteHorizonMs": pa.array(h.baseTimestamp, mask=~has_horizon, type=pa.int64()),
        "crc": h.crc,
        "crcValid": pa.nulls(len(h), pa.bool_()) if crc_valid is None else pa.array(crc_valid),
    }
    return pa.table({k: (v if isinstance(v, pa.Array) else pa.array(v)) for k, v in cols.items()}, schema=BATCH_SCHEMA)


def scan_buffer(buf, *, path=None, start: int = 0, end: Optional[int] = None, verify_crc: bool = True,
                on_corrupt: str = "raise", max_bytes: Optional[int] = None, engine: Optional[str] = None,
                drop_pages: bool = False) -> ScanResult:
    """Walk batches in ``buf[start:end]``. ``on_corrupt``: "raise" (default) or "stop" (Kafka's recovery:
    keep the valid prefix, report the first problem in ``ScanResult.error``). ``max_bytes`` reads at
    most that many bytes (kafka-dump-log's --max-bytes): a batch crossing the limit ends the walk
    quietly. ``drop_pages``: ``buf`` is a read-only file mapping (``MappedFile.array``), walked and
    checked ``SCAN_WINDOW_BYTES`` at a time, each window's pages released once checked (never pass it
    for memory the process owns: released anonymous pages read back as zeros)."""
    if on_corrupt not in ("raise", "stop"):
        raise ValueError("on_corrupt must be 'raise' or 'stop'")
    engine = resolve_engine(engine)
    file_end = len(buf) if end is None else end
    walk_end = file_end if max_bytes is None else min(file_end, start + max_bytes)
    window = SCAN_WINDOW_BYTES if drop_pages else 1 << 62
    # 26 bytes = the smallest entry; a full window goes on in the next one. Sized per window, the
    # arrays stay below numpy's 4 MiB huge-page threshold (a 2 MiB page per touched array otherwise).
    cap = max(16, (min(walk_end - start, window)) // 40 + 16)
    parts, crc_parts = [], []
    pos = start
    while True:
        at = pos
        out = HeaderArrays.empty(min(cap, (walk_end - pos) // MIN_ENTRY_SIZE + 1))
        n, status, pos = scan_window(buf, pos, walk_end, window, out, engine)
        parts.append(out.head(n))
        if drop_pages:
            if verify_crc:
                crc_parts.append(check_crcs(buf, parts[-1], n))
            release_pages(buf, at, pos)
            if verify_crc and not crc_parts[-1].all():
                break        # the first bad CRC is the walk's first problem: nothing after it is read
        if status != OK_WINDOW:
            break
    h = HeaderArrays.concat(parts)
    error = None
    if status not in (OK_END, OK_WINDOW):
        if max_bytes is not None and walk_end < file_end and status == ERR_TRUNCATED:
            status = OK_END   # the --max-bytes limit cut the batch, not the file
        else:
            error = walk_error(status, buf, pos, walk_end, path)
    if not verify_crc:
        crc_valid = None
    elif drop_pages:
        crc_valid = np.concatenate(crc_parts) if crc_parts else np.empty(0, np.bool_)
    else:
        crc_valid = check_crcs(buf, h, len(h))
    if crc_valid is not None and not crc_valid.all():
        bad = int(np.argmin(crc_valid))
        crc_err = crc_error(buf, h, bad, path)
        if on_corrupt == "raise":
            raise crc_err
        error = crc_err
        h = h.head(bad)
        crc_valid = crc_valid[:bad]
    if error is not None and on_corrupt == "raise":
        raise error
    valid_bytes = int(h.position[-1] + h.size[-1]) if len(h) else start
    return ScanResult(path=None if path is None else os.fspath(path), batches=header_table(h, crc_valid),
                      valid_bytes=valid_bytes, file_size=file_end, error=error, headers=h)


def recovery_valid_bytes(buf, *, path=None) -> tuple[int, Optional[KafkalogError]]:
    """Where Kafka's recovery (``LogSegment.recover`` over ``FileLogInputStream``) would truncate
    ``buf``, and our first complaint before that point (None when the whole buffer is valid).

    Our walk is stricter than Kafka's in two places: a magic byte above 2 and a negative record count
    stop it. Kafka reads the magic byte signed, takes >= 2 as v2 and keeps such a batch when its
    size is at least the v2 overhead and its CRC-32C matches; below 2 (negative included) as legacy,
    kept when its CRC-32 matches. So where our walk stops, the batch is judged Kafka's way and, if
    kept, the walk goes on after it."""
    pos = 0
    first_error = None
    n = len(buf)
    while True:
        scan = scan_buffer(buf, path=path, start=pos, verify_crc=True, on_corrupt="stop")
        pos = scan.valid_bytes
        if scan.error is None:
            return pos, first_error
        first_error = first_error or scan.error
        if pos + rb.LOG_OVERHEAD > n:
            return pos, first_error
        size = struct.unpack_from(">i", buf, pos + 8)[0]
        end = pos + rb.LOG_OVERHEAD + size
        if size < MIN_ENTRY_SIZE or end > n:
            return pos, first_error
        magic = struct.unpack_from(">b", buf, pos + rb.MAGIC_OFFSET)[0]
        if magic >= 2:
            ok = size + rb.LOG_OVERHEAD >= rb.RECORD_BATCH_OVERHEAD and \
                rb.compute_crc(buf[pos:end]) == struct.unpack_from(">I", buf, pos + rb.CRC_OFFSET)[0]
        else:
            ok = (zlib.crc32(bytes(buf[pos + rb.LOG_OVERHEAD + 4:end])) & 0xFFFFFFFF) == \
                struct.unpack_from(">I", buf, pos + rb.LOG_OVERHEAD)[0]
        if not ok:
            return pos, first_error
        pos = end


def scan_batches(path, *, verify_crc: bool = True, on_corrupt: str = "raise", max_bytes: Optional[int] = None,
                 engine: Optional[str] = None) -> ScanResult:
    """Walk a .log file (or any record-set file, local or a URI) and return its batches as an Arrow table.

    ``path``: the file; ``verify_crc``: check each v2 batch's CRC-32C; ``on_corrupt``: ``raise`` or
    ``stop`` (keep the valid prefix, as Kafka's recovery does); ``max_bytes``: walk at most this many
    bytes; ``engine``: ``kafkalog.engine``'s ``reference`` or ``compiled`` (None: ``$KAFKALOG_ENGINE``). The result's ``batches`` is one row per batch
    header, ``valid_bytes`` where the walk ended.

    Example::

        import kafkalog
        scan = kafkalog.scan_batches("logs/orders-0/00000000000000000000.log")
        print(scan.batches.num_rows, "batches,", scan.valid_bytes, "valid bytes")
    """
    with open_view(path) as f:
        return scan_buffer(f.array, path=path, verify_crc=verify_crc, on_corrupt=on_corrupt, max_bytes=max_bytes,
                           engine=engine, drop_pages=isinstance(f, MappedFile))
