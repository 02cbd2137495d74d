"""kafkalog.lookup.partition_log: ListOffsets (earliest, latest, max-timestamp, offset for a timestamp) and
offset -> batch position, against references written here from Kafka's ``UnifiedLog.fetchOffsetByTimestamp``:

* ``kafka_reference`` transcribes Kafka's rule (first segment whose largestTimestamp reaches the
  target, mtime fallback, the log start offset, later segments not tried);
* ``brute_force`` is "the first record in offset order with timestamp >= target and offset >= log
  start offset". Every found answer must equal it; a not-found answer where brute force finds one
  is allowed only for the documented exceptions (the chosen segment used the mtime fallback, or
  its qualifying records all lie below the log start offset).
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkalog import write_segment
from kafkalog.checkpoint.leader_epoch import EpochEntry, write_leader_epoch_checkpoint
from kafkalog.checkpoint.offset import write_offset_checkpoint
from kafkalog.fs.names import (LEADER_EPOCH_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
                                format_segment_file_name)
from kafkalog.errors import CorruptRecordError
from kafkalog.format import record_batch as rb
from kafkalog.index.builder import build_indexes
from kafkalog.index.offset_index import write_offset_index
from kafkalog.index.time_index import write_time_index
from kafkalog.errors import OffsetOutOfRangeError
from kafkalog.log.local_log import high_watermark, log_start_offset
from kafkalog.log.segment import largest_timestamp, running_max
from kafkalog.lookup.partition_log import PartitionLog, lookup_offsets
from kafkalog.lookup.rules import (BEYOND_HIGH_WATERMARK, EARLIEST_TIMESTAMP, FOUND, LATEST_TIERED_TIMESTAMP, LATEST_TIMESTAMP,
                                   MAX_TIMESTAMP, NO_TIERED_STORAGE, NO_TIMESTAMPS, NOT_IN_SEGMENT, PAST_END, earliest_epoch,
                                   first_segment_reaching, floor_segment)
from kafkalog.format.schema import RECORD_SCHEMA
from kafkalog.log.records_io import read_segment

TOPIC = "orders"
TS0 = 1_700_000_000_000


# --- a partition folder described in Python, then written as a broker would ----------------

@dataclass
class Batch:
    records: List[tuple]                  # (offset, producer timestamp)
    last_offset: int
    epoch: int = 0
    log_append_time: Optional[int] = None
    codec: int = 0
    value_size: int = 10

    @property
    def base_offset(self) -> int:
        return self.records[0][0]

    def effective(self):
        """(offset, timestamp as a reader sees it): LogAppendTime overrides every record's."""
        return [(o, self.log_append_time if self.log_append_time is not None else t) for o, t in self.records]

    @property
    def max_timestamp(self) -> int:
        return max(t for _, t in self.effective())


@dataclass
class Seg:
    base_offset: int
    batches: List[Batch]
    mtime_ms: int


@dataclass
class Part:
    segments: List[Seg]
    lso_entry: Optional[int] = None
    hw_entry: Optional[int] = None
    epochs: List[tuple] = field(default_factory=list)
    interval: int = 4096

    @property
    def log_start_offset(self) -> int:
        return max(self.lso_entry or 0, self.segments[0].base_offset)

    @property
    def log_end_offset(self) -> int:
        last = self.segments[-1]
        return last.batches[-1].last_offset + 1 if last.batches else last.base_offset

    @property
    def high_watermark(self) -> int:
        return min(max(self.hw_entry or 0, self.log_start_offset), self.log_end_offset)

    def records(self):
        """(offset, timestamp, segment index, batch) of every record, in offset order."""
        return [(o, t, i, b) for i, s in enumerate(self.segments) for b in s.batches for o, t in b.effective()]


def encode(b: Batch) -> bytes:
    lat = b.log_append_time
    return rb.encode_batch([rb.V2Record(o, t, b"k%d" % (o % 7), b"v" * b.value_size) for o, t in b.records],
                           base_offset=b.base_offset, last_offset_delta=b.last_offset - b.base_offset,
                           timestamp_type=rb.LOG_APPEND_TIME if lat is not None else rb.CREATE_TIME,
                           max_timestamp=lat, partition_leader_epoch=b.epoch, codec=b.codec)


