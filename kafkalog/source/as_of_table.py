"""The rows of an as-of table, computed in the task that reads a partition: two passes over the records
below the cut (``kafkalog.source.as_of`` plans them), no shuffle.

1. **The key map.** Every counted record's key goes into the cleaner's compiled map
   (``kafkalog.cleaner.key_map``: exact keys, not digests), with its offset, by ``put_keys_kernel``
   (as ``Cleaner.buildOffsetMap`` fills Kafka's map); records come in offset order, so each key ends
   holding its latest offset below the cut.
2. **The winners.** A second read asks the map for each counted record's key and keeps the record
   whose offset is the one the map holds and whose value is not null (a tombstone wins by deleting).

Counted: offset in [log start, cut), not a control record, a non-null key, not data of a dropped
transaction (aborted, or open at the cut). The rows come out in offset order, one per live key.
The map's budget is ``kafkalog.asOfMapBytes`` (default 1 GiB): a partition with more distinct keys
than it holds is an error naming it. ``reference_rows`` is the same answer as a plain Python replay
(the tests' oracle).
"""
from __future__ import annotations

import os
from typing import Iterator, List, Optional, Sequence

import numpy as np
import pyarrow as pa
from numba import njit

from kafkalog.cleaner.key_hash import key_hash
from kafkalog.cleaner.key_map import KeyMap, map_put
from kafkalog.errors import KafkalogError
from kafkalog.log.records_io import ReadOptions, SegmentReader
from kafkalog.source.as_of import AsOfPartition, AsOfPlan, drop_mask

_CACHE = os.path.isfile(__file__)
LOAD_FACTOR = 0.9                   # Kafka's log.cleaner.io.buffer.load.factor default
_NO_BITS = np.zeros(1, np.uint8)    # map_put's bitsets, unused (no marking)


@njit(cache=_CACHE, nogil=True)
def put_keys_kernel(key_offsets, key_data, offsets, start, weak, slots, arena, state, no_bits):
    """map[key of row j] = offsets[j] for rows j >= ``start`` of an Arrow binary column (its offsets and
    data buffers; every row non-null), in order. Returns -1, or the row whose new key did not fit."""
    for j in range(start, offsets.shape[0]):
        p = np.int64(key_offsets[j])
        n = np.int64(key_offsets[j + 1]) - p
        h = key_hash(key_data, p, n, weak)
        if not map_put(slots, arena, state, key_data, p, n, h, offsets[j], np.int64(0), False, no_bits, no_bits):
            return j
    return -1


def _key_buffers(keys: pa.Array):
    _validity, key_offsets, key_data = keys.buffers()
    offs = np.frombuffer(key_offsets, dtype=np.int32)[keys.offset:keys.offset + len(keys) + 1]
    data = np.frombuffer(key_data, dtype=np.uint8) if key_data is not None and key_data.size else np.zeros(1, np.uint8)
    return offs, data


def put_keys(m: KeyMap, keys: pa.Array, offsets: np.ndarray, where: str) -> None:
    """Every key of ``keys`` (binary, non-null) into ``m`` with its offset, growing the map as needed.

    :param m: the map.
    :param keys: the keys, in offset order.
    :param offsets: their offsets (int64).
    :param where: the partition, for the error when the keys do not fit."""
    offs, data = _key_buffers(keys)
    offsets = offsets.astype(np.int64, copy=False)
    start = 0
    while start >= 0:
        start = put_keys_kernel(offs, data, offsets, start, m.weak_hash, *m.table(), _NO_BITS)
        if start >= 0 and not m.grow():
            raise KafkalogError(f"{where}: more distinct keys than the as-of key map holds in {m.budget} bytes "
                                f"({len(m)} keys so far)", hint="raise the option kafkalog.asOfMapBytes")


