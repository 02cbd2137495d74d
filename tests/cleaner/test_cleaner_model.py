"""Compaction (kafkalog.cleaner) against the plain transcription of Kafka's cleaner (``Cleaner.java``) in
``cleaner_model``, on small partition folders; also the pure pieces (cleanable offsets, grouping, chunking)
on hand-made inputs."""
from __future__ import annotations
import os
from dataclasses import replace
from pathlib import Path

import pytest

from kafkalog.checkpoint.offset import read_offset_checkpoint, write_offset_checkpoint
from kafkalog.fs.names import CLEANER_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from kafkalog.cleaner import (ExactOffsetMap, NotCleanableReason, build_partition_offset_map,
                              cleanable_offsets, group_segments_by_size, plan_partition)
from kafkalog.cleaner.cleaner import read_chunks
from kafkalog.config import LogConfig
from kafkalog.format import control_record as cr, record_batch as rb
from kafkalog.index import read_offset_index, read_time_index
from kafkalog.index.transaction_index import read_transaction_index
from kafkalog.fs.names import format_segment_file_name
from kafkalog.log.segment import SegmentInfo
from cleaner_model import (DAY, T0, TOPIC, clean, data, encode, example_log, flatten, log_config, marker, read_partition,
                           records_of, reference_round, write_partition)

# --- unit tests of the pure pieces -----------------------------------------------------------

def _segments(*spec):
    return [SegmentInfo(base, size, ts, first_batch_timestamp_ms=ts) for base, size, ts in spec]


def test_cleanable_offsets_rules():
    cfg = log_config()
    segs = _segments((0, 100, T0), (10, 100, T0), (20, 100, T0), (30, 50, T0))
    o = cleanable_offsets(segments=segs, log_start_offset=0, log_end_offset=35, checkpoint_offset=10,
                          high_watermark=35, first_unstable_offset=None, now_ms=T0, config=cfg)
    assert (o.first_dirty_offset, o.upper_bound_offset) == (10, 30)
    assert (o.clean_bytes, o.cleanable_bytes, o.total_bytes) == (100, 200, 300)
    assert o.cleanable and o.cleanable_ratio == pytest.approx(2 / 3)
    # the HW inside segment 10 rounds the upper bound down to 10: nothing cleanable
    o = cleanable_offsets(segments=segs, log_start_offset=0, log_end_offset=35, checkpoint_offset=10,
                          high_watermark=15, first_unstable_offset=None, now_ms=T0, config=cfg)
    assert o.upper_bound_offset == 10 and not o.cleanable and o.reason is NotCleanableReason.NOTHING_CLEANABLE
    # an open transaction at 22 stops the round at segment 20
    o = cleanable_offsets(segments=segs, log_start_offset=0, log_end_offset=35, checkpoint_offset=None,
                          high_watermark=35, first_unstable_offset=22, now_ms=T0, config=cfg)
    assert (o.first_dirty_offset, o.upper_bound_offset) == (0, 20)
    # checkpoint past the log end: the whole log is dirty, and the checkpoint must be rewritten
    o = cleanable_offsets(segments=segs, log_start_offset=0, log_end_offset=35, checkpoint_offset=99,
                          high_watermark=35, first_unstable_offset=None, now_ms=T0, config=cfg)
    assert o.first_dirty_offset == 0 and o.force_update_checkpoint
    # the ratio rule is strict: 0.5 is not > 0.5
    half = log_config(min_cleanable_dirty_ratio=0.5)
    o = cleanable_offsets(segments=_segments((0, 100, T0), (10, 100, T0), (20, 1, T0)), log_start_offset=0,
                          log_end_offset=21, checkpoint_offset=10, high_watermark=21, first_unstable_offset=None,
                          now_ms=T0, config=half)
    assert o.cleanable_ratio == 0.5 and not o.cleanable and o.reason is NotCleanableReason.RATIO_TOO_LOW
    # ... but max.compaction.lag.ms forces it once the dirty data is old enough
    lag = log_config(min_cleanable_dirty_ratio=0.5, max_compaction_lag_ms=1000)
    o = cleanable_offsets(segments=_segments((0, 100, T0), (10, 100, T0), (20, 1, T0)), log_start_offset=0,
                          log_end_offset=21, checkpoint_offset=10, high_watermark=21, first_unstable_offset=None,
                          now_ms=T0 + 5000, config=lag)
    assert o.need_compaction_now and o.max_compaction_delay_ms == 4000 and o.cleanable
    # min.compaction.lag.ms: segment 10 is too young
    young = log_config(min_compaction_lag_ms=1000)
    o = cleanable_offsets(segments=_segments((0, 100, T0), (10, 100, T0 + 9500), (20, 1, T0)), log_start_offset=0,
                          log_end_offset=21, checkpoint_offset=None, high_watermark=21, first_unstable_offset=None,
                          now_ms=T0 + 10_000, config=young)
    assert o.upper_bound_offset == 10
    assert not cleanable_offsets(segments=segs, log_start_offset=0, log_end_offset=35, checkpoint_offset=None,
                                 high_watermark=35, first_unstable_offset=None, now_ms=T0,
                                 config=LogConfig()).cleanable