def write_partition(log_dir: Path, p: Part, partition: int = 0) -> Path:
    d = log_dir / f"{TOPIC}-{partition}"
    d.mkdir(parents=True)
    for s in p.segments:
        datas = [encode(b) for b in s.batches]
        sizes = np.array([len(x) for x in datas], np.int64)
        positions = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if len(datas) else sizes
        oi, ti = build_indexes(base_offset=s.base_offset, positions=positions, sizes=sizes,
                               last_offsets=np.array([b.last_offset for b in s.batches], np.int64),
                               max_timestamps=np.array([b.max_timestamp for b in s.batches], np.int64),
                               index_interval_bytes=p.interval)
        log = d / format_segment_file_name(s.base_offset, "log")
        log.write_bytes(b"".join(datas))
        write_offset_index(d / format_segment_file_name(s.base_offset, "index"), oi)
        write_time_index(d / format_segment_file_name(s.base_offset, "timeindex"), ti)
        os.utime(log, ns=(s.mtime_ms * 1_000_000, s.mtime_ms * 1_000_000))
    if p.lso_entry is not None:
        write_offset_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT, {(TOPIC, partition): p.lso_entry}, sync=False)
    if p.hw_entry is not None:
        write_offset_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT, {(TOPIC, partition): p.hw_entry}, sync=False)
    if p.epochs:
        write_leader_epoch_checkpoint(d / LEADER_EPOCH_CHECKPOINT, p.epochs, sync=False)
    return d


# --- the references ---------------------------------------------------------------------------

def brute_force(p: Part, target: int):
    lso = p.log_start_offset
    for o, t, i, b in p.records():
        if t >= target and o >= lso:
            return o, t, (b.epoch if b.epoch >= 0 else -1), p.segments[i].base_offset
    return None


def seg_max(s: Seg) -> int:
    return max((b.max_timestamp for b in s.batches), default=-1)


def kafka_reference(p: Part, target: int, isolation: str):
    """(offset, timestamp, epoch, segment) or (None, why), per ``UnifiedLog.fetchOffsetByTimestamp``, written independently."""
    lso, leo, hw = p.log_start_offset, p.log_end_offset, p.high_watermark
    if target == EARLIEST_TIMESTAMP:
        epochs = [e for e, start in p.epochs if start <= lso]
        return lso, -1, (epochs[-1] if epochs else -1), None
    if target == LATEST_TIMESTAMP:
        return (hw if isolation == "high_watermark" else leo), -1, (p.epochs[-1][0] if p.epochs else -1), None
    if target == MAX_TIMESTAMP:
        maxes = [seg_max(s) for s in p.segments]
        i = maxes.index(max(maxes))
        top = maxes[i]
        answer = (None, NO_TIMESTAMPS)
        for b in p.segments[i].batches:
            if b.max_timestamp == top:
                o = next(o for o, t in b.effective() if t == top)
                answer = (o, top, b.epoch if b.epoch >= 0 else -1, p.segments[i].base_offset)
                break
    else:
        largest = [seg_max(s) if seg_max(s) >= 0 else s.mtime_ms for s in p.segments]
        chosen = [i for i, lt in enumerate(largest) if lt >= target]
        if not chosen:
            return None, PAST_END
        s = p.segments[chosen[0]]
        answer = (None, NOT_IN_SEGMENT)
        for b in s.batches:
            hit = [(o, t) for o, t in b.effective() if t >= target and o >= lso]
            if hit:
                answer = (hit[0][0], hit[0][1], b.epoch if b.epoch >= 0 else -1, s.base_offset)
                break
    if isolation == "high_watermark" and answer[0] is not None and answer[0] >= hw:
        return None, BEYOND_HIGH_WATERMARK
    return answer


def check(result, expected, p: Part, target: int):
    if expected[0] is None:
        assert not result.found and result.offset == -1 and result.timestamp == -1, (target, result, expected)
        assert result.why == expected[1], (target, result, expected)
        return
    assert result.found and result.why == FOUND, (target, result, expected)
    assert (result.offset, result.timestamp, result.leader_epoch) == expected[:3], (target, result, expected)
    if expected[3] is not None:
        assert result.segment == expected[3]


