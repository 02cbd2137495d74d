"""Data a broker reads must read here too, the way the broker reads it; and memory stays bounded.
(Cases from a review against Kafka's source: DefaultRecord, ByteUtils, LegacyRecord,
DefaultRecordBatch.iterator, Lz4BlockInputStream, GZIPInputStream, SnappyInputStream.)"""
from __future__ import annotations

import struct

import lz4.frame
import pyarrow as pa
import pytest

from kafkalog.log import records_io as segment
from kafkalog.format import compression as codecs
from kafkalog.format import legacy_record as legacy
from kafkalog.format import record_batch as rb

from engines import engine_param

INT64_MAX = 2**63 - 1


def _write(tmp_path, data: bytes, name="00000000000000000000.log"):
    d = tmp_path / "topic-0"
    d.mkdir(exist_ok=True)
    p = d / name
    p.write_bytes(data)
    return p


def _recrc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, rb.CRC_OFFSET, rb.compute_crc(batch))
    return bytes(batch)


@engine_param
def test_offsets_and_timestamps_wrap_like_java_longs(tmp_path, engine):
    b = bytearray(rb.encode_batch([rb.V2Record(0, 10, b"a", b"1"), rb.V2Record(1, 15, b"b", b"2")]))
    struct.pack_into(">q", b, rb.BASE_OFFSET_OFFSET, INT64_MAX)             # outside the CRC
    struct.pack_into(">q", b, rb.BASE_TIMESTAMP_OFFSET, INT64_MAX)
    t = segment.read_segment(_write(tmp_path, _recrc(b)), engine=engine)
    assert t.column("offset").to_pylist() == [INT64_MAX, -(2**63)]
    assert t.column("timestamp").cast(pa.int64()).to_pylist() == [INT64_MAX, -(2**63) + 4]


@engine_param
def test_empty_batch_payload_is_never_read(tmp_path, engine):
    """DefaultRecordBatch.iterator returns nothing for count 0 without touching codec or payload."""
    for codec, payload in ((0, b"\x0c\x00\x00\x00\x01\x01\x00"), (1, b"not gzip at all"), (6, b"??"), (2, b"")):
        b = bytearray(rb.encode_batch([], base_offset=5, last_offset_delta=3, max_timestamp=99) + payload)
        struct.pack_into(">i", b, rb.LENGTH_OFFSET, len(b) - 12)
        b[rb.ATTRIBUTES_OFFSET + 1] = codec
        good = rb.encode_batch([rb.V2Record(9, 1, b"k", b"v")])
        t = segment.read_segment(_write(tmp_path, _recrc(b) + good), engine=engine)
        assert t.column("offset").to_pylist() == [9], codec


@engine_param
def test_negative_lengths_are_null_and_varint_high_bits_dropped(tmp_path, engine):
    # key length -2 (zigzag 03) is null in DefaultRecord.readFrom; a header value length -5 too
    body = b"\x00\x00\x00" + b"\x03" + b"\x02v" + b"\x02" + b"\x02h" + b"\x09"
    record = bytes([len(body) * 2]) + body
    hdr = bytearray(rb.RECORD_BATCH_OVERHEAD)
    rb.HEADER.pack_into(hdr, 0, 0, rb.RECORD_BATCH_OVERHEAD - 12 + len(record), 0, 2, 0, 0, 0, 7, 7, -1, -1, -1, 1)
    t = segment.read_segment(_write(tmp_path, _recrc(bytearray(bytes(hdr) + record))), engine=engine)
    row = t.to_pylist()[0]
    assert row["key"] is None and row["value"] == b"v" and row["headers"] == [{"key": "h", "value": None}]
    # offsetDelta as a 5-byte varint whose last byte carries bits beyond 32: Java drops them
    body = b"\x00\x00" + b"\x84\x80\x80\x80\x10" + b"\x01\x01\x00"       # zigzag raw 4 | (0x10 << 28) -> 4 -> 2
    record = bytes([len(body) * 2]) + body
    rb.HEADER.pack_into(hdr, 0, 0, rb.RECORD_BATCH_OVERHEAD - 12 + len(record), 0, 2, 0, 0, 2, 7, 7, -1, -1, -1, 1)
    t = segment.read_segment(_write(tmp_path, _recrc(bytearray(bytes(hdr) + record))), engine=engine)
    assert t.column("offset").to_pylist() == [2]


