"""Dumping record files (.log segments, raw .bin record sets, KRaft .checkpoint snapshots): one line per
batch and, with deep iteration, per record, then Kafka's truncated-tail line."""
from __future__ import annotations

import os

import numpy as np

from typing import Dict, Iterator, List
from kafkalog.java_types import INT32_MAX

from kafkalog.coordinator.record import decode_record, kafka_dump_text, record_json
from kafkalog.errors import CrcMismatchError, InvalidFileNameError, InvalidRecordError, KafkalogError, UnknownCodecError
from kafkalog.format import record_batch as rb
from kafkalog.format.compression import CODEC_NAMES
from kafkalog.tools.dump.dump_run import DumpRun
from kafkalog.tools.dump.batch_walk import (BatchView, RecordView, decode_records, legacy_first_offset, read_batch,
                                            tail_error, walk_batches)
from kafkalog.tools.dump.control_records import control_record_info
from kafkalog.tools.dump.file_names import BOOTSTRAP_SNAPSHOT, KRAFT_SNAPSHOT, absolute_path
from kafkalog.tools.dump.options import CLUSTER_METADATA_DECODER, coordinator_record_types
from kafkalog.metadata.metadata_record_serde import decode_metadata_record, kafka_dump_payload, metadata_record_json
from kafkalog.tools.dump.output import (NO_HINT, STDERR, STDOUT_BYTES, FileSummary, Line, b64, drop_generic_hint,
                                        java_bool,
                                        optional_long, string_decoder, utf8_or_none)
from kafkalog.fs.names import offset_from_file_name
from kafkalog.fs import filesystem


MAX_GAPS_LISTED = 100_000    # non-consecutive offset pairs kept per file (the rest are counted)
BULK_RUN_BYTES = 8 << 20     # record bytes decoded and formatted at once by the bulk path
BULK_MAX_BATCH_RECORDS = 1 << 20   # larger batches are printed a slice at a time (bulk_huge_batch)
BULK_SLICE_RECORDS = 1 << 16       # rows per slice of such a batch (~13 MiB of output buffer)
# HeaderArrays' fields (file_records), in the order bulk_run fills them (size: with the log overhead)
HEADER_FIELDS = ("position", "size", "baseOffset", "lastOffset", "magic", "attributes", "baseTimestamp",
                 "maxTimestamp", "producerId", "producerEpoch", "baseSequence", "recordsCount",
                 "partitionLeaderEpoch", "crc")
TS_NAMES = [rb.TIMESTAMP_TYPE_NAMES[rb.CREATE_TIME], rb.TIMESTAMP_TYPE_NAMES[rb.LOG_APPEND_TIME]]


class OffsetGaps:
    """A file's non-consecutive offset pairs as Kafka keeps them: previous offset -> next offset (a
    repeated previous offset keeps the last), at most MAX_GAPS_LISTED previous offsets (a hostile
    batch can make every one of millions of records a gap; the others are counted)."""

    def __init__(self):
        self.pairs: Dict[int, int] = {}
        self.omitted = 0

    def add(self, first: int, second: int) -> None:
        if first in self.pairs or len(self.pairs) < MAX_GAPS_LISTED:
            self.pairs[first] = second
        else:
            self.omitted += 1

    def add_many(self, firsts: np.ndarray, seconds: np.ndarray) -> None:
        """add() for each pair in order, vectorised: per previous offset only its last pair counts."""
        if not len(firsts):
            return
        keys, at = np.unique(firsts[::-1], return_index=True)      # the last occurrence of each key
        for first, second in zip(keys.tolist()[:MAX_GAPS_LISTED + 1], seconds[::-1][at].tolist()):
            self.add(first, second)
        if len(keys) > MAX_GAPS_LISTED + 1:
            self.omitted += int(np.count_nonzero(~np.isin(keys[MAX_GAPS_LISTED + 1:], list(self.pairs))))


