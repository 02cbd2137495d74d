"""Generate a demo Kafka log dir: a few partitions of several rolled segments each, with the
checkpoints, meta.properties and partition metadata a broker leaves — data for `kafkalog dump`
and the jobs, made on the spot instead of shipped."""
from __future__ import annotations

import argparse
import random
import uuid
from pathlib import Path
from typing import List, Optional

import pyarrow as pa

from kafkalog.checkpoint.leader_epoch import write_leader_epoch_checkpoint
from kafkalog.checkpoint.offset import write_offset_checkpoint
from kafkalog.checkpoint.partition_metadata import PartitionMetadata, write_partition_metadata
from kafkalog.checkpoint.text import format_kafka_uuid
from kafkalog.fs.names import (CLEANER_OFFSET_CHECKPOINT, LEADER_EPOCH_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                                META_PROPERTIES, PARTITION_METADATA, RECOVERY_POINT_CHECKPOINT,
                                REPLICATION_OFFSET_CHECKPOINT, format_partition_dir_name)
from kafkalog.errors import UsageError
from kafkalog.format.compression import parse_codec
from kafkalog.format.schema import HEADERS_TYPE, TIMESTAMP_TYPE
from kafkalog.log.records_io import write_segment

DEMO_TOPIC = "demo-orders"
START_MS = 1_767_225_600_000          # 2026-01-01T00:00:00Z
SEGMENT_RECORDS = 5_000


def _partition_records(rnd: random.Random, first_offset: int, n: int, keys: int) -> pa.Table:
    offsets = list(range(first_offset, first_offset + n))
    ts, key, value, headers = [], [], [], []
    clock = START_MS
    for i in range(n):
        clock += rnd.randrange(0, 2_000)
        k = rnd.randrange(keys)
        ts.append(clock)
        key.append(b"customer-%05d" % k)
        # about 5% tombstones, so compaction has something to remove
        value.append(None if rnd.random() < 0.05 else b'{"customer": %d, "amount": %d, "seq": %d}'
                     % (k, rnd.randrange(1, 10_000), first_offset + i))
        headers.append([{"key": "source", "value": b"demo"}] if i % 10 == 0 else [])
    return pa.table({
        "offset": pa.array(offsets, pa.int64()), "timestamp": pa.array(ts, TIMESTAMP_TYPE),
        "key": pa.array(key, pa.binary()), "value": pa.array(value, pa.binary()),
        "headers": pa.array(headers, HEADERS_TYPE),
    })


def generate_demo_log_dir(out, *, partitions: int = 3, records: int = 20_000, compression: str = "none",
                          seed: int = 1, topic: str = DEMO_TOPIC, consumer_groups: int = 0,
                          compacted_topic: Optional[str] = None) -> List[Path]:
    """Write a new log dir at ``out`` (created, or an existing empty folder); returns the .log files
    written. Anything already there is refused (UsageError) before a byte is written: a log dir's
    meta.properties and checkpoints would be overwritten. ``consumer_groups``: also write that many
    groups' commits in ``__consumer_offsets``; ``compacted_topic``: also write a topic for compaction
    (keys, tombstones, an aborted and a committed transaction: ``kafkalog.tools.demo_compacted``)."""
    out = Path(out)
    prepare_new_dir(out, what="the demo log dir")
    rnd = random.Random(seed)
    codec = parse_codec(compression)
    logs, recovery, hw = [], {}, {}
    for p in range(partitions):
        pdir = out / format_partition_dir_name(topic, p)
        pdir.mkdir(exist_ok=True)
        table = _partition_records(rnd, 0, records, keys=max(10, records // 20))
        for start in range(0, records, SEGMENT_RECORDS):
            logs.append(write_segment(pdir, table.slice(start, SEGMENT_RECORDS), compression=codec,
                                      overwrite=True))
        write_leader_epoch_checkpoint(pdir / LEADER_EPOCH_CHECKPOINT, [(0, 0)])
        write_partition_metadata(pdir / PARTITION_METADATA, PartitionMetadata(
            0, format_kafka_uuid(uuid.UUID(int=rnd.getrandbits(128)).bytes)))
        recovery[(topic, p)] = records
        hw[(topic, p)] = records
    if consumer_groups:
        from kafkalog.coordinator.demo_groups import write_consumer_offsets
        for (t, p), end in write_consumer_offsets(out, topic=topic, partitions=partitions, records=records,
                                                  groups=consumer_groups, rnd=rnd).items():
            recovery[(t, p)] = hw[(t, p)] = end
    if compacted_topic:
        from kafkalog.tools.demo_compacted import write_compacted_topic
        written = write_compacted_topic(out, topic=compacted_topic, start_ms=START_MS, rnd=rnd)
        recovery[(compacted_topic, 0)] = hw[(compacted_topic, 0)] = written.log_end_offset
        logs.extend(sorted(Path(written.folder).glob("*.log")))
    write_offset_checkpoint(out / RECOVERY_POINT_CHECKPOINT, recovery)
    write_offset_checkpoint(out / REPLICATION_OFFSET_CHECKPOINT, hw)
    write_offset_checkpoint(out / LOG_START_OFFSET_CHECKPOINT, {})
    write_offset_checkpoint(out / CLEANER_OFFSET_CHECKPOINT, {})
    (out / META_PROPERTIES).write_text(
        "#Written by kafkalog demo\nnode.id=1\nversion=1\ncluster.id=kafkalogDemoCluster000\n"
        f"directory.id={format_kafka_uuid(uuid.UUID(int=rnd.getrandbits(128)).bytes)}\n")
    return logs


def prepare_new_dir(out: Path, *, what: str) -> None:
    """Create ``out`` for a command that writes a new folder; a UsageError when it is a file, a
    folder that is not empty, or cannot be created."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"{what} must be a folder, and this is a file", path=out, hint="give a new folder name")
    if out.is_dir():
        try:
            first = next(iter(out.iterdir()), None)
        except OSError as e:
            raise UsageError(f"cannot read ({e.strerror or e})", path=out) from None
        if first is not None:
            raise UsageError(f"{what} must be a new or empty folder, and this one holds files ({first.name}, ...); "
                             "nothing was written", path=out,
                             hint="give a new folder name, or remove this one first if it is an old demo")
        return
    try:
        out.mkdir(parents=True)
    except OSError as e:
        raise UsageError(f"cannot create the folder ({e.strerror or e})", path=out,
                         hint="give a folder in a writable place") from None


def main(args: argparse.Namespace) -> int:
    topic = getattr(args, "topic", DEMO_TOPIC)
    groups = getattr(args, "consumer_groups", 0)
    compacted = getattr(args, "compacted_topic", None)
    logs = generate_demo_log_dir(args.out, partitions=args.partitions, records=args.records,
                                 compression=args.compression, seed=args.seed, topic=topic, consumer_groups=groups,
                                 compacted_topic=compacted)
    total = sum(p.stat().st_size for p in logs)
    print(f"Wrote {len(logs)} segments ({total:,} bytes) in {args.partitions} partitions of {topic} under "
          f"{args.out}")
    print(f"Next: kafkalog dump --files {logs[0]} --deep-iteration | head -n 5")
    if groups:
        print(f"Consumer groups: {groups} in __consumer_offsets; next: kafkalog lag --log-dirs {args.out}")
    if compacted:
        print(f"Compacted topic: {compacted}-0 (keys, tombstones, an aborted and a committed transaction); next: "
              f"kafkalog compact --log-dir {args.out} --topic-config {compacted}:cleanup.policy=compact --dry-run")
    return 0
