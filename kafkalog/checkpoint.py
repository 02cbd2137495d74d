"""Kafka's small text files beside the segments: the offset checkpoints, leader-epoch-checkpoint,
partition.metadata, meta.properties and .kafka_cleanshutdown (spec §3.1, §3.4, §3.5).

``parse_*``/``format_*`` are pure (text in, values out, and back); ``read_*``/``write_*`` touch the
disk. Every write is atomic the way Kafka's ``CheckpointFile`` does it: write ``<name>.tmp``, flush,
fsync, rename over ``<name>``, fsync the directory.

File layouts (UTF-8, lines end in ``\\n`` as Kafka writes them on Linux):

* offset checkpoints (log-dir level: the four ``*_CHECKPOINT`` names below)::

      0                          <- CHECKPOINT_VERSION; any other version is refused
      <n>                        <- number of entry lines
      <topic> <partition> <offset>   (n lines; split on \\s+, exactly 3 tokens)

  An empty file, or one holding only the version line, is an empty checkpoint. Entry order is
  Kafka's hash-map order and means nothing; ``format_offset_checkpoint`` sorts by (topic, partition).
* ``leader-epoch-checkpoint`` (partition dir): the same header, entries ``<epoch> <startOffset>``
  (int32, int64; exactly 2 tokens), ascending by epoch.
* ``partition.metadata`` (partition dir): ``version: 0\\ntopic_id: <uuid>`` with no trailing newline;
  the uuid is Kafka's ``Uuid.toString()``: 16 bytes, URL-safe base64 without padding (22 chars).
  The reader splits each line on ``:\\s+`` into key and value.
* ``meta.properties`` (log-dir level): a Java ``.properties`` file (ISO-8859-1, ``#``/``!`` comments,
  ``key=value``, ``key: value`` or ``key value``) with ``version`` (0 or 1), ``cluster.id``,
  ``broker.id`` (version 0) or ``node.id`` (version 1) and, since 3.7, ``directory.id``.
* ``.kafka_cleanshutdown`` (log-dir level): JSON ``{"version":0,"brokerEpoch":N}`` (brokers before
  3.7 left it empty); its mere presence tells the broker to skip recovery.
"""
from __future__ import annotations

import base64
import json
import os
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, NamedTuple, Optional, Sequence, TypeVar, Union

from kafkalog.errors import CheckpointError
from kafkalog.log import filesystem
from kafkalog.log.durable import fsync_dir, replace_file  # noqa: F401  (fsync_dir: public here too, for older callers)

# --- file names ------------------------------------------------------------------------------

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"   # LogManager
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"      # LogManager
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"  # ReplicaManager (high watermarks)
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"          # LogCleanerManager (first dirty offset)
OFFSET_CHECKPOINTS = (
    RECOVERY_POINT_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
)
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
TMP_SUFFIX = ".tmp"  # what CheckpointFile appends while writing; renamed away when complete

# --- layout constants ------------------------------------------------------------------------

CHECKPOINT_VERSION = 0
OFFSET_CHECKPOINT_TOKENS = 3   # <topic> <partition> <offset>
LEADER_EPOCH_TOKENS = 2        # <epoch> <startOffset>
PARTITION_METADATA_VERSION = 0
META_PROPERTIES_VERSIONS = (0, 1)
UUID_BYTES = 16
UUID_TEXT_LENGTH = 22

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# Java's \s (ASCII only): what Pattern.compile("\\s+") splits on.
_JAVA_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")
_PARTITION_METADATA_SEPARATOR = re.compile(r":[ \t\n\x0b\f\r]+")
# BufferedReader.readLine line terminators.
_JAVA_LINE_END = re.compile(r"\r\n|\r|\n")
# Integer.parseInt / Long.parseLong accept an optional sign and decimal digits, nothing else.
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_UUID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}(==)?")

PathLike = Union[str, os.PathLike]
T = TypeVar("T")


# --- dataclasses -----------------------------------------------------------------------------

class EpochEntry(NamedTuple):
    """One leader-epoch-checkpoint line: the leader ``epoch`` began at ``start_offset``."""

    epoch: int
    start_offset: int


@dataclass(frozen=True)
class PartitionMetadata:
    """``partition.metadata``: the file version and the topic id (Kafka's 22-char base64 text)."""

    version: int
    topic_id: str


