"""Producer state as the cleaner sees it (kafkalog.cleaner.producer_state, cleaner.plan_partition),
checked against what Kafka does:

* ``ProducerAppendInfo.append(batch)``: a control batch WITHOUT records ("An empty control batch
  means the entire transaction has been cleaned from the log, so no need to append") changes
  nothing: not the epoch, not the last timestamp, not the open transaction. The producer's entry is
  still created (``ProducerStateManager.prepareUpdate`` starts from ``ProducerStateEntry.empty``:
  epoch −1, timestamp −1, and ``update`` stores it). An empty DATA batch is appended like any other.
* producer state load (``UnifiedLog.rebuildProducerState`` → ``ProducerStateManager.truncateAndReload``
  / ``loadFromSnapshot``, after ``removeStraySnapshots``): the NEWEST snapshot with
  logStartOffset < offset <= logEndOffset, its expired entries dropped, then the batches from that
  offset (or from logStartOffset when there is none) replayed; the first unstable offset is
  clamped to the log start offset (``UnifiedLog.maybeIncrementFirstUnstableOffset``).
"""
from __future__ import annotations

from pathlib import Path

from kafkalog.cleaner import plan_partition
from kafkalog.cleaner import producer_state as ps
from kafkalog.log.producer_snapshot import ProducerSnapshot, ProducerSnapshotEntry, write_producer_snapshot

from cleaner_model import (B, DAY, T0, clean, data, flatten, log_config, marker, read_partition, reference_round,
                           write_partition)
from kafkalog.format import control_record as cr


def empty_marker(offset: int, pid: int, epoch: int) -> B:
    """A control batch an earlier cleaning emptied (recordsCount 0; maxTimestamp T0 + offset)."""
    return B(offset, offset, [], pid, epoch, True, True)


def plan(d: Path, now: int):
    return plan_partition(d, config=log_config(segment_bytes=1 << 30), now_ms=now)


def snapshot_entry(pid, epoch, last_offset, ts, txn_first=-1) -> ProducerSnapshotEntry:
    return ProducerSnapshotEntry(pid, epoch, 0, last_offset, 0, ts, 0, txn_first)


def bases(d: Path):
    return [(b.base, len(b.records)) for b in flatten(read_partition(d))]


# --- suspicion 1: empty control batches in the replay -----------------------------------------

def _cols(*rows):
    names = ("producerId", "producerEpoch", "baseOffset", "lastOffset", "maxTimestamp", "isTransactional",
             "isControl", "recordsCount")
    return {n: [r[i] for r in rows] for i, n in enumerate(names)}


def test_replay_ignores_an_empty_control_batch():
    state = ps.replay({}, _cols((5, 0, 0, 0, T0, True, False, 1),             # txn data
                                (5, 1, 1, 1, T0 + 50, True, True, 0)))        # emptied marker, newer epoch
    e = state[5]
    assert (e.epoch, e.last_data_offset, e.last_timestamp, e.current_txn_first_offset) == (0, 0, T0, 0)
    assert ps.first_unstable_offset(state) == 0
    # a producer seen only through an empty control batch: ProducerStateEntry.empty
    state = ps.replay({}, _cols((9, 3, 7, 7, T0, True, True, 0)))
    assert (state[9].epoch, state[9].last_data_offset, state[9].last_timestamp) == (-1, -1, -1)
    # a non-empty marker and an EMPTY data batch are appended as usual
    state = ps.replay({}, _cols((5, 0, 0, 0, T0, True, False, 1), (5, 1, 1, 1, T0 + 5, True, True, 1),
                                (5, 1, 2, 4, T0 + 9, False, False, 0)))
    assert (state[5].epoch, state[5].last_data_offset, state[5].last_timestamp,
            state[5].current_txn_first_offset) == (1, 4, T0 + 9, -1)


def test_empty_control_batch_does_not_keep_an_expired_producer_active(tmp_path):
    segs = [[data(0, [(b"a", b"1")], pid=5), data(1, [(b"a", b"2")]), empty_marker(2, 5, 0), data(3, [(b"b", b"1")])],
            [data(4, [(b"x", b"1")])]]
    d = write_partition(tmp_path, segs)
    now = T0 + DAY + 1           # producer 5's last data (T0) is a day old; the emptied marker's is not
    assert 5 not in plan(d, now).active_producers
    res = clean(d, now)
    assert res.cleaned, res
    assert bases(d) == [(1, 1), (3, 1), (4, 1)]      # batch 0 superseded and its producer expired
    expected, _ = reference_round(segs, first_dirty=0, now=now, delete_retention_ms=DAY, active_last_data={})
    assert read_partition(d) == expected


