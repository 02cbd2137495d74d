"""The fast cleaner (decoded windows as columns, numba writer of retained batches) against the
reference (a RecordRow per record, ``record_batch.encode_batch``): the same bytes, counts, audit
and reasons, twin style — the writer on random batches, whole rounds on random logs, every codec
and timestamp type, horizon stamping, null keys/values, headers and non-canonical encodings."""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkalog.cleaner import cleaner as cleaner_mod, filter_to, plan_partition
from kafkalog.cleaner.key_map import NOT_FOUND
from kafkalog.format import record_batch as rb
from kafkalog.format.compression import decompress
from kafkalog.format.records_encode_accel import rewrite_batch
from kafkalog.format.records_reference import v2_records
from kafkalog.fs.names import format_segment_file_name

from cleaner_model import DAY, T0, clean, data, example_log, log_config, marker, write_partition
from test_cleaner_properties import build, op

CODECS = [0, 1, 2, 3, 4]
_REWRITE_BATCH = filter_to.rewrite_batch


# --- the writer: kernel vs encode_batch ---------------------------------------------------------

def _reference_rewrite(h: rb.BatchHeader, rows, keep, horizon):
    log_append = h.timestamp_type == rb.LOG_APPEND_TIME
    recs = [rb.V2Record(r.offset, h.max_timestamp if log_append else r.timestamp, r.key, r.value, r.headers)
            for r, k in zip(rows, keep) if k]
    return rb.encode_batch(recs, base_offset=h.base_offset, last_offset_delta=h.last_offset_delta, codec=h.codec,
                           timestamp_type=h.timestamp_type, transactional=h.is_transactional, control=h.is_control,
                           delete_horizon_ms=horizon, producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                           base_sequence=h.base_sequence, partition_leader_epoch=h.partition_leader_epoch,
                           max_timestamp=h.max_timestamp if log_append else None)


def _fast_rewrite(raw: bytes, h: rb.BatchHeader, rows, keep, horizon):
    payload = raw[rb.RECORDS_OFFSET:]
    if h.codec:
        payload = decompress(h.codec, payload, magic=2)
    src = np.frombuffer(payload, dtype=np.uint8)
    log_append = h.timestamp_type == rb.LOG_APPEND_TIME
    ts = np.array([h.max_timestamp if log_append else r.timestamp for r, k in zip(rows, keep) if k], dtype=np.int64)
    return rewrite_batch(src, 0, len(src), len(rows), np.array(keep, dtype=np.bool_), ts, base_offset=h.base_offset,
                         last_offset_delta=h.last_offset_delta, codec=h.codec, timestamp_type=h.timestamp_type,
                         transactional=h.is_transactional, control=h.is_control, delete_horizon_ms=horizon,
                         producer_id=h.producer_id, producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                         partition_leader_epoch=h.partition_leader_epoch,
                         max_timestamp=h.max_timestamp if log_append else None)


def _rows(raw: bytes):
    h = rb.parse_header(raw, 0)
    payload = raw[rb.RECORDS_OFFSET:]
    if h.codec:
        payload = decompress(h.codec, payload, magic=2)
    return h, v2_records(payload, h)


def _check_twin(raw: bytes, keep, horizon, *, expect_fast: bool):
    h, rows = _rows(raw)
    try:
        expected = _reference_rewrite(h, rows, keep, horizon)
    except Exception as e:          # the reference refuses (int64 overflow): the fast writer must defer
        assert _fast_rewrite(raw, h, rows, keep, horizon) is None, e
        return
    got = _fast_rewrite(raw, h, rows, keep, horizon)
    if expect_fast:
        assert got is not None
    if got is not None:
        assert got == expected


_key = st.one_of(st.none(), st.binary(max_size=20))
_value = st.one_of(st.none(), st.binary(max_size=300))
_header_key = st.one_of(st.text(alphabet=st.characters(max_codepoint=127), max_size=8), st.text(max_size=4))
_headers = st.lists(st.tuples(_header_key, st.one_of(st.none(), st.binary(max_size=10))), max_size=3)
_record = st.tuples(st.integers(1, 300), st.integers(-2000, 2000), _key, _value, _headers)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=st.lists(_record, min_size=1, max_size=12), base=st.integers(0, 1 << 40), codec=st.sampled_from(CODECS),
       log_append=st.booleans(), control=st.booleans(), txn=st.booleans(),
       old_horizon=st.one_of(st.none(), st.integers(T0, T0 + DAY)), stamp=st.booleans(), data=st.data())