@dataclass(frozen=True)
class MetaProperties:
    """``meta.properties``. ``node_id`` is ``broker.id`` for version 0 and ``node.id`` for version 1
    (as Kafka's ``MetaProperties.Builder`` reads them); ``raw`` holds every property as read."""

    version: int
    cluster_id: Optional[str]
    node_id: Optional[int]
    directory_id: Optional[str]
    raw: dict = field(default_factory=dict)


@dataclass(frozen=True)
class _Line:
    number: int     # 1-based line number
    position: int   # byte offset of the line's first character (UTF-8)
    text: str


# --- shared text helpers ---------------------------------------------------------------------

def _java_lines(text: str) -> list[_Line]:
    """Split like BufferedReader.readLine: \\n, \\r or \\r\\n end a line; no empty line after a final terminator."""
    lines: list[_Line] = []
    start = 0
    byte_pos = 0
    number = 0
    for match in _JAVA_LINE_END.finditer(text):
        number += 1
        piece = text[start:match.start()]
        lines.append(_Line(number, byte_pos, piece))
        byte_pos += len(text[start:match.end()].encode("utf-8"))
        start = match.end()
    if start < len(text):
        lines.append(_Line(number + 1, byte_pos, text[start:]))
    return lines


def _java_split_whitespace(line: str) -> list[str]:
    """``Pattern.compile("\\\\s+").split(line)``: a leading empty token is kept, trailing ones dropped."""
    tokens = _JAVA_WHITESPACE.split(line)
    while len(tokens) > 1 and tokens[-1] == "":
        tokens.pop()
    if tokens == [""] and line != "":
        return []  # the line is only whitespace: every token was an empty trailing one
    return tokens


def _parse_java_int(token: str, lo: int, hi: int) -> Optional[int]:
    if not _JAVA_INTEGER.fullmatch(token):
        return None
    value = int(token)
    return value if lo <= value <= hi else None


def _check_range(what: str, value: int, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise CheckpointError(f"{what} {value!r} is not an integer in [{lo}, {hi}]")


def _error(message: str, path: Optional[PathLike], line: Optional[_Line]) -> CheckpointError:
    if line is None:
        return CheckpointError(message, path=path)
    return CheckpointError(f"line {line.number}: {message}", path=path, position=line.position)


def _read_utf8(path: PathLike) -> Optional[str]:
    """The file's text, or None when it does not exist. Invalid UTF-8 is a CheckpointError (Kafka's
    reader throws MalformedInputException)."""
    try:
        data = filesystem.read_bytes(path)
    except FileNotFoundError:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"not valid UTF-8 ({exc.reason})", path=path, position=exc.start) from None


# --- offset and leader-epoch checkpoints (CheckpointFile) ------------------------------------

def _parse_checkpoint(
    text: str,
    path: Optional[PathLike],
    tokens_per_entry: int,
    convert: Callable[[list[str]], Optional[T]],
    entry_description: str,
) -> list[T]:
    """CheckpointFile.read: version line, count line, entry lines; count must match."""
    lines = _java_lines(text)
    if not lines:
        return []
    version_line = lines[0]
    version = _parse_java_int(version_line.text, INT32_MIN, INT32_MAX)
    if version is None:
        raise _error(f"malformed version line {version_line.text!r}", path, version_line)
    if version != CHECKPOINT_VERSION:
        raise _error(f"unrecognised checkpoint version {version} (expected {CHECKPOINT_VERSION})",
                     path, version_line)
    if len(lines) == 1:
        return []
    count_line = lines[1]
    expected = _parse_java_int(count_line.text, INT32_MIN, INT32_MAX)
    if expected is None:
        raise _error(f"malformed entry-count line {count_line.text!r}", path, count_line)
    entries: list[T] = []
    for line in lines[2:]:
        tokens = _java_split_whitespace(line.text)
        value = convert(tokens) if len(tokens) == tokens_per_entry else None
        if value is None:
            raise _error(f"malformed line {line.text!r} (expected {entry_description})", path, line)
        entries.append(value)
    if len(entries) != expected:
        raise _error(f"expected {expected} entries but found {len(entries)}", path, count_line)
    return entries


def _format_checkpoint(lines: Sequence[str]) -> str:
    return "".join(f"{line}\n" for line in [str(CHECKPOINT_VERSION), str(len(lines)), *lines])