def test_empty_control_batch_with_a_newer_epoch_leaves_the_last_data_batch(tmp_path):
    segs = [[data(0, [(b"a", b"1")], pid=5), data(1, [(b"a", b"2")]), empty_marker(2, 5, 1), data(3, [(b"b", b"1")])],
            [data(4, [(b"x", b"1")])]]
    d = write_partition(tmp_path, segs)
    now = T0 + 1000
    assert plan(d, now).active_producers[5] == ps.LastRecord(0, 0)
    res = clean(d, now)
    assert res.cleaned, res
    # Kafka keeps producer 5's last data batch (empty) and drops the emptied marker
    assert bases(d) == [(0, 0), (1, 1), (3, 1), (4, 1)]
    expected, _ = reference_round(segs, first_dirty=0, now=now, delete_retention_ms=DAY, active_last_data={5: 0})
    assert read_partition(d) == expected


def test_empty_control_batch_of_an_unknown_producer_is_not_kept(tmp_path):
    segs = [[data(0, [(b"a", b"1")]), empty_marker(1, 9, 0), data(2, [(b"b", b"1")])], [data(3, [(b"x", b"1")])]]
    d = write_partition(tmp_path, segs)
    now = T0 + 1000
    assert plan(d, now).active_producers.get(9) in (None, ps.LastRecord(None, -1))
    assert clean(d, now).cleaned
    assert bases(d) == [(0, 1), (2, 1), (3, 1)]


# --- suspicion 2: which snapshot seeds the state ------------------------------------------------

def test_newest_snapshot_after_log_start_seeds_the_state(tmp_path):
    """Segment 0..99 deleted (log start 100); producer 7's transaction, open since offset 50, is
    known only from 200.snapshot. Kafka: first unstable offset 50, clamped to 100 → nothing past
    100 is cleanable."""
    segs = [[data(100, [(b"a", b"1")]), data(101, [(b"a", b"2")])], [data(200, [(b"a", b"3")])],
            [data(300, [(b"x", b"1")])]]
    d = write_partition(tmp_path, segs)
    write_producer_snapshot(d, ProducerSnapshot(200, [snapshot_entry(7, 0, 50, T0, txn_first=50)]), sync=False)
    p = plan(d, T0 + 1000)
    assert p.first_unstable_offset == 100
    assert p.upper_bound_offset == 100 and not p.offsets.cleanable
    res = clean(d, T0 + 1000, force=True)
    assert not res.cleaned and read_partition(d) == segs


def test_snapshot_at_log_start_or_past_log_end_is_not_loaded(tmp_path):
    segs = [[data(100, [(b"a", b"1")])], [data(200, [(b"x", b"1")])]]
    d = write_partition(tmp_path, segs)
    write_producer_snapshot(d, ProducerSnapshot(100, [snapshot_entry(7, 0, 50, T0, txn_first=50)]), sync=False)
    write_producer_snapshot(d, ProducerSnapshot(500, [snapshot_entry(8, 0, 450, T0, txn_first=450)]), sync=False)
    p = plan(d, T0 + 1000)          # truncateAndReload deletes both: offset <= logStart, offset > LEO
    assert p.first_unstable_offset is None and p.active_producers == {}


def test_newest_valid_snapshot_wins_and_expired_entries_are_dropped(tmp_path):
    """200.snapshot: producer 7 bumped to epoch 1 by a marker that a later cleaning emptied (epoch 1,
    no data offset); producer 8 long expired. Replaying the log alone would say epoch 0 / last data
    150. A corrupt newer snapshot is skipped (CorruptSnapshotException → next older)."""
    segs = [[data(100, [(b"a", b"1")])],
            [data(150, [(b"a", b"2")], pid=7), data(151, [(b"a", b"3")]), empty_marker(152, 7, 1),
             data(153, [(b"b", b"1")])],
            [data(200, [(b"x", b"1")]), marker(201, 8, cr.COMMIT)], [data(300, [(b"y", b"1")])]]
    segs[2][1].epoch = 2
    d = write_partition(tmp_path, segs)
    write_producer_snapshot(d, ProducerSnapshot(200, [snapshot_entry(7, 1, -1, T0 + 152),
                                                      snapshot_entry(8, 0, 90, T0 - 2 * DAY)]), sync=False)
    (d / "00000000000000000300.snapshot").write_bytes(b"\x00\x01garbage")
    now = T0 + 1000
    p = plan(d, now)
    # 7 from the snapshot; 8 expired at load, then re-created by the COMMIT marker at 201 (no data offset)
    assert p.active_producers == {7: ps.LastRecord(None, 1), 8: ps.LastRecord(None, 2)}
    res = clean(d, now)
    assert res.cleaned, res
    expected, _ = reference_round(segs, first_dirty=100, now=now, delete_retention_ms=DAY, active_last_data={},
                                  active_no_data={7: 1, 8: 2})
    assert read_partition(d) == expected
    got = [(b.base, len(b.records)) for b in flatten(read_partition(d))]
    assert (152, 0) in got and 150 not in [b for b, _n in got]
