"""Compaction (kafkalog.cleaner) against a plain transcription of Kafka's cleaner (``Cleaner.java``) written
here, on small partition folders built by these helpers; also the pure pieces (cleanable offsets, grouping,
chunking) on hand-made inputs. The cleaner tests import these helpers; tests/cleaner/test_cleaner_model.py
holds the model's own tests."""
from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
from kafka.record.memory_records import MemoryRecords

from kafkalog.checkpoint.offset import write_offset_checkpoint
from kafkalog.fs.names import CLEANER_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT, format_segment_file_name
from kafkalog.cleaner import CleanOptions, clean_partition
from kafkalog.config import LogConfig, configs_from_mappings
from kafkalog.format import control_record as cr, record_batch as rb
from kafkalog.index import build_indexes

T0 = 1_700_000_000_000
DAY = 86_400_000
TOPIC = "compacted"


# --- a logical view of a log ------------------------------------------------------------------

@dataclass
class B:
    """One batch as the tests reason about it."""

    base: int
    last: int
    records: List[Tuple[int, Optional[bytes], Optional[bytes]]]   # (offset, key, value)
    pid: int = -1
    epoch: int = -1
    txn: bool = False
    control: bool = False
    horizon: Optional[int] = None
    codec: int = 0
    log_append_time: bool = False
    seq: Optional[int] = None      # base sequence to write (None: 0 for a producer's data, else -1)

    @property
    def ctype(self) -> Optional[int]:
        return cr.parse_control_type(self.records[0][1]) if self.control and self.records else None


def data(base, kvs, *, pid=-1, txn=False, gap=0) -> B:
    recs = [(base + i, k, v) for i, (k, v) in enumerate(kvs)]
    return B(base, base + len(kvs) - 1 + gap, recs, pid, 0 if pid >= 0 else -1, txn)


def marker(offset, pid, ctype) -> B:
    return B(offset, offset, [(offset, cr.control_key(ctype), cr.end_txn_marker_value(1))], pid, 0, True, True)


def encode(b: B) -> bytes:
    recs = [rb.V2Record(o, T0 + b.last if b.log_append_time else T0 + o, k, v) for o, k, v in b.records]
    return rb.encode_batch(recs, base_offset=b.base, last_offset_delta=b.last - b.base, transactional=b.txn,
                           codec=b.codec, timestamp_type=rb.LOG_APPEND_TIME if b.log_append_time else rb.CREATE_TIME,
                           control=b.control, producer_id=b.pid, producer_epoch=b.epoch,
                           base_sequence=b.seq if b.seq is not None else (0 if b.pid >= 0 and not b.control else -1),
                           delete_horizon_ms=b.horizon, partition_leader_epoch=0,
                           max_timestamp=None if b.records else T0 + b.last)


def write_segment_files(d: Path, base: int, batches: List[B], open_txns: Dict[int, int], *,
                        mtime_ns: int) -> Dict[int, int]:
    """One segment as a broker leaves it: .log, recovery-style .index/.timeindex, .txnindex when a
    transaction aborts in it. ``open_txns`` (producer -> first offset) carries transactions in;
    returns those still open at its end."""
    from kafkalog.index.builder import replay_transactions
    from kafkalog.index.transaction_index import TransactionIndex
    raw = [encode(b) for b in batches]
    pos = np.cumsum([0] + [len(r) for r in raw])[:-1]
    oi, ti = build_indexes(base_offset=base, positions=pos.astype(np.int64),
                           sizes=np.array([len(r) for r in raw], np.int64),
                           last_offsets=np.array([b.last for b in batches], np.int64),
                           max_timestamps=np.array([T0 + max([o for o, _k, _v in b.records] or [b.last])
                                                    for b in batches], np.int64))
    cols = {"base_offset": [b.base for b in batches], "producer_id": [b.pid for b in batches],
            "is_transactional": [b.txn for b in batches], "is_control": [b.control for b in batches],
            "control_type": [b.ctype if b.control else -1 for b in batches]}
    aborted, open_txns = replay_transactions(batches=cols, open_txn_first_offsets=open_txns)
    (d / format_segment_file_name(base, "log")).write_bytes(b"".join(raw))
    (d / format_segment_file_name(base, "index")).write_bytes(oi.to_bytes())
    (d / format_segment_file_name(base, "timeindex")).write_bytes(ti.to_bytes())
    if aborted:
        (d / format_segment_file_name(base, "txnindex")).write_bytes(TransactionIndex(base, aborted).to_bytes())
    for suffix in ("log", "index", "timeindex"):
        os.utime(d / format_segment_file_name(base, suffix), ns=(mtime_ns, mtime_ns))
    return open_txns