def test_writer_matches_encode_batch(recs, base, codec, log_append, control, txn, old_horizon, stamp, data):
    offsets, o = [], base
    for gap, *_ in recs:
        o += gap
        offsets.append(o)
    records = [rb.V2Record(off, T0 + dt, k, v, hs) for off, (_g, dt, k, v, hs) in zip(offsets, recs)]
    last_delta = offsets[-1] - base + data.draw(st.integers(0, 3))
    raw = rb.encode_batch(records, base_offset=base, last_offset_delta=last_delta,
                          codec=codec, timestamp_type=rb.LOG_APPEND_TIME if log_append else rb.CREATE_TIME,
                          transactional=txn, control=control, delete_horizon_ms=old_horizon, producer_id=7,
                          producer_epoch=3, base_sequence=11, partition_leader_epoch=5,
                          max_timestamp=T0 + 5000 if log_append else None)
    keep = data.draw(st.lists(st.booleans(), min_size=len(records), max_size=len(records)))
    if not any(keep):
        keep[data.draw(st.integers(0, len(keep) - 1))] = True
    horizon = old_horizon if old_horizon is not None else (T0 + 10 * DAY if stamp else None)
    ascii_only = all(hk.isascii() for *_x, hs in recs for hk, _hv in hs)
    _check_twin(raw, keep, horizon, expect_fast=ascii_only)


def _reframe(raw: bytes, payload: bytes) -> bytes:
    """``raw`` (an uncompressed v2 batch) with its records region replaced; length and CRC fixed."""
    out = bytearray(raw[:rb.RECORDS_OFFSET] + payload)
    out[8:12] = (len(out) - rb.LOG_OVERHEAD).to_bytes(4, "big", signed=True)
    out[rb.CRC_OFFSET:rb.ATTRIBUTES_OFFSET] = rb.compute_crc(out).to_bytes(4, "big")
    return bytes(out)


def _record_bytes(*fields: bytes) -> bytes:
    body = b"".join(fields)
    return bytes([len(body) << 1]) + body


NON_CANONICAL = [
    # attributes, timestampDelta, offsetDelta, keyLength, key, valueLength, value, headers
    (b"\x05", b"\x00", b"\x80\x00", b"\x02", b"a", b"\x02", b"v", b"\x00"),          # offsetDelta in 2 bytes
    (b"\x00", b"\x00", b"\x00", b"\x82\x00", b"a", b"\x02", b"v", b"\x00"),          # key length in 2 bytes
    (b"\x00", b"\x00", b"\x00", b"\x02", b"a", b"\x03", b"", b"\x00"),               # value length -2 (null)
    (b"\x00", b"\x00", b"\x00", b"\x02", b"a", b"\x02", b"v", b"\x80\x00"),          # header count in 2 bytes
    (b"\x00", b"\x00", b"\x00", b"\x02", b"a", b"\x02", b"v", b"\x02\x02\xff\x01"),  # non-UTF-8 header key
    (b"\x00", b"\x00", b"\x00", b"\x02", b"a", b"\x01", b"", b"\x02\x02h\x05"),      # header value length -3
]


@pytest.mark.parametrize("fields", NON_CANONICAL)
def test_writer_defers_to_the_reference_on_non_canonical_records(fields):
    good = _record_bytes(b"\x00", b"\x00", b"\x02", b"\x02", b"b", b"\x02", b"w", b"\x00")
    template = rb.encode_batch([rb.V2Record(0, T0, b"a", b"v"), rb.V2Record(1, T0, b"b", b"w")], base_offset=0)
    raw = _reframe(template, _record_bytes(*fields) + good)
    h, rows = _rows(raw)
    assert _fast_rewrite(raw, h, rows, [True, True], T0 + DAY) is None
    assert _fast_rewrite(raw, h, rows, [False, True], T0 + DAY) == _reference_rewrite(h, rows, [False, True], T0 + DAY)


# --- whole rounds: engine "compiled" vs "reference" -------------------------------------------

def _files(d: Path) -> dict:
    out = {p.name: p.read_bytes() for p in sorted(d.iterdir())}
    cp = d.parent / "cleaner-offset-checkpoint"
    if cp.exists():
        out["cleaner-offset-checkpoint"] = cp.read_bytes()
    return out


