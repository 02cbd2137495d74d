"""Bad input never hangs, crashes with a bare traceback or allocates without bound: every case raises a
specific KafkalogError naming the file and byte position, and on_corrupt="stop" keeps the valid
prefix as Kafka's recovery does. Both engines."""
from __future__ import annotations

import struct

import pytest

from kafkalog import errors
from kafkalog.log import records_io as segment
from kafkalog.format import compression as codecs
from kafkalog.format import legacy_record as legacy
from kafkalog.format import record_batch as rb
from kafkalog.format.file_records import scan_batches

from engines import engine_param


def _batch(offset=0, n=3, codec=0, **kw) -> bytes:
    return rb.encode_batch([rb.V2Record(offset + i, 1000 + i, b"k%d" % i, b"v" * 50) for i in range(n)], codec=codec,
                           **kw)


def _recrc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, rb.CRC_OFFSET, rb.compute_crc(batch))
    return bytes(batch)


def _write(tmp_path, data: bytes):
    d = tmp_path / "topic-0"
    d.mkdir(exist_ok=True)
    p = d / "00000000000000000000.log"
    p.write_bytes(data)
    return p


GOOD = _batch(0) + _batch(3)


def _expect(tmp_path, data, exc, position, engine, *, valid_bytes=None):
    p = _write(tmp_path, data)
    with pytest.raises(exc) as e:
        segment.read_segment(p, engine=engine)
    assert e.value.path == str(p) and e.value.position == position, str(e.value)
    assert str(p) in str(e.value) and f"byte {position}" in str(e.value)
    assert e.value.hint, "every error says what to do next"
    if valid_bytes is not None:
        reader = segment.SegmentReader(p, segment.ReadOptions(on_corrupt="stop", engine=engine))
        rows = sum(b.num_rows for b in reader)
        assert reader.valid_bytes == valid_bytes and isinstance(reader.error, exc)
        assert rows == 6 if valid_bytes == len(GOOD) else rows >= 0
    return e.value


@engine_param
@pytest.mark.parametrize("cut", [1, 11, 12, 30, 61, 80])
def test_truncated_tail(tmp_path, engine, cut):
    third = _batch(6)
    _expect(tmp_path, GOOD + third[:cut], errors.TruncatedBatchError, len(GOOD), engine, valid_bytes=len(GOOD))


@engine_param
def test_bad_crc_v2(tmp_path, engine):
    bad = bytearray(_batch(3))
    bad[-1] ^= 0xFF
    err = _expect(tmp_path, _batch(0) + bytes(bad) + _batch(6), errors.CrcMismatchError, len(_batch(0)), engine,
                  valid_bytes=len(_batch(0)))
    assert "CRC-32C" in str(err)


@engine_param
def test_bad_crc_legacy(tmp_path, engine):
    msg = bytearray(legacy.encode_message(magic=1, offset=0, timestamp=5, key=b"a", value=b"b"))
    msg[-1] ^= 1
    err = _expect(tmp_path, bytes(msg), errors.CrcMismatchError, 0, engine)
    assert "CRC-32" in str(err)


@engine_param
@pytest.mark.parametrize("size", [0, 13, -5])
def test_size_below_minimum(tmp_path, engine, size):
    tail = struct.pack(">qi", 9, size) + b"\x00" * 20
    _expect(tmp_path, GOOD + tail, errors.BatchSizeError, len(GOOD), engine, valid_bytes=len(GOOD))


@engine_param
def test_zero_filled_tail_as_after_preallocation(tmp_path, engine):
    _expect(tmp_path, GOOD + b"\x00" * 4096, errors.BatchSizeError, len(GOOD), engine, valid_bytes=len(GOOD))


@engine_param
def test_v2_batch_smaller_than_header(tmp_path, engine):
    tiny = struct.pack(">qii", 9, 30, -1) + b"\x02" + b"\x00" * 29
    _expect(tmp_path, GOOD + tiny, errors.BatchSizeError, len(GOOD), engine, valid_bytes=len(GOOD))


@engine_param
def test_absurd_length_past_end(tmp_path, engine):
    huge = bytearray(_batch(6))
    struct.pack_into(">i", huge, rb.LENGTH_OFFSET, 2**31 - 1)
    _expect(tmp_path, GOOD + bytes(huge), errors.TruncatedBatchError, len(GOOD), engine, valid_bytes=len(GOOD))


@engine_param
@pytest.mark.parametrize("magic", [3, 7, 255])
def test_unknown_magic(tmp_path, engine, magic):
    b = bytearray(_batch(6))
    b[rb.MAGIC_OFFSET] = magic
    _expect(tmp_path, GOOD + bytes(b), errors.UnknownMagicError, len(GOOD), engine, valid_bytes=len(GOOD))


@engine_param
@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec(tmp_path, engine, codec):
    b = bytearray(_batch(6))
    b[rb.ATTRIBUTES_OFFSET + 1] = codec
    _expect(tmp_path, GOOD + _recrc(b), errors.UnknownCodecError, len(GOOD), engine, valid_bytes=len(GOOD))