def _offset_entry(tokens: list[str]) -> Optional[tuple[tuple[str, int], int]]:
    topic, partition_text, offset_text = tokens
    partition = _parse_java_int(partition_text, INT32_MIN, INT32_MAX)
    offset = _parse_java_int(offset_text, INT64_MIN, INT64_MAX)
    if partition is None or offset is None:
        return None
    return (topic, partition), offset


def _epoch_entry(tokens: list[str]) -> Optional[EpochEntry]:
    epoch = _parse_java_int(tokens[0], INT32_MIN, INT32_MAX)
    start_offset = _parse_java_int(tokens[1], INT64_MIN, INT64_MAX)
    if epoch is None or start_offset is None:
        return None
    return EpochEntry(epoch, start_offset)


def parse_offset_checkpoint(text: str, *, path: Optional[PathLike] = None) -> dict[tuple[str, int], int]:
    """Parse an offset checkpoint into {(topic, partition): offset}. A repeated key keeps its last
    value, as Kafka's map does. Malformed text raises CheckpointError naming the line."""
    entries = _parse_checkpoint(text, path, OFFSET_CHECKPOINT_TOKENS, _offset_entry,
                                "'<topic> <partition> <offset>'")
    return dict(entries)


def format_offset_checkpoint(entries: Mapping[tuple[str, int], int]) -> str:
    """The file text for {(topic, partition): offset}, entries sorted by (topic, partition)."""
    for (topic, partition), offset in entries.items():
        if not isinstance(topic, str) or not topic or _JAVA_WHITESPACE.search(topic):
            raise CheckpointError(f"topic {topic!r} is empty or contains whitespace; Kafka could not read it back")
        _check_range("partition", partition, INT32_MIN, INT32_MAX)
        _check_range("offset", offset, INT64_MIN, INT64_MAX)
    return _format_checkpoint([f"{topic} {partition} {offset}"
                               for (topic, partition), offset in sorted(entries.items())])


def parse_leader_epoch_checkpoint(text: str, *, path: Optional[PathLike] = None) -> list[EpochEntry]:
    """Parse a leader-epoch-checkpoint into its (epoch, start_offset) entries, in file order."""
    return _parse_checkpoint(text, path, LEADER_EPOCH_TOKENS, _epoch_entry, "'<epoch> <startOffset>'")


def format_leader_epoch_checkpoint(entries: Iterable[tuple[int, int]]) -> str:
    """The file text for (epoch, start_offset) entries, in the order given (Kafka's is ascending epoch)."""
    lines = []
    for epoch, start_offset in entries:
        _check_range("epoch", epoch, INT32_MIN, INT32_MAX)
        _check_range("start offset", start_offset, INT64_MIN, INT64_MAX)
        lines.append(f"{epoch} {start_offset}")
    return _format_checkpoint(lines)


# --- Kafka Uuid text -------------------------------------------------------------------------

def parse_kafka_uuid(text: str) -> bytes:
    """The 16 bytes of a Kafka ``Uuid.toString()`` (URL-safe base64, padding optional as in
    ``Uuid.fromString``). Raises ValueError for anything else."""
    if not _UUID_TEXT.fullmatch(text):
        raise ValueError(f"{text!r} is not a 22-character URL-safe base64 Kafka Uuid")
    return base64.urlsafe_b64decode(text[:UUID_TEXT_LENGTH] + "==")


def format_kafka_uuid(raw: bytes) -> str:
    """Kafka's ``Uuid.toString()`` of 16 bytes."""
    if len(raw) != UUID_BYTES:
        raise ValueError(f"a Kafka Uuid is {UUID_BYTES} bytes, not {len(raw)}")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


# --- partition.metadata ----------------------------------------------------------------------

def parse_partition_metadata(text: str, *, path: Optional[PathLike] = None) -> PartitionMetadata:
    """Parse ``partition.metadata`` as PartitionMetadataReadBuffer does: line 1 ``version: <int>``
    (at least 0: newer versions are accepted for downgrade compatibility), line 2
    ``topic_id: <uuid>`` (non-zero). Further lines are not read."""
    lines = _java_lines(text)

    def key_value(index: int, key: str) -> tuple[_Line, str]:
        if index >= len(lines):
            raise _error(f"missing line {index + 1} ('{key}: ...')", path, None)
        line = lines[index]
        parts = _PARTITION_METADATA_SEPARATOR.split(line.text, maxsplit=1)
        if len(parts) != 2 or parts[0] != key:
            raise _error(f"malformed line {line.text!r} (expected '{key}: <value>')", path, line)
        return line, parts[1]

    version_line, version_text = key_value(0, "version")
    version = _parse_java_int(version_text, INT32_MIN, INT32_MAX)
    if version is None:
        raise _error(f"malformed version {version_text!r}", path, version_line)
    if version < PARTITION_METADATA_VERSION:
        raise _error(f"unrecognized partition metadata version {version}", path, version_line)
    id_line, topic_id = key_value(1, "topic_id")
    try:
        raw = parse_kafka_uuid(topic_id)
    except ValueError as exc:
        raise _error(str(exc), path, id_line) from None
    if raw == bytes(UUID_BYTES):
        raise _error("topic id is the zero Uuid", path, id_line)
    return PartitionMetadata(version, topic_id)


