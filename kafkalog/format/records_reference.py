"""The reference engine: plain-Python decoding of batches into record rows.

Readable rather than fast; it is the oracle the accelerated engine is tested against, and the
path legacy (magic 0/1) data always takes.
"""
from __future__ import annotations

from dataclasses import dataclass
from contextlib import contextmanager
from typing import Iterator, List, Optional, Tuple

from kafkalog.errors import CrcMismatchError, InvalidRecordError, KafkalogError, UnknownCodecError
from kafkalog.format import legacy_record as legacy
from kafkalog.format import record_batch as rb
from kafkalog.format.compression import CODEC_NAMES, decompress
from kafkalog.format.varint import read_varint, read_varlong, wrap_int64


@dataclass(slots=True)
class RecordRow:
    offset: int
    timestamp: int                  # -1 = none
    timestamp_type: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: List[Tuple[str, Optional[bytes]]]


def check_codec(codec: int, magic: int, *, path=None, position=None) -> None:
    if codec not in CODEC_NAMES or (codec == 4 and magic < 2):
        what = "unknown compression type id" if codec not in CODEC_NAMES else "zstd with legacy magic"
        raise UnknownCodecError(f"{what} {codec} (attributes of the batch)", path=path, position=position)


def v2_records(payload, header: rb.BatchHeader) -> List[RecordRow]:
    """Parse the records region of a v2 batch (already decompressed). Positions in errors are
    relative to the start of ``payload``."""
    rows: List[RecordRow] = []
    for chunk in iter_v2_records(payload, header, max(header.records_count, 1)):
        rows.extend(chunk)
    return rows


def iter_v2_records(payload, header: rb.BatchHeader, chunk_rows: int) -> Iterator[List[RecordRow]]:
    """v2_records as lists of at most ``chunk_rows`` rows, parsed as they are asked for (a batch of
    millions of records is never held as one list); an error is raised when its record is reached."""
    if header.records_count < 0:
        raise InvalidRecordError(f"negative record count {header.records_count}")
    rows: List[RecordRow] = []
    read = 0
    p = 0
    end = len(payload)
    log_append = header.timestamp_type == rb.LOG_APPEND_TIME
    for _ in range(header.records_count):
        if p >= end:
            raise InvalidRecordError(f"batch declares {header.records_count} records but holds {read + len(rows)}",
                                     position=p)
        start = p
        try:
            p = _parse_record(payload, p, end, header, log_append, rows)
        except InvalidRecordError as e:
            e.position = start              # errors name the start of the bad record
            raise
        if len(rows) == chunk_rows:
            read += len(rows)
            yield rows
            rows = []
    if p != end:
        raise InvalidRecordError("incorrect declared batch size, records still remaining", position=p)
    if rows:
        yield rows


def _parse_record(payload, p: int, end: int, header: rb.BatchHeader, log_append: bool, rows: list) -> int:
    """Parse one record at ``p``; append it to ``rows``; return the next position."""
    start = p
    length, p = read_varint(payload, p, end)
    if length < 0 or p + length > end:
        raise InvalidRecordError(f"record length {length} runs past the batch", position=start)
    rend = p + length
    if p >= rend:
        raise InvalidRecordError("invalid record size: empty record body", position=start)
    p += 1                                           # attributes
    ts_delta, p = read_varlong(payload, p, rend)
    offset_delta, p = read_varint(payload, p, rend)
    key, p = _read_field(payload, p, rend, "key", start)
    value, p = _read_field(payload, p, rend, "value", start)
    count, p = read_varint(payload, p, rend)
    if count < 0 or count > rend - p:
        raise InvalidRecordError(f"invalid header count {count}", position=start)
    headers = []
    for _h in range(count):
        hk_len, p = read_varint(payload, p, rend)
        if hk_len < 0 or p + hk_len > rend:
            raise InvalidRecordError(f"invalid header key length {hk_len}", position=start)
        hkey = bytes(payload[p:p + hk_len]).decode("utf-8", errors="replace")
        p += hk_len
        hvalue, p = _read_field(payload, p, rend, "header value", start)
        headers.append((hkey, hvalue))
    if p != rend:
        raise InvalidRecordError(f"invalid record size: expected {length} bytes, read {p - (rend - length)}",
                                 position=start)
    ts = header.max_timestamp if log_append else wrap_int64(header.base_timestamp + ts_delta)
    rows.append(RecordRow(wrap_int64(header.base_offset + offset_delta), ts, header.timestamp_type, key, value,
                          headers))
    return p


