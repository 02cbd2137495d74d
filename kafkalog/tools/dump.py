"""``kafkalog dump``: Kafka's ``kafka-dump-log.sh`` (``kafka.tools.DumpLogSegments``) in Python.

The functions here yield output lines instead of printing, so the dump can be tested (and reused)
without a subprocess: :class:`Dumper` turns a list of files into :class:`Line` objects, each tagged
``"stdout"`` or ``"stderr"``, and ``kafkalog.tools.cli`` writes them out. :func:`dump` collects a whole
run into a :class:`DumpResult`.

Text output (the default) is line for line what DumpLogSegments prints, so scripts written against
``kafka-dump-log.sh`` keep working (spec §9, checked against DumpLogSegments.scala):

* every file starts with ``Dumping <file as given>``;
* files dispatch on the text after the LAST dot of the name: ``.log`` (and ``.bin``, for raw
  record sets such as fetched byte ranges) and ``.checkpoint`` (KRaft snapshots) are record
  files, then ``.index``, ``.timeindex``, ``.txnindex``, ``.snapshot`` (producer state); anything
  else prints ``Ignoring unknown file <file>`` on stderr (so ``x.log.deleted`` is ignored, as in
  Kafka);
* a record file prints ``Log starting offset: <base>`` (the digits before the first dot of the
  name, as Kafka parses it), one line per batch, with ``--deep-iteration`` / ``--print-data-log``
  one ``| offset: …`` line per record, and ``Found N invalid bytes at the end of <name>`` when
  bytes remain that do not form a batch (not with ``--max-bytes``);
* index files print their entries (``offset: O position: P``, ``timestamp: T offset: O``,
  ``version: … producerId: …``), ``<file> is empty.``, ``<file> passed sanity check.``;
* after all files, stderr gets Kafka's reports: ``Mismatches in :<abs path>`` (offset index entries
  whose position does not start a batch ending at the entry's offset), the three time-index
  reports, and with deep iteration ``Non-consecutive offsets in <abs path>``.

Decisions where Kafka has no answer (Kafka would die with a stack trace):

* A record file whose name does not start with digits (``fetch1.records.bin``, ``foo.log``) prints
  ``Log starting offset: <base offset of its first batch>`` (for a compressed legacy wrapper the
  offset of its first inner message), or ``-1`` when the file holds no complete batch.
* Bad input never stops the run. A problem is reported on stderr as
  ``kafkalog dump: error: <file>: byte <position>: <what>`` and makes the exit code 1; the dump
  then goes on with the next batch when the batch framing is intact (CRC mismatch — the batch line
  still says ``isvalid: false`` — undecodable records, bad control records, an unknown codec), or
  with the next file when it is not (a header size below 14, which is where Kafka throws
  ``CorruptRecordException``; a v2 batch shorter than its header; an unknown magic). A truncated
  tail prints Kafka's ``Found N invalid bytes`` line and is also reported as an error.
* Index files: a size that is not a multiple of the entry size (8, 12, 34) is an error after the
  whole entries are printed (Kafka counts ``length / entrySize`` entries and only its sanity check
  complains); a name without a numeric base offset is an error (Kafka throws
  ``NumberFormatException``); an index whose ``.log`` is missing is still printed, with a warning
  on stderr — only ``--verify-index-only`` turns that into an error (Kafka cannot open the index
  without its log at all). An offset-index entry whose position does not hold a complete batch
  within ``--max-message-size`` bytes is an error (Kafka throws ``NoSuchElementException``).
* Deep iteration does not verify CRCs (neither does Kafka); the ``isValid``/``crc`` of legacy
  records are those of each (inner) message, as Kafka prints them.

JSON output (``--json``): one JSON object per line on stdout, nothing else on stdout; problems
still go to stderr as text and into the file's summary. Every object has ``type`` and ``file``
(the path as given). Types and keys:

``batch`` (one per batch, with or without deep iteration)
    ``position``, ``size`` (incl. the 12-byte log overhead), ``magic``, ``baseOffset`` (legacy
    wrapper: its first inner offset, null when the wrapper cannot be decompressed),
    ``lastOffset``, ``count`` (v2 recordsCount; null for legacy, like Kafka's ``countOrNull``),
    ``baseSequence``, ``lastSequence``, ``producerId``, ``producerEpoch``,
    ``partitionLeaderEpoch``, ``isTransactional``, ``isControl``, ``deleteHorizonMs`` (null when
    the attribute bit is clear), ``timestampType`` ("CreateTime", "LogAppendTime",
    "NoTimestampType"), ``baseTimestamp``, ``maxTimestamp``, ``attributes``, ``compresscodec``
    ("none", "gzip", "snappy", "lz4", "zstd", "unknown(N)"), ``crc`` (unsigned), ``isvalid``.
``record`` (with ``--deep-iteration`` or ``--print-data-log``)
    ``batchPosition``, ``offset``, ``timestamp``, ``timestampType``, ``keySize``, ``valueSize``
    (-1 for null), ``sequence`` (v2; null for legacy), ``headerKeys`` (list of str),
    ``isValid`` / ``crc`` (legacy message CRC; null for v2), ``isControl``; control records add
    ``controlType`` ("COMMIT", "ABORT", "LEADER_CHANGE", …, "UNKNOWN") and ``controlTypeId``,
    markers add ``coordinatorEpoch``, KRaft snapshot/version/voters records add ``controlRecord``
    (the decoded message as Kafka's JSON converters name it). With ``--print-data-log`` (also for
    control records): ``key_b64``, ``value_b64`` (base64, null for null), ``key``, ``value`` (the
    bytes as text when they are valid UTF-8, else null) and ``headers`` (list of
    ``{"key": str, "value_b64": str|null}``). With ``--offsets-decoder`` / ``--transaction-log-decoder``
    (which imply ``--print-data-log``, as in Kafka) a non-control record adds ``recordType``,
    ``recordTypeName``, ``decodedKey``, ``valueVersion``, ``decodedValue`` (Kafka's JSON, as
    kafka-dump-log.sh prints it), ``tombstone`` and, when it does not decode, ``decodeError``.
``index_entry`` (``offset``, ``position``), ``time_index_entry`` (``timestamp``, ``offset``),
``txn_index_entry`` (``version``, ``producerId``, ``firstOffset``, ``lastOffset``,
``lastStableOffset``), ``producer_snapshot_entry`` (``producerId``, ``producerEpoch``,
``coordinatorEpoch``, ``currentTxnFirstOffset`` (null when none), ``lastTimestamp``,
``firstSequence``, ``lastSequence``, ``lastOffset``, ``offsetDelta``, ``timestamp`` — the last
five null when the entry has no batch metadata), ``sanity_check`` (``passed``: true).
    Entries are not emitted with ``--verify-index-only``.
``index_mismatch`` (``indexOffset``, ``logOffset``), ``time_index_mismatch`` (``indexTimestamp``,
``logTimestamp``), ``time_index_out_of_order`` (``indexTimestamp``, ``previousTimestamp``),
``time_index_offset_not_found`` (``indexOffset``, ``logOffset``, -1 when no batch reaches it),
``non_consecutive_offsets`` (``from``, ``to``)
    Kafka's end-of-run reports, emitted at the end of their file, in file order.
``summary`` (last object of every file)
    ``kind`` ("log", "index", "timeindex", "txnindex", "snapshot", "unknown"), ``batches``,
    ``records`` (records iterated; null without deep iteration), ``entries`` (index/snapshot
    entries read), ``valid_bytes`` (bytes of complete batches, CRC-invalid ones included; for
    index files the whole entries), ``invalid_bytes`` (bytes after them that do not form a batch
    or entry), ``startOffset`` (record files: the ``Log starting offset``), ``baseOffset`` (index
    files), ``errors`` (list of ``{"error": class name, "message": str, "position": int|null}``).

``--skip-record-metadata`` only changes text output.
"""
from __future__ import annotations