def write_partition(log_dir: Path, segments: List[List[B]], *, checkpoint: Optional[int] = None,
                    high_watermark: Optional[int] = None, partition: int = 0, mtime_ms: int = T0) -> Path:
    """A partition folder as a broker leaves it: .log, recovery-style .index/.timeindex, .txnindex."""
    d = log_dir / f"{TOPIC}-{partition}"
    d.mkdir(parents=True)
    open_txns: Dict[int, int] = {}
    leo = 0
    for i, batches in enumerate(segments):
        base = batches[0].base if batches else leo
        if i and segments[i - 1]:
            base = max(base, segments[i - 1][-1].last + 1) if not batches else batches[0].base
        open_txns = write_segment_files(d, base, batches, open_txns, mtime_ns=mtime_ms * 10**6 + i)
        if batches:
            leo = batches[-1].last + 1
    write_offset_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT,
                            {(TOPIC, partition): leo if high_watermark is None else high_watermark})
    if checkpoint is not None:
        write_offset_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT, {(TOPIC, partition): checkpoint})
    return d


def read_partition(d: Path) -> List[List[B]]:
    """Decode every segment with kafka-python (CRC checked): the oracle's view of the folder."""
    out = []
    for log in sorted(d.glob("*.log")):
        segment = []
        mr = MemoryRecords(log.read_bytes())
        while mr.has_next():
            x = mr.next_batch()
            if x is None:
                break
            assert x.validate_crc(), f"{log.name}: batch at {x.base_offset} fails kafka-python's CRC check"
            recs = [(r.offset, r.key, r.value) for r in x]
            horizon = x.first_timestamp if x.attributes & rb.DELETE_HORIZON_FLAG_MASK else None
            segment.append(B(x.base_offset, x.last_offset, recs, x.producer_id, x.producer_epoch,
                             bool(x.is_transactional), bool(x.is_control_batch), horizon,
                             x.attributes & rb.COMPRESSION_CODEC_MASK, x.timestamp_type == rb.LOG_APPEND_TIME))
        out.append(segment)
    return out


def flatten(segments: List[List[B]]) -> List[B]:
    return [b for s in segments for b in s]


def records_of(batches: List[B]) -> List[Tuple[int, Optional[bytes], Optional[bytes]]]:
    return [r for b in batches for r in b.records]


def log_config(**overrides) -> LogConfig:
    topic = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0", "delete.retention.ms": str(DAY)}
    topic.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
    return configs_from_mappings(topics={TOPIC: topic}).for_topic(TOPIC)


# --- the reference: Kafka's Cleaner over the logical view, one round, one group ----------------------

@dataclass
class Aborted:
    pid: int
    first: int
    marker: int


def aborted_txns(batches: List[B]) -> List[Aborted]:
    """Aborted transactions that held data: first data offset .. ABORT marker, per producer."""
    out, open_first = [], {}
    for b in batches:
        if b.pid < 0:
            continue
        if b.control:
            first = open_first.pop(b.pid, None)
            if first is not None and b.ctype == cr.ABORT:
                out.append(Aborted(b.pid, first, b.base))
        elif b.txn:
            open_first.setdefault(b.pid, b.base)
    return out


