"""Log dirs whose batches kafka-python wrote (tests/oracle.py), laid out as a broker lays them out:
partition folders of segments with the ``.index``/``.timeindex`` recovery builds, and the records the
oracle reads back from each partition, for comparing readers against."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from kafkalog.format import record_batch as rb
from kafkalog.format.control_record import ABORT, COMMIT, control_key, end_txn_marker_value
from kafkalog.format.file_records import scan_batches
from kafkalog.index.builder import build_indexes
from kafkalog.index.offset_index import write_offset_index
from kafkalog.index.time_index import write_time_index
from kafkalog.fs.names import format_segment_file_name
from oracle import build_batch, read_all

CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


@dataclass
class PartitionRecords:
    topic: str
    partition: int
    records: List[dict] = field(default_factory=list)      # the oracle's records, offset order (no control)
    control_offsets: List[int] = field(default_factory=list)
    aborted_offsets: List[int] = field(default_factory=list)   # data of aborted transactions
    log_end_offset: int = 0


def write_segment_files(folder: Path, batches: Sequence[bytes], *, index_interval_bytes: int = 64) -> Path:
    """One segment from whole batches: .log, plus .index/.timeindex as recovery builds them (a small
    interval, so the indexes have entries to seek and split by)."""
    data = b"".join(batches)
    base = int.from_bytes(batches[0][:8], "big") if batches[0][16] == 2 else None
    log_tmp = folder / "segment.tmp"
    log_tmp.write_bytes(data)
    h = scan_batches(log_tmp).batches
    if base is None:
        base = int(h.column("baseOffset")[0].as_py())
    log = folder / format_segment_file_name(base, "log")
    log_tmp.rename(log)
    oi, ti = build_indexes(base_offset=base, positions=h.column("position").to_numpy(),
                           sizes=h.column("size").to_numpy(), last_offsets=h.column("lastOffset").to_numpy(),
                           max_timestamps=h.column("maxTimestamp").to_numpy(),
                           index_interval_bytes=index_interval_bytes)
    write_offset_index(folder / format_segment_file_name(base, "index"), oi)
    write_time_index(folder / format_segment_file_name(base, "timeindex"), ti)
    return log


def make_kafka_python_partition(log_dir: Path, topic: str, partition: int, *, codec: int, segments: int,
                                batches_per_segment: int, records_per_batch: int, seed: int,
                                ts0: int = 1_700_000_000_000, jitter_ms: int = 0,
                                null_key_every: int = 5, headers_every: int = 3) -> PartitionRecords:
    """A partition of ``segments`` segments of kafka-python v2 batches in ``codec``: null keys and
    headers on some records, timestamps rising 10 ms a record with ``jitter_ms`` of disorder."""
    rng = random.Random(seed)
    folder = log_dir / f"{topic}-{partition}"
    folder.mkdir(parents=True, exist_ok=True)
    out = PartitionRecords(topic, partition)
    offset = 0
    for _s in range(segments):
        seg_batches = []
        for _b in range(batches_per_segment):
            recs = []
            for _r in range(records_per_batch):
                ts = ts0 + offset * 10 + len(recs) * 10 + (rng.randint(-jitter_ms, jitter_ms) if jitter_ms else 0)
                o = offset + len(recs)
                key = None if o % null_key_every == 0 else b"key-%d" % (o % 7)
                value = None if o % 11 == 10 else (b"value-%d-" % o) * rng.randint(1, 4)
                headers = [("h", b"%d" % o), ("n", None)] if o % headers_every == 0 else []
                headers = [(k, v if v is not None else b"") for k, v in headers]
                recs.append((max(ts, 0), key, value, headers))
            data = build_batch(2, codec, offset, recs)
            seg_batches.append(data)
            for r in read_all(data):
                out.records.append(r)
            offset += len(recs)
        write_segment_files(folder, seg_batches)
    out.log_end_offset = offset
    return out


def make_transactional_partition(log_dir: Path, topic: str, partition: int) -> PartitionRecords:
    """Two producers' transactions, one aborted and one committed interleaved, then one left open,
    plus plain batches; markers written by kafkalog's encoder (kafka-python writes none)."""
    folder = log_dir / f"{topic}-{partition}"
    folder.mkdir(parents=True, exist_ok=True)
    out = PartitionRecords(topic, partition)
    batches: List[bytes] = []
    offset = 0

    def data(pid: Optional[int], n: int, aborted: bool = False):
        nonlocal offset
        recs = [(1_700_000_000_000 + offset + i, b"k%d" % (offset + i), b"v%d" % (offset + i), []) for i in range(n)]
        if pid is None:
            raw = build_batch(2, 0, offset, recs)
        else:
            raw = build_batch(2, 0, offset, recs, producer_id=pid, producer_epoch=0, base_sequence=offset,
                              transactional=True)
        batches.append(raw)
        for r in read_all(raw):
            out.records.append(r)
            if aborted:
                out.aborted_offsets.append(r["offset"])
        offset += n

    def marker(pid: int, kind: int):
        nonlocal offset
        rec = rb.V2Record(offset, 1_700_000_000_000 + offset, control_key(kind), end_txn_marker_value(0))
        batches.append(rb.encode_batch([rec], control=True, transactional=True, producer_id=pid, producer_epoch=0))
        out.control_offsets.append(offset)
        offset += 1

    data(None, 3)
    data(1, 2, aborted=True)
    data(2, 2)
    data(1, 2, aborted=True)
    marker(1, ABORT)
    data(None, 2)
    marker(2, COMMIT)
    data(1, 3)
    marker(1, COMMIT)
    data(2, 2)              # left open: the last stable offset is its first offset
    data(None, 2)
    write_segment_files(folder, batches)
    out.log_end_offset = offset
    return out


def standard_log_dir(log_dir: Path) -> Dict[Tuple[str, int], PartitionRecords]:
    """Several topics, every v2 codec, null keys, headers, several segments, jittered timestamps."""
    parts = {}
    specs = [("orders", 0, 0), ("orders", 1, 1), ("orders", 2, 2), ("payments", 0, 3), ("payments", 1, 4),
             ("xorders", 0, 4)]
    for i, (topic, p, codec) in enumerate(specs):
        parts[(topic, p)] = make_kafka_python_partition(
            log_dir, topic, p, codec=codec, segments=3, batches_per_segment=4, records_per_batch=5,
            seed=100 + i, jitter_ms=25)
    return parts


def all_records(parts: Dict[Tuple[str, int], PartitionRecords], *, keep=lambda tp, r: True) -> List[tuple]:
    """Rows as (key, value, topic, partition, offset, timestamp ms, headers) for every kept record."""
    rows = []
    for (topic, p), pr in sorted(parts.items()):
        for r in pr.records:
            if keep((topic, p), r):
                rows.append((r["key"], r["value"], topic, p, r["offset"], r["timestamp"], r["headers"]))
    return rows


def timestamps(parts, tp) -> np.ndarray:
    return np.array([r["timestamp"] for r in parts[tp].records], np.int64)