import base64
import json
import os
import re
import struct
import zlib
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple

from kafkalog.errors import (BatchSizeError, CheckpointError, CorruptIndexError, CorruptRecordError, CrcMismatchError,
                             InvalidFileNameError, InvalidRecordError, KafkalogError, TruncatedBatchError, UnknownCodecError,
                             UnknownMagicError)
from kafkalog.coordinator.message import MessageReader
from kafkalog.coordinator.record import decode_record, kafka_dump_text, record_json
from kafkalog.format import control_record as cr
from kafkalog.format import legacy_record as legacy
from kafkalog.format import record_batch as rb
from kafkalog.format.compression import CODEC_NAMES, DEFAULT_MAX_BATCH_BYTES
from kafkalog.log import filesystem
from kafkalog.format.records_reference import decode_legacy_entry, iter_v2_batch, legacy_rows

STDOUT = "stdout"
STDERR = "stderr"

INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024       # --max-message-size default (DumpLogSegments)
HEADER_SIZE_UP_TO_MAGIC = 17                     # FileLogInputStream: 17 bytes or fewer left ends the walk
LOG_OVERHEAD = 12
MIN_RECORD_SIZE = legacy.RECORD_OVERHEAD_V0      # 14: "smaller than minimum record overhead"
OFFSET_ENTRY_SIZE = 8
TIME_ENTRY_SIZE = 12
TXN_ENTRY_SIZE = 34

RECORD_SUFFIXES = (".log", ".bin", ".checkpoint")
OTHER_SUFFIXES = (".index", ".timeindex", ".txnindex", ".snapshot")    # dumped by their own readers
BOOTSTRAP_SNAPSHOT = "bootstrap.checkpoint"
_KRAFT_SNAPSHOT = re.compile(r"(\d{20})-(\d{10})\.checkpoint")
_LEADING_DIGITS = re.compile(r"\d+")

_ENTRY = struct.Struct(">qi")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_TS_NAMES = rb.TIMESTAMP_TYPE_NAMES
_NO_HINT = ""


OFFSETS_DECODER = "offsets"                    # --offsets-decoder: __consumer_offsets records
TRANSACTION_LOG_DECODER = "transaction-log"    # --transaction-log-decoder: __transaction_state records


def coordinator_record_types(decoder: str):
    """The record-type table a decoder option reads records with."""
    if decoder == OFFSETS_DECODER:
        from kafkalog.coordinator.group.records import RECORD_TYPES
    else:
        from kafkalog.coordinator.transaction.records import RECORD_TYPES
    return RECORD_TYPES


class Line(NamedTuple):
    """One output line (without its newline) and the stream it belongs on."""

    stream: str
    text: str


@dataclass(frozen=True)
class DumpOptions:
    """The switches of ``kafkalog dump`` (named as kafka-dump-log.sh names them)."""

    deep_iteration: bool = False
    print_data_log: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False
    max_bytes: Optional[int] = None             # None = the whole file (Kafka: Integer.MAX_VALUE)
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    skip_record_metadata: bool = False
    json: bool = False
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES   # decompression bound per batch
    decoder: Optional[str] = None                     # OFFSETS_DECODER / TRANSACTION_LOG_DECODER

    def __post_init__(self):
        if self.decoder is not None:      # Kafka: a decoder option sets --print-data-log
            object.__setattr__(self, "print_data_log", True)

    @property
    def deep(self) -> bool:
        """--print-data-log implies deep iteration, as in Kafka."""
        return self.deep_iteration or self.print_data_log

    @property
    def limited(self) -> bool:
        """True when --max-bytes cut the files (Kafka compares against Integer.MAX_VALUE)."""
        return self.max_bytes is not None and self.max_bytes != INT32_MAX


@dataclass
class FileSummary:
    """What one file held; the JSON ``summary`` object."""

    file: str
    kind: str
    batches: int = 0
    records: Optional[int] = None
    entries: int = 0
    valid_bytes: int = 0
    invalid_bytes: int = 0
    start_offset: Optional[int] = None
    base_offset: Optional[int] = None
    errors: List[KafkalogError] = field(default_factory=list)

    def to_json(self) -> dict:
        out = {"type": "summary", "file": self.file, "kind": self.kind, "batches": self.batches,
               "records": self.records, "entries": self.entries, "valid_bytes": self.valid_bytes,
               "invalid_bytes": self.invalid_bytes}
        if self.start_offset is not None:
            out["startOffset"] = self.start_offset
        if self.base_offset is not None:
            out["baseOffset"] = self.base_offset
        out["errors"] = [{"error": type(e).__name__, "message": str(e), "position": e.position} for e in self.errors]
        return out


@dataclass
class DumpResult:
    stdout: List[str]
    stderr: List[str]
    exit_code: int
    summaries: List[FileSummary]


# --- small helpers ---------------------------------------------------------------------------

def dumps_file_kind(path) -> bool:
    """Whether the dump reads this file (by the text after the last dot, as Kafka dispatches)."""
    name = os.path.basename(os.fspath(path))
    return "." in name and name[name.rfind("."):] in RECORD_SUFFIXES + OTHER_SUFFIXES


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _optional_long(value: Optional[int]) -> str:
    """Java's OptionalLong.toString."""
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _json(obj: dict) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _b64(data: Optional[bytes]) -> Optional[str]:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _utf8_or_none(data: Optional[bytes]) -> Optional[str]:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _string_decoder(data: bytes) -> str:
    """Kafka's StringDecoder: new String(bytes, UTF_8), malformed input replaced by U+FFFD."""
    return data.decode("utf-8", errors="replace")


def _absolute(path: str) -> str:
    """java.io.File.getAbsolutePath: joined to the working directory, not normalised."""
    return path if os.path.isabs(path) or filesystem.is_uri(path) else os.path.join(os.getcwd(), path)


