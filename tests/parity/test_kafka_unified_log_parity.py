"""Kafka's ``UnifiedLogTest`` retention and ListOffsets scenarios ported onto ours: our code, their cases.

Mapping: Kafka's ``createLog(logDir, createLogConfig(segmentBytes = set.sizeInBytes * 5, ...))`` and 15
``log.appendAsLeader(set)`` calls are a partition folder written batch by batch, rolled at
segment.bytes (test_kafka_cleaner_parity's ``KafkaLog``; each record its own batch with timestamp
T0 + offset, the high watermark at the log end); ``mockTime.milliseconds`` is the ``now_ms`` given
to ``retain_partition``; ``log.deleteOldSegments()`` is ``retain_partition(..., execute=True)`` with
``file.delete.delay.ms`` 0 (the deleted segments' files are gone at once; Kafka's scheduler removes
them later); ``log.maybeIncrementLogStartOffset(n)`` is ``log-start-offset-checkpoint``;
``log.fetchOffsetByTimestamp(t)`` is ``lookup_offsets(folder, [t])`` and the leader-epoch cache is
``leader-epoch-checkpoint`` (``maybeAssignEpochStartOffset(e, o)`` appends the entry). The test logs
of retention and ListOffsets elsewhere (test_retention, test_lookup) check the rules one by one; these
are Kafka's own end-to-end cases.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kafkalog.checkpoint.leader_epoch import write_leader_epoch_checkpoint
from kafkalog.checkpoint.offset import write_offset_checkpoint
from kafkalog.fs.names import LEADER_EPOCH_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, format_segment_file_name
from kafkalog.config import configs_from_mappings
from kafkalog.format import record_batch as rb
from kafkalog.index import build_indexes
from kafkalog.lookup.partition_log import lookup_offsets
from kafkalog.lookup.rules import (EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP, LATEST_TIMESTAMP,
                                   MAX_TIMESTAMP, UNKNOWN_TIMESTAMP)
from kafkalog.retention.run import retain_partition

from cleaner_model import TOPIC, data, encode
from test_kafka_cleaner_parity import KafkaLog

T0 = 1_700_000_000_000


def one_record_log(tmp_path, *, records: int = 15) -> KafkaLog:
    """15 single-record batches, five to a segment (segment.bytes = 5 batches): three segments, the
    third the active one."""
    size = len(encode(data(0, [(b"test", b"test")])))
    log = KafkaLog(tmp_path, size * 5)
    for _ in range(records):
        log.append(data(log.next_offset, [(b"test", b"test")]))
    return log


def delete_old_segments(log: KafkaLog, now: int, **topic) -> dict:
    configs = configs_from_mappings({}, {TOPIC: {k.replace("_", "."): str(v) for k, v in topic.items()}})
    out = retain_partition(log.d, log_dir=log.root, configs=configs, now_ms=now, execute=True, delete_delay_ms=0)
    assert out["status"] in ("applied", "planned", "skipped"), out
    return out


def segments(log: KafkaLog) -> int:
    return len(list(log.d.glob("*.log")))


SET = len(encode(data(0, [(b"test", b"test")])))


def test_should_delete_size_based_segments(tmp_path):
    """shouldDeleteSizeBasedSegments: retention.bytes = 10 batches of 15 → 2 segments left."""
    log = one_record_log(tmp_path)
    assert segments(log) == 3
    delete_old_segments(log, T0, retention_bytes=SET * 10, cleanup_policy="delete")
    assert segments(log) == 2


def test_should_not_delete_size_based_segments_when_under_retention_size(tmp_path):
    """shouldNotDeleteSizeBasedSegmentsWhenUnderRetentionSize."""
    log = one_record_log(tmp_path)
    delete_old_segments(log, T0, retention_bytes=SET * 15, cleanup_policy="delete")
    assert segments(log) == 3


def test_should_delete_time_based_segments_ready_to_be_deleted(tmp_path):
    """shouldDeleteTimeBasedSegmentsReadyToBeDeleted: every segment is older than retention.ms, the
    active one included → roll, then delete all: one (empty) segment at the log end."""
    log = one_record_log(tmp_path)
    out = delete_old_segments(log, T0 + 10_000_000, retention_ms=10_000, cleanup_policy="delete")
    assert segments(log) == 1
    assert out["roll_at"] == 15 and out["new_log_start_offset"] == 15
    assert (log.d / format_segment_file_name(15, "log")).stat().st_size == 0


def test_should_not_delete_time_based_segments_when_none_ready_to_be_deleted(tmp_path):
    """shouldNotDeleteTimeBasedSegmentsWhenNoneReadyToBeDeleted."""
    log = one_record_log(tmp_path)
    delete_old_segments(log, T0 + 100, retention_ms=10_000_000, cleanup_policy="delete")
    assert segments(log) == 3


def test_should_not_delete_segments_when_policy_does_not_include_delete(tmp_path):
    """shouldNotDeleteSegmentsWhenPolicyDoesNotIncludeDelete: compact only → time retention off."""
    log = one_record_log(tmp_path)
    delete_old_segments(log, T0 + 10_000_000, retention_ms=10_000, cleanup_policy="compact")
    assert segments(log) == 3


def test_should_delete_segments_ready_to_be_deleted_when_cleanup_policy_is_compact_and_delete(tmp_path):
    """shouldDeleteSegmentsReadyToBeDeletedWhenCleanupPolicyIsCompactAndDelete."""
    log = one_record_log(tmp_path)
    delete_old_segments(log, T0 + 10_000_000, retention_ms=10_000, cleanup_policy="compact,delete")
    assert segments(log) == 1


def test_should_delete_start_offset_breached_segments_when_policy_does_not_include_delete(tmp_path):
    """shouldDeleteStartOffsetBreachedSegmentsWhenPolicyDoesNotIncludeDelete: the log start offset
    moved to 11 (DeleteRecords); segments wholly below it go even on a compact-only topic."""
    log = one_record_log(tmp_path)
    write_offset_checkpoint(log.root / LOG_START_OFFSET_CHECKPOINT, {(TOPIC, 0): 11})
    out = delete_old_segments(log, T0 + 10_000_000, retention_ms=10_000, cleanup_policy="compact")
    assert segments(log) == 1
    assert out["new_log_start_offset"] == 11
    assert [d["rule"] for d in out["decisions"] if d["decision"] == "delete"] == ["log_start_offset"] * 2


# --- ListOffsets (fetchOffsetByTimestamp) ------------------------------------------------------------

def write_batches(d: Path, specs) -> None:
    """One segment of single-record batches: ``specs`` = [(timestamp, partition leader epoch)],
    indexed with index.interval.bytes 1."""
    d.mkdir(parents=True, exist_ok=True)
    raw = [rb.encode_batch([rb.V2Record(i, ts, None, b"0123456789")], base_offset=i, last_offset_delta=0,
                           partition_leader_epoch=epoch) for i, (ts, epoch) in enumerate(specs)]
    (d / format_segment_file_name(0, "log")).write_bytes(b"".join(raw))
    pos = np.cumsum([0] + [len(r) for r in raw])[:-1].astype(np.int64)
    oi, ti = build_indexes(base_offset=0, positions=pos, sizes=np.array([len(r) for r in raw], np.int64),
                           last_offsets=np.arange(len(raw), dtype=np.int64),
                           max_timestamps=np.array([ts for ts, _e in specs], np.int64), index_interval_bytes=1)
    (d / format_segment_file_name(0, "index")).write_bytes(oi.to_bytes())
    (d / format_segment_file_name(0, "timeindex")).write_bytes(ti.to_bytes())


def answer(d: Path, target: int):
    [r] = lookup_offsets(d, [target])
    return (r.timestamp, r.offset, r.leader_epoch) if r.found else None


def test_fetch_offset_by_timestamp_includes_leader_epoch(tmp_path):
    """testFetchOffsetByTimestampIncludesLeaderEpoch."""
    d = tmp_path / "t-0"
    d.mkdir()
    (d / format_segment_file_name(0, "log")).touch()
    assert answer(d, 0) is None                               # an empty log has no answer
    first, second = T0, T0 + 1
    write_batches(d, [(first, 0), (second, 1)])
    epochs = d / LEADER_EPOCH_CHECKPOINT
    write_leader_epoch_checkpoint(epochs, [(0, 0), (1, 1)])
    assert answer(d, first) == (first, 0, 0)
    assert answer(d, second) == (second, 1, 1)
    assert answer(d, EARLIEST_TIMESTAMP) == (UNKNOWN_TIMESTAMP, 0, 0)
    assert answer(d, EARLIEST_LOCAL_TIMESTAMP) == (UNKNOWN_TIMESTAMP, 0, 0)
    assert answer(d, LATEST_TIMESTAMP) == (UNKNOWN_TIMESTAMP, 2, 1)
    write_leader_epoch_checkpoint(epochs, [(0, 0), (1, 1), (2, 2)])   # maybeAssignEpochStartOffset(2, 2)
    assert answer(d, LATEST_TIMESTAMP) == (UNKNOWN_TIMESTAMP, 2, 2)


def test_fetch_offset_by_timestamp_with_max_timestamp_includes_timestamp(tmp_path):
    """testFetchOffsetByTimestampWithMaxTimestampIncludesTimestamp: the first record holding the
    largest timestamp."""
    first = T0
    write_batches(tmp_path / "t-0", [(first, 0), (first + 1, 0), (first, 0)])
    assert answer(tmp_path / "t-0", MAX_TIMESTAMP) == (first + 1, 1, 0)


@pytest.mark.parametrize("records", [0, 2])
def test_fetch_latest_tiered_timestamp_no_remote_storage(tmp_path, records):
    """testFetchLatestTieredTimestampNoRemoteStorage: no answer (Kafka: offset -1, epoch -1) without
    tiered storage, empty or not."""
    d = tmp_path / "t-0"
    if records:
        write_batches(d, [(T0, 0), (T0 + 1, 0)])
    else:
        d.mkdir()
        (d / format_segment_file_name(0, "log")).touch()
    [r] = lookup_offsets(d, [LATEST_TIERED_TIMESTAMP])
    assert not r.found and (r.offset, r.timestamp) == (-1, UNKNOWN_TIMESTAMP)
