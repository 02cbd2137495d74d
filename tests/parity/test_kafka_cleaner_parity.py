"""Kafka's own cleaner scenarios (``LogCleanerTest``), ported onto our cleaner: our code, their cases.

Kafka's tests build a ``UnifiedLog`` with ``MockTime``, append with ``log.appendAsLeader`` (data,
transactional data and markers through ``appendTransactionalAsLeader`` / ``appendEndTxnMarkerAsLeader``),
roll with ``log.roll()`` and run ``cleaner.clean(LogToClean(log, 0, log.activeSegment.baseOffset))`` or
``cleaner.doClean(..., currentTime)``. Here a log is a partition folder written batch by batch
(``test_cleaner_model.write_partition``: one list per segment, the last one the active segment),
``MockTime.milliseconds`` is the ``now_ms`` each round is given, a roll is a new segment appended
to the folder (``roll``), and a round is ``clean_partition`` (or the Spark compact job, which must
give the same bytes). Kafka's ``segment.bytes`` / index size settings that make the cleaner build
several groups map onto ``LogConfig.segment_bytes`` here (``one_group_per_segment``).

The transaction tracker is ONE per cleaning round (``Cleaner.doClean`` creates it and passes it to
every group's ``cleanSegments``); only the ``.txnindex`` entries it collects are per group. The
scenarios in the first section fail with a tracker per group.
"""
from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import List

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from kafka.record.memory_records import MemoryRecords

from kafkalog.cleaner.clean_options import CleanOptions
from tests.cleaner_model import folded_options
from kafkalog.checkpoint.offset import write_offset_checkpoint
from kafkalog.fs.names import CLEANER_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from kafkalog.cleaner import (ExactOffsetMap, build_partition_offset_map, clean_partition,
                              group_segments_by_size, offset_map_entries, plan_partition)
from kafkalog.format import control_record as cr
from kafkalog.index.transaction_index import read_transaction_index
from kafkalog.log.producer_snapshot import ProducerSnapshot, ProducerSnapshotEntry, write_producer_snapshot
from kafkalog.log.segment import SegmentInfo
from kafkalog.fs.names import format_segment_file_name

import cleaner.test_cleaner_properties as props
from cleaner_model import B, DAY, T0, TOPIC, data, encode, flatten, log_config, marker, read_partition, \
    write_partition, write_segment_files

PID = 5


def _groupable(base, size, index_bytes, time_index_bytes) -> SegmentInfo:
    """A segment as groupSegmentsBySize reads it."""
    return SegmentInfo(base, size, offset_index_bytes=index_bytes, time_index_bytes=time_index_bytes)


def pad(base: int, n: int, tag: bytes) -> B:
    """A non-transactional batch of ``n`` keys no other batch uses: nothing in it is ever removed,
    so a segment holding it keeps its size round after round."""
    return data(base, [(tag + b"%d" % i, b"p" * 40) for i in range(n)])


def segment_sizes(d: Path) -> List[int]:
    return [p.stat().st_size for p in sorted(d.glob("*.log"))]


def one_group_per_segment(d: Path, **overrides):
    """A config whose segment.bytes is the largest .log: no two non-empty segments fit one group."""
    return log_config(segment_bytes=max(segment_sizes(d)), **overrides)


def roll(d: Path, base: int, key: bytes = b"roll") -> None:
    """The broker rolled (``log.roll()``) and appended one record: a new active segment at ``base``,
    the high watermark at its end."""
    (d / format_segment_file_name(base, "log")).write_bytes(encode(data(base, [(key + b"%d" % base, b"v")])))
    write_offset_checkpoint(d.parent / REPLICATION_OFFSET_CHECKPOINT, {(TOPIC, 0): base + 1})


def control_batches(d: Path):
    return {b.base: b for b in flatten(read_partition(d)) if b.control}


def txn_entries(d: Path, base: int):
    path = d / format_segment_file_name(base, "txnindex")
    if not path.exists():
        return []
    return [(t.producer_id, t.first_offset, t.last_offset) for t in read_transaction_index(path).entries]


def clean(d: Path, now: int, config, **kw):
    res = clean_partition(d, config=config, now_ms=now, **folded_options(**kw))
    assert res.error is None, res.error
    return res


# --- transactions across cleaning groups (the tracker is per round) --------------------------

def commit_across_groups() -> List[List[B]]:
    """Producer 5's transaction: data at 0 in the first segment, its COMMIT at 4 in the second."""
    return [[data(0, [(b"t", b"1")], pid=PID, txn=True), pad(1, 3, b"x")],
            [marker(4, PID, cr.COMMIT), pad(5, 3, b"y")],
            [data(8, [(b"z", b"1")])]]


def abort_across_groups() -> List[List[B]]:
    """Producer 5's aborted transaction: data at 0 in the first segment, its ABORT at 4 in the second."""
    return [[data(0, [(b"t", b"1")], pid=PID, txn=True), pad(1, 3, b"x")],
            [marker(4, PID, cr.ABORT), pad(5, 3, b"y")],
            [data(8, [(b"z", b"1")])]]


def test_commit_marker_whose_data_is_in_an_earlier_group_is_kept(tmp_path):
    """LogCleanerTest.testCommitMarkerRemoval's rule (a COMMIT is removed only once its transaction's
    data is gone), with the data and the marker in different groups."""
    d = write_partition(tmp_path, commit_across_groups())
    config = one_group_per_segment(d)
    now = T0 + 10 * DAY                                   # producer 5 expired: nothing kept for it
    res = clean(d, now, config)
    assert res.cleaned and len(res.groups) >= 2
    assert [g.source_base_offsets for g in res.groups][:2] == [[0], [4]]
    assert control_batches(d)[4].horizon is None, "a COMMIT protecting data gets no delete horizon"
    # a later round, past any horizon the first round could have stamped: the data is still there,
    # so is its COMMIT
    roll(d, 9)
    later = now + 3 * DAY
    res = clean(d, later, config)
    assert res.cleaned and len(res.groups) >= 2
    kept = flatten(read_partition(d))
    assert [b.base for b in kept if b.txn and not b.control] == [0]
    assert 4 in control_batches(d) and control_batches(d)[4].horizon is None
    assert res.counts.markers_removed == 0


