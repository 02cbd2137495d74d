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
from pathlib import Path
from typing import List

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kafkalog.checkpoint import REPLICATION_OFFSET_CHECKPOINT, write_offset_checkpoint
from kafkalog.cleaner import clean_partition
from kafkalog.format import control_record as cr
from kafkalog.index.transaction_index import read_transaction_index
from kafkalog.logdir import format_segment_file_name

import test_cleaner_properties as props
from test_cleaner_model import B, DAY, T0, TOPIC, data, encode, flatten, log_config, marker, read_partition, \
    write_partition

PID = 5


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
    res = clean_partition(d, config=config, now_ms=now, **kw)
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