def reference_round(segments: List[List[B]], *, first_dirty: int, now: int, delete_retention_ms: int,
                    active_last_data: Dict[int, int], active_no_data: Optional[Dict[int, int]] = None,
                    high_watermark: Optional[int] = None) -> Tuple[List[List[B]], int]:
    """(segments after one round, new checkpoint). All recopied segments form one group (tests use
    a large segment.bytes); the upper bound is the active segment's base unless a transaction is
    open; ``active_last_data`` maps each active producer to its last data offset, ``active_no_data``
    each active producer WITHOUT a data offset to its epoch (its control batches of that epoch are
    kept: ``isBatchLastRecordOfProducer``); ``high_watermark`` (default: the log end offset, as
    ``write_partition`` writes it): an emptied batch ending right below it is kept (KAFKA-20452)."""
    active_no_data = active_no_data or {}
    batches = flatten(segments)
    hw = high_watermark if high_watermark is not None else max((b.last + 1 for b in batches), default=0)
    bases = [s[0].base for s in segments if s]
    open_first = {}
    for b in batches:
        if b.pid >= 0 and b.control:
            open_first.pop(b.pid, None)
        elif b.pid >= 0 and b.txn:
            open_first.setdefault(b.pid, b.base)
    lso = min(open_first.values(), default=None)
    limit = bases[-1] if lso is None else min(lso, bases[-1])
    upper = max(b for b in bases if b <= limit)
    upper = max(upper, first_dirty) if upper > first_dirty else upper
    aborted = aborted_txns(batches)

    def is_aborted(b: B) -> bool:
        return b.txn and not b.control and any(a.pid == b.pid and a.first <= b.last < a.marker for a in aborted)

    latest: Dict[bytes, int] = {}
    for b in batches:
        if b.control or is_aborted(b):
            continue
        for o, k, _v in b.records:
            if k is not None and first_dirty <= o < upper:
                latest[k] = max(latest.get(k, -1), o)
    out_segments = []
    for seg in segments:
        if not seg or seg[0].base >= upper:
            out_segments.append(seg)
            continue
        out_segments.append(seg)
    recopied = [b for b in batches if b.base < upper]
    result = []
    for idx, b in enumerate(recopied):
        if b.control:
            if b.ctype == cr.ABORT:
                txn = [a for a in aborted if a.pid == b.pid and a.marker == b.base]
                can_discard = not (txn and any(is_aborted(x) and x.pid == b.pid and txn[0].first <= x.last < b.base
                                               for x in recopied))
            elif b.ctype == cr.COMMIT:
                prev = max([x.base for x in recopied if x.control and x.pid == b.pid and x.base < b.base],
                           default=-1)
                can_discard = not any(x.txn and not x.control and x.pid == b.pid and prev < x.base < b.base
                                      for x in recopied)
            else:
                can_discard = not b.records         # other types: never; an empty control batch: always
            discard = can_discard and b.horizon is not None and b.horizon <= now
        else:
            can_discard = discard = is_aborted(b)
        retain_empty = ((b.pid >= 0 and active_last_data.get(b.pid) == b.last and not b.control)
                        or (b.control and b.pid >= 0 and active_no_data.get(b.pid, -2) == b.epoch)
                        or b.last + 1 == hw)
        if discard and not retain_empty:
            continue
        kept = []
        for o, k, v in b.records:
            if discard:
                continue
            if b.control or o >= upper:
                kept.append((o, k, v))
            elif k is None or o < latest.get(k, -1):
                continue
            elif v is None and b.horizon is not None and now >= b.horizon:
                continue
            else:
                kept.append((o, k, v))
        if kept:
            stamp = (any(v is None for _o, _k, v in kept) and not b.control) or (can_discard and b.control)
            horizon = b.horizon if b.horizon is not None else (now + delete_retention_ms if stamp else None)
            result.append(replace(b, records=kept, horizon=horizon))
        elif retain_empty:
            result.append(replace(b, records=[], horizon=None, codec=0))
    tail = [s for s in segments if s and s[0].base >= upper]
    return [result] + tail, upper


def folded_options(base: CleanOptions = CleanOptions(), **kw) -> dict:
    """``kw`` with the ``CleanOptions`` fields among them folded into one ``options=`` (on top of
    ``base``): the tests' shorthand for ``clean_partition(..., options=CleanOptions(...))``."""
    names = {f.name for f in fields(CleanOptions)}
    picked = {k: kw.pop(k) for k in list(kw) if k in names}
    return dict(kw, options=replace(base, **picked))


def clean(d: Path, now: int, config: Optional[LogConfig] = None, **kw):
    return clean_partition(d, config=config or log_config(segment_bytes=1 << 30), now_ms=now, **folded_options(**kw))



def example_log() -> List[List[B]]:
    k = lambda i: b"k%d" % i  # noqa: E731
    return [
        [data(0, [(k(1), b"a"), (k(2), b"b")]), data(2, [(k(1), b"c"), (None, b"nokey")]),
         data(4, [(k(3), b"x")], pid=7, txn=True), marker(5, 7, cr.ABORT)],
        [data(6, [(k(2), None), (k(4), b"d")]), data(8, [(k(5), b"e")], pid=8, txn=True), marker(9, 8, cr.COMMIT),
         data(10, [(k(1), b"f")])],
        [data(11, [(k(4), b"g")])],                      # the active segment
    ]