def test_abort_marker_whose_data_is_in_an_earlier_group_is_kept_with_its_txnindex_entry(tmp_path):
    """LogCleanerTest.testAbortMarkerRemoval / testAbortMarkerRetentionWithEmptyBatch's first round: the
    aborted data is removed, its ABORT is kept (its data was seen this round) and its AbortedTxn is
    written to the .txnindex of the cleaned segment that holds the marker."""
    d = write_partition(tmp_path, abort_across_groups())
    assert txn_entries(d, 4) == [(PID, 0, 4)]
    config = one_group_per_segment(d)
    now = T0 + 10 * DAY
    res = clean(d, now, config)
    assert res.cleaned and [g.source_base_offsets for g in res.groups][:2] == [[0], [4]]
    assert res.counts.aborted_records_removed == 1
    assert [b.base for b in flatten(read_partition(d)) if b.txn and not b.control] == []
    assert control_batches(d)[4].horizon is None
    assert txn_entries(d, 0) == []
    assert txn_entries(d, 4) == [(PID, 0, 4)]
    assert [g.aborted_txns for g in res.groups][:2] == [0, 1]
    # the next round no longer sees the data: the marker is stamped, then removed past its horizon
    roll(d, 9)
    res = clean(d, now + DAY, config)
    assert control_batches(d)[4].horizon == now + 2 * DAY
    assert txn_entries(d, 4) == []
    roll(d, 10)
    res = clean(d, now + 3 * DAY, config)
    assert 4 not in control_batches(d) and res.counts.markers_removed == 1


def test_abort_marker_kept_while_a_retained_empty_batch_in_an_earlier_group_holds_its_producer(tmp_path):
    """LogCleanerTest.testAbortMarkerRetentionWithEmptyBatch over two groups: the aborted batch is the
    active producer's last data, so it stays as an empty batch; while it stays, every round sees it
    and keeps its ABORT marker (in another group), with the .txnindex entry."""
    d = write_partition(tmp_path, abort_across_groups())
    config = one_group_per_segment(d, delete_retention_ms=1000)
    now = T0 + 1000                                       # producer 5 active (expiry: one day)
    res = clean(d, now, config)
    assert res.cleaned and [g.source_base_offsets for g in res.groups][:2] == [[0], [4]]
    empty = [b for b in flatten(read_partition(d)) if b.pid == PID and not b.control]
    assert [(b.base, b.records) for b in empty] == [(0, [])], "the producer's last batch is kept empty"
    assert control_batches(d)[4].horizon is None
    assert txn_entries(d, 4) == [(PID, 0, 4)]
    for i, later in enumerate((now + 2500, now + 5000)):   # past any 1 s horizon, producer still active
        roll(d, 9 + i)
        res = clean(d, later, config)
        assert res.cleaned
        assert [(b.base, b.records) for b in flatten(read_partition(d)) if b.pid == PID and not b.control] == \
            [(0, [])]
        assert 4 in control_batches(d) and control_batches(d)[4].horizon is None
        assert txn_entries(d, 4) == [(PID, 0, 4)]


def test_commit_marker_kept_while_a_retained_empty_batch_in_an_earlier_group_holds_its_producer(tmp_path):
    """testEmptyBatchRemovalWithSequenceReuse's setting over two groups: the committed batch's record is
    superseded, but it is the active producer's last data, so it stays empty — and keeps its COMMIT."""
    segs = [[data(0, [(b"t", b"1")], pid=PID, txn=True), pad(1, 3, b"x")],
            [marker(4, PID, cr.COMMIT), pad(5, 3, b"y"), data(8, [(b"t", b"2")])],
            [data(9, [(b"z", b"1")])]]
    d = write_partition(tmp_path, segs)
    config = one_group_per_segment(d, delete_retention_ms=1000)
    now = T0 + 1000
    for i, when in enumerate((now, now + 2500, now + 5000)):
        if i:
            roll(d, 9 + i)
        res = clean(d, when, config)
        assert res.cleaned and [g.source_base_offsets for g in res.groups][:2] == [[0], [4]]
        assert [(b.base, b.records) for b in flatten(read_partition(d)) if b.pid == PID and not b.control] == \
            [(0, [])]
        assert 4 in control_batches(d) and control_batches(d)[4].horizon is None


def _spark_job_equals_local(spark, tmp_path: Path, segs, now: int, config_overrides: dict) -> Path:
    import shutil

    from kafkalog.config import configs_from_mappings
    from udfs import compact_job

    from logdirs import snapshot

    local = tmp_path / "local"
    d = write_partition(local, segs)
    settings = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0",
                "segment.bytes": str(max(segment_sizes(d))), **config_overrides}
    shutil.copytree(local, tmp_path / "spark")
    config = configs_from_mappings(topics={TOPIC: settings}).for_topic(TOPIC)
    assert clean(d, now, config).cleaned
    args = ["--log-dirs", str(tmp_path / "spark"), "--now-ms", str(now)]
    for key, value in settings.items():
        args += ["--topic-config", f"{TOPIC}:{key}={value}"]
    assert compact_job.main(args, spark=spark) == 0
    strip = lambda s: {k: v for k, v in s.items() if not k.endswith(".lock")}  # noqa: E731
    assert strip(snapshot(tmp_path / "spark")) == strip(snapshot(local))
    return tmp_path / "spark" / f"{TOPIC}-0"


def test_spark_compact_keeps_markers_across_groups(spark, tmp_path):
    """The Spark job's rewrite follows the same per-round tracker: the COMMIT and the ABORT whose data
    sit in an earlier group are kept, the ABORT's .txnindex entry is written, byte for byte as the
    single-process cleaner."""
    pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")
    now = T0 + 10 * DAY
    d = _spark_job_equals_local(spark, tmp_path / "commit", commit_across_groups(), now,
                                {"delete.retention.ms": str(DAY)})
    assert control_batches(d)[4].horizon is None
    d = _spark_job_equals_local(spark, tmp_path / "abort", abort_across_groups(), now,
                                {"delete.retention.ms": str(DAY)})
    assert control_batches(d)[4].horizon is None and txn_entries(d, 4) == [(PID, 0, 4)]


def _all_txn_entries(d: Path):
    return sorted((t.producer_id, t.first_offset, t.last_offset)
                  for p in d.glob("*.txnindex") for t in read_transaction_index(p).entries)


# test_cleaner_properties' operations, plus a transaction that spans a roll (data, roll, marker)
spanning_op = st.tuples(st.integers(1, 3), st.sampled_from([cr.COMMIT, cr.ABORT])).map(
    lambda t: [("txn", t[0], [(b"a", b"t")]), ("roll",), ("end", t[0], t[1])])
