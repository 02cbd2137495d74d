"""Kafka's log-loading scenarios (``LogLoaderTest``; ``LogCleanerTest.testRecoveryAfterCrash`` is in
test_cleaner_crash) ported onto ours: our code, their cases.

Kafka's tests write a log through ``UnifiedLog``, close it, damage or leave files behind and reopen it
(``createLog(..., lastShutdownClean = false)`` runs ``LogLoader.load``). Here the log is written with
test_kafka_cleaner_parity's ``KafkaLog`` (or as raw bytes), the damage is done to the files the same
way, and "reopen" is what we offer in its place: ``kafkalog recover`` (``recover_log_dirs``) for
the file clean-up of ``LogLoader.load`` (leftover ``.deleted``/``.cleaned``/``.swap`` files, orphaned
index files) and ``reindex`` (``reindex_partition``) for recovery's index rebuild and corrupt-tail
cut. The steps ``recover`` leaves to the broker (segment recovery after an unclean shutdown, log end
below log start, producer state) are listed in kafkalog/log/recover.py's docstring; their
Kafka tests (testLogEndLessThanStartAfterReopen, testCleanShutdownFile, testLogRecoversForLeaderEpoch,
...) are not ported.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import List

import pytest
from kafka.record.memory_records import MemoryRecords

from kafkalog.cleaner import recover_log_dirs
from kafkalog.tools.cli import main
from kafkalog.format import record_batch as rb
from kafkalog.format.file_records import recovery_valid_bytes
from kafkalog.index.transaction_index import read_transaction_index
from kafkalog.fs.names import format_segment_file_name
from kafkalog.log.reindex import reindex_partition

from cleaner_model import data as data_batch
from test_kafka_cleaner_parity import KafkaLog

T0 = 1_700_000_000_000


def records_in(d: Path) -> List[tuple]:
    """(offset, key, value) of every record of every ``.log``, in file-name order (kafka-python)."""
    out = []
    for log in sorted(d.glob("*.log")):
        mr = MemoryRecords(log.read_bytes())
        while mr.has_next():
            batch = mr.next_batch()
            if batch is None:
                break
            out += [(r.offset, r.key, r.value) for r in batch]
    return out


def one_record_batch(offset: int, key: bytes, value: bytes) -> bytes:
    """``MemoryRecords.withRecords(offset, NONE, new SimpleRecord(value, key))`` (a follower's append)."""
    return rb.encode_batch([rb.V2Record(offset, T0, key, value)], base_offset=offset, last_offset_delta=0)


def names(d: Path) -> set:
    return {p.name for p in d.iterdir()}


# --- leftover and orphaned files (LogLoader.load: the clean-up passes) -----------------------------

def test_bogus_index_segments_are_removed(tmp_path, capsys):
    """testBogusIndexSegmentsAreRemoved: index files at offset 5, where there is no log, are deleted
    (with the loader's message); the first segment's indexes stay."""
    log = KafkaLog(tmp_path, 1 << 20)
    for i in range(3):
        log.record(i, i)
    log.roll()
    d = log.d
    for suffix in ("index", "timeindex", "txnindex"):
        (d / format_segment_file_name(5, suffix)).touch()
    kept = {format_segment_file_name(0, s) for s in ("log", "index", "timeindex")}
    assert main(["recover", "--log-dirs", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert kept <= names(d)
    assert not {format_segment_file_name(5, s) for s in ("index", "timeindex", "txnindex")} & names(d)
    assert f"Found an orphaned index file {d / format_segment_file_name(5, 'index')}, with no corresponding log file" \
        in out
    # a second run has nothing left to do
    assert main(["recover", "--log-dirs", str(tmp_path)]) == 0
    assert "nothing to recover" in capsys.readouterr().out


def test_orphaned_index_check_runs_after_the_swap_is_completed(tmp_path):
    """The loader's order: a ``.index.swap`` whose ``.log.swap`` completes is renamed first, so its
    index is not an orphan; an index past the swap's range without its log is one."""
    log = KafkaLog(tmp_path, 1 << 20)
    for i in range(4):
        log.record(i, i)
    log.roll()
    d = log.d
    base = format_segment_file_name(0, "log")
    for suffix in ("log", "index", "timeindex"):
        src = d / format_segment_file_name(0, suffix)
        (d / (src.name + ".swap")).write_bytes(src.read_bytes())
    (d / format_segment_file_name(100, "timeindex")).touch()    # past the swap's range, with no .log
    [report] = recover_log_dirs([tmp_path])
    assert report.error is None
    assert base in names(d) and format_segment_file_name(0, "index") in names(d)
    assert not any(n.endswith(".swap") for n in names(d))
    assert report.orphaned_indexes == [format_segment_file_name(100, "timeindex")]


def test_index_file_without_an_offset_in_its_name_is_left_alone(tmp_path):
    """A file such as ``foo.index`` makes Kafka's loader fail (offsetFromFile); we report it."""
    log = KafkaLog(tmp_path, 1 << 20)
    log.record(0, 0)
    log.roll()
    (log.d / "foo.index").touch()
    [report] = recover_log_dirs([tmp_path])
    assert report.unreadable_names == ["foo.index"] and (log.d / "foo.index").exists()
    assert "left alone" in report.describe()


def test_open_deletes_obsolete_files(tmp_path):
    """testOpenDeletesObsoleteFiles: segments retention renamed to ``.deleted`` are gone after the
    clean-up, the live segment stays."""
    log = KafkaLog(tmp_path, 200)
    for i in range(12):
        log.record(i, i)
    log.roll()
    d = log.d
    live = sorted(d.glob("*.log"))
    for seg in live[:-1]:                                    # deleteOldSegments: rename every file
        for p in d.glob(seg.stem + ".*"):
            os.replace(p, p.with_name(p.name + ".deleted"))
    assert len(list(d.glob("*.deleted"))) >= 3
    [report] = recover_log_dirs([tmp_path])
    assert not list(d.glob("*.deleted"))
    assert sorted(d.glob("*.log")) == live[-1:]
    assert report.error is None


# --- an interrupted segment split (testRecoveryAfterCrashDuringSplitPhase1-5) ---------------------

OVERFLOW = 2**31 + 5


def overflowed_log(tmp_path) -> tuple:
    """A segment at 0 whose offsets overflow 32 bits relative to its base (Kafka's
    ``createLogWithOffsetOverflow``), then an active segment; and the two segments a split makes
    of it (base 0: offsets 0-1; base OVERFLOW: offsets OVERFLOW, OVERFLOW+1)."""
    d = tmp_path / "t-0"
    d.mkdir()
    old = [one_record_batch(0, b"k0", b"v0"), one_record_batch(1, b"k1", b"v1"),
           one_record_batch(OVERFLOW, b"k2", b"v2"), one_record_batch(OVERFLOW + 1, b"k3", b"v3")]
    (d / format_segment_file_name(0, "log")).write_bytes(b"".join(old))
    (d / format_segment_file_name(OVERFLOW + 2, "log")).write_bytes(one_record_batch(OVERFLOW + 2, b"k4", b"v4"))
    split = {0: b"".join(old[:2]), OVERFLOW: b"".join(old[2:])}
    return d, split, records_in(d)


def _write(d: Path, base: int, data: bytes, suffix: str = "") -> None:
    (d / (format_segment_file_name(base, "log") + suffix)).write_bytes(data)


def test_recovery_after_crash_during_split_phase1(tmp_path):
    """Phase 1: every new segment still ``.cleaned`` → the split is dropped, the old segment stays."""
    d, split, expected = overflowed_log(tmp_path)
    for base, data in split.items():
        _write(d, base, b"", ".cleaned")
    recover_log_dirs([tmp_path])
    assert records_in(d) == expected and not list(d.glob("*.cleaned"))
    assert len(list(d.glob("*.log"))) == 2


def test_recovery_after_crash_during_split_phase2(tmp_path):
    """Phase 2: the last new segment ``.swap``, the others ``.cleaned`` → a ``.swap`` at or above the
    smallest ``.cleaned`` offset belongs to the incomplete split and is deleted too."""
    d, split, expected = overflowed_log(tmp_path)
    _write(d, 0, b"", ".cleaned")
    _write(d, OVERFLOW, split[OVERFLOW], ".swap")
    [report] = recover_log_dirs([tmp_path])
    assert records_in(d) == expected
    assert not [n for n in names(d) if n.endswith((".swap", ".cleaned"))]
    assert report.swap_range is None


@pytest.mark.parametrize("old_segment", ["present", "already-deleted"])
def test_recovery_after_crash_during_split_phase3_and_4(tmp_path, old_segment):
    """Phase 3: every new segment ``.swap``, the old one still there → the split completes: the old
    segment (in the swaps' offset range) is deleted, the swaps renamed. Phase 4: the old segment
    was already deleted → the swaps are renamed."""
    d, split, expected = overflowed_log(tmp_path)
    for base, data in split.items():
        _write(d, base, data, ".swap")
    if old_segment == "already-deleted":
        (d / format_segment_file_name(0, "log")).unlink()
    [report] = recover_log_dirs([tmp_path])
    assert records_in(d) == expected
    assert sorted(int(p.stem) for p in d.glob("*.log")) == [0, OVERFLOW, OVERFLOW + 2]
    assert report.swap_range == (0, OVERFLOW + 2)


def test_recovery_after_crash_during_split_phase5(tmp_path):
    """Phase 5: the first new segment already renamed over the old one's name, the last still
    ``.swap`` → the swap completes."""
    d, split, expected = overflowed_log(tmp_path)
    _write(d, 0, split[0])
    _write(d, OVERFLOW, split[OVERFLOW], ".swap")
    recover_log_dirs([tmp_path])
    assert records_in(d) == expected
    assert sorted(int(p.stem) for p in d.glob("*.log")) == [0, OVERFLOW, OVERFLOW + 2]


# --- recovery's rebuilds: corrupt tails, transaction indexes -----------------------------------------

def test_corrupt_log(tmp_path):
    """testCorruptLog: nonsense appended to the active segment's ``.log`` (and ``.index``): recovery
    keeps exactly the records written before (recovery_valid_bytes; reindex --truncate-corrupt-tail)."""
    rng = __import__("random").Random(14)
    for round_ in range(5):
        log = KafkaLog(tmp_path / str(round_), 1000)
        n = 50 + rng.randrange(50)
        for i in range(n):
            log.record(i, i)
        expected = records_in(log.d)
        active = sorted(log.d.glob("*.log"))[-1]
        size = active.stat().st_size
        with open(active, "ab") as f:
            f.write(bytes(rng.randrange(256) for _ in range(rng.randrange(1024) + 1)))
        with open(active.with_suffix(".index"), "ab") as f:
            f.write(bytes(rng.randrange(256) for _ in range(rng.randrange(1024) + 1)))
        assert recovery_valid_bytes(active.read_bytes())[0] == size
        reindex_partition(log.d, log_dir=log.root, include_active=True, verify_only=False, truncate_tail=True)
        assert active.stat().st_size == size
        assert records_in(log.d) == expected and len(expected) == n


def _full_transaction_log(tmp_path) -> KafkaLog:
    """testFullTransactionIndexRecovery's log: four producers' transactions mixed with plain data
    over several segments (segment.bytes 640)."""
    log = KafkaLog(tmp_path, 128 * 5)

    def txn(pid, n):
        log.txn(pid, *range(n))

    def plain(n):
        log.append(data_batch(log.next_offset, [(b"%d" % i, b"%d" % i) for i in range(n)]))

    txn(1, 5); plain(3); txn(2, 2); txn(1, 4); txn(3, 3); plain(2); txn(1, 10)    # noqa: E702
    log.abort(1)                                                                     # 29
    txn(2, 6); txn(4, 3); plain(10); txn(3, 9)                                       # noqa: E702
    log.commit(3)                                                                    # 58
    txn(4, 8); txn(2, 7)                                                             # noqa: E702
    log.abort(2)                                                                     # 74
    plain(10); txn(4, 4)                                                             # noqa: E702
    log.commit(4)                                                                    # 89
    log.roll()
    assert log.next_offset == 90
    return log


def all_aborted(d: Path):
    return [(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
            for p in sorted(d.glob("*.txnindex")) for t in read_transaction_index(p).entries]


EXPECTED_ABORTED = [(1, 0, 29, 8), (2, 8, 74, 36)]


def test_full_transaction_index_recovery(tmp_path):
    """testFullTransactionIndexRecovery: every ``.index`` and ``.txnindex`` deleted; the rebuild
    finds both aborted transactions with Kafka's last stable offsets."""
    log = _full_transaction_log(tmp_path)
    assert len(list(log.d.glob("*.log"))) > 3
    assert all_aborted(log.d) == EXPECTED_ABORTED
    for p in list(log.d.glob("*.index")) + list(log.d.glob("*.txnindex")):
        p.unlink()
    reindex_partition(log.d, log_dir=log.root, verify_only=False)
    assert all_aborted(log.d) == EXPECTED_ABORTED


@pytest.mark.parametrize("snapshots", ["kept", "deleted"])
def test_recover_only_last_segment(tmp_path, snapshots):
    """testRecoverOnlyLastSegment / testRecoverLastSegmentWithNoSnapshots: only the last closed
    segment's ``.index`` and ``.txnindex`` are gone (with or without producer snapshots, i.e.
    transactions open at its start known from the snapshot or from the earlier segments)."""
    log = _full_transaction_log(tmp_path)
    if snapshots == "deleted":
        for p in log.d.glob("*.snapshot"):
            p.unlink()
    last_closed = sorted(log.d.glob("*.log"))[-2]
    for suffix in (".index", ".txnindex"):
        last_closed.with_suffix(suffix).unlink(missing_ok=True)
    reindex_partition(log.d, log_dir=log.root, verify_only=False)
    assert all_aborted(log.d) == EXPECTED_ABORTED


def test_reindex_names_kafkas_split_for_a_segment_whose_offsets_overflow(tmp_path):
    """testRecoveryOfSegmentWithOffsetOverflow's segment given to ``reindex``: Kafka's recovery splits
    it (retryOnOffsetOverflow → splitOverflowedSegment); we do not split, leave its (missing)
    indexes alone, and say so — not that recovery would empty it."""
    d, _split, expected = overflowed_log(tmp_path)
    out = reindex_partition(d, log_dir=tmp_path, verify_only=False)
    rows = [r for r in out.rows if r["base_offset"] == 0]
    assert rows and all(r["action"] == "not rebuilt" for r in rows if r["kind"] != "txnindex")
    details = {r["action_detail"] for r in rows if r["kind"] != "txnindex"}
    assert all("splitOverflowedSegment" in x and "empty the segment" not in x for x in details), details
    assert not (d / format_segment_file_name(0, "index")).exists()
    assert records_in(d) == expected