# --- hypothesis: generated partitions ------------------------------------------------------

@st.composite
def partitions(draw):
    n_segments = draw(st.integers(1, 4))
    next_offset = draw(st.sampled_from([0, 1000]))
    segments = []
    for s in range(n_segments):
        base = next_offset
        next_offset += draw(st.sampled_from([0, 0, 2]))          # a cleaned segment keeps its base offset
        batches = []
        for _ in range(draw(st.integers(1 if s < n_segments - 1 else 0, 7))):
            offsets = [next_offset]
            for _ in range(draw(st.integers(0, 3))):
                offsets.append(offsets[-1] + draw(st.sampled_from([1, 1, 1, 2, 4])))   # compaction gaps
            last = offsets[-1] + draw(st.sampled_from([0, 0, 0, 3]))  # removed tail keeps lastOffsetDelta
            next_offset = last + 1 + draw(st.sampled_from([0, 0, 0, 1, 6]))       # removed whole batches
            records = [(o, TS0 + draw(st.integers(0, 60))) for o in offsets]      # CreateTime, not monotonic
            lat = TS0 + draw(st.integers(0, 60)) if draw(st.integers(0, 4)) == 0 else None
            batches.append(Batch(records, last, epoch=draw(st.sampled_from([-1, 0, 1, 3])), log_append_time=lat,
                                 codec=draw(st.sampled_from([0, 0, 0, 1])), value_size=draw(st.integers(0, 400))))
        segments.append(Seg(base, batches, TS0 + draw(st.integers(-20, 90))))
    p = Part(segments, interval=draw(st.sampled_from([0, 100, 700, 4096])))
    first, end = segments[0].base_offset, p.log_end_offset
    p.lso_entry = draw(st.none() | st.integers(max(first - 3, 0), end))
    p.hw_entry = draw(st.none() | st.integers(0, end + 3))
    starts = sorted(draw(st.lists(st.integers(first, end + 1), max_size=3, unique=True)))
    p.epochs = [(e, start) for e, start in enumerate(starts)]
    return p


def targets_for(p: Part) -> List[int]:
    ts = sorted({t for o, t, _, _ in p.records()} | {s.mtime_ms for s in p.segments})
    out = {EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, 0, TS0 - 1}
    for t in ts:
        out.update((t - 1, t, t + 1))
    return sorted(out)