ops_spanning_groups = st.lists(st.one_of(props.op.map(lambda o: [o]), spanning_op), min_size=3, max_size=20).map(
    lambda chunks: [o for chunk in chunks for o in chunk])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops_spanning_groups, producers_active=st.booleans())
def test_grouping_never_changes_what_a_round_keeps(ops, producers_active):
    """Property: with the tracker carried through the round, how the segments are grouped changes
    only where segments begin, never which batches and records are kept, their delete horizons, or
    the .txnindex entries — over two rounds (the second past every horizon the first stamped)."""
    segments, _open = props.build(ops)
    now = T0 + (1000 if producers_active else 10 * DAY)
    outcomes = []
    for segment_bytes in (1 << 30, 14):                  # one group; one group per segment
        with tempfile.TemporaryDirectory() as tmp:
            d = write_partition(Path(tmp), segments)
            config = log_config(segment_bytes=segment_bytes, delete_retention_ms=1000)
            rounds = []
            for i, when in enumerate((now, now + 2000)):
                if i:
                    roll(d, flatten(read_partition(d))[-1].last + 1)
                res = clean(d, when, config)
                rounds.append((flatten(read_partition(d)), _all_txn_entries(d)))
                if segment_bytes == 14 and res.cleaned:
                    event(f"round {i}: {len(res.groups)} groups")
            outcomes.append(rounds)
    assert outcomes[0] == outcomes[1]


# --- Kafka's LogCleanerTest scenarios, on Kafka's layout and on one segment (and group) per batch ----

NOW = T0 + 1_000_000           # MockTime during the test: every producer stays active (expiry: 1 day)
RETENTION = 60_000             # delete.retention.ms: a horizon passes while producers stay active
FAR = NOW + 10 * RETENTION     # Kafka's Long.MAX_VALUE clean: past every horizon stamped before
SEGMENT_PER_BATCH = 14         # segment.bytes' minimum: every batch rolls its own segment and group


def k(i: int) -> bytes:
    return str(i).encode()