def _round(src: Path, work: Path, engine: str, monkeypatch, *, accel_writer=True, tiny_map=False, weak_hash=False,
           **kw):
    """One round; ``tiny_map``: the fast engine's map gets the smallest budget (a dozen keys), so
    most logs take several hash-slice passes; ``weak_hash``: every key hashed by its length."""
    shutil.copytree(src, work)
    # accel_writer=False: the numba writer declines every batch, so the reference writer writes them
    monkeypatch.setattr(filter_to, "rewrite_batch", _REWRITE_BATCH if accel_writer else (lambda *a, **k: None))
    monkeypatch.setattr(cleaner_mod, "KEY_HASH_WEAK", weak_hash)
    d = next(p for p in sorted(work.iterdir()) if p.is_dir())          # the partition folder
    now = kw.pop("now")
    res = clean(d, now, map_budget_bytes=1 if tiny_map else None, engine=engine, **kw)
    return res, _files(d), (res.map_stats.passes if res.map_stats else None)


def _same_round(src_dir: Path, tmp: Path, monkeypatch, **kw):
    results = {}
    for name, engine, accel in (("ref", "reference", True), ("fast", "compiled", True), ("fastref", "compiled", False)):
        results[name] = _round(src_dir, tmp / name, engine, monkeypatch, accel_writer=accel, **dict(kw))
    ref_res, ref_files, _ = results["ref"]
    if kw.get("record_decisions"):       # the compiled recopy (filter_to) runs only when no reasons are asked
        res, files, _ = _round(src_dir, tmp / "compiled", "compiled", monkeypatch, **dict(kw, record_decisions=False))
        assert res.error == ref_res.error and files == ref_files and res.counts == ref_res.counts
        assert [g.counts for g in res.groups] == [g.counts for g in ref_res.groups]
    for name in ("fast", "fastref"):
        res, files, passes = results[name]
        assert res.error == ref_res.error and res.skipped_reason == ref_res.skipped_reason
        assert files == ref_files, name
        assert res.counts == ref_res.counts, name
        assert res.audit() == ref_res.audit(), name
        assert res.batches == ref_res.batches, name
        assert res.record_reasons == ref_res.record_reasons, name
        assert [g.counts for g in res.groups] == [g.counts for g in ref_res.groups]
        if res.map_stats is not None:
            assert res.map_stats.keys == ref_res.map_size and passes >= 1
    return ref_res


def _log_dir_of(tmp: Path, segments, **kw) -> Path:
    write_partition(tmp / "src", segments, **kw)
    return tmp / "src"


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ops=st.lists(op, min_size=3, max_size=30), checkpoint_at=st.floats(0, 1), producers_active=st.booleans(),
       codec=st.sampled_from(CODECS), log_append=st.booleans(), reasons=st.sampled_from(["all", "none", "some"]),
       tiny_map=st.booleans(), weak_hash=st.booleans(), io_buffer=st.sampled_from([None, 200]))
def test_random_rounds_fast_equals_reference(monkeypatch, ops, checkpoint_at, producers_active, codec, log_append,
                                             reasons, tiny_map, weak_hash, io_buffer):
    segments, _open = build(ops)
    segments = [[b if b.control else replace(b, codec=codec, log_append_time=log_append) for b in seg]
                for seg in segments]
    leo = segments[-1][-1].last + 1
    now = T0 + (1000 if producers_active else 10 * DAY)
    rd = {"all": True, "none": False, "some": set(range(0, leo, 3))}[reasons]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        src = _log_dir_of(tmp, segments, checkpoint=int(checkpoint_at * leo))
        res = _same_round(src, tmp, monkeypatch, now=now, record_decisions=rd, tiny_map=tiny_map,
                          weak_hash=weak_hash, io_buffer_size=io_buffer)
        assert res.error is None


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("log_append", [False, True])
def test_rounds_with_codecs_horizons_and_markers(tmp_path, monkeypatch, codec, log_append):
    segs = [[replace(data(0, [(b"a", b"1" * 50), (b"b", b"2" * 50), (b"a", b"3" * 50), (b"c", None), (None, b"n")],
                          pid=9), codec=codec, log_append_time=log_append),
             replace(data(5, [(b"b", b"4"), (b"d", None)]), codec=codec, log_append_time=log_append),
             data(7, [(b"e", b"x")], pid=4, txn=True), marker(8, 4, 0),
             data(9, [(b"f", b"y")], pid=5, txn=True), marker(10, 5, 1)],
            [data(11, [(b"z", b"active")])]]
    src = _log_dir_of(tmp_path, segs)
    _same_round(src, tmp_path, monkeypatch, now=T0 + 10 * DAY)
    # a second round past every horizon, from the cleaned log
    first = tmp_path / "fast"
    d = first / "compacted-0"
    (d / format_segment_file_name(12, "log")).write_bytes(rb.encode_batch([rb.V2Record(12, T0, b"n", b"x")],
                                                                         base_offset=12))
    for name in ("ref", "fastref"):
        shutil.rmtree(tmp_path / name)
    shutil.move(str(first), str(tmp_path / "src2"))
    from kafkalog.checkpoint.offset import write_offset_checkpoint
    from kafkalog.fs.names import REPLICATION_OFFSET_CHECKPOINT
    write_offset_checkpoint(tmp_path / "src2" / REPLICATION_OFFSET_CHECKPOINT, {("compacted", 0): 13})
    src2 = tmp_path / "src2" / "compacted-0"
    tmp2 = tmp_path / "round2"
    tmp2.mkdir()
    res = _same_round(src2.parent, tmp2, monkeypatch, now=T0 + 20 * DAY)
    assert res.cleaned


