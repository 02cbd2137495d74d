"""Segment files as Arrow: read a .log (batch by batch, as Kafka's ``FileRecords`` does), streamed in
bounded RecordBatches or whole, and write a segment — .log plus the .index and .timeindex Kafka's
recovery (``LogSegment.recover``) would build for it.
"""
from __future__ import annotations

import errno
import os
from collections import deque
from contextlib import contextmanager
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Deque, Iterator, List, Optional, Sequence

import numpy as np
import pyarrow as pa

from kafkalog.fs import filesystem
from kafkalog.fs.durable import replace_file
from kafkalog.engine import REFERENCE, resolve as resolve_engine
from kafkalog.errors import InvalidFileNameError, KafkalogError, OutOfMemoryError
from kafkalog.format import compression as codecs, legacy_record as legacy, record_batch as rb
from kafkalog.format.compression import release_frames
from kafkalog.format.buffer_pool import available_memory_bytes
from kafkalog.format import batch_slices
from kafkalog.format.batch_slices import BatchSlices, needs_slicing
from kafkalog.format.decoder import decode_window
from kafkalog.topic_partition import UNKNOWN_PARTITION, TopicPartition
from kafkalog.format.file_records import (OK_END, OK_WINDOW, HeaderArrays, check_crcs, crc_error,
                                          scan_buffer, scan_window, walk_error)
from kafkalog.format.schema import RECORD_SCHEMA

DEFAULT_WINDOW_BYTES = 16 << 20       # file bytes walked per window; decoded data per RecordBatch is bounded too
DEFAULT_BATCH_BYTES = 16 * 1024       # producers' batch.size, for batches write_segment forms itself
# Header slots of a first window. Sizing every window for its bound (a 16 MiB window could hold
# 645k of the smallest entries: 5 MiB per int64 column) made numpy map each column with huge pages,
# so every window zeroed ~16 MiB to use ~12 KB.
FIRST_WINDOW_SLOTS = 4096
SMALLEST_ENTRY_BYTES = rb.LOG_OVERHEAD + legacy.RECORD_OVERHEAD_V0   # offset, size, then a v0 message: 26
MIN_SPLIT_BYTES = 1 << 20             # a file is not cut into windows smaller than this to share it out
# The fixed-width columns of one decoded row that no other row shares: offset, timestamp, baseOffset,
# lastOffset, batchPosition (8 bytes each) and the key and value offsets (4 each). read_segment refuses
# a file whose declared records need more than the memory left, once that is past TABLE_CHECK_FROM_BYTES.
TABLE_ROW_BYTES = 48
TABLE_CHECK_FROM_BYTES = 256 << 20
GIB = 1 << 30


