"""Writing records back as a log dir (kafkalog.log.writer) and rolling segments as a broker does
(kafkalog.log.roll): kafka-python reads the written segments back equal, every index is what Kafka's
recovery builds (kafkalog.index.verify: "identical"), transactions keep their markers and
.txnindex, and each roll rule of LogSegment.shouldRoll fires where Kafka's does."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import kafkalog
from kafkalog.checkpoint.leader_epoch import read_leader_epoch_checkpoint
from kafkalog.checkpoint.meta_properties import read_meta_properties
from kafkalog.checkpoint.offset import read_offset_checkpoint
from kafkalog.errors import KafkalogError
from kafkalog.index.verify import verify_segment
from kafkalog.log.roll import MAX_RELATIVE_OFFSET, RollConfig, plan_segments
from kafkalog.log.writer import check_new_log_dir, leader_epochs, write_log_dir, write_partition
from kafka_python_logs import make_kafka_python_partition, make_transactional_partition
from oracle import read_all


def _partition_table(folder: Path) -> pa.Table:
    return pa.concat_tables([kafkalog.read_segment(p) for p in sorted(folder.glob("*.log"))])


def _oracle_records(folder: Path) -> list:
    return [r for p in sorted(folder.glob("*.log")) for r in read_all(p.read_bytes())]


def _verify_all(folder: Path, **kw):
    open_txns: dict = {}
    statuses = []
    for log in sorted(folder.glob("*.log")):
        v = verify_segment(log, open_txns=open_txns, **kw)
        open_txns = v.open_txns_after
        statuses.extend((log.name, x.kind, x.status) for x in v.verdicts)
    return statuses


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_written_partition_reads_back_in_kafka_python_with_recovery_indexes(tmp_path, codec):
    src = tmp_path / "src"
    parts = make_kafka_python_partition(src, "orders", 0, codec=codec, segments=3, batches_per_segment=6,
                                        records_per_batch=7, seed=codec, jitter_ms=30)
    table = _partition_table(src / "orders-0")
    roll = RollConfig(segment_bytes=900, index_interval_bytes=300)
    out = tmp_path / "out"
    written = write_log_dir(out, [("orders", 0, table)], roll=roll)
    folder = out / "orders-0"
    assert _oracle_records(folder) == parts.records
    assert written[0].segments == len(list(folder.glob("*.log"))) > 3
    for log in folder.glob("*.log"):
        assert log.stat().st_size <= 900 or kafkalog.scan_batches(log).batches.num_rows == 1  # one batch over it
    statuses = _verify_all(folder, index_interval_bytes=300)
    assert statuses and all(s == "identical" for _n, _k, s in statuses), statuses
    # the checkpoints: recovery point and high watermark at the log end, no log-start entry, meta.properties
    assert read_offset_checkpoint(out / "recovery-point-offset-checkpoint") == {("orders", 0): parts.log_end_offset}
    assert read_offset_checkpoint(out / "replication-offset-checkpoint") == {("orders", 0): parts.log_end_offset}
    assert read_offset_checkpoint(out / "log-start-offset-checkpoint") == {}
    meta = read_meta_properties(out / "meta.properties")
    assert meta.version == 1 and meta.node_id == 1 and meta.cluster_id and meta.directory_id
    assert read_leader_epoch_checkpoint(folder / "leader-epoch-checkpoint") == [(0, 0)]  # epoch 0 from 0


def test_gaps_and_batch_fields_survive_and_compression_can_change(tmp_path):
    src = tmp_path / "src"
    make_kafka_python_partition(src, "c", 0, codec=0, segments=2, batches_per_segment=4, records_per_batch=5, seed=7)
    table = _partition_table(src / "c-0")
    kept = table.filter(pa.array([o % 3 != 1 for o in table.column("offset").to_pylist()]))   # a compacted log
    out = tmp_path / "out"
    write_log_dir(out, [("c", 0, kept)], compression="zstd")
    back = _partition_table(out / "c-0")
    assert back.column("offset").to_pylist() == kept.column("offset").to_pylist()
    assert back.column("value").to_pylist() == kept.column("value").to_pylist()
    assert set(back.column("codec").to_pylist()) == {4}
    assert back.column("baseOffset").to_pylist() == kept.column("baseOffset").to_pylist()
    assert back.column("lastOffset").to_pylist() == kept.column("lastOffset").to_pylist()
    assert all(s == "identical" for _n, _k, s in _verify_all(out / "c-0"))


def test_transactions_keep_markers_and_txnindex(tmp_path):
    src = tmp_path / "src"
    make_transactional_partition(src, "tx", 0)
    table = kafkalog.read_segment(next((src / "tx-0").glob("*.log")))
    out = tmp_path / "out"
    write_log_dir(out, [("tx", 0, table)], roll=RollConfig(segment_bytes=400))
    back = _partition_table(out / "tx-0")
    for col in ("offset", "key", "value", "producerId", "isTransactional", "isControl", "baseOffset"):
        assert back.column(col).to_pylist() == table.column(col).to_pylist(), col
    statuses = _verify_all(out / "tx-0")
    assert any(k == "txnindex" for _n, k, _s in statuses)
    assert all(s == "identical" for _n, _k, s in statuses), statuses


def test_restore_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(KafkalogError, match="not an empty folder"):
        check_new_log_dir(tmp_path / "full")
    check_new_log_dir(tmp_path / "new")
    t = pa.table({"offset": pa.array([0, 1], pa.int64()), "key": [b"a", b"b"], "value": [b"1", b"2"]})
    write_partition(tmp_path / "new", "t", 0, t)
    with pytest.raises(KafkalogError, match="already exists"):
        write_partition(tmp_path / "new", "t", 0, t)
    with pytest.raises(KafkalogError, match="repeat an offset"):
        write_partition(tmp_path / "new", "t", 1, pa.table({"offset": [3, 3], "value": [b"a", b"b"]}))


# --- the roll rules, one by one -----------------------------------------------------------------

def _batches(n, size=100, step_ms=1000, count=1, first_offset=0):
    bases = np.arange(n, dtype=np.int64) * count + first_offset
    return bases, bases + count - 1, np.full(n, size, np.int64), np.arange(n, dtype=np.int64) * step_ms


def test_roll_by_segment_bytes_is_strict_as_kafka():
    bases, lasts, sizes, ts = _batches(10)
    # size > segment.bytes - append: 300 bytes hold three 100-byte batches exactly
    plan = plan_segments(bases, lasts, sizes, ts, RollConfig(segment_bytes=300))
    assert [(a, b) for a, b, _ in plan] == [(0, 3), (3, 6), (6, 9), (9, 10)]
    assert [base for _a, _b, base in plan] == [0, 3, 6, 9]
    # a batch bigger than segment.bytes still goes into a segment of its own
    plan = plan_segments(bases[:3], lasts[:3], np.array([50, 500, 50]), ts[:3], RollConfig(segment_bytes=300))
    assert [(a, b) for a, b, _ in plan] == [(0, 1), (1, 2), (2, 3)]


def test_roll_by_segment_ms_counts_from_the_first_batch_max_timestamp():
    bases, lasts, sizes, ts = _batches(10, step_ms=1000)
    plan = plan_segments(bases, lasts, sizes, ts, RollConfig(segment_ms=2500))
    # a batch rolls when its timestamp minus the first batch's is > 2500: 0,1,2 | 3,4,5 | ...
    assert [(a, b) for a, b, _ in plan] == [(0, 3), (3, 6), (6, 9), (9, 10)]
    plan = plan_segments(bases, lasts, sizes, ts, RollConfig(segment_ms=3000, segment_jitter_ms=500))
    assert [(a, b) for a, b, _ in plan] == [(0, 3), (3, 6), (6, 9), (9, 10)]
    # no timestamps (-1): wall-clock rolling, which never fires for a log written at once
    plan = plan_segments(bases, lasts, sizes, np.full(10, -1), RollConfig(segment_ms=1))
    assert len(plan) == 1


def test_roll_when_an_index_is_full():
    bases, lasts, sizes, ts = _batches(40, size=100)
    # index.interval.bytes 150: an entry every second batch; 8-byte index holds 2 offset entries (0 time:
    # 16 // 12 = 1 entry, which fills first)
    plan = plan_segments(bases, lasts, sizes, ts, RollConfig(segment_index_bytes=24, index_interval_bytes=150))
    # 24 bytes: 3 offset entries, 2 time entries -> full after the 2nd entry (batch 4), roll before batch 5
    assert [(a, b) for a, b, _ in plan][:2] == [(0, 5), (5, 10)]


def test_roll_when_offsets_overflow_the_relative_offset():
    bases = np.array([0, 10, MAX_RELATIVE_OFFSET, MAX_RELATIVE_OFFSET + 5], np.int64)
    lasts = bases + 1
    plan = plan_segments(bases, lasts, np.full(4, 100), np.zeros(4, np.int64), RollConfig())
    assert [(a, b, base) for a, b, base in plan] == [(0, 2, 0), (2, 4, MAX_RELATIVE_OFFSET)]


def test_leader_epochs_as_recovery_assigns_them():
    assert leader_epochs(np.array([0, 5, 9, 12, 20]), np.array([-1, 0, 0, 3, 2])) == [(0, 5), (3, 12)]