def counted(part: AsOfPartition, *, window_bytes: int = 8 << 20, threads: int = 1) -> Iterator[pa.RecordBatch]:
    """The partition's decoded records that count (module docstring), in offset order."""
    options = ReadOptions(window_bytes=window_bytes, threads=threads)
    for piece in part.pieces:
        reader = SegmentReader(piece.log, options, topic=piece.topic, partition=piece.partition,
                               start=piece.start, end=piece.end)
        for batch in reader:
            if batch.num_rows == 0:
                continue
            offsets = batch.column("offset").to_numpy()
            if offsets[0] >= piece.offset_hi:
                return
            keep = (offsets >= piece.offset_lo) & (offsets < piece.offset_hi)
            keep &= ~batch.column("isControl").to_numpy(zero_copy_only=False)
            keep &= batch.column("key").is_valid().to_numpy(zero_copy_only=False)
            if piece.aborted:
                keep &= ~drop_mask(batch.column("producerId").to_numpy(),
                                   batch.column("isTransactional").to_numpy(zero_copy_only=False),
                                   batch.column("baseOffset").to_numpy(), piece.aborted)
            if not keep.all():
                batch = batch.filter(pa.array(keep))
            if batch.num_rows:
                yield batch


def partition_rows(part: AsOfPartition, *, map_bytes: int, weak_hash: bool = False,
                   window_bytes: int = 8 << 20, threads: int = 1) -> Iterator[pa.RecordBatch]:
    """The as-of table's rows of one partition (decoded record batches, the winners only).

    :param part: the partition's plan.
    :param map_bytes: the key map's budget.
    :param weak_hash: the tests' weak hash (every key collides on its slot: probes compare bytes).
    :param window_bytes: bytes of .log decoded at once.
    :param threads: decode threads."""
    if not part.pieces:
        return
    where = f"{part.topic}-{part.partition}"
    m = KeyMap(map_bytes, LOAD_FACTOR, weak_hash=weak_hash)
    for batch in counted(part, window_bytes=window_bytes, threads=threads):
        put_keys(m, batch.column("key"), batch.column("offset").to_numpy(), where)
    for batch in counted(part, window_bytes=window_bytes, threads=threads):
        offsets = batch.column("offset").to_numpy().astype(np.int64, copy=False)
        latest = m.lookup(batch.column("key"), np.arange(batch.num_rows, dtype=np.int64))
        keep = (latest == offsets) & batch.column("value").is_valid().to_numpy(zero_copy_only=False)
        if keep.all():
            yield batch
        elif keep.any():
            yield batch.filter(pa.array(keep))


def as_of_table(plan: AsOfPlan, *, map_bytes: int = 1 << 28, weak_hash: bool = False) -> Optional[pa.Table]:
    """Every partition's rows as one Arrow table (decoded columns, with topic and partition), None when
    no partition has a row. No Spark: what the data source's tasks compute, run here in turn."""
    batches = [b for part in plan.partitions for b in partition_rows(part, map_bytes=map_bytes, weak_hash=weak_hash)]
    return pa.Table.from_batches(batches) if batches else None


def reference_rows(records: Sequence[dict], cut: int, *, log_start: int = 0) -> List[dict]:
    """The as-of table replayed record by record as a read_committed consumer would: the oracle of the
    tests. First which transactional records are decided committed below the cut (their producer's
    COMMIT marker follows them below the cut; aborted and still open ones are not), then every counted
    record in offset order, the later offset of a key replacing the earlier, a null value deleting it.

    :param records: a partition's records, control records included, as dicts with offset, key, value,
        producerId, isTransactional, isControl, and for a marker ``control``: 'commit' or 'abort'.
    :param cut: records at or past it do not count.
    :param log_start: records below it are not held.
    :returns: the winning records, by offset."""
    rows = [r for r in sorted(records, key=lambda r: r["offset"]) if log_start <= r["offset"] < cut]
    open_txn: dict = {}               # producer id -> offsets of its transaction's records so far
    committed: set = set()
    for r in rows:
        if r["isControl"]:
            decided = open_txn.pop(r["producerId"], [])
            if r["control"] == "commit":
                committed.update(decided)
        elif r["isTransactional"]:
            open_txn.setdefault(r["producerId"], []).append(r["offset"])
    table: dict = {}
    for r in rows:
        if r["isControl"] or r["key"] is None or (r["isTransactional"] and r["offset"] not in committed):
            continue
        if r["value"] is None:
            table.pop(r["key"], None)
        else:
            table[r["key"]] = r
    return sorted(table.values(), key=lambda r: r["offset"])