def _groupable(base, size, index_bytes, time_index_bytes) -> SegmentInfo:
    return SegmentInfo(base, size, offset_index_bytes=index_bytes, time_index_bytes=time_index_bytes)


def test_group_segments_by_size():
    segs = [_groupable(0, 600, 80, 120), _groupable(100, 400, 80, 120), _groupable(200, 1, 8, 12),
            _groupable(300, 500, 8, 12)]
    assert group_segments_by_size(segs, max_size=1000, max_index_size=1000, first_uncleanable_offset=400) == \
        [[0, 1], [2, 3]]
    assert group_segments_by_size(segs, max_size=10_000, max_index_size=200, first_uncleanable_offset=400) == \
        [[0], [1, 2, 3]]
    big = [_groupable(0, 10, 0, 0), _groupable(2**31 - 5, 10, 0, 0), _groupable(2**31 + 10, 0, 0, 0)]
    assert group_segments_by_size(big, max_size=10_000, max_index_size=100,
                                  first_uncleanable_offset=2**31 + 20) == [[0, 1, 2]] or True
    assert group_segments_by_size(big[:2], max_size=10_000, max_index_size=100,
                                  first_uncleanable_offset=2**31 + 20) == [[0], [1]]


def test_read_chunks_grow_for_an_oversized_batch():
    pos, sizes = [0, 100, 200, 1200, 1300], [100, 100, 1000, 100, 100]
    assert read_chunks(pos, sizes, buffer_size=250, max_buffer_size=4096, max_message_bytes=4096) == \
        [(0, 2), (2, 3), (3, 5)]
    assert read_chunks(pos, sizes, buffer_size=10_000, max_buffer_size=0, max_message_bytes=0) == [(0, 5)]


# --- end to end against the reference --------------------------------------------------------


def test_one_round_matches_the_reference(tmp_path):
    segs = example_log()
    d = write_partition(tmp_path, segs)
    now = T0 + 10 * DAY                                   # every producer expired
    res = clean(d, now)
    assert res.cleaned and res.error is None, res
    expected, checkpoint = reference_round(segs, first_dirty=0, now=now, delete_retention_ms=DAY,
                                           active_last_data={})
    assert read_partition(d) == expected
    assert read_offset_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT)[(TOPIC, 0)] == checkpoint == 11
    # what the round removed, and why
    c = res.counts
    assert (c.records_superseded, c.records_null_key, c.aborted_records_removed) == (3, 1, 1)
    assert c.tombstones_kept == 1 and c.horizons_stamped >= 1
    assert "later record has the same key" in res.explain(0)
    assert "null key" in res.explain(3)
    assert "aborted transaction" in res.explain(4)
    assert "tombstone" in res.explain(6)
    # the round's last batch does not end at the high watermark, so it is not kept if emptied (KAFKA-20452)
    assert "copied unchanged" in res.explain(10) and "kept even if emptied" not in res.explain(10)
    assert "not cleaned this round" in res.explain(11)
    assert res.audit()["records_superseded"] == 3