def batch_line(b: BatchView) -> str:
    """DumpLogSegments.printBatchLevel."""
    if b.magic >= rb.MAGIC_VALUE_V2:
        head = (f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {b.count} "
                f"baseSequence: {b.base_sequence} lastSequence: {b.last_sequence} producerId: {b.producer_id} "
                f"producerEpoch: {b.producer_epoch} partitionLeaderEpoch: {b.partition_leader_epoch} "
                f"isTransactional: {java_bool(b.is_transactional)} isControl: {java_bool(b.is_control)} "
                f"deleteHorizonMs: {optional_long(b.delete_horizon_ms)}")
    else:
        head = f"offset: {b.last_offset}"
    return (f"{head} position: {b.position} {b.timestamp_type_name}: {b.max_timestamp} size: {b.size} "
            f"magic: {b.magic} compresscodec: {b.codec_name} crc: {b.crc} isvalid: {java_bool(b.crc_valid)}")


def batch_json(path: str, b: BatchView) -> dict:
    return {"type": "batch", "file": path, "position": b.position, "size": b.size, "magic": b.magic,
            "baseOffset": b.base_offset, "lastOffset": b.last_offset, "count": b.count,
            "baseSequence": b.base_sequence, "lastSequence": b.last_sequence, "producerId": b.producer_id,
            "producerEpoch": b.producer_epoch, "partitionLeaderEpoch": b.partition_leader_epoch,
            "isTransactional": b.is_transactional, "isControl": b.is_control,
            "deleteHorizonMs": b.delete_horizon_ms, "timestampType": b.timestamp_type_name,
            "baseTimestamp": b.base_timestamp, "maxTimestamp": b.max_timestamp, "attributes": b.attributes,
            "compresscodec": b.codec_name, "crc": b.crc, "isvalid": b.crc_valid}


def dump_record_file(run: DumpRun, path: str, s: FileSummary) -> Iterator[Line]:
    o = run.options
    name = os.path.basename(path)
    header = None
    if name.endswith(".checkpoint"):
        if name == BOOTSTRAP_SNAPSHOT:
            header = "KRaft bootstrap snapshot"
        else:
            m = KRAFT_SNAPSHOT.fullmatch(name)
            if m is None:
                raise InvalidFileNameError(
                    f"{name!r} is not a KRaft snapshot name (<20-digit end offset>-<10-digit epoch>.checkpoint)",
                    path=path, hint=NO_HINT)
            header = f"Snapshot end offset: {int(m.group(1))}, epoch: {int(m.group(2))}"
    with filesystem.open_view(path, 0, o.max_bytes) as f:
        mv = memoryview(f.array)
        try:
            end = len(mv) if o.max_bytes is None else min(len(mv), o.max_bytes)
            if header is None:
                start = offset_from_file_name(name)
                if start is None:
                    start = first_base_offset(run, mv, end, path)
                s.start_offset = start
                header = f"Log starting offset: {start}"
            if not o.json:
                yield run.out(header)
            yield from walk_log(run, path, mv, end, s)
        finally:
            mv.release()


def first_base_offset(run: DumpRun, mv, end: int, path) -> int:
    """Base offset of the first complete batch, -1 if there is none (names without an offset)."""
    try:
        for pos, size, magic in walk_batches(mv, 0, end, path):
            b = read_batch(mv, pos, size, magic, path)
            first = legacy_first_offset(mv, b, path, run.options.max_batch_bytes)
            return b.last_offset if first is None else first
    except KafkalogError:
        pass   # reported by the walk itself
    return -1


def walk_log(run: DumpRun, path: str, mv, end: int, s: FileSummary) -> Iterator[Line]:
    o = run.options
    deep = o.deep
    if deep:
        s.records = 0
    state = WalkState()
    # text lines of plain v2 batches are formatted in bulk (record_lines); the rest batch by batch
    bulk = deep and not o.json and o.decoder is None and run.bulk
    pending: List[BatchView] = []
    pending_bytes = 0
    try:
        for pos, size, magic in walk_batches(mv, 0, end, path):
            b = read_batch(mv, pos, size, magic, path)
            s.batches += 1
            s.valid_bytes = pos + size
            if bulk and bulk_eligible(b, BULK_MAX_BATCH_RECORDS):
                pending.append(b)
                pending_bytes += size
                if pending_bytes >= BULK_RUN_BYTES:
                    yield from bulk_run(run, path, mv, pending, s, state)
                    pending, pending_bytes = [], 0
                continue
            if pending:
                yield from bulk_run(run, path, mv, pending, s, state)
                pending, pending_bytes = [], 0
            if bulk and bulk_eligible(b, INT32_MAX):
                yield from bulk_huge_batch(run, path, mv, b, s, state)
            else:
                yield from one_batch(run, path, mv, b, s, state)
        if pending:
            yield from bulk_run(run, path, mv, pending, s, state)
    except KafkalogError:
        s.invalid_bytes = end - s.valid_bytes
        yield from report_gaps(run, path, state.gaps)
        raise
    yield from report_gaps(run, path, state.gaps)
    trailing = end - s.valid_bytes
    if trailing > 0 and not o.limited:
        s.invalid_bytes = trailing
        if not o.json:
            yield run.out(f"Found {trailing} invalid bytes at the end of {os.path.basename(path)}")
        yield run.error(s, tail_error(mv, s.valid_bytes, end, path))