def _read_field(payload, p: int, end: int, what: str, start: int):
    n, p = read_varint(payload, p, end)
    if n < 0:                       # any negative length is null (DefaultRecord.readFrom)
        return None, p
    if p + n > end:
        raise InvalidRecordError(f"invalid {what} length {n}", position=start)
    return bytes(payload[p:p + n]), p + n


def decode_v2_batch(buf, position: int, *, path=None, max_batch_bytes: int) -> Tuple[rb.BatchHeader, List[RecordRow]]:
    header, chunks = iter_v2_batch(buf, position, path=path, max_batch_bytes=max_batch_bytes)
    rows: List[RecordRow] = []
    for chunk in chunks:
        rows.extend(chunk)
    return header, rows


def iter_v2_batch(buf, position: int, *, path=None, max_batch_bytes: int,
                  chunk_rows: int = 1 << 20) -> Tuple[rb.BatchHeader, Iterator[List[RecordRow]]]:
    """decode_v2_batch streaming: the header, and the records in lists of at most ``chunk_rows``.
    The payload is decompressed (and the record count checked against it) before this returns;
    record errors are raised as the iteration reaches them."""
    header = rb.parse_header(buf, position)
    if header.records_count == 0:
        return header, iter(())    # Kafka never reads the payload of a batch that declares no records
    check_codec(header.codec, 2, path=path, position=position)
    raw = memoryview(buf)[position + rb.RECORDS_OFFSET:position + header.size_in_bytes]
    with _located(header, position, path):
        payload = raw if header.codec == 0 else decompress(header.codec, raw, magic=2, max_bytes=max_batch_bytes)
        if header.records_count > len(payload) // rb.MIN_RECORD_SIZE:
            raise InvalidRecordError(
                f"batch at offset {header.base_offset} declares {header.records_count} records but its {len(payload)} "
                f"bytes of records can hold at most {len(payload) // rb.MIN_RECORD_SIZE}")

    def chunks() -> Iterator[List[RecordRow]]:
        with _located(header, position, path):
            yield from iter_v2_records(payload, header, chunk_rows)
    return header, chunks()


@contextmanager
def _located(header: rb.BatchHeader, position: int, path):
    """Errors inside a batch name the file and the batch; a record's place within a compressed
    payload goes into the message."""
    try:
        yield
    except KafkalogError as e:
        if header.codec != 0 and isinstance(e, InvalidRecordError) and e.position is not None:
            e.message += f" (byte {e.position} of the decompressed records of this batch)"
            e.position = None
        elif header.codec == 0 and e.position is not None:
            e.position += position + rb.RECORDS_OFFSET
        raise e.with_location(path=path, position=position)


def decode_legacy_entry(buf, position: int, *, path=None, verify_crc: bool,
                        max_batch_bytes: int) -> Tuple[legacy.LegacyMessage, List[Tuple[int, legacy.LegacyMessage]]]:
    """One shallow legacy entry → (wrapper or message, [(absolute offset, message)])."""
    offset = int.from_bytes(buf[position:position + 8], "big", signed=True)
    size = int.from_bytes(buf[position + 8:position + 12], "big", signed=True)
    try:   # positions raised here are file positions (the buffer is the file)
        msg = legacy.parse_message(buf, position + rb.LOG_OVERHEAD, size, offset)
        check_codec(msg.codec, msg.magic)
        if verify_crc and not msg.crc_valid:
            raise CrcMismatchError(f"legacy message at offset {offset}: stored CRC-32 {msg.crc} does not match")
    except KafkalogError as e:
        raise e.with_location(path=path, position=position)
    if msg.codec == 0:
        return msg, [(offset, msg)]
    try:   # positions raised here are inside the decompressed inner message set
        return msg, legacy.inner_messages(msg, offset, verify_crc=verify_crc, max_bytes=max_batch_bytes)
    except KafkalogError as e:
        if e.position is not None:
            e.message += f" (byte {e.position} of the decompressed wrapper)"
            e.position = None
        raise e.with_location(path=path, position=position)


def legacy_rows(wrapper: legacy.LegacyMessage, inner) -> List[RecordRow]:
    rows = []
    ts_type = wrapper.timestamp_type
    for abs_offset, m in inner:
        if wrapper.magic == 0:
            ts = -1
        elif ts_type == rb.LOG_APPEND_TIME:
            ts = wrapper.timestamp
        else:
            ts = m.timestamp
        rows.append(RecordRow(abs_offset, ts, ts_type, m.key, m.value, []))
    return rows