class KafkaLog:
    """A ``UnifiedLog`` as LogCleanerTest drives it, on disk. Appends go to the active segment, rolled
    first when the batch would take it past segment.bytes (``UnifiedLog.maybeRoll``); ``roll`` is
    ``log.roll()``, which also writes the producer snapshot at the new segment's base, as a broker's
    roll does (``ProducerStateManager.takeSnapshot``) — so a round sees the producer state a running
    broker holds, not one rebuilt from a log that the cleaner has emptied; the high watermark
    follows the log end offset. Values equal keys, as in Kafka's ``appendTransactionalAsLeader``;
    sequences count per producer from 0."""

    def __init__(self, root: Path, segment_bytes: int, **config):
        self.root = root
        self.d = root / f"{TOPIC}-0"
        self.d.mkdir(parents=True)
        self.segment_bytes = segment_bytes
        self.config = log_config(**{"segment_bytes": segment_bytes, "segment_index_bytes": 1024,
                                    "delete_retention_ms": RETENTION, **config})
        self.active_base, self.active, self.active_size = 0, [], 0
        self.next_offset = 0
        self.open_txns: dict = {}
        self.sequences: dict = {}
        self.producers: dict = {}      # pid -> ProducerSnapshotEntry, as ProducerStateManager holds it
        self._flush()

    def _flush(self) -> None:
        self._open_at_end = write_segment_files(self.d, self.active_base, self.active, dict(self.open_txns),
                                                mtime_ns=(T0 + self.next_offset) * 10**6)
        write_offset_checkpoint(self.root / REPLICATION_OFFSET_CHECKPOINT, {(TOPIC, 0): self.next_offset})

    def append(self, b: B) -> B:
        size = len(encode(b))
        if self.active and self.active_size + size > self.segment_bytes:
            self.roll()
        self.active.append(b)
        self.active_size += size
        self.next_offset = b.last + 1
        if b.pid >= 0:
            self._update_producer(b)
        self._flush()
        return b

    def _update_producer(self, b: B) -> None:
        """``ProducerAppendInfo.append``: a data batch sets the last sequence and data offset (and opens
        a transaction); a marker ends the transaction and leaves the data offset alone."""
        e = self.producers.get(b.pid) or ProducerSnapshotEntry(b.pid, b.epoch, -1, -1, 0, -1, -1, -1)
        e = replace(e, producer_epoch=b.epoch, timestamp=T0 + b.last)
        if b.control:
            e = replace(e, current_txn_first_offset=-1, coordinator_epoch=1)
        else:
            e = replace(e, last_sequence=(b.seq or 0) + b.last - b.base, last_offset=b.last, offset_delta=b.last - b.base,
                        current_txn_first_offset=(b.base if b.txn and e.current_txn_first_offset < 0
                                                  else e.current_txn_first_offset))
        self.producers[b.pid] = e

    def roll(self, base: int = None) -> None:
        self._flush()
        self.open_txns = self._open_at_end
        self.next_offset = self.active_base = self.next_offset if base is None else base
        self.active, self.active_size = [], 0
        self._flush()
        write_producer_snapshot(self.d, ProducerSnapshot(self.active_base, list(self.producers.values())))

    def txn(self, pid: int, *keys: int, seq: int = None) -> B:
        """``appendTransactionalAsLeader(log, pid, 0)(keys)``: one transactional batch."""
        return self._producer_batch(pid, keys, True, seq)

    def idempotent(self, pid: int, *keys: int, seq: int = None) -> B:
        return self._producer_batch(pid, keys, False, seq)

    def _producer_batch(self, pid, keys, txn, seq) -> B:
        b = data(self.next_offset, [(k(x), k(x)) for x in keys], pid=pid, txn=txn)
        b.seq = self.sequences.get(pid, 0) if seq is None else seq
        self.sequences[pid] = b.seq + len(keys)
        return self.append(b)

    def record(self, key, value) -> B:
        """``record(key, value)``: a plain batch of one record (value None: a tombstone)."""
        return self.append(data(self.next_offset, [(None if key is None else k(key),
                                                    None if value is None else k(value))]))

    def commit(self, pid: int) -> B:
        return self.append(marker(self.next_offset, pid, cr.COMMIT))

    def abort(self, pid: int) -> B:
        return self.append(marker(self.next_offset, pid, cr.ABORT))

    def clean(self, first_dirty: int, now: int = NOW, *, offset_map=None, config=None, **kw):
        """``cleaner.doClean(LogToClean(log, first_dirty, activeSegment.baseOffset), now)``; returns the
        round's end offset (the next first dirty offset). Kafka's test map (FakeOffsetMap) keeps its
        last end offset when the dirty range is empty, so such a round recopies the log with an empty
        map: here an empty ExactOffsetMap ending at the upper bound. The upper bound is the broker's
        (``cleanableOffsets``: active segment, high watermark, first unstable offset), where Kafka's
        tests pass the active segment's base whatever the first unstable offset."""
        upper = plan_partition(self.d, config=config or self.config, now_ms=now).upper_bound_offset
        if offset_map is None and first_dirty >= upper:
            offset_map, first_dirty = ExactOffsetMap(end_offset=upper), 0
        write_offset_checkpoint(self.root / CLEANER_OFFSET_CHECKPOINT, {(TOPIC, 0): first_dirty})
        res = clean_partition(self.d, config=config or self.config, now_ms=now,
                              offset_map=offset_map,
                              **folded_options(CleanOptions(force=True), **kw))
        assert res.error is None and res.cleaned, (res.error, res.skipped_reason)
        self.last_result = res
        return res.end_offset

    def two_pass_clean(self, first_dirty: int, now: int = NOW) -> int:
        """``runTwoPassClean``: the second pass one retention period (+1 ms) later."""
        self.clean(first_dirty, now)
        return self.clean(first_dirty, now + RETENTION + 1)

    # what Kafka's assertions read back (LogTestUtils.keysInLog, offsetsInLog, ...)
    def batches(self):
        out = []
        for log in sorted(self.d.glob("*.log")):
            mr = MemoryRecords(log.read_bytes())
            while mr.has_next():
                x = mr.next_batch()
                if x is None:
                    break
                assert x.validate_crc()
                out.append((x, list(x)))
        return out

    def keys(self):
        return [int(r.key) for x, recs in self.batches() if not x.is_control_batch
                for r in recs if r.key is not None and r.value is not None]

    def offsets(self):
        return [r.offset for _x, recs in self.batches() for r in recs if r.key is not None and r.value is not None]

    def last_offsets(self):
        return [x.last_offset for x, _recs in self.batches()]

    def base_offsets(self):
        return [x.base_offset for x, _recs in self.batches()]

    def last_sequences(self):
        return {x.producer_id: x.base_sequence + x.last_offset_delta for x, _recs in self.batches()
                if x.producer_id >= 0 and not x.is_control_batch}

    def aborted_txns(self):
        """``log.collectAbortedTransactions(0, logEndOffset)``: (pid, first, last, lastStable)."""
        return [(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
                for p in sorted(self.d.glob("*.txnindex")) for t in read_transaction_index(p).entries]


def kafka_capacity_map(log: KafkaLog, first_dirty: int, slots: int) -> ExactOffsetMap:
    """The map Kafka's ``buildOffsetMap`` fills in a FakeOffsetMap of ``slots`` slots (load factor
    0.75): keys enter in log order until the map holds int(slots * 0.75) keys; the latest offset is
    that of the last key put or batch read whole (a segment read whole ends at the next segment's
    base), and the round's end offset is one past it."""
    write_offset_checkpoint(log.root / CLEANER_OFFSET_CHECKPOINT, {(TOPIC, 0): first_dirty})
    plan = plan_partition(log.d, config=log.config, now_ms=NOW)
    entries = list(offset_map_entries(plan))
    capacity, taken, latest = int(slots * 0.75), {}, -1
    dirty = plan.dirty_segments()
    for i, seg in enumerate(dirty):
        cols = seg.scan().batches.to_pydict()
        for base, last in zip(cols["baseOffset"], cols["lastOffset"]):
            if last < first_dirty:
                continue
            for key, offset in entries:
                if base <= offset <= last:
                    if len(taken) >= capacity:
                        return ExactOffsetMap(end_offset=latest + 1, offsets=taken)
                    taken[key] = offset
                    latest = offset                # SkimpyOffsetMap.put (and Kafka's FakeOffsetMap)
            latest = last
        latest = (dirty[i + 1].base_offset if i + 1 < len(dirty) else plan.upper_bound_offset) - 1
    return ExactOffsetMap(end_offset=latest + 1, offsets=taken)


@pytest.fixture(params=["kafka-layout", "segment-per-batch"])
def layout(request):
    """Kafka's segment.bytes (the test's), or one segment — hence one cleaning group — per batch."""
    return request.param


def kafka_log(tmp_path, layout, segment_bytes, **config) -> KafkaLog:
    return KafkaLog(tmp_path, segment_bytes if layout == "kafka-layout" else SEGMENT_PER_BATCH, **config)


def test_basic_transaction_aware_cleaning(tmp_path, layout):
    """testBasicTransactionAwareCleaning."""
    log = kafka_log(tmp_path, layout, 2048)
    log.txn(1, 1, 2)
    log.txn(2, 2, 3)
    log.txn(1, 3, 4)
    log.abort(1)
    log.commit(2)
    log.txn(1, 2)
    log.commit(1)
    aborted = log.aborted_txns()
    log.roll()
    log.clean(0)
    assert log.keys() == [3, 2]
    assert log.offsets() == [3, 6, 7, 8, 9]
    assert log.aborted_txns() == aborted == [(1, 0, 6, 2)]


def test_clean_with_transactions_spanning_segments(tmp_path, layout):
    """testCleanWithTransactionsSpanningSegments: only the first segment is cleanable; aborted data of
    transactions whose markers are in the active segment is removed from it."""
    log = kafka_log(tmp_path, layout, 1024)
    log.txn(1, 1, 2)
    log.txn(3, 2, 3)
    log.txn(2, 3, 4)
    log.roll()
    log.txn(2, 5, 6)
    log.txn(3, 6, 7)
    log.txn(1, 7, 8)
    log.abort(2)
    log.txn(3, 8, 9)
    log.commit(3)
    log.txn(1, 9, 10)
    log.abort(1)
    if layout == "kafka-layout":
        dirty = log.clean(0)                   # the second segment is the active one
        assert log.keys() == [2, 3, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10]
    else:                                      # every batch is a segment: clean what Kafka cleaned
        dirty = log.clean(0, offset_map=None, high_watermark=6)
        assert log.keys() == [2, 3, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10]
    log.roll()
    log.txn(2, 11)
    log.txn(1, 12)
    log.clean(dirty)
    assert log.keys() == [2, 3, 6, 7, 8, 9, 11, 12]


def test_commit_marker_removal(tmp_path, layout):
    """testCommitMarkerRemoval: a COMMIT stays while its transaction has records, is stamped once they
    are gone, and goes once its horizon has passed."""
    log = kafka_log(tmp_path, layout, 256)
    log.txn(1, 1)
    log.txn(1, 2, 3)
    log.commit(1)
    log.txn(1, 2)
    log.commit(1)
    log.roll()
    dirty = log.clean(0)
    assert log.keys() == [1, 3, 2]
    assert log.offsets() == [0, 2, 3, 4, 5]
    log.txn(1, 1, 3)
    log.commit(1)
    log.roll()
    dirty = log.clean(dirty)
    assert log.keys() == [2, 1, 3]
    assert log.offsets() == [3, 4, 5, 6, 7, 8]
    dirty = log.clean(dirty)                   # same time: the marker is not removed early
    assert log.offsets() == [3, 4, 5, 6, 7, 8]
    log.clean(dirty, FAR)
    assert log.keys() == [2, 1, 3]
    assert log.offsets() == [4, 5, 6, 7, 8]


def test_deleted_batches_with_no_messages_read(tmp_path, layout):
    """testDeletedBatchesWithNoMessagesRead: 100-byte read buffers and max.message.bytes 100."""
    log = kafka_log(tmp_path, layout, 1000, max_message_bytes=100)
    log.txn(1, 1)
    log.abort(1)
    log.txn(1, 2)
    log.txn(1, 2)
    log.commit(1)
    log.roll()
    log.clean(0, io_buffer_size=100)
    assert log.keys() == [2]
    assert log.offsets() == [1, 3, 4]
    log.clean(0, io_buffer_size=100)
    log.clean(0, NOW + RETENTION + 1, io_buffer_size=100)
    assert log.keys() == [2]
    assert log.offsets() == [3, 4]


def test_commit_marker_retention_with_empty_batch(tmp_path, layout):
    """testCommitMarkerRetentionWithEmptyBatch: producer 1's data (offsets 0-1) and its COMMIT (7) are
    segments — and, at segment.bytes 256, cleaning groups — apart."""
    log = kafka_log(tmp_path, layout, 256)
    log.txn(1, 2, 3)
    log.roll()
    log.txn(2, 2, 3)
    log.commit(2)
    log.roll()
    log.record(2, 2)
    log.record(3, 3)
    log.commit(1)
    log.roll()
    dirty = log.clean(0)
    if layout == "kafka-layout":
        assert [g.source_base_offsets for g in log.last_result.groups] == [[0, 2], [5]]
    assert log.keys() == [2, 3]
    assert log.offsets() == [4, 5, 6, 7]
    assert log.last_offsets() == [1, 3, 4, 5, 6, 7]
    dirty = log.clean(dirty)                   # the empty batches still hold the last sequences
    assert log.offsets() == [4, 5, 6, 7]
    assert log.last_offsets() == [1, 3, 4, 5, 6, 7]
    log.txn(2, 1)
    log.commit(2)
    log.roll()
    dirty = log.clean(dirty)
    assert log.keys() == [2, 3, 1]
    assert log.offsets() == [4, 5, 6, 7, 8, 9]
    assert log.last_offsets() == [1, 4, 5, 6, 7, 8, 9]
    log.two_pass_clean(dirty)
    assert log.keys() == [2, 3, 1]
    assert log.offsets() == [5, 6, 7, 8, 9]
    assert log.last_offsets() == [1, 5, 6, 7, 8, 9]


def test_clean_empty_control_batch(tmp_path, layout):
    """testCleanEmptyControlBatch: a COMMIT with no transaction is stamped, then emptied but kept
    (the producer's epoch), and an empty control batch cleans without error."""
    log = kafka_log(tmp_path, layout, 256)
    log.commit(1)
    log.record(2, 2)
    log.record(3, 3)
    log.roll()
    dirty = log.two_pass_clean(0)
    assert log.keys() == [2, 3]
    assert log.offsets() == [1, 2]
    assert log.last_offsets() == [0, 1, 2]
    log.clean(dirty, FAR)
    assert log.offsets() == [1, 2]
    assert log.last_offsets() == [0, 1, 2]


def test_committed_transaction_spanning_segments(tmp_path, layout):
    """testCommittedTransactionSpanningSegments (segment.bytes 128: two groups): both stay."""
    log = kafka_log(tmp_path, layout, 128)
    log.txn(1, 1)
    log.roll()
    log.commit(1)
    log.roll()
    log.two_pass_clean(0)
    assert len(log.last_result.groups) == 2
    assert log.offsets() == [0, 1]
    assert log.last_offsets() == [0, 1]


def test_aborted_transaction_spanning_segments(tmp_path, layout):
    """testAbortedTransactionSpanningSegments: the empty batch (the producer's last) and its ABORT in
    the next group both stay, round after round."""
    log = kafka_log(tmp_path, layout, 128)
    log.txn(1, 1)
    log.roll()
    log.abort(1)
    log.roll()
    log.clean(0)
    assert len(log.last_result.groups) == 2
    assert log.offsets() == [1]
    assert log.last_offsets() == [0, 1]
    log.clean(0, FAR)
    assert log.offsets() == [1]
    assert log.last_offsets() == [0, 1]


def test_abort_marker_removal(tmp_path, layout):
    """testAbortMarkerRemoval."""
    log = kafka_log(tmp_path, layout, 256)
    log.txn(1, 1)
    log.txn(1, 2, 3)
    log.abort(1)
    log.txn(1, 3)
    log.commit(1)
    log.roll()
    dirty = log.clean(0)
    assert log.keys() == [3]
    assert log.offsets() == [3, 4, 5]
    log.two_pass_clean(dirty)
    assert log.keys() == [3]
    assert log.offsets() == [4, 5]


def test_empty_batch_removal_with_sequence_reuse(tmp_path, layout):
    """testEmptyBatchRemovalWithSequenceReuse: two transactions that both start at sequence 0."""
    log = kafka_log(tmp_path, layout, 2048)
    log.txn(1, 1, seq=0)
    log.commit(1)
    log.txn(1, 2, seq=0)
    log.commit(1)
    log.record(1, 1)
    log.record(2, 1)
    log.roll()
    log.clean(0)
    assert log.offsets() == [1, 3, 4, 5]
    assert log.last_offsets() == [1, 2, 3, 4, 5]
    log.two_pass_clean(0)
    assert log.offsets() == [3, 4, 5]
    assert log.last_offsets() == [2, 3, 4, 5]


def test_abort_marker_retention_with_empty_batch(tmp_path, layout):
    """testAbortMarkerRetentionWithEmptyBatch, with its transaction index checks."""
    log = kafka_log(tmp_path, layout, 256)
    log.txn(1, 2, 3)
    log.abort(1)
    log.roll()
    indexed = [(1, 0, 2, 3)]
    assert log.aborted_txns() == indexed
    dirty = log.clean(0)
    assert log.aborted_txns() == indexed
    assert log.keys() == [] and log.offsets() == [2]
    assert log.last_offsets() == [1, 2]
    dirty = log.two_pass_clean(dirty)
    assert log.aborted_txns() == indexed
    assert log.offsets() == [2] and log.last_offsets() == [1, 2]
    log.txn(1, 1)              # a transaction left open: a broker cleans only below offset 3
    log.roll()
    dirty = log.clean(dirty)
    assert dirty == 3
    assert log.aborted_txns() == indexed
    assert log.keys() == [1]
    assert log.offsets() == [2, 3]
    assert log.last_offsets() == [2, 3]
    log.two_pass_clean(dirty)
    assert log.keys() == [1] and log.offsets() == [3]
    assert log.aborted_txns() == []
    # the ABORT is the last batch below this round's upper bound (the open transaction's first
    # offset) but not at the high watermark: Kafka 4.4 drops it (KAFKA-20452), as Kafka's test expects
    assert log.last_offsets() == [3]


def test_log_cleaner_retains_producer_last_sequence(tmp_path, layout):
    """testLogCleanerRetainsProducerLastSequence."""
    log = kafka_log(tmp_path, layout, 1024)
    log.record(0, 0)
    log.idempotent(1, 0, seq=0)
    log.idempotent(2, 0, seq=0)
    log.idempotent(3, 0, seq=0)
    log.idempotent(2, 1, seq=1)
    log.roll()
    log.clean(0)
    assert log.last_offsets() == [1, 3, 4]
    assert log.last_sequences() == {1: 0, 2: 1, 3: 0}
    assert log.keys() == [0, 1]
    assert log.offsets() == [3, 4]


def test_log_cleaner_retains_last_sequence_even_if_transaction_aborted(tmp_path, layout):
    """testLogCleanerRetainsLastSequenceEvenIfTransactionAborted."""
    log = kafka_log(tmp_path, layout, 1024)
    log.txn(1, 1)
    log.txn(1, 2, 3)
    log.abort(1)
    log.roll()
    log.clean(0)
    assert log.last_offsets() == [2, 3]
    assert log.last_sequences() == {1: 2}
    assert log.keys() == [] and log.offsets() == [3]
    log.txn(1, 1, 5)
    log.roll()
    log.clean(0)
    assert log.last_offsets() == [3, 5]
    assert log.last_sequences() == {1: 4}
    assert log.keys() == [1, 5]
    assert log.offsets() == [3, 4, 5]


def test_cleaning_with_keys_conflicting_with_txn_marker_keys(tmp_path, layout):
    """testCleaningWithKeysConflictingWithTxnMarkerKeys: a data record whose key is a COMMIT marker's
    key never supersedes the marker."""
    log = kafka_log(tmp_path, layout, 1024)
    log.txn(1, 1)
    log.commit(1)
    log.append(data(2, [(cr.control_key(cr.COMMIT), b"foo")], pid=2, txn=True))
    log.commit(2)
    log.roll()
    assert log.offsets() == [0, 1, 2, 3]
    log.clean(0)
    assert log.last_offsets() == [0, 1, 2, 3]
    assert log.offsets() == [0, 1, 2, 3]


def test_duplicate_check_after_cleaning(tmp_path, layout):
    """testDuplicateCheckAfterCleaning (what the cleaner writes; the broker's duplicate check on
    reload is not ours): each producer's last batch keeps its offsets and last sequence."""
    log = kafka_log(tmp_path, layout, 2048)
    log.idempotent(1, 1, 2, 3)
    log.idempotent(2, 3, 1, 4)
    log.idempotent(3, 1, 4)
    log.roll()
    log.clean(0)
    assert log.last_offsets() == [2, 5, 7]
    assert log.last_sequences() == {1: 2, 2: 2, 3: 1}
    assert log.keys() == [2, 3, 1, 4]
    assert log.offsets() == [1, 3, 6, 7]
    log.idempotent(4, 2)
    log.roll()
    log.clean(0)
    assert log.last_sequences() == {1: 2, 2: 2, 3: 1, 4: 0}
    assert log.last_offsets() == [2, 5, 7, 8]
    assert log.keys() == [3, 1, 4, 2]
    assert log.offsets() == [3, 6, 7, 8]


def test_multi_pass_segment_cleaning_with_aborted_transactions(tmp_path):
    """testMultiPassSegmentCleaningWithAbortedTransactions: a 4-slot map cleans the log in three
    rounds; aborted data goes in the first, empty transactions leave the index in the second, the
    ABORT markers go once delete.retention.ms has passed. Kafka's layout only: the point is a round
    that ends inside a segment and still recopies all of it (with a segment per batch, a round
    recopies only the segments below its end, so the intermediate logs differ)."""
    log = KafkaLog(tmp_path, 1024, delete_retention_ms=50_000)
    log.txn(1, 1, 2)           # [0, 1]
    log.txn(2, 2, 3)           # [2, 3]
    log.txn(1, 3, 4)           # [4, 5]
    log.commit(1)              # 6
    log.commit(2)              # 7
    log.txn(1, 2, 3)           # [8, 9]
    log.abort(1)               # 10
    log.txn(2, 4, 5)           # [11, 12]
    log.txn(1, 5, 6)           # [13, 14]
    log.commit(1)              # 15
    log.abort(2)               # 16
    log.txn(2, 6, 7)           # [17, 18]
    log.commit(2)              # 19
    log.roll()
    assert log.next_offset == 20
    expected = [(1, 8, 10, 11), (2, 11, 16, 17)]
    assert log.aborted_txns() == expected

    def one_pass(dirty, now):
        return log.clean(dirty, now, offset_map=kafka_capacity_map(log, dirty, slots=4))

    dirty = one_pass(0, NOW)
    assert dirty == 4
    assert log.base_offsets() == [0, 2, 4, 6, 7, 10, 13, 15, 16, 17, 19]
    assert log.offsets() == [0, 2, 3, 4, 5, 6, 7, 10, 13, 14, 15, 16, 17, 18, 19]
    assert log.aborted_txns() == expected
    dirty = one_pass(dirty, NOW)
    assert dirty == 14
    assert log.base_offsets() == [0, 2, 4, 6, 7, 10, 13, 15, 16, 17, 19]
    assert log.offsets() == [0, 2, 4, 5, 6, 7, 10, 13, 14, 15, 16, 17, 18, 19]
    assert log.aborted_txns() == []
    dirty = one_pass(dirty, NOW + 50_000)
    assert dirty == 20
    assert log.base_offsets() == [0, 2, 4, 6, 7, 13, 15, 17, 19]
    assert log.offsets() == [0, 2, 4, 5, 6, 7, 13, 15, 17, 18, 19]
    assert log.aborted_txns() == []


def test_partial_segment_clean(tmp_path, layout):
    """testPartialSegmentClean: a map of one key still makes progress, round after round."""
    log = kafka_log(tmp_path, layout, 1024)
    for key in (0, 1, 0, 1, 0):
        log.record(key, key)
    log.roll()

    def one_pass(dirty):
        return log.clean(dirty, offset_map=kafka_capacity_map(log, dirty, slots=2))

    one_pass(2)
    assert log.keys() == [1, 0, 1, 0] and log.offsets() == [1, 2, 3, 4]
    one_pass(3)
    assert log.keys() == [0, 1, 0] and log.offsets() == [2, 3, 4]
    one_pass(4)
    assert log.keys() == [1, 0] and log.offsets() == [3, 4]


# --- tombstones, unkeyed records, statistics, the round's last batch, offset gaps ------------------

def fill_until(log: KafkaLog, segments: int, key=lambda o: o, value=lambda o: o) -> None:
    """``while (log.numberOfSegments < n) log.appendAsLeader(record(key, value))``."""
    while len(list(log.d.glob("*.log"))) < segments:
        log.record(key(log.next_offset), value(log.next_offset))


def test_cleaning_with_deletes(tmp_path, layout):
    """testCleaningWithDeletes: every key deleted by a tombstone is gone after one round."""
    log = kafka_log(tmp_path, layout, 1024)
    fill_until(log, 2 if layout == "kafka-layout" else 12)
    leo = log.next_offset
    for key in range(0, leo, 2):
        log.record(key, None)
    fill_until(log, 4 if layout == "kafka-layout" else leo + leo // 2 + 3)
    log.roll()
    log.clean(0)
    assert not set(log.keys()) & set(range(0, leo, 2))
    assert log.last_result.counts.tombstones_kept == len(range(0, leo, 2))


def test_cleaning_with_unkeyed_messages(tmp_path, layout):
    """testCleaningWithUnkeyedMessages: records without a key all go, and are counted as invalid."""
    log = kafka_log(tmp_path, layout, 1024)
    fill_until(log, 2 if layout == "kafka-layout" else 12, key=lambda o: None)
    unkeyed = sum(1 for x, recs in log.batches() for r in recs if r.key is None)
    size_with_unkeyed = sum(p.stat().st_size for p in log.d.glob("*.log"))
    fill_until(log, 3 if layout == "kafka-layout" else 24)
    log.roll()
    expected_size = sum(p.stat().st_size for p in log.d.glob("*.log")) - size_with_unkeyed
    log.clean(0)
    assert sum(1 for x, recs in log.batches() for r in recs if r.key is None) == 0
    assert sum(p.stat().st_size for p in log.d.glob("*.log")) == expected_size
    assert log.last_result.counts.records_null_key == unkeyed


def test_log_cleaner_stats(tmp_path):
    """testLogCleanerStats: records and bytes read and written by a round from offset 2."""
    log = KafkaLog(tmp_path, 1024)
    for key in (0, 1, 0, 1, 0):
        log.record(key, key)
    log.roll()
    initial = sum(p.stat().st_size for p in log.d.glob("*.log"))
    assert log.clean(2) == 5
    c = log.last_result.counts
    assert (c.records_read, c.bytes_read, c.records_kept, c.records_null_key) == (5, initial, 2, 0)
    assert c.bytes_written == sum(p.stat().st_size for p in log.d.glob("*.log"))


@pytest.mark.parametrize("at_hw", [True, False])
def test_clean_segments_retaining_last_empty_batch(tmp_path, at_hw):
    """testCleanSegmentsRetainingLastEmptyBatch and testCleanSegmentsNotRetainingLastEmptyBatch
    (KAFKA-20452, Kafka 4.4): when every record of a round is superseded, the round's last batch
    stays, empty, where it ends at the high watermark (so the log keeps its last offset); with the
    high watermark beyond the cleaned range nothing stays."""
    log = KafkaLog(tmp_path, 1024)
    fill_until(log, 4)
    keys = log.keys()
    assert keys == list(range(log.next_offset))
    active = log.active_base
    superseded = ExactOffsetMap(end_offset=active, offsets={k(x): 2**62 for x in keys})
    log.clean(0, offset_map=superseded, config=log_config(segment_bytes=1 << 30),   # the three as one group
              high_watermark=active if at_hw else None)
    assert len(list(log.d.glob("*.log"))) == 2
    first = sorted(log.d.glob("*.log"))[0]
    batches = log.batches()
    kept = [(x.last_offset, recs) for x, recs in batches if x.base_offset < active]
    if at_hw:
        assert kept == [(active - 1, [])] and first.stat().st_size == 61
    else:
        assert kept == [] and first.stat().st_size == 0


def test_cleaning_beyond_missing_offsets(tmp_path):
    """testCleaningBeyondMissingOffsets: the round ends at the active segment across offset gaps."""
    log = KafkaLog(tmp_path / "a", 1024 * 1024)
    for i in range(10):
        log.record(i, i)
    log.roll(base=11)                            # offset 10 is missing
    log.append(data(11, [(k(1015), k(1015))]))
    assert log.clean(0) == 11
    log = KafkaLog(tmp_path / "b", 1024 * 1024)
    for i in range(10):
        log.record(i, i)
    log.roll(base=15)                            # [10, 14] missing
    for i in range(15, 25):
        log.record(i, i)
    log.roll(base=30)                            # [25, 29] missing
    log.append(data(30, [(k(1015), k(1015))]))
    assert log.clean(0) == 30


def distinct_values_by_segment(log: KafkaLog) -> List[int]:
    out = []
    for path in sorted(log.d.glob("*.log")):
        mr, values = MemoryRecords(path.read_bytes()), set()
        while mr.has_next():
            x = mr.next_batch()
            if x is None:
                break
            values.update(r.value for r in x)
        out.append(len(values))
    return out


def test_cleaning_with_uncleanable_section(tmp_path):
    """testCleaningWithUncleanableSection: only the segments below the first uncleanable offset (a
    high watermark inside the third segment) are cleaned; the others keep every value."""
    log = KafkaLog(tmp_path, 1024)
    n, cleanable, total = 10, 2, 7
    while len(list(log.d.glob("*.log"))) <= cleanable:
        log.record(log.next_offset % n, log.next_offset)
    first_uncleanable = log.next_offset + 1
    while len(list(log.d.glob("*.log"))) < total - 1:
        log.record(log.next_offset % n, log.next_offset)
    before = distinct_values_by_segment(log)
    assert all(v > n for v in before[:-1]), "each segment must hold duplicates"
    write_offset_checkpoint(log.root / REPLICATION_OFFSET_CHECKPOINT, {(TOPIC, 0): first_uncleanable})
    log.clean(0)
    after = distinct_values_by_segment(log)
    assert all(after[i] < before[i] for i in range(cleanable))
    assert after[cleanable:] == before[cleanable:]


def test_build_offset_map(tmp_path):
    """testBuildOffsetMap: our map over [start, end) for ranges that end at segment bases."""
    log = KafkaLog(tmp_path, 1024)
    for i in range(500):
        log.record(i, i)
    bases = sorted(int(p.name.split(".")[0]) for p in log.d.glob("*.log"))
    for start, end in ((0, bases[1]), (bases[1], bases[3]), (bases[3], bases[-1])):
        write_offset_checkpoint(log.root / CLEANER_OFFSET_CHECKPOINT, {(TOPIC, 0): start})
        write_offset_checkpoint(log.root / REPLICATION_OFFSET_CHECKPOINT, {(TOPIC, 0): end})
        m = build_partition_offset_map(plan_partition(log.d, config=log.config, now_ms=NOW))
        assert m.end_offset == end
        assert len(m) == end - start
        assert all(m.latest_offset(k(i)) == i for i in range(start, end))
        assert m.latest_offset(k(start - 1)) is None and m.latest_offset(k(end)) is None


# --- segment grouping (Cleaner.groupSegmentsBySize) ------------------------------------------------

INT_MAX = 2**31 - 1


def _order(groups) -> List[int]:
    flat = [i for g in groups for i in g]
    assert flat == sorted(flat), "segments must stay in order"
    return flat


def test_segment_grouping(tmp_path):
    """testSegmentGrouping over a real log of ten segments (segment.bytes 300; index.interval.bytes 1:
    an offset-index entry per batch, and one time-index entry, all records sharing MockTime's
    timestamp): very large limits → one group; limits of 1 → singletons; limits of three segments' log
    or index bytes + 1 → groups of three."""
    log = KafkaLog(tmp_path, 300)
    while len(list(log.d.glob("*.log"))) < 10:
        log.append(data(log.next_offset, [(b"hello", b"hello")]))
    paths = sorted(log.d.glob("*.log"))
    bases = [int(p.stem) for p in paths] + [log.next_offset]
    segs = []
    for i, p in enumerate(paths):
        n = sum(1 for x, _r in log.batches() if bases[i] <= x.base_offset < bases[i + 1])
        segs.append(_groupable(bases[i], p.stat().st_size, 8 * n, 12))   # one time entry: one timestamp
    leo = log.next_offset

    def group(max_size, max_index):
        g = group_segments_by_size(segs, max_size=max_size, max_index_size=max_index, first_uncleanable_offset=leo)
        assert len(_order(g)) == len(segs)
        return g

    assert [len(g) for g in group(2**31 - 1, 2**31 - 1)] == [len(segs)]
    assert all(len(g) == 1 for g in group(1, 2**31 - 1)) and len(group(1, 2**31 - 1)) == len(segs)
    assert all(len(g) == 1 for g in group(2**31 - 1, 1))
    log_size = sum(s.size for s in segs[:3]) + 1
    assert all(len(g) == 3 for g in group(log_size, 2**31 - 1)[:-1])
    index_size = sum(s.offset_index_bytes for s in segs[:3]) + 1
    assert all(len(g) == 3 for g in group(2**31 - 1, index_size)[:-1])


def test_segment_grouping_with_sparse_offsets():
    """testSegmentGroupingWithSparseOffsets: a group never spans more than Int.MaxValue offsets."""
    seg = lambda base: _groupable(base, 100, 8, 12)  # noqa: E731
    segs = [seg(0), seg(INT_MAX - 1)]
    assert group_segments_by_size(segs, max_size=2**31 - 1, max_index_size=2**31 - 1,
                                  first_uncleanable_offset=INT_MAX + 1) == [[0, 1]]
    assert group_segments_by_size(segs, max_size=2**31 - 1, max_index_size=2**31 - 1,
                                  first_uncleanable_offset=INT_MAX + 2) == [[0], [1]]
    segs += [seg(INT_MAX + 5), seg(INT_MAX + 9)]
    groups = group_segments_by_size(segs, max_size=2**31 - 1, max_index_size=2**31 - 1,
                                    first_uncleanable_offset=INT_MAX + 12)
    assert groups == [[0], [1, 2, 3]]


def test_segment_grouping_with_sparse_offsets_and_empty_segments():
    """testSegmentGroupingWithSparseOffsetsAndEmptySegments: non-empty segments each Int.MaxValue + 1
    offsets apart never group; once cleaned to empty they do (an empty segment skips the check)."""
    step = INT_MAX + 1
    segs = [_groupable(i * step, 140, 0, 0) for i in range(3)]
    big = dict(max_size=2**31 - 1, max_index_size=2**31 - 1, first_uncleanable_offset=3 * step + 1)
    assert group_segments_by_size(segs, **big) == [[0], [1], [2]]
    emptied = [_groupable(0, 0, 0, 0), _groupable(step, 0, 0, 0), segs[2]]
    assert group_segments_by_size(emptied, **big) == [[0, 1], [2]]


def test_segment_grouping_following_load_of_zero_index():
    """testSegmentGroupingFollowingLoadOfZeroIndex: the estimate of a segment's last offset comes from
    the next base (or the first uncleanable offset), not from an index that may be empty."""
    segs = [_groupable(0, 140, 0, 0), _groupable(INT_MAX // 2, 140, 0, 0)]
    groups = group_segments_by_size(segs, max_size=2**31 - 1, max_index_size=2**31 - 1,
                                    first_uncleanable_offset=INT_MAX + 2)
    assert groups == [[0], [1]]