class WalkState:
    """What a file's walk carries from batch to batch: the last record offset and the gaps."""

    def __init__(self):
        self.last_offset = -1
        self.gaps = OffsetGaps()


def one_batch(run: DumpRun, path: str, mv, b: BatchView, s: FileSummary, state: WalkState,
              skip: int = 0) -> Iterator[Line]:
    """A batch's line and, with deep iteration, its records' lines, one record at a time. ``skip``:
    the batch line and this many records were printed already (bulk_huge_batch)."""
    o = run.options
    if not skip:                        # the batch line, unless the bulk path printed it already
        if o.json:
            obj = batch_json(path, b)
            if b.base_offset is None:
                obj["baseOffset"] = legacy_first_offset(mv, b, path, o.max_batch_bytes)
            yield run.obj(obj)
        else:
            yield run.out(batch_line(b))
    if b.codec not in CODEC_NAMES and not skip:
        yield run.error(s, UnknownCodecError(
            f"batch at offset {b.last_offset} has unknown compression codec id {b.codec}", path=path,
            position=b.position, hint="Kafka cannot read this batch either"))
    if not b.crc_valid:
        kind = "CRC-32C" if b.magic >= 2 else "CRC-32"
        yield run.error(s, CrcMismatchError(
            f"batch at offset {b.last_offset}: stored {kind} {b.crc}, computed {b.computed_crc(mv)}",
            path=path, position=b.position, hint="Kafka's recovery truncates the segment at this batch"))
    if not o.deep or b.codec not in CODEC_NAMES:
        return
    try:
        for r in decode_records(mv, b, path, max_batch_bytes=o.max_batch_bytes):
            if skip:
                skip -= 1
                continue
            if r.offset != state.last_offset + 1 and (state.last_offset != -1 or not o.json):
                state.gaps.add(state.last_offset, r.offset)    # Kafka 4.x: from -1 too (a file not starting at 0)
            state.last_offset = r.offset
            s.records += 1
            text, obj, problem = record_output(run, path, b, r)
            yield run.obj(obj) if o.json else run.out(text)
            if problem is not None:
                yield run.error(s, problem)
    except KafkalogError as e:
        yield run.error(s, drop_generic_hint(e.with_location(path=path, position=b.position)))


def bulk_eligible(b: BatchView, max_records: int) -> bool:
    """A batch the bulk path prints: v2 data (no control records), a known codec, a valid CRC (an
    invalid one is reported right after its line) and at most ``max_records`` records."""
    return (b.magic == rb.MAGIC_VALUE_V2 and not b.is_control and b.crc_valid and b.codec in CODEC_NAMES
            and b.count is not None and 0 <= b.count <= max_records)


def header_arrays(batches: List[BatchView]):
    """The HeaderArrays of batches read by read_batch (the decoder's input)."""
    from kafkalog.format.file_records import HeaderArrays
    h = HeaderArrays.empty(len(batches))
    for field, values in zip(HEADER_FIELDS, zip(*[
            (b.position, b.size, b.base_offset, b.last_offset, b.magic, b.attributes, b.base_timestamp, b.max_timestamp,
             b.producer_id, b.producer_epoch, b.base_sequence, b.count, b.partition_leader_epoch, b.crc)
            for b in batches])):
        getattr(h, field)[:] = values
    return h