def format_partition_metadata(metadata: PartitionMetadata) -> str:
    """``version: <v>\\ntopic_id: <uuid>`` with no trailing newline, exactly as Kafka writes it."""
    parse_kafka_uuid(metadata.topic_id)  # refuse to write what Kafka could not read
    return f"version: {metadata.version}\ntopic_id: {metadata.topic_id}"


# --- meta.properties (java.util.Properties.load) ---------------------------------------------

_PROPERTY_WHITESPACE = " \t\f"
_PROPERTY_ESCAPES = {"t": "\t", "r": "\r", "n": "\n", "f": "\f"}


def _property_logical_lines(text: str) -> list[tuple[int, str]]:
    """Properties.LineReader: (first line number, logical line). Skips blank and comment lines,
    drops leading whitespace, joins lines ending in an odd number of backslashes."""
    physical = _JAVA_LINE_END.split(text)
    if physical and physical[-1] == "":
        physical.pop()
    result: list[tuple[int, str]] = []
    current: Optional[str] = None
    start_number = 0
    for number, line in enumerate(physical, start=1):
        stripped = line.lstrip(_PROPERTY_WHITESPACE)
        if current is None:
            if stripped == "" or stripped[0] in "#!":
                continue
            current, start_number = "", number
        elif stripped == "":
            # an empty continuation line ends the logical line
            result.append((start_number, current))
            current = None
            continue
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2 == 1:
            current += stripped[:-1]
            continue
        result.append((start_number, current + stripped))
        current = None
    if current is not None and (current or not _JAVA_LINE_END.search(text[-1:])):
        result.append((start_number, current))  # continuation at end of file: backslash dropped
    return result


def _property_unescape(text: str, number: int, path: Optional[PathLike]) -> str:
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        i += 1
        if c != "\\" or i >= len(text):
            out.append(c)
            continue
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i:i + 4]
            if len(digits) != 4 or not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise CheckpointError(f"line {number}: malformed \\uxxxx escape", path=path)
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_PROPERTY_ESCAPES.get(c, c))
    return "".join(out)


def parse_properties(text: str, *, path: Optional[PathLike] = None) -> dict[str, str]:
    """Parse Java ``.properties`` text as ``Properties.load`` does. The key ends at the first
    unescaped ``=``, ``:`` or whitespace; whitespace around the separator is dropped; trailing
    whitespace of a value is kept (Java keeps it). A repeated key keeps its last value."""
    props: dict[str, str] = {}
    for number, line in _property_logical_lines(text):
        key_end = len(line)
        value_start = len(line)
        has_separator = False
        escaped = False
        for i, c in enumerate(line):
            if not escaped and c in "=:":
                key_end, value_start, has_separator = i, i + 1, True
                break
            if not escaped and c in _PROPERTY_WHITESPACE:
                key_end, value_start = i, i + 1
                break
            escaped = (c == "\\") and not escaped
        while value_start < len(line):
            c = line[value_start]
            if c not in _PROPERTY_WHITESPACE:
                if not has_separator and c in "=:":
                    has_separator = True
                else:
                    break
            value_start += 1
        key = _property_unescape(line[:key_end], number, path)
        props[key] = _property_unescape(line[value_start:], number, path)
    return props