SETTINGS = settings(max_examples=70, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@SETTINGS
@given(p=partitions(), engine=st.sampled_from(["reference", "compiled"]),
       isolation=st.sampled_from(["log_end", "high_watermark"]))
def test_lookups_agree_with_kafka_rule_and_brute_force(tmp_path_factory, p, engine, isolation):
    d = write_partition(tmp_path_factory.mktemp("logdir"), p)
    with PartitionLog.open(d, engine=engine) as log:
        assert log.log_start_offset == p.log_start_offset
        assert log.log_end_offset == p.log_end_offset
        assert log.high_watermark == p.high_watermark
        targets = targets_for(p)
        results = log.lookup_many(targets, isolation=isolation)
        assert len(results) == len(targets)
        for target, result in zip(targets, results):
            check(result, kafka_reference(p, target, isolation), p, target)
            assert result.notes == ()
            if target >= 0:
                brute = brute_force(p, target)
                if result.found and isolation == "log_end":
                    assert (result.offset, result.timestamp, result.leader_epoch, result.segment) == brute
                elif brute is not None and isolation == "log_end":
                    # documented exceptions only: the chosen segment has no record >= target at an
                    # offset >= the log start offset (LSO inside it, or chosen by its mtime)
                    assert result.why == NOT_IN_SEGMENT
                    assert result.segment < brute[3]
        # a second, separate lookup answers the same as the batch of queries
        assert log.lookup(targets[-1], isolation=isolation) == results[-1]


@SETTINGS
@given(p=partitions(), engine=st.sampled_from(["reference", "compiled"]))
def test_translate_offset_and_read_records_agree_with_a_scan(tmp_path_factory, p, engine):
    d = write_partition(tmp_path_factory.mktemp("logdir"), p)
    batches = [(i, b) for i, s in enumerate(p.segments) for b in s.batches]
    lso, leo = p.log_start_offset, p.log_end_offset
    positions = {}
    for i, s in enumerate(p.segments):
        pos = 0
        for b in s.batches:
            positions[id(b)] = pos
            pos += len(encode(b))
    records = [(o, t) for o, t, _, _ in p.records()]
    with PartitionLog.open(d, engine=engine) as log:
        candidates = list(range(max(lso - 2, 0), leo + 3))
        rng = np.random.default_rng(len(candidates))
        for offset in sorted(rng.choice(candidates, min(25, len(candidates)), replace=False).tolist()):
            if offset < lso or offset > leo:
                with pytest.raises(OffsetOutOfRangeError):
                    log.translate_offset(offset)
                continue
            got = log.translate_offset(offset)
            if offset == leo:
                assert got is None
                continue
            i, b = next(((i, b) for i, b in batches if b.last_offset >= offset), (None, None))
            if b is None:                      # in a gap after the last batch: nothing to read
                assert got is None
                continue
            assert (got.segment, got.position, got.base_offset, got.last_offset) == \
                (p.segments[i].base_offset, positions[id(b)], b.base_offset, b.last_offset), offset
            want = [o for o, _ in records if o >= offset][:5]
            rows = pa.Table.from_batches(list(log.read_records(offset, max_records=5)), schema=RECORD_SCHEMA)
            assert rows.column("offset").to_pylist() == want


# --- pure decisions ---------------------------------------------------------------------------

def test_log_start_offset_high_watermark_and_epoch_rules():
    assert log_start_offset(None, 100) == 100                      # absent: first segment base offset
    assert log_start_offset(50, 100) == 100                        # never below the first segment
    assert log_start_offset(150, 100) == 150
    assert log_start_offset(None, None) == 0
    assert high_watermark(None, log_start_offset=10, log_end_offset=20) == 10   # absent: 0, clamped up to the LSO
    assert high_watermark(99, log_start_offset=10, log_end_offset=20) == 20
    assert high_watermark(15, log_start_offset=10, log_end_offset=20) == 15
    entries = [EpochEntry(0, 0), EpochEntry(2, 50), EpochEntry(5, 90)]
    assert earliest_epoch(entries, 60) == 2                       # the epoch in force at the LSO
    assert earliest_epoch(entries, 0) == 0
    assert earliest_epoch([EpochEntry(4, 70)], 60) == -1          # the first epoch starts above the LSO
    assert largest_timestamp(-1, 123) == 123 and largest_timestamp(5, 123) == 5
    assert first_segment_reaching([5, 3, 9, 9], 6) == 2 and first_segment_reaching([5], 6) == -1
    assert floor_segment([0, 10, 20], 9) == 0 and floor_segment([0, 10, 20], 20) == 2 and floor_segment([5], 1) == -1
    # strictly greater wins: on ties the earlier batch keeps the max
    assert running_max((-1, 0), np.array([3, 7, 7]), np.array([1, 2, 3])) == (7, 2)
    assert running_max((7, 9), np.array([7]), np.array([12])) == (7, 9)


# --- documented choices ----------------------------------------------------------------------

def simple_part(**kw) -> Part:
    s0 = Seg(0, [Batch([(0, TS0 + 10), (1, TS0 + 5)], 1), Batch([(2, TS0 + 30)], 2, epoch=1)], TS0 + 1000)
    s1 = Seg(3, [Batch([(3, TS0 + 20), (4, TS0 + 40)], 4, epoch=2), Batch([(5, TS0 + 40)], 5, epoch=2)], TS0 + 2000)
    return Part([s0, s1], **kw)


def test_past_the_end_and_latest_choices(tmp_path):
    p = simple_part(hw_entry=3, epochs=[(0, 0), (2, 3)])
    d = write_partition(tmp_path, p)
    with PartitionLog.open(d) as log:
        past = log.lookup(TS0 + 41)
        assert (past.found, past.offset, past.timestamp, past.why, past.segment) == (False, -1, -1, PAST_END, None)
        assert log.lookup(LATEST_TIMESTAMP).offset == 6                         # LEO by default
        assert log.lookup(LATEST_TIMESTAMP, isolation="high_watermark").offset == 3
        assert log.lookup(LATEST_TIMESTAMP).leader_epoch == 2
        mx = log.lookup(MAX_TIMESTAMP)
        assert (mx.offset, mx.timestamp, mx.leader_epoch, mx.segment) == (4, TS0 + 40, 2, 3)
        assert log.lookup(MAX_TIMESTAMP, isolation="high_watermark").why == BEYOND_HIGH_WATERMARK
        assert log.lookup(TS0 + 31, isolation="high_watermark").why == BEYOND_HIGH_WATERMARK
        assert log.lookup(TS0 + 31).offset == 4
        assert log.lookup(TS0 + 20).offset == 2      # the first record >= target, not the first >= in segment 1
        assert log.lookup(LATEST_TIERED_TIMESTAMP).why == NO_TIERED_STORAGE
        with pytest.raises(ValueError):
            log.lookup(-9)
        with pytest.raises(ValueError, match="isolation"):
            log.lookup(0, isolation="serializable")
        # LocalLog.read: between the HW and the log end a client's fetch is empty, not out of range
        assert log.translate_offset(4, isolation="high_watermark") is None
        assert log.translate_offset(6, isolation="high_watermark") is None
        assert log.translate_offset(4).offset == 4
        with pytest.raises(OffsetOutOfRangeError):
            log.translate_offset(7, isolation="high_watermark")
    assert [r.offset for r in lookup_offsets(d, [EARLIEST_TIMESTAMP, 0, TS0 + 30])] == [0, 0, 2]


def test_log_start_offset_inside_a_segment_is_not_searched_past(tmp_path):
    # LSO 2 lies inside segment 0; the only record >= TS0+10 at or above it in segment 0 is offset 2
    p = simple_part(lso_entry=2)
    d = write_partition(tmp_path, p)
    with PartitionLog.open(d) as log:
        assert log.lookup(EARLIEST_TIMESTAMP).offset == 2
        assert log.lookup(TS0 + 10).offset == 2
        assert log.lookup(0).offset == 2
    # LSO 3 is above every record of segment 0 that reaches TS0+30... but segment 0's largest
    # timestamp (TS0+30) still chooses it, and Kafka does not try segment 1
    p = Part([Seg(0, [Batch([(0, TS0 + 30)], 0), Batch([(1, TS0 + 1)], 1)], TS0),
              Seg(2, [Batch([(2, TS0 + 50)], 2)], TS0)], lso_entry=1)
    d = write_partition(tmp_path / "b", p)
    with PartitionLog.open(d) as log:
        r = log.lookup(TS0 + 30)
        assert (r.found, r.why, r.segment) == (False, NOT_IN_SEGMENT, 0)
        assert brute_force(p, TS0 + 30)[0] == 2                               # the documented exception


def test_log_start_offset_past_the_log_end(tmp_path):
    d = write_partition(tmp_path, simple_part(lso_entry=100))
    with PartitionLog.open(d) as log:
        assert log.lookup(EARLIEST_TIMESTAMP).offset == 100 and log.lookup(LATEST_TIMESTAMP).offset == 100
        assert not log.lookup(TS0).found                                      # every record is below the LSO
        assert any("past the log end" in n for n in log.notes)
        with pytest.raises(OffsetOutOfRangeError):
            log.translate_offset(5)
        assert log.translate_offset(100) is None


def magic0_partition(tmp_path: Path, mtimes) -> Path:
    d = tmp_path / f"{TOPIC}-0"
    start = 0
    for mtime in mtimes:
        table = pa.table({"offset": pa.array(range(start, start + 5), pa.int64()),
                          "key": pa.array([b"k"] * 5), "value": pa.array([b"v" * 50] * 5)})
        log = write_segment(d, table, magic=0, index_interval_bytes=10)
        os.utime(log, ns=(mtime * 1_000_000, mtime * 1_000_000))
        start += 5
    return d


def test_no_timestamps_magic0(tmp_path):
    d = magic0_partition(tmp_path, [TS0 + 100, TS0 + 300, TS0 + 200])
    assert (d / "00000000000000000000.timeindex").stat().st_size == 0          # magic 0: empty time index
    with PartitionLog.open(d) as log:
        mx = log.lookup(MAX_TIMESTAMP)
        assert (mx.found, mx.why, mx.offset) == (False, NO_TIMESTAMPS, -1)
        # the mtime fallback picks the segment; no record in it has a timestamp -> not found there
        for target, segment in [(0, 0), (TS0 + 100, 0), (TS0 + 101, 5), (TS0 + 300, 5)]:
            r = log.lookup(target)
            assert (r.found, r.why, r.segment) == (False, NOT_IN_SEGMENT, segment), target
        # the active segment's largest timestamp is its mtime too (no timestamps in memory either)
        assert log.lookup(TS0 + 301).why == PAST_END
        assert log.lookup(LATEST_TIMESTAMP).offset == 15
        assert log.translate_offset(7).position > 0
        assert [r for b in log.read_records(13) for r in b.column("offset").to_pylist()] == [13, 14]


def test_magic1_and_compressed_wrappers(tmp_path):
    d = tmp_path / f"{TOPIC}-0"
    ts = [TS0 + t for t in (5, 1, 9, 9, 3, 12, 2, 2)]
    table = pa.table({"offset": pa.array(range(8), pa.int64()),
                      "timestamp": pa.array(ts, pa.timestamp("ms", tz="UTC")),
                      "key": pa.array([b"k"] * 8), "value": pa.array([b"v" * 30] * 8)})
    write_segment(d, table, magic=1, compression="gzip", batch_bytes=100, index_interval_bytes=10)
    with PartitionLog.open(d) as log:
        assert log.lookup(TS0 + 9).offset == 2
        assert log.lookup(TS0 + 10).offset == 5
        assert log.lookup(MAX_TIMESTAMP).offset == 5
        assert log.lookup(TS0 + 13).why == PAST_END
        got = log.translate_offset(3)
        assert got.base_offset <= 3 <= got.last_offset


def test_max_timestamp_ties_pick_the_first_segment_and_batch(tmp_path):
    p = Part([Seg(0, [Batch([(0, TS0 + 1)], 0), Batch([(1, TS0 + 9), (2, TS0 + 9)], 2, epoch=4)], TS0),
              Seg(3, [Batch([(3, TS0 + 9)], 3)], TS0)])
    with PartitionLog.open(write_partition(tmp_path, p)) as log:
        r = log.lookup(MAX_TIMESTAMP)
        assert (r.offset, r.timestamp, r.leader_epoch, r.segment) == (1, TS0 + 9, 4, 0)
    lat = Part([Seg(0, [Batch([(0, TS0 + 1), (1, TS0 + 2)], 1, log_append_time=TS0 + 50)], TS0)])
    with PartitionLog.open(write_partition(tmp_path / "lat", lat)) as log:
        r = log.lookup(MAX_TIMESTAMP)
        assert (r.offset, r.timestamp) == (0, TS0 + 50)                       # LogAppendTime: the first record
        assert (log.lookup(TS0 + 3).offset, log.lookup(TS0 + 3).timestamp) == (0, TS0 + 50)


def test_empty_partition_folder(tmp_path):
    d = tmp_path / f"{TOPIC}-0"
    d.mkdir()
    with PartitionLog.open(d) as log:
        assert log.lookup(EARLIEST_TIMESTAMP).offset == 0 and log.lookup(LATEST_TIMESTAMP).offset == 0
        assert log.lookup(0).why == PAST_END and log.lookup(MAX_TIMESTAMP).why == NO_TIMESTAMPS
        assert log.translate_offset(0) is None


# --- index fallbacks ----------------------------------------------------------------------------

def fallback_part() -> Part:
    rng = np.random.default_rng(3)
    segs, o = [], 0
    for s in range(3):
        batches = []
        for _ in range(40):
            batches.append(Batch([(o, TS0 + s * 1000 + int(rng.integers(0, 900)))], o, epoch=s, value_size=200))
            o += 1
        segs.append(Seg(batches[0].base_offset, batches, TS0 + 5000))
    return Part(segs, interval=500)


def answers(d: Path, p: Part):
    targets = targets_for(p)[::3] + [MAX_TIMESTAMP, TS0 + 10**6]
    with PartitionLog.open(d) as log:
        results = log.lookup_many(targets)
        return ([(r.offset, r.timestamp, r.why) for r in results],
                [log.translate_offset(o).position for o in range(0, p.log_end_offset, 7)],
                [n for r in results for n in r.notes] + list(log.notes))


@pytest.mark.parametrize("damage", ["no-index", "short-index", "index-past-end", "index-mid-batch",
                                    "timeindex-disorder", "timeindex-odd-size", "zero-padded-active"])
def test_damaged_indexes_fall_back_to_the_log(tmp_path, damage):
    p = fallback_part()
    good = answers(write_partition(tmp_path / "good", p), p)
    d = write_partition(tmp_path / "bad", p)
    index = d / "00000000000000000040.index"
    timeindex = d / "00000000000000000040.timeindex"
    if damage == "no-index":
        index.unlink()
    elif damage == "short-index":
        index.write_bytes(index.read_bytes() + b"\x00\x01\x02")
    elif damage == "index-past-end":
        index.write_bytes(index.read_bytes() + struct.pack(">ii", 45, 10**7))
    elif damage == "index-mid-batch":
        data = bytearray(index.read_bytes())
        rel, pos = struct.unpack_from(">ii", data, 0)
        struct.pack_into(">ii", data, 0, rel, pos + 7)                        # inside a batch
        index.write_bytes(bytes(data))
    elif damage == "timeindex-disorder":                                       # fails Kafka's sanity check
        timeindex.write_bytes(struct.pack(">qiqi", TS0 + 1900, 5, TS0 + 1000, 10))
    elif damage == "timeindex-odd-size":
        timeindex.write_bytes(timeindex.read_bytes()[:-5])
    elif damage == "zero-padded-active":                                        # a running broker's files
        for f, n in ((d / "00000000000000000080.index", 8), (d / "00000000000000000080.timeindex", 12)):
            f.write_bytes(f.read_bytes() + bytes(n * 5000))
    got = answers(d, p)
    assert got[:2] == good[:2]
    if damage == "zero-padded-active":
        assert got[2] == []
    else:
        assert any("rebuilt" in n for n in got[2]), got[2]


def test_missing_timeindex_uses_the_mtime_as_the_broker_does(tmp_path):
    # segment 0's records all lie below TS0+500, but without its .timeindex its largest timestamp
    # is the file time (TS0+5000): the broker chooses it and does not try segment 1
    p = fallback_part()
    d = write_partition(tmp_path, p)
    (d / "00000000000000000000.timeindex").unlink()
    with PartitionLog.open(d) as log:
        r = log.lookup(TS0 + 1500)
        assert (r.found, r.why, r.segment) == (False, NOT_IN_SEGMENT, 0)
        assert any("mtime" in n for n in r.notes)
        assert log.lookup(TS0 + 10).offset == brute_force(p, TS0 + 10)[0]
    (d / "00000000000000000000.log").touch()
    os.utime(d / "00000000000000000000.log", ns=(TS0 * 1_000_000, TS0 * 1_000_000))
    with PartitionLog.open(d) as log:
        assert log.lookup(TS0 + 1500).offset == brute_force(p, TS0 + 1500)[0]


def test_torn_tail_of_the_last_segment_ends_the_log(tmp_path):
    p = fallback_part()
    d = write_partition(tmp_path, p)
    log_file = d / "00000000000000000080.log"
    log_file.write_bytes(log_file.read_bytes() + encode(Batch([(120, TS0 + 9999)], 120))[:40])
    with PartitionLog.open(d) as log:
        assert log.log_end_offset == 120
        assert any("truncate" in n for n in log.notes)
        assert log.lookup(TS0 + 9999).why == PAST_END
        assert log.lookup(MAX_TIMESTAMP).offset == brute_force(p, max(t for _, t, _, _ in p.records()))[0]


def test_corrupt_batch_bytes_raise_a_clear_error(tmp_path):
    p = fallback_part()
    d = write_partition(tmp_path, p)
    log_file = d / "00000000000000000040.log"
    data = bytearray(log_file.read_bytes())
    fifth = sum(len(encode(b)) for b in p.segments[1].batches[:4])
    struct.pack_into(">i", data, fifth + 8, 3)                                 # batch size 3 < 14
    log_file.write_bytes(bytes(data))
    with PartitionLog.open(d) as log, pytest.raises(CorruptRecordError) as info:
        for o in range(40, 80):
            log.translate_offset(o)
    assert info.value.path == str(log_file) and info.value.position is not None


# --- real broker-written segments -----------------------------------------------------------

REAL_PARTITIONS = [
    ("pinterest__tiered-storage/ts-common/src/test/resources/log-files/timeindex_test", ("timeindex_test", 0)),
    ("pinterest__tiered-storage/ts-consumer/src/test/resources/log-files/test_topic_a-0", None),
    ("pinterest__tiered-storage/ts-consumer/src/test/resources/log-files/test_topic_a-1", None),
    ("pinterest__tiered-storage/ts-segment-uploader/src/test/resources/log_segments/test_topic_a-0", None),
]


def real_reference(d: Path):
    """Per segment: (base, records (offset, timestamp), largestTimestamp by the time index's last
    entry, parsed here with struct, or the mtime)."""
    segs = []
    for log in sorted(d.glob("*.log")):
        t = read_segment(log)
        base = int(log.stem)
        ti = log.with_suffix(".timeindex")
        raw = ti.read_bytes() if ti.exists() else b""
        last = struct.unpack_from(">q", raw, len(raw) - 12)[0] if len(raw) >= 12 else -1
        lt = last if last >= 0 else os.stat(log).st_mtime_ns // 1_000_000
        segs.append((base, list(zip(t.column("offset").to_pylist(),
                                    t.column("timestamp").cast(pa.int64()).to_pylist())), lt))
    return segs


@pytest.mark.parametrize("rel, tp", REAL_PARTITIONS, ids=[r[0].split("/")[-1] + str(i) for i, r in
                                                          enumerate(REAL_PARTITIONS)])
def test_real_time_indexes(real_fixtures, rel, tp):
    d = real_fixtures / rel
    segs = real_reference(d)
    records = [r for _, recs, _ in segs for r in recs]
    stamps = sorted({t for _, t in records})
    rng = np.random.default_rng(11)
    targets = sorted(set(rng.choice(stamps, min(150, len(stamps)), replace=False).tolist())
                     | {stamps[0] - 1, stamps[-1], stamps[-1] + 1, 0})
    with PartitionLog.open(d, topic_partition=tp) as log:
        assert log.log_end_offset == records[-1][0] + 1
        for target, r in zip(targets, log.lookup_many(targets)):
            chosen = next((i for i, (_, _, lt) in enumerate(segs) if lt >= target), None)
            want = None if chosen is None else next(((o, t) for o, t in segs[chosen][1] if t >= target), None)
            if want is None:
                assert not r.found, target
            else:
                assert (r.offset, r.timestamp, r.segment) == (*want, segs[chosen][0]), target
                assert r.notes == ()
                assert want == next((o, t) for o, t in records if t >= target)   # Kafka == brute force here
        top = max(t for _, t in records)
        mx = log.lookup(MAX_TIMESTAMP)
        assert (mx.offset, mx.timestamp) == next((o, t) for o, t in records if t == top)
        offsets = [o for o, _ in records]
        for o in rng.choice(offsets, min(60, len(offsets)), replace=False).tolist():
            got = log.translate_offset(o)
            assert got.base_offset <= o <= got.last_offset
            first = next(log.read_records(o, max_records=1))
            assert first.column("offset")[0].as_py() == o


def test_real_segment_without_indexes(real_fixtures):
    # test_topic_b-0: only the newest segment's .log survived, with no .index or .timeindex
    d = real_fixtures / "pinterest__tiered-storage/ts-segment-uploader/src/test/resources/log_segments/test_topic_b-0"
    (log_file,) = sorted(d.glob("*.log"))
    t = read_segment(log_file)
    offsets = t.column("offset").to_pylist()
    stamps = t.column("timestamp").cast(pa.int64()).to_pylist()
    with PartitionLog.open(d) as log:
        r = log.lookup(stamps[len(stamps) // 2])
        assert r.offset == next(o for o, s in zip(offsets, stamps) if s >= stamps[len(stamps) // 2])
        assert any("rebuilt" in n for n in r.notes)
        assert log.log_end_offset == offsets[-1] + 1