def bulk_lines(run: DumpRun, batch_lines: List[str], h, used: int, counts, records, s: FileSummary,
               state: WalkState):
    """Format the decoded ``records`` of ``used`` batches of ``h``, ``counts`` rows each (format_run);
    None when they must go record by record. Updates the record count and the offset gaps."""
    from kafkalog.tools.dump.record_lines import format_run
    o = run.options
    lines = format_run(batch_lines, counts,
                       (h.attributes[:used] & rb.TIMESTAMP_TYPE_MASK) != 0, TS_NAMES, h.baseOffset[:used],
                       h.baseSequence[:used], records, print_data=o.print_data_log,
                       skip_metadata=o.skip_record_metadata, batch_line_first=bool(batch_lines))
    if not lines.utf8_ok:
        return None
    offsets = lines.offsets
    if len(offsets):
        prev = np.empty_like(offsets)
        prev[0] = state.last_offset
        prev[1:] = offsets[:-1]
        gap = offsets != prev + 1
        state.gaps.add_many(prev[gap], offsets[gap])
        state.last_offset = int(offsets[-1])
    s.records += len(offsets)
    return Line(STDOUT_BYTES, lines.data)


def bulk_huge_batch(run: DumpRun, path: str, mv, b: BatchView, s: FileSummary, state: WalkState) -> Iterator[Line]:
    """A batch of more than BULK_MAX_BATCH_RECORDS records in slices of BULK_SLICE_RECORDS rows
    (format.batch_slices: the payload decompressed once, its record bounds walked first), so memory
    stays bounded and the first lines come out at once. A batch whose record bounds do not walk, or a
    slice holding bytes that are not UTF-8, goes record by record (from that slice on)."""
    from kafkalog.format.batch_slices import BatchSlices
    from kafkalog.topic_partition import UNKNOWN_PARTITION

    o = run.options
    h = header_arrays([b])
    try:
        slices = BatchSlices(np.frombuffer(mv, np.uint8), h, UNKNOWN_PARTITION, engine=None, path=path,
                             max_batch_bytes=o.max_batch_bytes, rows=BULK_SLICE_RECORDS)
    except KafkalogError:
        yield from one_batch(run, path, mv, b, s, state)
        return
    printed = 0
    try:
        for j in range(len(slices)):
            try:
                records = slices._slice(j)
            except KafkalogError as e:
                if printed == 0:
                    yield run.out(batch_line(b))
                yield run.error(s, drop_generic_hint(e.with_location(path=path, position=b.position)))
                return
            line = bulk_lines(run, [batch_line(b)] if j == 0 else [], h, 1, np.array([records.num_rows]), records,
                              s, state)
            if line is None:
                break
            printed += records.num_rows
            yield line
        else:
            return
    finally:
        slices.close()
    # the rest record by record (a slice with bytes that are not UTF-8)
    yield from one_batch(run, path, mv, b, s, state, skip=printed)


def bulk_run(run: DumpRun, path: str, mv, batches: List[BatchView], s: FileSummary,
             state: WalkState) -> Iterator[Line]:
    """The lines of a run of bulk-eligible batches as blocks of bytes (Line(STDOUT_BYTES, ...)); a
    part that does not decode, or holds bytes that are not UTF-8, goes batch by batch instead (which
    reports the problem exactly where the per-record path does)."""
    from kafkalog.format.decoder import decode_accel
    from kafkalog.topic_partition import UNKNOWN_PARTITION

    o = run.options
    buf = np.frombuffer(mv, np.uint8)
    h = header_arrays(batches)
    done = 0
    while done < len(batches):
        part = h.slice(done, len(h))
        try:
            records, used = decode_accel(buf, part, UNKNOWN_PARTITION, path=path, verify_crc=False,
                                         max_batch_bytes=o.max_batch_bytes, budget=BULK_RUN_BYTES)
        except KafkalogError:
            records, used = None, 1
        views = batches[done:done + used]
        line = None if records is None else bulk_lines(run, [batch_line(b) for b in views], part, used,
                                                        part.recordsCount[:used], records, s, state)
        if line is None:
            for b in views:
                yield from one_batch(run, path, mv, b, s, state)
        else:
            yield line
        done += used