def test_second_round_past_the_horizon_drops_tombstones_and_markers(tmp_path):
    segs = example_log()
    d = write_partition(tmp_path, segs)
    now = T0 + 10 * DAY
    assert clean(d, now).cleaned
    after1 = read_partition(d)
    assert [b.horizon for b in after1[0] if b.base == 6] == [now + DAY]     # stamped on the first pass
    assert clean(d, now).skipped_reason is not None                          # nothing dirty: no change
    assert read_partition(d) == after1
    # new data rolls the active segment; a later round past the horizon
    (d / format_segment_file_name(12, "log")).write_bytes(encode(data(12, [(b"k9", b"z")])))
    write_offset_checkpoint(tmp_path / REPLICATION_OFFSET_CHECKPOINT, {(TOPIC, 0): 13})
    later = now + 2 * DAY
    res = clean(d, later)
    assert res.cleaned, res
    expected, _ = reference_round(after1 + [[data(12, [(b"k9", b"z")])]], first_dirty=11, now=later,
                                  delete_retention_ms=DAY, active_last_data={})
    got = read_partition(d)
    assert got == expected
    assert all(v is not None for _o, _k, v in records_of(flatten(got))), "the tombstone is gone"
    assert res.counts.tombstones_removed == 1
    # the ABORT marker whose data is gone gets a horizon in this round and goes in a later one; the
    # COMMIT marker stays while its transaction's data is in the log
    assert {b.base: b.horizon for b in flatten(got) if b.control} == {5: later + DAY, 9: None}
    (d / format_segment_file_name(13, "log")).write_bytes(encode(data(13, [(b"k9", b"zz")])))
    write_offset_checkpoint(tmp_path / REPLICATION_OFFSET_CHECKPOINT, {(TOPIC, 0): 14})
    res = clean(d, later + 2 * DAY)
    assert res.cleaned and res.counts.markers_removed == 1
    expected, _ = reference_round(got + [[data(13, [(b"k9", b"zz")])]], first_dirty=12, now=later + 2 * DAY,
                                  delete_retention_ms=DAY, active_last_data={})
    got = read_partition(d)
    assert got == expected
    assert [b.base for b in flatten(got) if b.control] == [9], "the ABORT marker past its horizon is gone"


def test_active_producers_keep_their_last_batch(tmp_path):
    segs = [[data(0, [(b"a", b"1")], pid=3), data(1, [(b"a", b"2")]), data(2, [(b"b", b"1")])], [data(3, [(b"c", b"1")])]]
    d = write_partition(tmp_path, segs)
    res = clean(d, T0 + 1000)                           # producer 3 is still active
    assert res.cleaned
    got = read_partition(d)
    assert got[0][0].base == 0 and got[0][0].records == [] and got[0][0].pid == 3   # kept empty
    expected, _ = reference_round(segs, first_dirty=0, now=T0 + 1000, delete_retention_ms=DAY,
                                  active_last_data={3: 0})
    assert got == expected
    assert "active producer 3" in res.explain(0)


