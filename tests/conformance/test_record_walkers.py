"""Every v2 record walk in kafkalog reads the same records: the reference decoder
(``records_reference``), the compiled decoder (``records_accel``, through ``read_segment``), the
timestamp search's walk (``record_stamps``), the map pass's key walk (``key_map.walk_keys_kernel``,
driven by ``key_walk``) and the compiled recopy (``filter_to_kernel``, through a cleaner round).
They are written separately for speed (a shared cursor cost the decoder 10% once); this suite holds
them to one reading on hostile records (``hostile_records``): padded and maximum-size varints,
negative null lengths, headers, control records, the last record ending exactly at the batch end.
They must agree on offsets, timestamps, key bytes and whether a value is present."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from kafkalog.errors import KafkalogError
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkalog.cleaner import key_map as km
from kafkalog.cleaner import key_walk as kw
from kafkalog.format import control_record as cr
from kafkalog.format import record_batch as rb
from kafkalog.format.compression import decompress
from kafkalog.format.record_stamps import batch_stamps
from kafkalog.format.records_reference import v2_records
from kafkalog.log.records_io import read_segment

from hostile_records import T0, Rec, batch, control_record, record, zz32

MAX_BATCH = 1 << 20
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _region(raw: bytes):
    h = rb.parse_header(raw, 0)
    payload = raw[rb.RECORDS_OFFSET:]
    return h, (decompress(h.codec, payload, magic=2) if h.codec else payload)


def reference_walk(raw: bytes):
    h, payload = _region(raw)
    return [(r.offset, r.timestamp, r.key, r.value is not None) for r in v2_records(payload, h)]


def decoder_walk(raw: bytes, tmp_path, engine: str):
    path = tmp_path / f"{engine}.log"
    path.write_bytes(raw)
    t = read_segment(path, engine=engine)
    ts = t.column("timestamp").cast(pa.int64()).to_pylist()
    return [(o, s, k, v is not None) for o, s, k, v in zip(t.column("offset").to_pylist(), ts,
                                                            t.column("key").to_pylist(), t.column("value").to_pylist())]


def stamps_walk(raw: bytes):
    got = batch_stamps(np.frombuffer(raw, np.uint8), 0, max_batch_bytes=MAX_BATCH)
    assert got is not None, "record_stamps refused records the decoders read"
    return list(zip(got[0].tolist(), got[1].tolist()))


def key_walk(raw: bytes):
    """The map pass's walk: every non-null key into a fresh map; the map's offset for each key."""
    h, payload = _region(raw)
    src = np.frombuffer(payload, np.uint8)
    m = km.KeyMap(1 << 20, 0.9)
    slots, arena = m.arrays()
    one = lambda v: np.array([v], np.int64)  # noqa: E731
    status, *_ = kw.walk_keys_kernel(kw.WALK_INSERT, kw.WalkRecords(src, src),
                                     kw.WalkBatches(one(0), one(0), one(len(src)), one(h.records_count),
                                                    one(h.base_offset), one(1), one(0)),
                                     kw.WalkKeys(0, 1 << 62, 1, 0, False), (slots, arena, m.state),
                                     kw.WalkBits(np.zeros(8, np.uint8), np.zeros(8, np.uint8), False), kw.WALK_START)
    assert status == kw.WALK_OK
    return m


@SETTINGS
@given(records=st.lists(record, min_size=1, max_size=12), codec=st.sampled_from([0, 0, 1, 2, 3, 4]),
       base=st.sampled_from([0, 1 << 33]))
def test_every_walker_reads_hostile_records_alike(tmp_path, records, codec, base):
    raw = batch(records, base_offset=base, codec=codec)
    ref = reference_walk(raw)
    assert [r[0] for r in ref] == [base + i for i in range(len(records))]
    assert [r[1] for r in ref] == [T0 + r.ts_delta for r in records]
    assert [r[2] for r in ref] == [r.key for r in records]
    assert [r[3] for r in ref] == [r.value is not None for r in records]
    assert decoder_walk(raw, tmp_path, "compiled") == ref
    assert decoder_walk(raw, tmp_path, "reference") == ref
    assert stamps_walk(raw) == [(o, t) for o, t, _, _ in ref]
    latest = {}
    for o, _, k, _ in ref:
        if k is not None:
            latest[k] = o
    m = key_walk(raw)
    assert len(m) == len(latest)
    keys = pa.array(list(latest), pa.binary())
    assert m.lookup(keys, np.arange(len(latest), dtype=np.int64)).tolist() == list(latest.values())


@pytest.mark.parametrize("pad", [0, 4])
def test_control_records_walk_alike(tmp_path, pad):
    raw = batch([control_record(cr.COMMIT, pad)], base_offset=5, control=True)
    ref = reference_walk(raw)
    assert ref == [(5, T0, b"\x00\x00\x00\x01", True)]
    assert decoder_walk(raw, tmp_path, "compiled") == ref == decoder_walk(raw, tmp_path, "reference")
    assert stamps_walk(raw) == [(5, T0)]
    assert len(key_walk(raw)) == 1


def test_maximum_size_varints_end_exactly_at_the_batch_end(tmp_path):
    """Every varint at 5 bytes and every varlong at 10: the last record's last byte is the batch's."""
    recs = [Rec(3, b"a", None, [(b"h", None)], pad=9), Rec(-7, None, b"v", [], null_len=-1, pad=9)]
    assert len(zz32(1, 9)) == 5
    raw = batch(recs)
    ref = reference_walk(raw)
    assert ref == [(0, T0 + 3, b"a", False), (1, T0 - 7, None, True)]
    assert decoder_walk(raw, tmp_path, "compiled") == ref
    assert stamps_walk(raw) == [(0, T0 + 3), (1, T0 - 7)]
    assert len(key_walk(raw)) == 1


@pytest.mark.parametrize("cut", ["short", "long"])
def test_a_record_that_misses_the_batch_end_is_refused_by_every_walker(tmp_path, cut):
    """A record length one byte off: the decoders raise, the stamps walk and the key walk refuse."""
    good = Rec(0, b"a", b"v", []).encode(0)
    body = good[1:]
    bad = zz32(len(body) + (1 if cut == "long" else -1)) + body
    template = batch([Rec(0, b"a", b"v", [])])
    raw = bytearray(template[:rb.RECORDS_OFFSET] + bad)
    raw[8:12] = (len(raw) - rb.LOG_OVERHEAD).to_bytes(4, "big", signed=True)
    raw[rb.CRC_OFFSET:rb.ATTRIBUTES_OFFSET] = rb.compute_crc(raw).to_bytes(4, "big")
    raw = bytes(raw)
    for engine in ("reference", "compiled"):
        path = tmp_path / f"{engine}.log"
        path.write_bytes(raw)
        with pytest.raises(KafkalogError):
            read_segment(path, engine=engine)
    assert batch_stamps(np.frombuffer(raw, np.uint8), 0, max_batch_bytes=MAX_BATCH) is None
    src = np.frombuffer(raw, np.uint8)
    one = lambda v: np.array([v], np.int64)  # noqa: E731
    m = km.KeyMap(1 << 20, 0.9)
    slots, arena = m.arrays()
    status, *_ = kw.walk_keys_kernel(kw.WALK_INSERT, kw.WalkRecords(src, src),
                                     kw.WalkBatches(one(0), one(rb.RECORDS_OFFSET), one(len(raw)), one(1), one(0),
                                                    one(1), one(0)),
                                     kw.WalkKeys(0, 1 << 62, 1, 0, False), (slots, arena, m.state),
                                     kw.WalkBits(np.zeros(8, np.uint8), np.zeros(8, np.uint8), False), kw.WALK_START)
    assert status == kw.WALK_MALFORMED