def report_gaps(run: DumpRun, path: str, gaps: "OffsetGaps") -> Iterator[Line]:
    """Record offset gaps of one file: JSON objects now (file order), or Kafka's stderr report at the end."""
    if not gaps.pairs:
        return
    if run.options.json:
        for first, second in gaps.pairs.items():
            yield run.obj({"type": "non_consecutive_offsets", "file": path, "from": first, "to": second})
    else:
        # Kafka: a TreeMap per absolute path, previous offset -> next (ascending; a repeated key keeps the last)
        run.non_consecutive.setdefault(absolute_path(path), {}).update(gaps.pairs)
    if gaps.omitted:
        yield Line(STDERR, f"{path}: {gaps.omitted} more non-consecutive offset pairs not listed "
                           f"({MAX_GAPS_LISTED} are)")


def record_output(run: DumpRun, path: str, b: BatchView, r: RecordView):
    """(text line, JSON object, error or None) for one record of a deep iteration."""
    o = run.options
    key_size = -1 if r.key is None else len(r.key)
    value_size = -1 if r.value is None else len(r.value)
    v2 = b.magic >= rb.MAGIC_VALUE_V2
    problem = None
    control_text = ""
    control_fields: dict = {}
    if b.is_control:
        try:
            control_text, control_fields = control_record_info(r.key, r.value)
        except KafkalogError as e:
            problem = drop_generic_hint(e.with_location(path=path, position=b.position))
    decoded = metadata = None
    if o.decoder == CLUSTER_METADATA_DECODER and not b.is_control:
        metadata = decode_metadata_record(r.value)     # no key; a record Kafka cannot read is a payload line
    elif o.decoder is not None and o.print_data_log and not b.is_control:
        if r.key is None and problem is None:      # Kafka throws here and stops; we report and go on
            problem = InvalidRecordError(f"failed to decode the record at offset {r.offset} with the "
                                         f"{o.decoder} decoder (the record has no key)", path=path,
                                         position=b.position)
        else:
            decoded = decode_record(coordinator_record_types(o.decoder), r.key, r.value)
    if o.json:
        obj = {"type": "record", "file": path, "batchPosition": b.position, "offset": r.offset,
               "timestamp": r.timestamp, "timestampType": b.timestamp_type_name, "keySize": key_size,
               "valueSize": value_size, "sequence": r.sequence if v2 else None,
               "headerKeys": [k for k, _ in r.headers], "isValid": r.crc_valid, "crc": r.crc,
               "isControl": b.is_control}
        obj.update(control_fields)
        if o.print_data_log:
            obj.update({"key_b64": b64(r.key), "value_b64": b64(r.value), "key": utf8_or_none(r.key),
                        "value": utf8_or_none(r.value),
                        "headers": [{"key": k, "value_b64": b64(v)} for k, v in r.headers]})
        if decoded is not None:
            obj.update(record_json(decoded))
        if metadata is not None:
            obj.update(metadata_record_json(metadata))
        return None, obj, problem
    prefix = "| "
    text = ""
    if not o.skip_record_metadata:
        text = (f"| offset: {r.offset} {b.timestamp_type_name}: {r.timestamp} keySize: {key_size} "
                f"valueSize: {value_size}")
        prefix = " "
        if v2:
            text += f" sequence: {r.sequence} headerKeys: [{','.join(k for k, _ in r.headers)}]"
        else:
            text += f" isValid: {java_bool(bool(r.crc_valid))} crc: {r.crc}}}"
        text += control_text
    if metadata is not None:
        text += f"{prefix}payload: {kafka_dump_payload(metadata, r.offset)}"
    elif decoded is not None:
        key_text, payload_text = kafka_dump_text(decoded, r.offset)
        text += f"{prefix}key: {key_text}"
        if payload_text is not None:
            text += f" payload: {payload_text}"
    elif o.print_data_log and not b.is_control and o.decoder is None:
        if r.key is not None:
            text += f"{prefix}key: {string_decoder(r.key)}"
            prefix = " "
        if r.value is not None:
            text += f"{prefix}payload: {string_decoder(r.value)}"
    return text, None, problem