def test_non_canonical_source_records_round_trip_as_the_reference_writes_them(tmp_path, monkeypatch):
    recs = [rb.V2Record(0, T0, b"a", b"v"), rb.V2Record(1, T0 + 1, b"b", b"w"), rb.V2Record(2, T0 + 2, b"a", None)]
    template = rb.encode_batch(recs, base_offset=0)
    payload = b"".join(_record_bytes(*f) for f in [
        (b"\x00", b"\x00", b"\x00", b"\x02", b"a", b"\x02", b"v", b"\x00"),
        (b"\x07", b"\x02", b"\x02", b"\x82\x00", b"b", b"\x02", b"w", b"\x02\x02\xff\x01"),
        (b"\x00", b"\x04", b"\x04", b"\x02", b"a", b"\x03", b"", b"\x00"),
    ])
    raw = _reframe(template, payload)
    tail = rb.encode_batch([rb.V2Record(3, T0 + 3, b"c", b"x")], base_offset=3)
    d = tmp_path / "src" / "compacted-0"
    d.mkdir(parents=True)
    (d / format_segment_file_name(0, "log")).write_bytes(raw + tail)
    (d / format_segment_file_name(4, "log")).write_bytes(rb.encode_batch([rb.V2Record(4, T0, b"z", b"q")],
                                                                         base_offset=4))
    from kafkalog.checkpoint.offset import write_offset_checkpoint
    from kafkalog.fs.names import REPLICATION_OFFSET_CHECKPOINT
    write_offset_checkpoint(tmp_path / "src" / REPLICATION_OFFSET_CHECKPOINT, {("compacted", 0): 5})
    res = _same_round(tmp_path / "src", tmp_path, monkeypatch, now=T0 + 10 * DAY)
    assert res.cleaned and res.counts.batches_rewritten == 1


def test_map_pass_equals_the_reference(tmp_path, monkeypatch):
    d = write_partition(tmp_path, example_log())
    plan = plan_partition(d, config=log_config(), now_ms=T0 + 10 * DAY)
    fast = cleaner_mod.build_key_map(plan)
    ref = cleaner_mod.build_partition_offset_map(plan)
    assert fast.end_offset == ref.end_offset and fast.stats.passes == 1 and len(fast) == len(ref)
    for key, offset in ref.offsets.items():
        got = fast.key_map.lookup(pa.array([key], pa.binary()), np.array([0]))
        assert got.tolist() == [offset]
    assert fast.key_map.lookup(pa.array([b"not a key"], pa.binary()), np.array([0])).tolist() == [NOT_FOUND]


@pytest.mark.parametrize("stamps,horizon", [([(1 << 63) - 1, (1 << 63) - 2], -(1 << 62) * 2),
                                            ([-(1 << 63), 0], (1 << 63) - 1),
                                            ([T0, T0 + 1], 1 << 64)])
def test_writer_defers_where_the_reference_refuses(stamps, horizon):
    recs = [rb.V2Record(i, ts, b"k%d" % i, b"v") for i, ts in enumerate(stamps)]
    raw = rb.encode_batch(recs, base_offset=0, base_timestamp=0, max_timestamp=0)
    h, rows = _rows(raw)
    with pytest.raises(ValueError, match="does not fit a varlong"):
        _reference_rewrite(h, rows, [True, True], horizon)
    assert _fast_rewrite(raw, h, rows, [True, True], horizon) is None