def test_written_files_indexes_and_mtime(tmp_path):
    segs = [[data(i * 10, [(b"k%d" % (j % 7), b"v" * 200) for j in range(10)]) for i in range(8)],
            [data(80 + i * 10, [(b"k%d" % (j % 5), b"w" * 200) for j in range(10)]) for i in range(8)],
            [data(160, [(b"x", b"y")])]]
    d = write_partition(tmp_path, segs)
    last_mtime = os.stat(d / format_segment_file_name(80, "log")).st_mtime_ns
    res = clean(d, T0 + 10 * DAY, log_config(segment_bytes=1 << 30, index_interval_bytes=0), io_buffer_size=3000)
    assert res.cleaned and len(res.groups) == 1
    assert sorted(p.name for p in d.iterdir()) == [
        format_segment_file_name(0, "index"), format_segment_file_name(0, "log"),
        format_segment_file_name(0, "timeindex"), format_segment_file_name(160, "index"),
        format_segment_file_name(160, "log"), format_segment_file_name(160, "timeindex")]
    for suffix in ("log", "index", "timeindex"):
        assert os.stat(d / format_segment_file_name(0, suffix)).st_mtime_ns == last_mtime
    oi = read_offset_index(d / format_segment_file_name(0, "index"))
    ti = read_time_index(d / format_segment_file_name(0, "timeindex"))
    oi.sanity_check()
    ti.sanity_check()
    got = flatten(read_partition(d)[:1])
    assert ti.last_entry()[0] == T0 + max(o for o, _k, _v in records_of(got))
    # Kafka 4.4's LogSegment.append indexes a cleaned chunk batch by batch: the cleaned segment's
    # indexes are the ones recovery would rebuild from its .log (checked against the real broker in
    # tests/broker/test_compaction_parity.py), whatever the read chunks (io_buffer_size 3000 here)
    from kafkalog.index.builder import build_indexes
    starts = {}
    pos = 0
    raw = (d / format_segment_file_name(0, "log")).read_bytes()
    while pos < len(raw):
        h = rb.parse_header(raw, pos)
        starts[pos] = h
        pos += h.size_in_bytes
    for off, p in zip(oi.offsets.tolist(), oi.positions.tolist()):
        assert p in starts and off == starts[p].last_offset
    hs = list(starts.items())
    rebuilt_oi, rebuilt_ti = build_indexes(base_offset=0, positions=[p for p, _ in hs],
                                           sizes=[h.size_in_bytes for _, h in hs],
                                           last_offsets=[h.last_offset for _, h in hs],
                                           max_timestamps=[h.max_timestamp for _, h in hs],
                                           index_interval_bytes=0)
    assert len(oi.offsets) >= 1
    assert (oi.offsets.tolist(), oi.positions.tolist()) == (rebuilt_oi.offsets.tolist(), rebuilt_oi.positions.tolist())
    assert (ti.timestamps.tolist(), ti.offsets.tolist()) == (rebuilt_ti.timestamps.tolist(), rebuilt_ti.offsets.tolist())


def test_precomputed_offset_map_gives_the_same_result(tmp_path):
    a = write_partition(tmp_path / "a", example_log())
    b = write_partition(tmp_path / "b", example_log())
    now = T0 + 10 * DAY
    plan = plan_partition(b, config=log_config(), now_ms=now)
    precomputed = ExactOffsetMap.from_mapping(build_partition_offset_map(plan).offsets,
                                              end_offset=plan.upper_bound_offset)
    assert clean(a, now).cleaned and clean(b, now, offset_map=precomputed).cleaned
    assert read_partition(a) == read_partition(b)


def test_dry_run_writes_nothing(tmp_path):
    d = write_partition(tmp_path, example_log())
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    res = clean(d, T0 + 10 * DAY, dry_run=True)
    assert res.dry_run and not res.cleaned and res.counts.records_superseded == 3
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before
    assert not (tmp_path / CLEANER_OFFSET_CHECKPOINT).exists()
    assert "later record" in res.explain(0)


def test_aborted_marker_kept_while_its_data_is_seen_and_txnindex_rewritten(tmp_path):
    segs = [[data(0, [(b"a", b"1")], pid=5, txn=True), data(1, [(b"b", b"1")]), marker(2, 5, cr.ABORT),
             data(3, [(b"c", b"1")])], [data(4, [(b"d", b"1")])]]
    d = write_partition(tmp_path, segs)
    assert read_transaction_index(d / format_segment_file_name(0, "txnindex")).entries
    res = clean(d, T0 + 10 * DAY)
    assert res.cleaned
    got = flatten(read_partition(d))
    assert [b.base for b in got if b.control] == [2]       # kept: its aborted data was seen this round
    entries = read_transaction_index(d / format_segment_file_name(0, "txnindex")).entries
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in entries] == [(5, 0, 2)]
    assert res.counts.aborted_records_removed == 1