@engine_param
@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_corrupt_compressed_payload(tmp_path, engine, codec):
    b = bytearray(_batch(6, n=40, codec=codec))
    mid = rb.RECORDS_OFFSET + (len(b) - rb.RECORDS_OFFSET) // 2
    for i in range(mid, min(mid + 12, len(b))):
        b[i] ^= 0x5A
    if codec == 1:
        b = b[:mid]                      # a cut gzip stream (flipped deflate bytes may still inflate)
        struct.pack_into(">i", b, rb.LENGTH_OFFSET, len(b) - 12)
    err = _expect(tmp_path, GOOD + _recrc(b), errors.CorruptRecordError, len(GOOD), engine, valid_bytes=len(GOOD))
    assert isinstance(err, (errors.DecompressionError, errors.InvalidRecordError))


@engine_param
@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompression_bomb_is_bounded(tmp_path, engine, codec):
    # one record whose 8 MiB value compresses to a few KB; reading with a 1 MiB batch limit must refuse
    batch = rb.encode_batch([rb.V2Record(0, 1, None, b"\x00" * (8 << 20))], codec=codec)
    p = _write(tmp_path, batch)
    assert p.stat().st_size < 500_000
    with pytest.raises(errors.DecompressedSizeError) as e:
        segment.read_segment(p, engine=engine, max_batch_bytes=1 << 20)
    assert e.value.position == 0 and "max_batch_bytes" in str(e.value)
    assert segment.read_segment(p, engine=engine).column("value")[0].as_py() == b"\x00" * (8 << 20)


@engine_param
def test_forged_record_count_does_not_allocate(tmp_path, engine):
    b = bytearray(_batch(6))
    struct.pack_into(">i", b, rb.RECORDS_COUNT_OFFSET, 2**31 - 1)
    _expect(tmp_path, GOOD + _recrc(b), errors.InvalidRecordError, len(GOOD), engine, valid_bytes=len(GOOD))


@engine_param
def test_negative_record_count(tmp_path, engine):
    b = bytearray(_batch(6))
    struct.pack_into(">i", b, rb.RECORDS_COUNT_OFFSET, -1)
    _expect(tmp_path, GOOD + _recrc(b), errors.InvalidRecordError, len(GOOD), engine, valid_bytes=len(GOOD))


def _one_record_batch(record_body: bytes, count=1) -> bytes:
    """A v2 batch whose records region is ``record_body`` verbatim (valid CRC)."""
    hdr = bytearray(rb.RECORD_BATCH_OVERHEAD)
    rb.HEADER.pack_into(hdr, 0, 6, rb.RECORD_BATCH_OVERHEAD - 12 + len(record_body), 0, 2, 0, 0, 0, 1000, 1000,
                        -1, -1, -1, count)
    return _recrc(bytearray(bytes(hdr) + record_body))


BAD_RECORDS = {
    "varint-too-long": b"\xff\xff\xff\xff\xff\xff\x01",
    "length-past-batch": b"\x40" + b"\x00" * 7,                       # length 32, 7 bytes follow
    "key-past-record": b"\x0e\x00\x00\x00\x40abc\x00\x00",            # key length 32 in a 7-byte body
    "negative-header-key-length": b"\x0e\x00\x00\x00\x01\x01\x02\x03",  # one header, key length -2
    "negative-header-count": b"\x0a\x00\x00\x00\x01\x01\x01",          # headers -1
    "body-longer-than-fields": b"\x0e\x00\x00\x00\x01\x01\x00\x00",    # 7 declared, 6 used
    "records-remaining": b"\x0c\x00\x00\x00\x01\x01\x00" + b"\x0c\x00\x00\x00\x01\x01\x00",
}


@engine_param
@pytest.mark.parametrize("name", sorted(BAD_RECORDS))
def test_malformed_records(tmp_path, engine, name):
    # uncompressed records: the error names the bad record's byte position in the file
    first_record = len(GOOD) + rb.RECORDS_OFFSET
    position = first_record + 7 if name == "records-remaining" else first_record
    _expect(tmp_path, GOOD + _one_record_batch(BAD_RECORDS[name]), errors.InvalidRecordError, position, engine,
            valid_bytes=len(GOOD))


def test_legacy_wrapper_with_bad_inner_data(tmp_path):
    inner = legacy.encode_message(magic=1, offset=0, timestamp=1, key=None, value=b"x")[:-3]   # cut inner message
    wrapper = legacy.encode_message(magic=1, offset=0, timestamp=1, key=None, value=codecs.compress(1, inner),
                                    attributes=1)
    p = _write(tmp_path, wrapper)
    with pytest.raises(errors.InvalidRecordError) as e:
        segment.read_segment(p)
    assert e.value.position == 0 and "decompressed wrapper" in str(e.value)


def test_garbage_is_refused_quickly(tmp_path):
    import os
    import time
    p = _write(tmp_path, os.urandom(1 << 20))
    t = time.perf_counter()
    with pytest.raises(errors.CorruptRecordError):
        segment.read_segment(p)
    scan = scan_batches(p, on_corrupt="stop")
    assert scan.valid_bytes <= scan.file_size and time.perf_counter() - t < 5


def test_errors_share_one_hierarchy():
    for cls in (errors.CorruptRecordError, errors.CorruptIndexError, errors.InvalidFileNameError,
                errors.CheckpointError, errors.LogDirLockedError, errors.OffsetOverflowError):
        assert issubclass(cls, errors.KafkalogError)
    e = errors.CrcMismatchError("bad", path="/x/0.log", position=12)
    assert str(e).startswith("/x/0.log: byte 12: bad (")
