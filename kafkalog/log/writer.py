"""Writing records back into a log dir a broker loads: each topic-partition's records (an Arrow table with
the data source's columns) as a partition folder of segments rolled as a broker rolls them
(``kafkalog.log.roll``), each with the ``.index`` / ``.timeindex`` Kafka's recovery (``LogSegment.recover``) builds, a
``.txnindex`` where an aborted transaction ends, a ``leader-epoch-checkpoint`` as recovery assigns it, and the log dir's checkpoint files and
``meta.properties``. Every file goes through ``kafkalog.fs.durable`` (temporary name, fsync, rename).

Offsets are those of the records (gaps kept, as in a compacted log). With the batch-level columns
(``baseOffset``, ``lastOffset``, ``producerId``, ``codec``, ``timestampType``, ...) each batch is written
back with its header fields — producer state, transactions and control markers survive; without them
records are grouped into new batches of about ``batch_bytes``. Batches the cleaner left empty have no
rows and are not written back.

Checkpoints: recovery point and high watermark = log end offset (everything written is flushed and
committed, so a broker recovers nothing), log start offset = the first segment's base offset (no
``log-start-offset-checkpoint`` entry, as Kafka writes none then). No ``.kafka_cleanshutdown`` and no
producer snapshot: the broker rebuilds producer state from the segments at its first start.
"""
from __future__ import annotations

import datetime as _dt
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafkalog.checkpoint.leader_epoch import write_leader_epoch_checkpoint
from kafkalog.checkpoint.offset import write_offset_checkpoint
from kafkalog.checkpoint.text import format_kafka_uuid
from kafkalog.fs.names import LEADER_EPOCH_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, META_PROPERTIES, RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from kafkalog.fs.durable import check_fences, replace_file
from kafkalog.errors import KafkalogError
from kafkalog.format.file_records import scan_buffer
from kafkalog.format.control_record import parse_control_type
from kafkalog.index.builder import build_indexes, build_transaction_index, replay_transactions
from kafkalog.index.transaction_index import write_transaction_index
from kafkalog.index.offset_index import write_offset_index
from kafkalog.index.time_index import write_time_index
from kafkalog.log.roll import RollConfig, plan_segments
from kafkalog.fs.names import format_partition_dir_name, format_segment_file_name
from kafkalog.log.records_io import DEFAULT_BATCH_BYTES, encode_records

NO_EPOCH = -1


@dataclass(frozen=True)
class WrittenPartition:
    """What :func:`write_partition` wrote."""

    topic: str
    partition: int
    folder: str
    segments: int
    batches: int
    records: int
    bytes: int
    log_start_offset: int
    log_end_offset: int

    def to_dict(self) -> dict:
        return dict(topic=self.topic, partition=self.partition, folder=self.folder, segments=self.segments,
                    batches=self.batches, records=self.records, bytes=self.bytes,
                    log_start_offset=self.log_start_offset, log_end_offset=self.log_end_offset)


def check_new_log_dir(log_dir) -> None:
    """A restore writes only into a new or empty folder: never merges into or overwrites a log dir."""
    path = Path(log_dir)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise KafkalogError(f"{path} exists and is not an empty folder; refused (a restore never merges into or "
                            "overwrites a log dir)", path=path, hint="give a new folder")


def leader_epochs(base_offsets: np.ndarray, epochs: np.ndarray) -> List[Tuple[int, int]]:
    """(epoch, start offset) as recovery assigns them: each batch whose leader epoch is above the latest
    one starts a new entry (batches without an epoch, -1, assign nothing)."""
    out: List[Tuple[int, int]] = []
    latest = NO_EPOCH
    for epoch, base in zip(epochs.tolist(), base_offsets.tolist()):
        if epoch > latest:
            out.append((epoch, base))
            latest = epoch
    return out


def sort_by_offset(records: pa.Table) -> pa.Table:
    offsets = records.column("offset")
    if len(offsets) > 1 and not pc.all(pc.greater(offsets.slice(1), offsets.slice(0, len(offsets) - 1))).as_py():
        records = records.take(pc.sort_indices(records, sort_keys=[("offset", "ascending")]))
        dup = pc.equal(records.column("offset").slice(1), records.column("offset").slice(0, len(offsets) - 1))
        if pc.any(dup).as_py():
            raise KafkalogError("records repeat an offset: a partition holds each offset once")
    return records


def control_types(records: pa.Table, bases: np.ndarray) -> np.ndarray:
    """Per batch (``bases``: the batches' base offsets): the marker type of a control batch, read from its
    record's key (rows with ``isControl``), else -1."""
    out = np.full(len(bases), -1, np.int64)
    if "isControl" not in records.column_names or "baseOffset" not in records.column_names:
        return out
    control = records.filter(pc.fill_null(records.column("isControl"), False))
    for base, key in zip(control.column("baseOffset").to_pylist(), control.column("key").to_pylist()):
        i = int(np.searchsorted(bases, base))
        if i < len(bases) and bases[i] == base and key is not None:
            out[i] = parse_control_type(key)
    return out