def parse_meta_properties(text: str, *, path: Optional[PathLike] = None) -> MetaProperties:
    """Parse ``meta.properties`` and check it the way Kafka's MetaProperties.Builder does."""
    raw = parse_properties(text, path=path)

    def integer(key: str) -> int:
        value = _parse_java_int(raw[key], INT32_MIN, INT32_MAX)
        if value is None:
            raise CheckpointError(f"{key}={raw[key]!r} is not an int32", path=path)
        return value

    version_text = raw.get("version", "0")
    version = _parse_java_int(version_text, INT32_MIN, INT32_MAX)
    if version not in META_PROPERTIES_VERSIONS:
        raise CheckpointError(f"unknown meta.properties version {version_text!r}", path=path)
    node_id: Optional[int] = None
    if version == 0:
        if "broker.id" in raw:
            node_id = integer("broker.id")
    else:
        if "node.id" not in raw:
            raise CheckpointError("node.id was not found (required by version 1)", path=path)
        node_id = integer("node.id")
    cluster_id = raw.get("cluster.id")
    if version == 1 and cluster_id is None:
        raise CheckpointError("cluster.id was not found (required by version 1)", path=path)
    directory_id = raw.get("directory.id")
    if directory_id is not None:
        try:
            parse_kafka_uuid(directory_id)
        except ValueError as exc:
            raise CheckpointError(f"directory.id: {exc}", path=path) from None
    return MetaProperties(version, cluster_id, node_id, directory_id, raw)


# --- .kafka_cleanshutdown --------------------------------------------------------------------

def parse_clean_shutdown(text: str, *, path: Optional[PathLike] = None) -> dict:
    """The JSON object of a ``.kafka_cleanshutdown`` file; an empty file (brokers before 3.7) is {}."""
    if text.strip() == "":
        return {}
    try:
        content = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"not valid JSON: {exc.msg}", path=path,
                              position=len(text[:exc.pos].encode("utf-8"))) from None
    if not isinstance(content, dict):
        raise CheckpointError("expected a JSON object like {\"version\":0,\"brokerEpoch\":N}", path=path)
    return content


# --- files -----------------------------------------------------------------------------------

def atomic_write(path: PathLike, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` as Kafka's CheckpointFile does: write ``<path>.tmp``, fsync it,
    rename it over ``path``, then fsync the directory; the file keeps the owner, group and mode of the
    one it replaces (``durable.replace_file``). A failure before the rename removes the temp file and
    leaves ``path`` untouched."""
    replace_file(path, data, sync=sync)


def read_offset_checkpoint(path: PathLike) -> dict[tuple[str, int], int]:
    """Read an offset checkpoint; a missing file is an empty checkpoint (as for Kafka)."""
    text = _read_utf8(path)
    return {} if text is None else parse_offset_checkpoint(text, path=path)


def write_offset_checkpoint(path: PathLike, entries: Mapping[tuple[str, int], int], *, sync: bool = True) -> None:
    """Atomically write an offset checkpoint (see ``atomic_write``)."""
    atomic_write(path, format_offset_checkpoint(entries).encode("utf-8"), sync=sync)


def read_leader_epoch_checkpoint(path: PathLike) -> list[EpochEntry]:
    """Read a leader-epoch-checkpoint; a missing file has no entries."""
    text = _read_utf8(path)
    return [] if text is None else parse_leader_epoch_checkpoint(text, path=path)


def write_leader_epoch_checkpoint(path: PathLike, entries: Iterable[tuple[int, int]], *, sync: bool = True) -> None:
    """Atomically write a leader-epoch-checkpoint."""
    atomic_write(path, format_leader_epoch_checkpoint(entries).encode("utf-8"), sync=sync)


def read_partition_metadata(path: PathLike) -> Optional[PartitionMetadata]:
    """Read ``partition.metadata``; None when the file does not exist."""
    text = _read_utf8(path)
    return None if text is None else parse_partition_metadata(text, path=path)


def write_partition_metadata(path: PathLike, metadata: PartitionMetadata, *, sync: bool = True) -> None:
    """Atomically write ``partition.metadata``."""
    atomic_write(path, format_partition_metadata(metadata).encode("utf-8"), sync=sync)


def read_meta_properties(path: PathLike) -> Optional[MetaProperties]:
    """Read ``meta.properties`` (ISO-8859-1, as Properties.load(InputStream)); None when absent."""
    try:
        data = filesystem.read_bytes(path)
    except FileNotFoundError:
        return None
    return parse_meta_properties(data.decode("latin-1"), path=path)


def read_clean_shutdown(path: PathLike) -> Optional[dict]:
    """Read ``.kafka_cleanshutdown``: its JSON object ({} for the empty pre-3.7 marker), or None when
    the file is absent (the broker will recover the unflushed segments)."""
    text = _read_utf8(path)
    return None if text is None else parse_clean_shutdown(text, path=path)