@engine_param
def test_v1_wrapper_with_v0_inner_messages(tmp_path, engine):
    """KAFKA-4298 left v0 messages inside v1 wrappers; Kafka's iterator reads them (offsets follow the wrapper)."""
    inner = b"".join(legacy.encode_message(magic=0, offset=i, timestamp=-1, key=None, value=b"x%d" % i) for i in (0, 1))
    wrapper = legacy.encode_message(magic=1, offset=11, timestamp=500, key=None, value=codecs.compress(1, inner),
                                    attributes=1)
    t = segment.read_segment(_write(tmp_path, wrapper), engine=engine)
    assert t.column("offset").to_pylist() == [10, 11]
    assert t.column("timestamp").to_pylist() == [None, None]
    assert t.column("value").to_pylist() == [b"x0", b"x1"]


def test_lz4_content_checksum_and_size_are_not_verified_block_checksums_are():
    data = b"kafka " * 5000
    frame = bytearray(lz4.frame.compress(data, block_linked=False, content_checksum=True, store_size=True))
    frame[-1] ^= 0xFF                                     # wrong content checksum: Kafka does not verify it
    assert codecs.decompress(codecs.LZ4, bytes(frame)) == data
    frame = bytearray(lz4.frame.compress(data, block_linked=False, store_size=True))
    struct.pack_into("<Q", frame, 6, 12345)               # wrong content size: Kafka skips it
    frame[14] = codecs.lz4_header_checksum(bytes(frame[4:14]))
    assert codecs.decompress(codecs.LZ4, bytes(frame)) == data
    frame = bytearray(lz4.frame.compress(data, block_linked=False, block_checksum=True))
    frame[-5] ^= 0xFF                                     # a block checksum: verified
    with pytest.raises(codecs.DecompressionError):
        codecs.decompress(codecs.LZ4, bytes(frame))


def test_gzip_and_xerial_trailers_end_the_stream_as_java_does():
    data = b"payload " * 100
    gz = codecs.compress(codecs.GZIP, data)
    assert codecs.decompress(codecs.GZIP, gz + b"\x1f\x8b" + b"\x00" * 20) == data
    sn = codecs.compress(codecs.SNAPPY, data)
    assert codecs.decompress(codecs.SNAPPY, sn + codecs.XERIAL_MAGIC[:4] + b"junk") == data


@pytest.mark.parametrize("engine,magic", [("reference", 2), ("compiled", 2), ("reference", 1), ("compiled", 1)])
def test_decoded_record_batches_stay_within_the_window(tmp_path, engine, magic):
    """Compressed batches that expand a lot: each RecordBatch holds about one window of data."""
    value = b"\x00" * (2 << 20)
    if magic == 2:
        data = b"".join(rb.encode_batch([rb.V2Record(i, 1, None, value)], codec=1) for i in range(8))
    else:
        data = b"".join(legacy.encode_message_set([(i, 1, None, value)], magic=1, codec=1) for i in range(8))
    p = _write(tmp_path, data)
    assert p.stat().st_size < 100_000
    parts = list(segment.iter_segment(p, engine=engine, window_bytes=1 << 20))
    assert sum(b.num_rows for b in parts) == 8
    assert max(b.nbytes for b in parts) < 3 << 20        # one 2 MiB record per RecordBatch, never all eight


def test_encode_records_keeps_batches_of_concatenated_segments_apart(tmp_path):
    a = _write(tmp_path, rb.encode_batch([rb.V2Record(0, 1, b"k", b"a")]), "00000000000000000000.log")
    b = _write(tmp_path, rb.encode_batch([rb.V2Record(1, 2, b"k", b"b")], producer_id=9, producer_epoch=1,
                                         base_sequence=0), "00000000000000000001.log")
    both = pa.concat_tables([segment.read_segment(a), segment.read_segment(b)])
    assert both.column("batchPosition").to_pylist() == [0, 0]
    assert segment.encode_records(both) == a.read_bytes() + b.read_bytes()


def test_encode_records_legacy_keeps_codec_and_log_append_time(tmp_path):
    src = legacy.encode_message_set([(0, 5, b"k", b"v" * 100), (1, 6, b"k", b"w" * 100)], magic=1, codec=1)
    t = segment.read_segment(_write(tmp_path, src))
    again = segment.read_segment(_write(tmp_path, segment.encode_records(t, magic=1), "00000000000000000100.log"))
    assert again.column("codec").to_pylist() == [1, 1] and again.column("value").equals(t.column("value"))
    lat = segment.encode_records(t, magic=1, compression="none", timestamp_type=rb.LOG_APPEND_TIME, keep_batches=False)
    back = segment.read_segment(_write(tmp_path, lat, "00000000000000000200.log"))
    assert back.column("timestampType").to_pylist() == [1, 1]