def write_partition(log_dir, topic: str, partition: int, records: pa.Table, *, compression=None,
                    roll: RollConfig = RollConfig(), batch_bytes: int = DEFAULT_BATCH_BYTES) -> WrittenPartition:
    """Write ``records`` (one topic-partition; any order) as the partition folder ``<topic>-<partition>``
    of ``log_dir``, which must not exist yet. ``compression`` re-encodes every batch with that codec."""
    folder = Path(log_dir) / format_partition_dir_name(topic, partition)
    if folder.exists():
        raise KafkalogError(f"{folder} already exists; refused", path=folder)
    if records.num_rows == 0:
        raise ValueError(f"{topic}-{partition}: no records to write")
    records = sort_by_offset(records)
    data = encode_records(records, compression=compression, batch_bytes=batch_bytes)
    buf = np.frombuffer(data, dtype=np.uint8)
    b = scan_buffer(buf, verify_crc=False, engine=None).batches
    positions, sizes = b.column("position").to_numpy(), b.column("size").to_numpy().astype(np.int64)
    bases, lasts = b.column("baseOffset").to_numpy(), b.column("lastOffset").to_numpy()
    max_ts = b.column("maxTimestamp").to_numpy()
    txn = dict(base_offset=bases, producer_id=b.column("producerId").to_numpy(),
               is_transactional=b.column("isTransactional").to_numpy(zero_copy_only=False),
               is_control=b.column("isControl").to_numpy(zero_copy_only=False),
               control_type=control_types(records, bases))
    check_fences("creating", folder)          # a restore's workers stop once its driver's lock is gone
    folder.mkdir(parents=True)
    plan = plan_segments(bases, lasts, sizes, max_ts, roll)
    view = memoryview(data)
    open_txns: dict = {}
    for first, end, base in plan:
        lo, hi = int(positions[first]), int(positions[end - 1] + sizes[end - 1])
        oi, ti = build_indexes(base_offset=base, positions=positions[first:end] - lo, sizes=sizes[first:end],
                               last_offsets=lasts[first:end], max_timestamps=max_ts[first:end],
                               index_interval_bytes=roll.index_interval_bytes)
        replace_file(folder / format_segment_file_name(base, "log"), view[lo:hi])
        write_offset_index(folder / format_segment_file_name(base, "index"), oi)
        write_time_index(folder / format_segment_file_name(base, "timeindex"), ti)
        seg_txn = {k: v[first:end] for k, v in txn.items()}
        txn_index = build_transaction_index(base_offset=base, batches=seg_txn, open_txn_first_offsets=open_txns)
        if len(txn_index):                 # Kafka creates the file for a segment's first aborted transaction
            write_transaction_index(folder / format_segment_file_name(base, "txnindex"), txn_index)
        open_txns = replay_transactions(batches=seg_txn, open_txn_first_offsets=open_txns)[1]
    write_leader_epoch_checkpoint(folder / LEADER_EPOCH_CHECKPOINT,
                                  leader_epochs(bases, b.column("partitionLeaderEpoch").to_numpy()))
    return WrittenPartition(topic, partition, str(folder), len(plan), b.num_rows, records.num_rows, len(data),
                            int(bases[0]), int(lasts[-1]) + 1)


def format_meta_properties(*, node_id: int, cluster_id: str, directory_id: str) -> str:
    """``meta.properties`` version 1 (KRaft) as a broker writes it (Java Properties, date comment)."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%a %b %d %H:%M:%S UTC %Y")
    return (f"#\n#{stamp}\ncluster.id={cluster_id}\ndirectory.id={directory_id}\nnode.id={node_id}\n"
            "version=1\n")


def random_kafka_uuid() -> str:
    """A random Kafka Uuid in its base64 form (as ``kafka-storage.sh random-uuid``)."""
    return format_kafka_uuid(uuid.uuid4().bytes)


def write_log_dir_files(log_dir, written: Iterable[WrittenPartition], *, node_id: Optional[int] = None,
                        cluster_id: Optional[str] = None) -> List[str]:
    """The log dir's checkpoints for the partitions written, and ``meta.properties`` when ``node_id`` is
    given (a new log dir). Returns the files written."""
    log_dir = Path(log_dir)
    parts = sorted(written, key=lambda w: (w.topic, w.partition))
    ends = {(w.topic, w.partition): w.log_end_offset for w in parts}
    files = []
    for name, entries in ((RECOVERY_POINT_CHECKPOINT, ends), (REPLICATION_OFFSET_CHECKPOINT, ends),
                          (LOG_START_OFFSET_CHECKPOINT, {})):
        write_offset_checkpoint(log_dir / name, entries)
        files.append(name)
    if node_id is not None:
        text = format_meta_properties(node_id=node_id, cluster_id=cluster_id or random_kafka_uuid(),
                                      directory_id=random_kafka_uuid())
        replace_file(log_dir / META_PROPERTIES, text.encode("utf-8"))
        files.append(META_PROPERTIES)
    return files


def write_log_dir(log_dir, partitions: Sequence[Tuple[str, int, pa.Table]], *, compression=None,
                  roll: RollConfig = RollConfig(), node_id: int = 1, cluster_id: Optional[str] = None
                  ) -> List[WrittenPartition]:
    """A whole new log dir from (topic, partition, records) in one process (tests, small data)."""
    check_new_log_dir(log_dir)
    os.makedirs(log_dir, exist_ok=True)
    written = [write_partition(log_dir, t, p, recs, compression=compression, roll=roll) for t, p, recs in partitions]
    write_log_dir_files(log_dir, written, node_id=node_id, cluster_id=cluster_id)
    return written