@dataclass(frozen=True)
class ReadOptions:
    """How a segment is read: ``verify_crc`` (check each v2 batch's CRC-32C), ``on_corrupt``
    (``raise``, or ``stop`` to keep the valid prefix as Kafka's recovery does), ``max_batch_bytes`` (a
    batch larger than this is corrupt), ``window_bytes`` (bytes decoded per window), ``engine`` and
    ``threads`` (windows decoded at once; 0 = one per core, at most 4).

    Example::

        import kafkalog
        options = kafkalog.ReadOptions(on_corrupt="stop", window_bytes=8 << 20)
        reader = kafkalog.SegmentReader("logs/orders-0/00000000000000000000.log", options)
    """
    verify_crc: bool = True
    on_corrupt: str = "raise"         # or "stop": keep the valid prefix, as Kafka's recovery does
    max_batch_bytes: int = codecs.DEFAULT_MAX_BATCH_BYTES
    window_bytes: int = DEFAULT_WINDOW_BYTES
    engine: Optional[str] = None      # kafkalog.engine: "reference" | "compiled" (None: $KAFKALOG_ENGINE)
    threads: int = 0                  # windows decoded at once; 0 = one per core (at most 4)

    def __post_init__(self):
        if self.on_corrupt not in ("raise", "stop"):
            raise ValueError(f"on_corrupt must be 'raise' or 'stop', not {self.on_corrupt!r}")
        for name in ("max_batch_bytes", "window_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.threads < 0:
            raise ValueError(f"threads must be 0 (one per core) or more, not {self.threads}")


def partition_of(path) -> TopicPartition:
    """Topic and partition from the folder a file sits in (``orders-3``); None outside one."""
    from kafkalog.fs.names import parse_partition_dir_name
    folder = (Path(path) if filesystem.is_uri(path) else Path(path).resolve()).parent.name
    try:
        topic, partition, _kind = parse_partition_dir_name(folder)
    except InvalidFileNameError:
        return UNKNOWN_PARTITION
    return TopicPartition(topic, partition)


@dataclass
class _WindowResult:
    batches: List[pa.RecordBatch]
    batches_read: int
    valid_bytes: Optional[int]            # end of the last decoded batch (None: nothing decoded)
    error: Optional[KafkalogError] = None


class SegmentReader:
    """Streams one .log as RecordBatches; after iteration, ``valid_bytes`` and ``error`` tell where
    and why it stopped (``error`` is only set with on_corrupt="stop").

    Windows of ``window_bytes`` are walked in file order, then checked (CRC) and decoded on a small
    thread pool — the numba kernel, the codecs and CRC-32C release the GIL — and yielded in order.
    ``path``: the .log (or a URI); ``options``: a ReadOptions; ``topic``/``partition``: the columns'
    values (default: from the folder's name); ``start``/``end``: a byte range of batch boundaries.

    Example::

        import kafkalog
        reader = kafkalog.SegmentReader("logs/orders-0/00000000000000000000.log",
                                        kafkalog.ReadOptions(on_corrupt="stop"))
        rows = sum(batch.num_rows for batch in reader)
        print(rows, reader.valid_bytes, reader.error)
    """

    def __init__(self, path, options: ReadOptions = ReadOptions(), *, topic: Optional[str] = None,
                 partition: Optional[int] = None, start: int = 0, end: Optional[int] = None):
        self.path = os.fspath(path)
        self.options = options
        if start < 0 or (end is not None and end < start):
            raise ValueError(f"byte range [{start}, {end}) of {self.path} is not a range")
        self.start, self.end = start, end     # a byte range of the file; both must be batch boundaries
        pid = partition_of(path)
        self.pid = TopicPartition(topic if topic is not None else pid.topic,
                               partition if partition is not None else pid.partition)
        self.valid_bytes = start
        self.error: Optional[KafkalogError] = None
        self.batches_read = 0
        self.keeps_all = False            # the caller keeps every row: check the table fits first
        self._declared = 0

    def _check_table_fits(self, h: HeaderArrays) -> None:
        """For a caller that keeps every row (read_segment): refuse, before decoding, a file whose
        declared records alone would take more memory than the process can still get."""
        if len(h):
            # a count larger than the batch's records can hold is an error decoding will name
            compressed = (h.attributes & rb.COMPRESSION_CODEC_MASK) != 0
            room = np.where(compressed, self.options.max_batch_bytes, h.size.astype(np.int64) - rb.RECORDS_OFFSET)
            plausible = np.minimum(h.recordsCount.astype(np.int64), np.maximum(room, 0) // rb.MIN_RECORD_SIZE)
            self._declared += int(plausible[h.magic == 2].sum())
        need = self._declared * TABLE_ROW_BYTES
        if need < TABLE_CHECK_FROM_BYTES:
            return
        available = available_memory_bytes()
        if available is not None and need > available:
            raise OutOfMemoryError(
                f"the segment declares {self._declared:,} records up to the window at byte {int(h.position[0])}: "
                f"a table of them needs at least {need / GIB:.1f} GiB, more than the {available / GIB:.1f} GiB "
                "this process can still allocate", path=self.path, position=int(h.position[0]),
                hint="stream it with iter_segment (bounded RecordBatches), or give the process more memory")

    def _threads(self, engine: str) -> int:
        if engine == REFERENCE:
            return 1
        return self.options.threads or max(1, min(4, os.cpu_count() or 1))

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        opts = self.options
        engine = resolve_engine(opts.engine)
        threads = self._threads(engine)
        with filesystem.open_view(self.path, self.start, self.end) as f, ThreadPoolExecutor(max_workers=threads) as pool:
            buf = f.array
            pending: Deque[Future] = deque()
            for h, walk_problem in self._windows(buf, engine, threads):
                if self.keeps_all:
                    self._check_table_fits(h)
                pending.append(pool.submit(self._decode_window, buf, h, walk_problem, engine))
                if len(pending) > threads:
                    stop = yield from self._deliver(pending.popleft())
                    if stop:
                        for fut in pending:
                            fut.cancel()
                        return
            while pending:
                if (yield from self._deliver(pending.popleft())):
                    for fut in pending:
                        fut.cancel()
                    return

    def _windows(self, buf, engine, threads: int = 1):
        """Walk the file window by window: (header arrays, walk problem or None).

        Windows split the file evenly into a multiple of ``threads``, each at most ``window_bytes``
        (and at least MIN_SPLIT_BYTES), so the threads finish together: a 9 MB file was one window
        for one thread, and 85 MB in 16 MiB windows five and a bit.

        Header arrays are sized for the batches a window holds, not for the most it could hold:
        FIRST_WINDOW_SLOTS to start, four times more after a window that filled them (it ends
        early and the next one goes on), up to one slot per smallest entry of the window's bytes.
        """
        opts = self.options
        end = len(buf) if self.end is None else min(len(buf), self.end)
        pos = min(self.start, end)
        window = even_window_bytes(end - pos, opts.window_bytes, threads)
        slots = FIRST_WINDOW_SLOTS
        while True:
            most = max(16, min(window, end - pos) // SMALLEST_ENTRY_BYTES + 2)
            h = HeaderArrays.empty(min(slots, most))
            n, status, stop_pos = scan_window(buf, pos, end, window, h, engine)
            problem = None if status in (OK_END, OK_WINDOW) else walk_error(status, buf, stop_pos, end, self.path)
            yield h.head(n), problem
            if status != OK_WINDOW:
                return
            if n == len(h):
                slots *= 4
            pos = stop_pos

    def _deliver(self, fut: Future):
        """Yield one window's batches; return True when the walk must stop."""
        result: _WindowResult = fut.result()
        for item in result.batches:
            if isinstance(item, BatchSlices):      # one huge batch, validated, decoded slice by slice
                with out_of_memory_as_error(self.path, item.position):
                    yield from item
            else:
                yield item
        self.batches_read += result.batches_read
        if result.valid_bytes is not None:
            self.valid_bytes = result.valid_bytes
        if result.error is not None:
            if self.options.on_corrupt == "raise" or isinstance(result.error, OutOfMemoryError):
                raise result.error
            self.error = result.error
            return True
        return False

    def _decode_window(self, buf, h: HeaderArrays, walk_problem: Optional[KafkalogError], engine: str) -> _WindowResult:
        """CRC-check and decode one window (runs on the pool)."""
        opts = self.options
        problem = walk_problem
        if opts.verify_crc and len(h):
            valid = check_crcs(buf, h, len(h))
            if not valid.all():
                bad = int(np.argmin(valid))
                problem = crc_error(buf, h, bad, self.path)
                h = h.head(bad)
        out = _WindowResult([], 0, None)
        slice_rows = batch_slices.SLICE_RECORDS
        huge = needs_slicing(h, slice_rows).tolist()
        i = 0
        while i < len(h):
            stop = next((j for j in huge if j >= i), len(h))     # windows end before a huge batch
            try:
                if i == stop:
                    with out_of_memory_as_error(self.path, int(h.position[i])):
                        sliced = BatchSlices(buf, h.slice(i, i + 1), self.pid, engine=engine, path=self.path,
                                             max_batch_bytes=opts.max_batch_bytes, rows=slice_rows)
                        sliced.validate()
                    out.batches.append(sliced)
                    out.batches_read += 1
                    out.valid_bytes = int(h.position[i] + h.size[i])
                    i += 1
                    continue
                with out_of_memory_as_error(self.path, int(h.position[i])):
                    batch, k = decode_window(buf, h.slice(i, stop), self.pid, engine=engine, path=self.path,
                                             verify_crc=opts.verify_crc, max_batch_bytes=opts.max_batch_bytes,
                                             budget=opts.window_bytes)
            except KafkalogError as e:
                release_frames(e)
                if opts.on_corrupt == "raise" or isinstance(e, OutOfMemoryError):   # memory is not corruption
                    out.error = e
                    return out
                # A reader stops at the bad batch, after the valid ones before it.
                bad = self._bad_batch_index(h, i, e)
                if bad > i:
                    batch, k = decode_window(buf, h.slice(i, bad), self.pid, engine=engine, path=self.path,
                                             verify_crc=opts.verify_crc, max_batch_bytes=opts.max_batch_bytes)
                    self._add(out, batch, k, h, i)
                out.valid_bytes = int(h.position[bad])
                out.error = e
                return out
            self._add(out, batch, k, h, i)
            i += k
        out.error = problem
        return out

    @staticmethod
    def _add(out: _WindowResult, batch: pa.RecordBatch, k: int, h: HeaderArrays, i: int) -> None:
        if batch.num_rows:
            out.batches.append(batch)
        out.batches_read += k
        out.valid_bytes = int(h.position[i + k - 1] + h.size[i + k - 1])

    @staticmethod
    def _bad_batch_index(h: HeaderArrays, i: int, e: KafkalogError) -> int:
        """Index of the batch holding the error position (errors name a position inside the file)."""
        if e.position is None:
            return i
        idx = int(np.searchsorted(h.position[i:], e.position, side="right")) - 1
        return i + max(idx, 0)


@contextmanager
def out_of_memory_as_error(path, position: Optional[int]) -> Iterator[None]:
    """Running out of memory while decoding (MemoryError, or ENOMEM from an allocation or a mapping)
    becomes a KafkalogError naming the file and the batch, with what was held released first."""
    try:
        yield
    except MemoryError as exc:
        release_frames(exc)
        raise OutOfMemoryError("out of memory decoding the batch at this position", path=path,
                               position=position) from None
    except OSError as exc:
        if exc.errno != errno.ENOMEM:
            raise
        release_frames(exc)
        raise OutOfMemoryError(f"out of memory decoding the batch at this position ({exc.strerror})", path=path,
                               position=position) from None


def even_window_bytes(file_bytes: int, window_bytes: int, threads: int) -> int:
    """Window size that cuts ``file_bytes`` into a multiple of ``threads`` windows of at most
    ``window_bytes``; windows end at the first batch boundary past it, so the last may be small."""
    if threads <= 1 or file_bytes <= MIN_SPLIT_BYTES:
        return window_bytes
    rounds = -(-file_bytes // (window_bytes * threads))
    return min(window_bytes, max(MIN_SPLIT_BYTES, -(-file_bytes // (rounds * threads))))


def iter_segment(path, *, topic: Optional[str] = None, partition: Optional[int] = None, start: int = 0,
                 end: Optional[int] = None, **options) -> Iterator[pa.RecordBatch]:
    """Stream a .log as ``pyarrow.RecordBatch``es of RECORD_SCHEMA, bounded by ``window_bytes``.
    ``path``: the .log (or a URI); ``topic``/``partition``: the columns' values (default: from the
    folder's name); ``start``/``end``: read only the batches in that byte range (both batch boundaries,
    e.g. offset index positions; ``end`` None = the end of the file); ``options``: ReadOptions' fields.

    Example::

        import kafkalog
        for batch in kafkalog.iter_segment("logs/orders-0/00000000000000000000.log", window_bytes=16 << 20):
            print(batch.num_rows)
    """
    return iter(SegmentReader(path, ReadOptions(**options), topic=topic, partition=partition, start=start, end=end))


def read_segment(path, *, topic: Optional[str] = None, partition: Optional[int] = None, **options) -> pa.Table:
    """Decode a whole .log into a ``pyarrow.Table``, one row per record in file order.

    ``path``: the .log (or a URI); ``topic``/``partition``: the columns' values (default: from the
    folder's name). Options: verify_crc (True), on_corrupt ("raise" | "stop"), max_batch_bytes,
    window_bytes, engine (``kafkalog.engine``: "reference" | "compiled"; None takes ``$KAFKALOG_ENGINE``).

    Example::

        import kafkalog
        table = kafkalog.read_segment("logs/orders-0/00000000000000000000.log")
        print(table.num_rows, table.column("offset")[0])
    """
    reader = SegmentReader(path, ReadOptions(**options), topic=topic, partition=partition)
    reader.keeps_all = True
    with out_of_memory_as_error(reader.path, None):
        batches = list(reader)
        return pa.Table.from_batches(batches, schema=RECORD_SCHEMA)


# --- writing -------------------------------------------------------------------------------

def _column(table: pa.Table, name: str, default=None) -> list:
    if name in table.column_names:
        return table.column(name).to_pylist()
    return [default] * table.num_rows


def _timestamps_ms(table: pa.Table) -> List[int]:
    if "timestamp" not in table.column_names:
        return [rb.NO_TIMESTAMP] * table.num_rows
    col = table.column("timestamp")
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.timestamp("ms", tz=col.type.tz)).cast(pa.int64())
    return [rb.NO_TIMESTAMP if t is None else int(t) for t in col.to_pylist()]


def _group_rows(table: pa.Table, *, keep_batches: bool, batch_bytes: int) -> List[List[int]]:
    """Row indexes per batch: the table's own batches (by batchPosition/baseOffset) or new ones."""
    n = table.num_rows
    if keep_batches:
        # A batch is identified by its position, base and last offset together: tables concatenated
        # from several segments repeat positions.
        names = [c for c in ("batchPosition", "baseOffset", "lastOffset") if c in table.column_names]
        ident = list(zip(*(_column(table, c) for c in names)))
        groups: List[List[int]] = []
        for i in range(n):
            if i and ident[i] == ident[i - 1]:
                groups[-1].append(i)
            else:
                groups.append([i])
        return groups
    keys, values = _column(table, "key"), _column(table, "value")
    groups, size = [], 0
    for i in range(n):
        rec = 24 + len(keys[i] or b"") + len(values[i] or b"")
        if groups and size + rec <= batch_bytes:
            groups[-1].append(i)
            size += rec
        else:
            groups.append([i])
            size = rec
    return groups


def encode_records(table: pa.Table, *, compression=None, magic: int = 2, batch_bytes: int = DEFAULT_BATCH_BYTES,
                   keep_batches: Optional[bool] = None, timestamp_type: int = rb.CREATE_TIME) -> bytes:
    """Encode an Arrow table of records as Kafka batches (the bytes of a .log).

    With batch-level columns (baseOffset, lastOffset, producerId, … as read_segment returns them)
    each batch is re-encoded keeping its header fields and codec; otherwise records are grouped into
    new batches of about ``batch_bytes``. ``compression`` (name or id) overrides the codec.

    A record table cannot carry batches without records (the cleaner's empty batches): they have no
    rows. Code that must keep them (compaction's write-back) encodes them with
    ``record_batch.encode_batch([], base_offset=…, last_offset_delta=…, …)``.

    ``table``: the records; ``magic``: 2 (v2 batches) or 0/1 (legacy messages); ``keep_batches``:
    re-encode the table's own batches (default: when it has the batch columns); ``timestamp_type``:
    CreateTime (0) or LogAppendTime (1) for new batches.

    Example::

        import kafkalog
        table = kafkalog.read_segment("logs/orders-0/00000000000000000000.log")
        data = kafkalog.encode_records(table, compression="zstd")
        print(len(data), "bytes")
    """
    if "offset" not in table.column_names:
        raise ValueError("records need an 'offset' column")
    keep = ("baseOffset" in table.column_names and "lastOffset" in table.column_names) if keep_batches is None \
        else keep_batches
    forced_codec = None if compression is None else codecs.parse_codec(compression)
    offsets = [int(o) for o in _column(table, "offset")]
    ts = _timestamps_ms(table)
    keys, values = _column(table, "key"), _column(table, "value")
    headers = _column(table, "headers", [])
    out = []
    for rows in _group_rows(table, keep_batches=keep, batch_bytes=batch_bytes):
        first = rows[0]
        if magic in (0, 1):
            row_codec = table.column("codec")[first].as_py() if keep and "codec" in table.column_names else 0
            codec = forced_codec if forced_codec is not None else (row_codec if row_codec in (0, 1, 2, 3) else 0)
            row_type = table.column("timestampType")[first].as_py() if "timestampType" in table.column_names else 0
            recs = [(offsets[i], ts[i], keys[i], values[i]) for i in rows]
            log_append = magic == 1 and (timestamp_type == rb.LOG_APPEND_TIME or (keep and row_type == 1))
            out.append(legacy.encode_message_set(recs, magic=magic, codec=codec,
                                                 log_append_time=max(ts[i] for i in rows) if log_append else None))
            continue
        records = [rb.V2Record(offsets[i], ts[i], keys[i], values[i],
                               [(h["key"], h["value"]) for h in (headers[i] or [])]) for i in rows]
        if keep:
            def batch_field(name, default):
                v = table.column(name)[first].as_py() if name in table.column_names else None
                return default if v is None else v
            codec = forced_codec if forced_codec is not None else batch_field("codec", 0)
            log_append = batch_field("timestampType", 0) == rb.LOG_APPEND_TIME
            base_offset = batch_field("baseOffset", offsets[first])
            out.append(rb.encode_batch(
                records, base_offset=base_offset,
                last_offset_delta=batch_field("lastOffset", offsets[rows[-1]]) - base_offset,
                codec=codec, timestamp_type=rb.LOG_APPEND_TIME if log_append else rb.CREATE_TIME,
                transactional=bool(batch_field("isTransactional", False)),
                control=bool(batch_field("isControl", False)),
                delete_horizon_ms=batch_field("deleteHorizonMs", None),
                producer_id=batch_field("producerId", rb.NO_PRODUCER_ID),
                producer_epoch=batch_field("producerEpoch", rb.NO_PRODUCER_EPOCH),
                base_sequence=batch_field("baseSequence", rb.NO_SEQUENCE),
                partition_leader_epoch=batch_field("partitionLeaderEpoch", rb.NO_PARTITION_LEADER_EPOCH)))
        else:
            out.append(rb.encode_batch(records, codec=forced_codec or 0, timestamp_type=timestamp_type,
                                       partition_leader_epoch=0))
    return b"".join(out)


def write_segment(directory, records: pa.Table, *, compression=None, magic: int = 2,
                  base_offset: Optional[int] = None, batch_bytes: int = DEFAULT_BATCH_BYTES,
                  keep_batches: Optional[bool] = None, index_interval_bytes: int = 4096,
                  timestamp_type: int = rb.CREATE_TIME, overwrite: bool = False) -> Path:
    """Write ``records`` as a segment in ``directory``: ``<20-digit base>.log`` with the ``.index`` and
    ``.timeindex`` Kafka's recovery builds for it (trimmed, final time entry). Returns the .log path.

    Every file is written to a temporary name, fsynced and renamed; an existing segment is refused
    unless ``overwrite``. ``compression``, ``magic``, ``batch_bytes``, ``keep_batches``,
    ``timestamp_type``: as :func:`encode_records`; ``base_offset``: the segment's (default: the first
    record's offset); ``index_interval_bytes``: the ``.index``'s spacing, as ``index.interval.bytes``.

    Example::

        import kafkalog
        table = kafkalog.read_segment("logs/orders-0/00000000000000000000.log")
        path = kafkalog.write_segment("out/orders-0", table, compression="zstd")
        print(path)          # out/orders-0/00000000000000000000.log, with its .index and .timeindex
    """
    from kafkalog.index.builder import build_indexes
    from kafkalog.fs.names import format_segment_file_name
    from kafkalog.index.offset_index import write_offset_index
    from kafkalog.index.time_index import write_time_index

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    data = encode_records(records, compression=compression, magic=magic, batch_bytes=batch_bytes,
                          keep_batches=keep_batches, timestamp_type=timestamp_type)
    scan = scan_buffer(np.frombuffer(data, dtype=np.uint8), verify_crc=True, engine=None)
    if base_offset is None:
        if records.num_rows == 0:
            raise ValueError("an empty segment needs an explicit base_offset")
        base_offset = int(scan.batches.column("baseOffset")[0].as_py()) if magic == 2 else \
            min(int(o) for o in records.column("offset").to_pylist())
    log_path = directory / format_segment_file_name(base_offset, "log")
    if log_path.exists() and not overwrite:
        raise KafkalogError(f"segment {log_path.name} already exists", path=log_path,
                            hint="pass overwrite=True to replace it, or choose another base_offset")
    b = scan.batches
    offset_index, time_index = build_indexes(
        base_offset=base_offset, positions=b.column("position").to_numpy(), sizes=b.column("size").to_numpy(),
        last_offsets=b.column("lastOffset").to_numpy(), max_timestamps=b.column("maxTimestamp").to_numpy(),
        index_interval_bytes=index_interval_bytes)
    replace_file(log_path, data)
    write_offset_index(directory / format_segment_file_name(base_offset, "index"), offset_index)
    write_time_index(directory / format_segment_file_name(base_offset, "timeindex"), time_index)
    return log_path


def scan_segment(path, **kwargs):
    """The batch walk of a .log (see kafkalog.format.file_records.scan_batches)."""
    from kafkalog.format.file_records import scan_batches
    return scan_batches(path, **kwargs)


__all__: Sequence[str] = ("ReadOptions", "SegmentReader", "iter_segment", "read_segment", "write_segment",
                          "encode_records", "partition_of", "scan_segment")