def _name_offset(name: str) -> Optional[int]:
    """The base offset Kafka reads from a file name: the text before the first dot, when it is a
    number that fits a long (Kafka: ``name.split("\\.")(0).toLong``)."""
    prefix = name.split(".", 1)[0]
    if not _LEADING_DIGITS.fullmatch(prefix):
        return None
    value = int(prefix)
    return value if value <= INT64_MAX else None


def _base_offset_or_raise(path: str, suffix: str) -> int:
    name = os.path.basename(path)
    value = _name_offset(name)
    if value is None:
        raise InvalidFileNameError(
            f"file name {name!r} does not start with a base offset, so the {suffix} entries cannot be placed",
            path=path, hint="Kafka names these files <20-digit base offset>" + suffix)
    return value


def _decrement_sequence(sequence: int, decrement: int) -> int:
    """DefaultRecordBatch.decrementSequence (wraps below zero to Integer.MAX_VALUE)."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def _record_sequence(base_sequence: int, offset_delta: int) -> int:
    """DefaultRecord.sequence: baseSequence >= 0 ? incrementSequence(base, offsetDelta) : -1."""
    if base_sequence < 0:
        return rb.NO_SEQUENCE
    return rb.increment_sequence(base_sequence, offset_delta)


def _drop_generic_hint(e: KafkalogError) -> KafkalogError:
    """Errors raised by the decoders carry hints written for API callers ("run kafkalog dump");
    inside the dump the location says enough."""
    if e.hint == type(e).default_hint and isinstance(e, CorruptRecordError):
        e.hint = _NO_HINT
        e.args = (str(e),)
    return e


# --- the file walk (FileLogInputStream.nextBatch) --------------------------------------------

def _walk(mv, start: int, end: int, path) -> Iterator[Tuple[int, int, int]]:
    """Yield (position, size incl. the 12-byte overhead, signed magic) per batch, as Kafka's file
    walker does: 17 or fewer bytes left, or a batch running past ``end``, end the walk quietly; a
    size field below 14 raises BatchSizeError (Kafka's CorruptRecordException)."""
    pos = start
    while pos < end - HEADER_SIZE_UP_TO_MAGIC:
        size = _ENTRY.unpack_from(mv, pos)[1]
        if size < MIN_RECORD_SIZE:
            raise BatchSizeError(
                f"record size {size} is smaller than the minimum record overhead ({MIN_RECORD_SIZE})", path=path,
                position=pos,
                hint="kafka-dump-log.sh stops here with CorruptRecordException; Kafka's recovery truncates the "
                     "segment at this position")
        if pos > end - LOG_OVERHEAD - size:
            return
        magic = mv[pos + rb.MAGIC_OFFSET]
        yield pos, size + LOG_OVERHEAD, magic - 256 if magic > 127 else magic
        pos += size + LOG_OVERHEAD


def _tail_error(mv, pos: int, end: int, path) -> TruncatedBatchError:
    left = end - pos
    hint = "an incomplete batch, as after a crash or a partial copy; Kafka's recovery drops it"
    if left <= HEADER_SIZE_UP_TO_MAGIC:
        return TruncatedBatchError(f"{left} trailing bytes are too few for a batch header", path=path, position=pos,
                                   hint=hint)
    size = _ENTRY.unpack_from(mv, pos)[1]
    return TruncatedBatchError(f"batch of {size + LOG_OVERHEAD} bytes runs past the end of the file, which has "
                               f"{left} bytes left", path=path, position=pos, hint=hint)


@dataclass
class BatchView:
    """The batch-level fields DumpLogSegments prints, for v2 and legacy batches alike."""

    position: int
    size: int
    magic: int
    base_offset: Optional[int]      # None: a compressed legacy wrapper (needs decompression)
    last_offset: int
    count: Optional[int]            # None for legacy (Kafka's countOrNull)
    base_sequence: int
    last_sequence: int
    producer_id: int
    producer_epoch: int
    partition_leader_epoch: int
    attributes: int
    codec: int
    timestamp_type: int
    base_timestamp: int
    max_timestamp: int
    is_transactional: bool
    is_control: bool
    delete_horizon_ms: Optional[int]
    crc: int
    crc_valid: bool

    @property
    def codec_name(self) -> str:
        if self.codec in CODEC_NAMES:
            return CODEC_NAMES[self.codec]
        return f"unknown({self.codec})"

    @property
    def timestamp_type_name(self) -> str:
        return _TS_NAMES[self.timestamp_type]

    def computed_crc(self, mv) -> int:
        end = self.position + self.size
        if self.magic >= 2:
            return rb.crc32c(mv[self.position + rb.ATTRIBUTES_OFFSET:end])
        return zlib.crc32(mv[self.position + LOG_OVERHEAD + legacy.MAGIC_OFFSET:end]) & 0xFFFFFFFF


def _read_batch(mv, pos: int, size: int, magic: int, path) -> BatchView:
    """Decode the header of the batch at ``pos`` (size includes the log overhead)."""
    if magic >= rb.MAGIC_VALUE_V2:      # the file walker treats every magic >= 2 as v2
        if size < rb.RECORD_BATCH_OVERHEAD:
            raise BatchSizeError(f"v2 batch of {size} bytes is smaller than its {rb.RECORD_BATCH_OVERHEAD}-byte header",
                                 path=path, position=pos,
                                 hint="Kafka's recovery truncates the segment at this position")
        h = rb.parse_header(mv, pos)
        crc_valid = rb.crc32c(mv[pos + rb.ATTRIBUTES_OFFSET:pos + size]) == h.crc
        return BatchView(pos, size, magic, h.base_offset, h.last_offset, h.records_count, h.base_sequence,
                         h.last_sequence, h.producer_id, h.producer_epoch, h.partition_leader_epoch, h.attributes,
                         h.codec, h.timestamp_type, h.base_timestamp, h.max_timestamp, h.is_transactional,
                         h.is_control, h.delete_horizon_ms, h.crc, crc_valid)
    if magic < 0:
        raise UnknownMagicError(f"unknown magic {magic} (expected 0, 1 or 2)", path=path, position=pos,
                                hint="Kafka's recovery truncates the segment at this position")
    message_size = size - LOG_OVERHEAD
    if message_size < legacy.overhead(magic):
        raise BatchSizeError(f"legacy v{magic} message of {message_size} bytes is smaller than its "
                             f"{legacy.overhead(magic)}-byte header", path=path, position=pos,
                             hint="Kafka's recovery truncates the segment at this position")
    offset = _I64.unpack_from(mv, pos)[0]
    m = pos + LOG_OVERHEAD
    crc = _U32.unpack_from(mv, m)[0]
    attributes = mv[m + legacy.ATTRIBUTES_OFFSET]
    if magic == 1:
        timestamp = _I64.unpack_from(mv, m + legacy.TIMESTAMP_OFFSET)[0]
        ts_type = rb.LOG_APPEND_TIME if attributes & legacy.TIMESTAMP_TYPE_MASK else rb.CREATE_TIME
    else:
        timestamp = rb.NO_TIMESTAMP
        ts_type = rb.NO_TIMESTAMP_TYPE
    crc_valid = (zlib.crc32(mv[m + legacy.MAGIC_OFFSET:pos + size]) & 0xFFFFFFFF) == crc
    codec = attributes & legacy.CODEC_MASK
    return BatchView(pos, size, magic, offset if codec == 0 else None, offset, None, rb.NO_SEQUENCE, rb.NO_SEQUENCE,
                     rb.NO_PRODUCER_ID, rb.NO_PRODUCER_EPOCH, rb.NO_PARTITION_LEADER_EPOCH, attributes, codec, ts_type,
                     timestamp, timestamp, False, False, None, crc, crc_valid)


def batch_line(b: BatchView) -> str:
    """DumpLogSegments.printBatchLevel."""
    if b.magic >= rb.MAGIC_VALUE_V2:
        head = (f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {b.count} "
                f"baseSequence: {b.base_sequence} lastSequence: {b.last_sequence} producerId: {b.producer_id} "
                f"producerEpoch: {b.producer_epoch} partitionLeaderEpoch: {b.partition_leader_epoch} "
                f"isTransactional: {_bool(b.is_transactional)} isControl: {_bool(b.is_control)} "
                f"deleteHorizonMs: {_optional_long(b.delete_horizon_ms)}")
    else:
        head = f"offset: {b.last_offset}"
    return (f"{head} position: {b.position} {b.timestamp_type_name}: {b.max_timestamp} size: {b.size} "
            f"magic: {b.magic} compresscodec: {b.codec_name} crc: {b.crc} isvalid: {_bool(b.crc_valid)}")


def _batch_json(path: str, b: BatchView) -> dict:
    return {"type": "batch", "file": path, "position": b.position, "size": b.size, "magic": b.magic,
            "baseOffset": b.base_offset, "lastOffset": b.last_offset, "count": b.count,
            "baseSequence": b.base_sequence, "lastSequence": b.last_sequence, "producerId": b.producer_id,
            "producerEpoch": b.producer_epoch, "partitionLeaderEpoch": b.partition_leader_epoch,
            "isTransactional": b.is_transactional, "isControl": b.is_control,
            "deleteHorizonMs": b.delete_horizon_ms, "timestampType": b.timestamp_type_name,
            "baseTimestamp": b.base_timestamp, "maxTimestamp": b.max_timestamp, "attributes": b.attributes,
            "compresscodec": b.codec_name, "crc": b.crc, "isvalid": b.crc_valid}


@dataclass
class RecordView:
    offset: int
    timestamp: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: List[Tuple[str, Optional[bytes]]]
    sequence: Optional[int]         # v2 only
    crc: Optional[int] = None       # legacy only: the (inner) message's stored CRC and its check
    crc_valid: Optional[bool] = None


RECORD_CHUNK = 1 << 20       # records of one v2 batch parsed at a time by a deep iteration
MAX_GAPS_LISTED = 100_000    # non-consecutive offset pairs kept per file (the rest are counted)


class _Gaps:
    """A file's non-consecutive offset pairs, in file order, at most MAX_GAPS_LISTED of them (a
    hostile batch can make every one of millions of records one)."""

    def __init__(self):
        self.pairs: List[Tuple[int, int]] = []
        self.omitted = 0

    def add(self, first: int, second: int) -> None:
        if len(self.pairs) < MAX_GAPS_LISTED:
            self.pairs.append((first, second))
        else:
            self.omitted += 1


def decode_records(mv, b: BatchView, path, *, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES) -> Iterator[RecordView]:
    """Deep iteration of one batch (no CRC verification, as in Kafka), streamed: a v2 batch's records
    are parsed RECORD_CHUNK at a time, so a batch of millions of records is never held whole (its
    decompressed payload is, within max_batch_bytes). A batch of up to RECORD_CHUNK records is parsed
    whole before its first record is yielded; in a larger one, as in Kafka's dump, an error stops the
    listing at the bad record."""
    if b.magic >= rb.MAGIC_VALUE_V2:
        if b.count is not None and b.count < 0:
            raise InvalidRecordError(f"batch declares a negative record count {b.count}", path=path,
                                     position=b.position)
        header, chunks = iter_v2_batch(mv, b.position, path=path, max_batch_bytes=max_batch_bytes,
                                       chunk_rows=RECORD_CHUNK)
        return (RecordView(r.offset, r.timestamp, r.key, r.value, r.headers,
                           _record_sequence(header.base_sequence, r.offset - header.base_offset))
                for chunk in chunks for r in chunk)
    wrapper, inner = decode_legacy_entry(mv, b.position, path=path, verify_crc=False, max_batch_bytes=max_batch_bytes)
    rows = legacy_rows(wrapper, inner)
    return iter([RecordView(r.offset, r.timestamp, r.key, r.value, [], None, m.crc, m.crc_valid)
                 for r, (_, m) in zip(rows, inner)])


def _legacy_first_offset(mv, b: BatchView, path, max_batch_bytes: int) -> Optional[int]:
    """A legacy batch's baseOffset: the first inner offset (decompresses a wrapper); None if it cannot."""
    if b.base_offset is not None:
        return b.base_offset
    try:
        _, inner = decode_legacy_entry(mv, b.position, path=path, verify_crc=False, max_batch_bytes=max_batch_bytes)
    except KafkalogError:
        return None
    return inner[0][0] if inner else None


# --- KRaft control records (flexible-version messages, read as Kafka's JSON converters print them) ---

class _MessageReader(MessageReader):
    """Kafka's message primitives over a KRaft control record value, failing as InvalidRecordError."""

    def __init__(self, data: bytes, what: str):
        super().__init__(data, 0, what)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise InvalidRecordError(f"{self.what} control record value is truncated at byte {self.pos}")
        return super().take(n)

    def too_long_varint(self) -> Exception:
        return InvalidRecordError(f"{self.what} control record value has a varint longer than 5 bytes")

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def uint16(self) -> int:
        return struct.unpack(">H", self.take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self.take(8))[0]

    def uuid(self) -> str:
        """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
        return base64.urlsafe_b64encode(self.take(16)).decode("ascii").rstrip("=")

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise InvalidRecordError(f"{self.what} control record value has a null non-nullable string")
        return self.take(n).decode("utf-8", errors="replace")

    def compact_array(self, read_item) -> list:
        n = self.uvarint() - 1
        if n < 0:
            raise InvalidRecordError(f"{self.what} control record value has a null non-nullable array")
        return [read_item() for _ in range(n)]

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def _snapshot_header(r: _MessageReader) -> dict:
    out = {"version": r.int16(), "lastContainedLogTimestamp": r.int64()}
    r.tagged_fields()
    return out


def _snapshot_footer(r: _MessageReader) -> dict:
    out = {"version": r.int16()}
    r.tagged_fields()
    return out


def _kraft_version(r: _MessageReader) -> dict:
    out = {"version": r.int16(), "kRaftVersion": r.int16()}
    r.tagged_fields()
    return out


def _voters(r: _MessageReader) -> dict:
    def endpoint():
        e = {"name": r.compact_string(), "host": r.compact_string(), "port": r.uint16()}
        r.tagged_fields()
        return e

    def voter():
        v = {"voterId": r.int32(), "voterDirectoryId": r.uuid(), "endpoints": r.compact_array(endpoint)}
        feature = {"minSupportedVersion": r.int16(), "maxSupportedVersion": r.int16()}
        r.tagged_fields()
        v["kRaftVersionFeature"] = feature
        r.tagged_fields()
        return v

    out = {"version": r.int16()}
    out["voters"] = r.compact_array(voter)
    r.tagged_fields()
    return out


# control type id → (label DumpLogSegments prints, message reader)
_KRAFT_RECORDS = {
    cr.SNAPSHOT_HEADER: ("SnapshotHeader", _snapshot_header),
    cr.SNAPSHOT_FOOTER: ("SnapshotFooter", _snapshot_footer),
    cr.KRAFT_VERSION: ("KRaftVersion", _kraft_version),
    cr.KRAFT_VOTERS: ("KRaftVoters", _voters),
}


def control_record_info(key: Optional[bytes], value: Optional[bytes]) -> Tuple[str, dict]:
    """The text DumpLogSegments appends for a control record, and the same as JSON fields."""
    if key is None or len(key) < cr.CONTROL_KEY.size:
        raise InvalidRecordError(f"control record key has {0 if key is None else len(key)} bytes, needs at least 4")
    version, type_id = cr.CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"control record key has negative version {version}")
    name = cr.CONTROL_TYPE_NAMES.get(type_id, "UNKNOWN")
    fields = {"controlType": name, "controlTypeId": type_id}
    if type_id in (cr.ABORT, cr.COMMIT):
        marker = cr.parse_end_txn_marker(key, value)
        fields["coordinatorEpoch"] = marker.coordinator_epoch
        return f" endTxnMarker: {name} coordinatorEpoch: {marker.coordinator_epoch}", fields
    if type_id in _KRAFT_RECORDS:
        label, reader = _KRAFT_RECORDS[type_id]
        if value is None:
            raise InvalidRecordError(f"{label} control record has a null value")
        message = reader(_MessageReader(value, label))
        fields["controlRecord"] = message
        return f" {label} {json.dumps(message, separators=(',', ':'), ensure_ascii=False)}", fields
    return f" controlType: {name}({type_id})", fields


# --- the dumper ------------------------------------------------------------------------------

class Dumper:
    """Dumps files one after another and keeps Kafka's end-of-run reports.

    ``dump_files`` yields every line of a run (the reports last); ``exit_code`` is 1 once any file
    had a problem. ``summaries`` holds one :class:`FileSummary` per file dumped.
    """

    def __init__(self, options: Optional[DumpOptions] = None, *, prog: str = "kafkalog dump"):
        self.options = options or DumpOptions()
        self.prog = prog
        self.summaries: List[FileSummary] = []
        # Kafka's maps, keyed by absolute path, in insertion order
        self.index_mismatches: Dict[str, List[Tuple[int, int]]] = {}
        self.time_mismatches: Dict[str, List[Tuple[int, int]]] = {}
        self.time_out_of_order: Dict[str, List[Tuple[int, int]]] = {}
        self.time_not_found: Dict[str, List[Tuple[int, int]]] = {}
        self.non_consecutive: Dict[str, List[Tuple[int, int]]] = {}

    @property
    def exit_code(self) -> int:
        return 1 if any(s.errors for s in self.summaries) else 0

    # -- output helpers --

    def _out(self, text: str) -> Line:
        return Line(STDOUT, text)

    def _obj(self, obj: dict) -> Line:
        return Line(STDOUT, _json(obj))

    def _error(self, summary: FileSummary, error: KafkalogError) -> Line:
        summary.errors.append(error)
        return Line(STDERR, f"{self.prog}: error: {error}")

    def _warning(self, text: str) -> Line:
        return Line(STDERR, f"{self.prog}: warning: {text}")

    # -- the run --

    def dump_files(self, paths: Iterable[str]) -> Iterator[Line]:
        for path in paths:
            yield from self.dump_file(path)
        yield from self.finish()

    def dump_file(self, path) -> Iterator[Line]:
        path = os.fspath(path)
        name = os.path.basename(path)
        suffix = name[name.rfind("."):] if "." in name else ""
        if suffix in RECORD_SUFFIXES:
            kind, handler = "log", self._dump_log
        else:
            kind, handler = {
                ".index": ("index", self._dump_offset_index),
                ".timeindex": ("timeindex", self._dump_time_index),
                ".txnindex": ("txnindex", self._dump_txn_index),
                ".snapshot": ("snapshot", self._dump_producer_snapshot),
            }.get(suffix, ("unknown", None))
        summary = FileSummary(path, kind)
        self.summaries.append(summary)
        if not self.options.json:
            yield self._out(f"Dumping {path}")
        if handler is None:
            yield Line(STDERR, f"Ignoring unknown file {path}")
        else:
            try:
                yield from handler(path, summary)
            except KafkalogError as e:
                yield self._error(summary, _drop_generic_hint(e))
            except OSError as e:
                yield self._error(summary, KafkalogError(e.strerror or str(e), path=path))
            except (ValueError, IndexError, struct.error, OverflowError) as e:   # never a traceback on bad bytes
                yield self._error(summary, CorruptRecordError(f"unreadable content ({type(e).__name__}: {e})",
                                                              path=path, hint=_NO_HINT))
        if self.options.json:
            yield self._obj(summary.to_json())

    def finish(self) -> Iterator[Line]:
        """Kafka's end-of-run reports on stderr (text mode; JSON mode emitted them per file)."""
        for name, pairs in self.index_mismatches.items():
            yield Line(STDERR, f"Mismatches in :{name}")
            for index_offset, log_offset in pairs:
                yield Line(STDERR, f"  Index offset: {index_offset}, log offset: {log_offset}")
        for name, pairs in self.time_mismatches.items():
            yield Line(STDERR, f"Found timestamp mismatch in :{name}")
            for index_ts, log_ts in pairs:
                yield Line(STDERR, f"  Index timestamp: {index_ts}, log timestamp: {log_ts}")
        for name, pairs in self.time_out_of_order.items():
            yield Line(STDERR, f"Found out of order timestamp in :{name}")
            for index_ts, prev_ts in pairs:
                yield Line(STDERR, f"  Index timestamp: {index_ts}, Previously indexed timestamp: {prev_ts}")
        for pairs in self.time_not_found.values():
            yield Line(STDERR, "The following indexed offsets are not found in the log.")
            for index_offset, log_offset in pairs:
                yield Line(STDERR, f"Indexed offset: {index_offset}, found log offset: {log_offset}")
        for name, pairs in self.non_consecutive.items():
            yield Line(STDERR, f"Non-consecutive offsets in {name}")
            for first, second in pairs:
                yield Line(STDERR, f"  {first} is followed by {second}")
        self.index_mismatches, self.time_mismatches, self.time_out_of_order = {}, {}, {}
        self.time_not_found, self.non_consecutive = {}, {}

    # -- record files --

    def _dump_log(self, path: str, s: FileSummary) -> Iterator[Line]:
        o = self.options
        name = os.path.basename(path)
        header = None
        if name.endswith(".checkpoint"):
            if name == BOOTSTRAP_SNAPSHOT:
                header = "KRaft bootstrap snapshot"
            else:
                m = _KRAFT_SNAPSHOT.fullmatch(name)
                if m is None:
                    raise InvalidFileNameError(
                        f"{name!r} is not a KRaft snapshot name (<20-digit end offset>-<10-digit epoch>.checkpoint)",
                        path=path, hint=_NO_HINT)
                header = f"Snapshot end offset: {int(m.group(1))}, epoch: {int(m.group(2))}"
        with filesystem.open_view(path, 0, o.max_bytes) as f:
            mv = memoryview(f.array)
            try:
                end = len(mv) if o.max_bytes is None else min(len(mv), o.max_bytes)
                if header is None:
                    start = _name_offset(name)
                    if start is None:
                        start = self._first_base_offset(mv, end, path)
                    s.start_offset = start
                    header = f"Log starting offset: {start}"
                if not o.json:
                    yield self._out(header)
                yield from self._walk_log(path, mv, end, s)
            finally:
                mv.release()

    def _first_base_offset(self, mv, end: int, path) -> int:
        """Base offset of the first complete batch, -1 if there is none (names without an offset)."""
        try:
            for pos, size, magic in _walk(mv, 0, end, path):
                b = _read_batch(mv, pos, size, magic, path)
                first = _legacy_first_offset(mv, b, path, self.options.max_batch_bytes)
                return b.last_offset if first is None else first
        except KafkalogError:
            pass   # reported by the walk itself
        return -1

    def _walk_log(self, path: str, mv, end: int, s: FileSummary) -> Iterator[Line]:
        o = self.options
        deep = o.deep
        if deep:
            s.records = 0
        last_offset = -1
        gaps = _Gaps()
        try:
            for pos, size, magic in _walk(mv, 0, end, path):
                b = _read_batch(mv, pos, size, magic, path)
                s.batches += 1
                s.valid_bytes = pos + size
                if o.json:
                    obj = _batch_json(path, b)
                    if b.base_offset is None:
                        obj["baseOffset"] = _legacy_first_offset(mv, b, path, o.max_batch_bytes)
                    yield self._obj(obj)
                else:
                    yield self._out(batch_line(b))
                if b.codec not in CODEC_NAMES:
                    yield self._error(s, UnknownCodecError(
                        f"batch at offset {b.last_offset} has unknown compression codec id {b.codec}", path=path,
                        position=pos, hint="Kafka cannot read this batch either"))
                if not b.crc_valid:
                    kind = "CRC-32C" if b.magic >= 2 else "CRC-32"
                    yield self._error(s, CrcMismatchError(
                        f"batch at offset {b.last_offset}: stored {kind} {b.crc}, computed {b.computed_crc(mv)}",
                        path=path, position=pos, hint="Kafka's recovery truncates the segment at this batch"))
                if not deep or b.codec not in CODEC_NAMES:
                    continue
                try:
                    for r in decode_records(mv, b, path, max_batch_bytes=o.max_batch_bytes):
                        if last_offset == -1:
                            last_offset = r.offset
                        elif r.offset != last_offset + 1:
                            gaps.add(last_offset, r.offset)
                        last_offset = r.offset
                        s.records += 1
                        text, obj, problem = self._record_output(path, b, r)
                        yield self._obj(obj) if o.json else self._out(text)
                        if problem is not None:
                            yield self._error(s, problem)
                except KafkalogError as e:
                    yield self._error(s, _drop_generic_hint(e.with_location(path=path, position=pos)))
                    continue
        except KafkalogError:
            s.invalid_bytes = end - s.valid_bytes
            yield from self._report_gaps(path, gaps)
            raise
        yield from self._report_gaps(path, gaps)
        trailing = end - s.valid_bytes
        if trailing > 0 and not o.limited:
            s.invalid_bytes = trailing
            if not o.json:
                yield self._out(f"Found {trailing} invalid bytes at the end of {os.path.basename(path)}")
            yield self._error(s, _tail_error(mv, s.valid_bytes, end, path))

    def _report_gaps(self, path: str, gaps: "_Gaps") -> Iterator[Line]:
        """Record offset gaps of one file: JSON objects now (file order), or Kafka's stderr report at the end."""
        if not gaps.pairs:
            return
        if self.options.json:
            for first, second in gaps.pairs:
                yield self._obj({"type": "non_consecutive_offsets", "file": path, "from": first, "to": second})
        else:
            key = _absolute(path)
            # most recent first, as Kafka prepends
            self.non_consecutive[key] = gaps.pairs[::-1] + self.non_consecutive.get(key, [])
        if gaps.omitted:
            yield Line(STDERR, f"{path}: {gaps.omitted} more non-consecutive offset pairs not listed "
                               f"(the first {MAX_GAPS_LISTED} are)")

    def _record_output(self, path: str, b: BatchView, r: RecordView):
        """(text line, JSON object, error or None) for one record of a deep iteration."""
        o = self.options
        key_size = -1 if r.key is None else len(r.key)
        value_size = -1 if r.value is None else len(r.value)
        v2 = b.magic >= rb.MAGIC_VALUE_V2
        problem = None
        control_text, control_fields = "", {}
        if b.is_control:
            try:
                control_text, control_fields = control_record_info(r.key, r.value)
            except KafkalogError as e:
                problem = _drop_generic_hint(e.with_location(path=path, position=b.position))
        decoded = None
        if o.decoder is not None and o.print_data_log and not b.is_control:
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
                obj.update({"key_b64": _b64(r.key), "value_b64": _b64(r.value), "key": _utf8_or_none(r.key),
                            "value": _utf8_or_none(r.value),
                            "headers": [{"key": k, "value_b64": _b64(v)} for k, v in r.headers]})
            if decoded is not None:
                obj.update(record_json(decoded))
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
                text += f" isValid: {_bool(bool(r.crc_valid))} crc: {r.crc}}}"
            text += control_text
        if decoded is not None:
            key_text, payload_text = kafka_dump_text(decoded, r.offset)
            text += f"{prefix}key: {key_text}"
            if payload_text is not None:
                text += f" payload: {payload_text}"
        elif o.print_data_log and not b.is_control and o.decoder is None:
            if r.key is not None:
                text += f"{prefix}key: {_string_decoder(r.key)}"
            if r.value is not None:
                text += f" payload: {_string_decoder(r.value)}"
        return text, None, problem

    # -- offset index --

    def _open_log_for_index(self, path: str, s: FileSummary):
        """The .log beside an index (Kafka: <abs dir>/<name before first dot>.log), or None with a
        warning (an error with --verify-index-only)."""
        name = os.path.basename(path)
        log_path = os.path.join(os.path.dirname(_absolute(path)), name.split(".", 1)[0] + ".log")
        if filesystem.isfile(log_path):
            return filesystem.open_view(log_path), None
        if self.options.verify_index_only:
            raise KafkalogError(f"cannot verify the index: its log {log_path} does not exist", path=path)
        return None, self._warning(f"{log_path} not found; the entries of {path} are not checked against it")

    def _load_index(self, path: str, s: FileSummary, suffix: str, entry_size: int, parse, kind: str):
        """An index file as Kafka counts it (length / entry size, zero slots included) and, when its
        size is not a multiple of the entry size, the error to report."""
        base = _base_offset_or_raise(path, suffix)
        s.base_offset = base
        data = filesystem.read_bytes(path)
        whole = len(data) - len(data) % entry_size
        s.valid_bytes, s.invalid_bytes = whole, len(data) - whole
        index = parse(data[:whole], base, path=path, stop_at_zero_slot=False)
        size_error = None
        if whole != len(data):
            size_error = CorruptIndexError(
                f"{kind} index file size {len(data)} bytes is not a multiple of the entry size {entry_size} "
                f"({len(data) - whole} trailing bytes)", path=path, position=whole,
                hint="Kafka counts only the whole entries; rebuild the index from its .log")
        return index, size_error

    def _sanity_check(self, index, path: str, size_error) -> Line:
        """--index-sanity-check: Kafka's sanityCheck() (a size error counts as failing it)."""
        if size_error is not None:
            raise size_error
        index.sanity_check(path)
        return (self._obj({"type": "sanity_check", "file": path, "passed": True}) if self.options.json
                else self._out(f"{path} passed sanity check."))

    def _dump_offset_index(self, path: str, s: FileSummary) -> Iterator[Line]:
        from kafkalog.index.offset_index import parse_offset_index

        o = self.options
        index, size_error = self._load_index(path, s, ".index", OFFSET_ENTRY_SIZE, parse_offset_index, "offset")
        base = index.base_offset
        if len(index) == 0:
            if not o.json:
                yield self._out(f"{path} is empty.")
            if size_error is not None:
                yield self._error(s, size_error)
            return
        if o.index_sanity_check:
            yield self._sanity_check(index, path, size_error)
            return
        log, warning = self._open_log_for_index(path, s)
        if warning is not None:
            yield warning
        mismatches: List[Tuple[int, int]] = []
        try:
            mv = memoryview(log.array) if log is not None else None
            offsets, positions = index.offsets.tolist(), index.positions.tolist()
            for i, (offset, position) in enumerate(zip(offsets, positions)):
                if i > 0 and offset == base:   # zero padding of a preallocated index
                    break
                s.entries += 1
                if mv is not None:
                    try:
                        log_offset = self._first_batch_last_offset(mv, position, o.max_message_size, log.path)
                    except KafkalogError as e:
                        yield self._error(s, CorruptIndexError(
                            f"entry {i} (offset {offset}, position {position}): {e.message}", path=path,
                            position=i * OFFSET_ENTRY_SIZE, hint=_NO_HINT))
                    else:
                        if log_offset != offset:
                            mismatches.append((offset, log_offset))
                if o.verify_index_only:
                    continue
                yield (self._obj({"type": "index_entry", "file": path, "offset": offset, "position": position})
                       if o.json else self._out(f"offset: {offset} position: {position}"))
            if mv is not None:
                mv.release()
        finally:
            if log is not None:
                log.close()
        if mismatches:
            if o.json:
                for index_offset, log_offset in mismatches:
                    yield self._obj({"type": "index_mismatch", "file": path, "indexOffset": index_offset,
                                     "logOffset": log_offset})
            else:
                key = _absolute(path)
                self.index_mismatches[key] = list(reversed(mismatches)) + self.index_mismatches.get(key, [])
        if size_error is not None:
            yield self._error(s, size_error)

    @staticmethod
    def _first_batch_last_offset(mv, position: int, max_size: int, log_path) -> int:
        """lastOffset of the first batch of FileRecords.slice(position, max_size)."""
        if position < 0 or position > len(mv):
            raise CorruptIndexError(f"position is outside the log ({len(mv)} bytes)")
        end = min(len(mv), position + max_size)
        for pos, size, magic in _walk(mv, position, end, log_path):
            return _read_batch(mv, pos, size, magic, log_path).last_offset
        raise CorruptIndexError(f"no complete batch starts there within --max-message-size {max_size} bytes "
                                f"of {log_path}")

    # -- time index --

    def _dump_time_index(self, path: str, s: FileSummary) -> Iterator[Line]:
        from kafkalog.index.offset_index import parse_offset_index
        from kafkalog.index.time_index import parse_time_index

        o = self.options
        index, size_error = self._load_index(path, s, ".timeindex", TIME_ENTRY_SIZE, parse_time_index, "time")
        base = index.base_offset
        if o.index_sanity_check:
            yield self._sanity_check(index, path, size_error)
            return
        log, warning = (None, None) if len(index) == 0 else self._open_log_for_index(path, s)
        if warning is not None:
            yield warning
        offset_index = None
        index_path = os.path.join(os.path.dirname(_absolute(path)), os.path.basename(path).split(".", 1)[0] + ".index")
        if log is not None and filesystem.isfile(index_path):
            raw = filesystem.read_bytes(index_path)
            try:
                offset_index = parse_offset_index(raw[:len(raw) - len(raw) % OFFSET_ENTRY_SIZE], base)
            except KafkalogError:
                offset_index = None   # scan from the start of the log instead
        mismatches: List[Tuple[int, int]] = []
        out_of_order: List[Tuple[int, int]] = []
        not_found: List[Tuple[int, int]] = []
        prev_timestamp = rb.NO_TIMESTAMP
        try:
            mv = memoryview(log.array) if log is not None else None
            for i, (timestamp, offset) in enumerate(zip(index.timestamps.tolist(), index.offsets.tolist())):
                if i > 0 and offset == base:   # zero padding
                    break
                s.entries += 1
                if mv is not None:
                    try:
                        found = self._time_entry_check(mv, offset_index, offset, log.path, index_path)
                    except KafkalogError as e:
                        yield self._error(s, CorruptIndexError(
                            f"entry {i} (timestamp {timestamp}, offset {offset}): {e.message}", path=path,
                            position=i * TIME_ENTRY_SIZE, hint=_NO_HINT))
                    else:
                        batch_last, max_ts = found
                        if batch_last != offset:
                            not_found.append((offset, batch_last))
                        else:
                            if max_ts != timestamp:
                                mismatches.append((timestamp, max_ts))
                            if prev_timestamp >= timestamp:
                                out_of_order.append((timestamp, prev_timestamp))
                if not o.verify_index_only:
                    yield (self._obj({"type": "time_index_entry", "file": path, "timestamp": timestamp,
                                      "offset": offset})
                           if o.json else self._out(f"timestamp: {timestamp} offset: {offset}"))
                prev_timestamp = timestamp
            if mv is not None:
                mv.release()
        finally:
            if log is not None:
                log.close()
        if o.json:
            for a, b in mismatches:
                yield self._obj({"type": "time_index_mismatch", "file": path, "indexTimestamp": a, "logTimestamp": b})
            for a, b in out_of_order:
                yield self._obj({"type": "time_index_out_of_order", "file": path, "indexTimestamp": a,
                                 "previousTimestamp": b})
            for a, b in not_found:
                yield self._obj({"type": "time_index_offset_not_found", "file": path, "indexOffset": a,
                                 "logOffset": b})
        else:
            key = _absolute(path)
            for store, pairs in ((self.time_mismatches, mismatches), (self.time_out_of_order, out_of_order),
                                 (self.time_not_found, not_found)):
                if pairs:
                    store.setdefault(key, []).extend(pairs)
        if size_error is not None:
            yield self._error(s, size_error)

    def _time_entry_check(self, mv, offset_index, offset: int, log_path, offset_index_name=None) -> Tuple[int, int]:
        """(lastOffset of the first batch reaching ``offset``, max record timestamp of that batch);
        (-1, -1) when no batch reaches it. The walk starts at the offset index's lookup position."""
        position = offset_index.lookup(offset)[1] if offset_index is not None else 0
        if position < 0:
            raise CorruptIndexError(f"the offset index {offset_index_name} maps offset {offset} to byte position "
                                    f"{position}, which is negative", hint=_NO_HINT)
        if position > len(mv):
            position = 0
        for pos, size, magic in _walk(mv, position, len(mv), log_path):
            b = _read_batch(mv, pos, size, magic, log_path)
            if b.last_offset < offset:
                continue
            if b.last_offset != offset:
                return b.last_offset, rb.NO_TIMESTAMP
            max_ts = rb.NO_TIMESTAMP
            for r in decode_records(mv, b, log_path, max_batch_bytes=self.options.max_batch_bytes):
                max_ts = max(max_ts, r.timestamp)
            return b.last_offset, max_ts
        return -1, rb.NO_TIMESTAMP

    # -- transaction index --

    def _dump_txn_index(self, path: str, s: FileSummary) -> Iterator[Line]:
        from kafkalog.index.transaction_index import parse_transaction_index

        base = _base_offset_or_raise(path, ".txnindex")
        s.base_offset = base
        data = filesystem.read_bytes(path)
        whole = len(data) - len(data) % TXN_ENTRY_SIZE
        s.valid_bytes, s.invalid_bytes = whole, len(data) - whole
        index = parse_transaction_index(data, base, path=path)
        for t in index.entries:
            s.entries += 1
            if self.options.json:
                yield self._obj({"type": "txn_index_entry", "file": path, "version": t.version,
                                 "producerId": t.producer_id, "firstOffset": t.first_offset,
                                 "lastOffset": t.last_offset, "lastStableOffset": t.last_stable_offset})
            else:
                yield self._out(f"version: {t.version} producerId: {t.producer_id} firstOffset: {t.first_offset} "
                                f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}")
        if whole != len(data):
            yield self._error(s, CorruptIndexError(
                f"{len(data) - whole} trailing bytes do not form a whole {TXN_ENTRY_SIZE}-byte entry "
                "(Kafka's reader ignores them)", path=path, position=whole, hint=_NO_HINT))

    # -- producer snapshot --

    def _dump_producer_snapshot(self, path: str, s: FileSummary) -> Iterator[Line]:
        from kafkalog.log.producer_snapshot import parse_producer_snapshot

        data = filesystem.read_bytes(path)
        offset = _name_offset(os.path.basename(path))
        s.base_offset = offset
        try:
            snapshot = parse_producer_snapshot(data, -1 if offset is None else offset, path=path)
        except CheckpointError as e:
            e.hint = "Kafka discards a corrupt snapshot and rebuilds the producer state from the log"
            e.args = (str(e),)
            raise
        s.valid_bytes = len(data)
        for e in snapshot.entries:
            s.entries += 1
            has_batch = e.last_offset >= 0
            first_seq = _decrement_sequence(e.last_sequence, e.offset_delta) if has_batch else None
            txn_first = e.current_txn_first_offset if e.current_txn_first_offset >= 0 else None
            if self.options.json:
                yield self._obj({"type": "producer_snapshot_entry", "file": path, "producerId": e.producer_id,
                                 "producerEpoch": e.producer_epoch, "coordinatorEpoch": e.coordinator_epoch,
                                 "currentTxnFirstOffset": txn_first, "lastTimestamp": e.timestamp,
                                 "firstSequence": first_seq, "lastSequence": e.last_sequence if has_batch else None,
                                 "lastOffset": e.last_offset if has_batch else None,
                                 "offsetDelta": e.offset_delta if has_batch else None,
                                 "timestamp": e.timestamp if has_batch else None})
                continue
            text = (f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} "
                    f"coordinatorEpoch: {e.coordinator_epoch} currentTxnFirstOffset: {_optional_long(txn_first)} "
                    f"lastTimestamp: {e.timestamp} ")
            if has_batch:
                text += (f"firstSequence: {first_seq} lastSequence: {e.last_sequence} lastOffset: {e.last_offset} "
                         f"offsetDelta: {e.offset_delta} timestamp: {e.timestamp}")
            yield self._out(text)


def dump(paths: Iterable[str], options: Optional[DumpOptions] = None, *, prog: str = "kafkalog dump") -> DumpResult:
    """Run a whole dump and collect its output (what the CLI would print, split by stream)."""
    dumper = Dumper(options, prog=prog)
    stdout: List[str] = []
    stderr: List[str] = []
    for line in dumper.dump_files(paths):
        (stdout if line.stream == STDOUT else stderr).append(line.text)
    return DumpResult(stdout, stderr, dumper.exit_code, dumper.summaries)