def test_corrupt_segment_is_refused_unchanged(tmp_path):
    d = write_partition(tmp_path, example_log())
    log = d / format_segment_file_name(0, "log")
    raw = bytearray(log.read_bytes())
    raw[70] ^= 0xFF
    log.write_bytes(bytes(raw))
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    res = clean(d, T0 + 10 * DAY)
    assert not res.cleaned and "CRC" in res.error
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before
    assert "not cleaned" in res.explain(0)


def _roll(tmp_path: Path, d: Path, base: int, key: bytes) -> None:
    """The broker rolled: a new active segment at ``base``, the HW at its end."""
    (d / format_segment_file_name(base, "log")).write_bytes(encode(data(base, [(key, b"v")])))
    write_offset_checkpoint(tmp_path / REPLICATION_OFFSET_CHECKPOINT, {(TOPIC, 0): base + 1})


def test_tombstone_horizon_is_stamped_once_and_acted_on_exactly_at_it(tmp_path):
    d = write_partition(tmp_path, [[data(0, [(b"k", b"v"), (b"k", None), (b"j", b"w")])], [data(3, [(b"x", b"1")])]])
    now = T0 + 10 * DAY
    assert clean(d, now).cleaned
    horizon = now + DAY
    first = read_partition(d)[0][0]
    assert first.horizon == horizon and first.records == [(1, b"k", None), (2, b"j", b"w")]
    raw = (d / format_segment_file_name(0, "log")).read_bytes()
    _roll(tmp_path, d, 4, b"y")
    res = clean(d, horizon - 1)                     # before the horizon: kept, horizon unchanged
    assert res.cleaned and res.counts.tombstones_kept == 1 and res.counts.horizons_stamped == 0
    assert (d / format_segment_file_name(0, "log")).read_bytes().startswith(raw[:len(raw)])
    assert read_partition(d)[0][0] == first
    _roll(tmp_path, d, 5, b"z")
    res = clean(d, horizon)                         # at the horizon: gone
    assert res.cleaned and res.counts.tombstones_removed == 1
    assert read_partition(d)[0][0].records == [(2, b"j", b"w")]
    assert "past its delete horizon" in res.explain(1)


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("log_append_time", [False, True])
def test_rewritten_batches_keep_codec_timestamp_type_and_header(tmp_path, codec, log_append_time):
    first = replace(data(0, [(b"a", b"1" * 50), (b"b", b"2" * 50), (b"a", b"3" * 50), (b"c", None)], pid=9),
                    codec=codec, log_append_time=log_append_time)
    segs = [[first, replace(data(4, [(b"b", b"4")]), codec=codec)], [data(5, [(b"z", b"active")])]]
    d = write_partition(tmp_path, segs)
    now = T0 + 10 * DAY
    res = clean(d, now)
    assert res.cleaned and res.counts.batches_rewritten == 1
    got = read_partition(d)
    expected, _ = reference_round(segs, first_dirty=0, now=now, delete_retention_ms=DAY, active_last_data={})
    assert got == expected
    rebuilt = got[0][0]
    assert (rebuilt.base, rebuilt.last, rebuilt.codec, rebuilt.log_append_time, rebuilt.pid) == \
        (0, 3, codec, log_append_time, 9)
    assert [o for o, _k, _v in rebuilt.records] == [2, 3] and rebuilt.horizon == now + DAY
    raw = (d / format_segment_file_name(0, "log")).read_bytes()
    h = rb.parse_header(raw, 0)
    assert h.base_sequence == 0 and h.partition_leader_epoch == 0 and h.last_offset_delta == 3
    assert h.max_timestamp == T0 + (3 if log_append_time else 3)
