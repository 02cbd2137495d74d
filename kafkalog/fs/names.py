"""Every file and folder name in a Kafka log dir: the constants, and parsing and formatting them as
Kafka does (``LogFileUtils``, ``UnifiedLog.logDirName``, ``CheckpointFile``). Pure: nothing here
touches the disk.

Layout (Kafka's ``LogFileUtils.java``, ``UnifiedLog.logDirName``)::

    <log dir>/
      .lock                                  LOCK_FILE, held by the broker (POSIX record lock)
      .kafka_cleanshutdown                   only between a clean shutdown and the next start
      meta.properties
      recovery-point-offset-checkpoint       and the other three OFFSET_CHECKPOINTS
      remote-log-index-cache/                tiered storage's cache, not a partition
      <topic>-<partition>/                   kind "live"
      <topic>-<partition>.<32 hex>-delete/   kind "delete" (topic cut so the name is <= 255 chars)
      <topic>-<partition>.<32 hex>-future/   kind "future" (alter-log-dirs copy)
      <topic>-<partition>.<32 hex>-stray/    kind "stray"
        <20-digit base offset>.log|.index|.timeindex|.txnindex
        <20-digit offset>.snapshot           producer state (producer_snapshot.py)
        <any of those>.cleaned|.swap|.deleted   compaction output / swap-in / pending deletion
        leader-epoch-checkpoint, partition.metadata
        quorum-state, <offset>-<epoch>.checkpoint   KRaft, in __cluster_metadata-0 only

Topic names use ``[a-zA-Z0-9._-]`` (at most 249 chars), so the partition is the text after the LAST
``-``. Segment-file names have two parsers: :func:`parse_segment_file_name` is strict (a name Kafka
writes) and :func:`offset_from_file_name` is Kafka's lenient ``LogFileUtils.offsetFromFileName``
(whatever precedes the first dot, read as a Java long), which the broker's loader and
DumpLogSegments use.
"""
from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from kafkalog.errors import InvalidFileNameError
from kafkalog.java_types import INT32_MAX, INT64_MAX, INT64_MIN

# --- log-dir files ---------------------------------------------------------------------------

LOCK_FILE = ".lock"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"
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
TMP_SUFFIX = ".tmp"  # what CheckpointFile appends while writing; renamed away when complete

# --- partition-folder files ------------------------------------------------------------------

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"

LOG_SUFFIX = "log"
INDEX_SUFFIX = "index"
TIME_INDEX_SUFFIX = "timeindex"
TXN_INDEX_SUFFIX = "txnindex"
SNAPSHOT_SUFFIX = "snapshot"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX)
INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

CLEANED_SUFFIX = "cleaned"   # in-progress compaction or split output
SWAP_SUFFIX = "swap"         # complete replacement being swapped in
DELETED_SUFFIX = "deleted"   # scheduled for asynchronous deletion
TEMP_SUFFIXES = (CLEANED_SUFFIX, SWAP_SUFFIX, DELETED_SUFFIX)

OFFSET_DIGITS = 20           # LogFileUtils.filenamePrefixFromOffset: at least 20 digits, zero-padded

LIVE, DELETE, FUTURE, STRAY = "live", "delete", "future", "stray"
PARTITION_DIR_KINDS = (LIVE, DELETE, FUTURE, STRAY)
MAX_TOPIC_LENGTH = 249       # Topic.MAX_NAME_LENGTH
MAX_DIR_NAME_LENGTH = 255    # logDirNameWithSuffixCappedLength cuts the topic to fit
UNIQUE_ID_HEX_DIGITS = 32    # java.util.UUID without dashes

REMOTE_INDEX_CACHE_DIR = "remote-log-index-cache"   # RemoteIndexCache.DIR_NAME, skipped by LogManager
QUORUM_STATE = "quorum-state"                        # KRaft, in __cluster_metadata-0
KRAFT_METADATA_TOPIC = "__cluster_metadata"          # KafkaRaftServer.MetadataTopic: the LogManager never
                                                     # loads it; snapshots, not retention, trim its log
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"        # KRaft metadata bootstrap, log-dir level

_TOPIC_CHARS = r"[a-zA-Z0-9._-]"
_LIVE_DIR = re.compile(rf"(?P<topic>{_TOPIC_CHARS}+)-(?P<partition>0|[1-9][0-9]*)")
_SUFFIXED_DIR = re.compile(
    rf"(?P<topic>{_TOPIC_CHARS}+)-(?P<partition>0|[1-9][0-9]*)"
    rf"\.(?P<uid>[0-9a-f]{{{UNIQUE_ID_HEX_DIGITS}}})-(?P<kind>{DELETE}|{FUTURE}|{STRAY})"
)
_SEGMENT_FILE = re.compile(
    rf"(?P<base>[0-9]{{{OFFSET_DIGITS},}})\.(?P<suffix>{'|'.join(SEGMENT_SUFFIXES)})"
    rf"(?:\.(?P<temp>{'|'.join(TEMP_SUFFIXES)}))?"
)
KRAFT_SNAPSHOT = re.compile(r"[0-9]{20}-[0-9]{10}\.checkpoint(?:\.part|\.deleted)?")   # KRaft snapshots
_JAVA_LONG = re.compile(r"[+-]?[0-9]+")   # what Long.parseLong accepts


# --- data structures ---------------------------------------------------------------------------

@dataclass(frozen=True)
class SegmentFileName:
    """A parsed segment-file name: ``<base_offset>.<suffix>[.<temp>]``."""

    base_offset: int
    suffix: str                 # one of SEGMENT_SUFFIXES
    temp: Optional[str] = None  # None or one of TEMP_SUFFIXES


# --- parsing and formatting ---------------------------------------------------------------------

def _check_topic(topic: str, name: str, max_length: int) -> None:
    if topic in (".", ".."):
        raise InvalidFileNameError(f"{name!r}: topic {topic!r} is not a legal topic name")
    if len(topic) > max_length:
        raise InvalidFileNameError(f"{name!r}: topic is {len(topic)} chars, longer than {max_length}")


def parse_partition_dir_name(name: str) -> tuple[str, int, str]:
    """``(topic, partition, kind)`` of a partition folder name; kind is live/delete/future/stray.
    Raises InvalidFileNameError for a name Kafka would not write."""
    hint = "partition folders are named <topic>-<partition> or <topic>-<partition>.<32 hex>-delete|-future|-stray"
    match = _LIVE_DIR.fullmatch(name)
    if match:
        kind, max_topic = LIVE, MAX_TOPIC_LENGTH
    else:
        match = _SUFFIXED_DIR.fullmatch(name)
        if not match:
            raise InvalidFileNameError(f"{name!r} is not a partition folder name", hint=hint)
        kind = match["kind"]
        # -delete and -stray names cut the topic to keep the whole name within 255 chars
        max_topic = MAX_TOPIC_LENGTH if kind == FUTURE else MAX_DIR_NAME_LENGTH
        if kind != FUTURE and len(name) > MAX_DIR_NAME_LENGTH:
            raise InvalidFileNameError(f"{name!r} is longer than {MAX_DIR_NAME_LENGTH} chars", hint=hint)
    topic = match["topic"]
    _check_topic(topic, name, max_topic)
    partition = int(match["partition"])
    if partition > INT32_MAX:
        raise InvalidFileNameError(f"{name!r}: partition {partition} does not fit an int32", hint=hint)
    return topic, partition, kind


def format_partition_dir_name(topic: str, partition: int, kind: str = LIVE,
                              unique_id: Optional[str] = None) -> str:
    """The folder name Kafka gives a partition of this kind. ``unique_id`` (32 lowercase hex) is
    generated when not given; -delete/-stray names cut the topic to fit 255 chars, as Kafka does."""
    if not re.fullmatch(f"{_TOPIC_CHARS}+", topic or "") or len(topic) > MAX_TOPIC_LENGTH or topic in (".", ".."):
        raise InvalidFileNameError(f"topic {topic!r} is not a legal Kafka topic name")
    if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition <= INT32_MAX:
        raise InvalidFileNameError(f"partition {partition!r} is not an int32 >= 0")
    if kind == LIVE:
        return f"{topic}-{partition}"
    if kind not in PARTITION_DIR_KINDS:
        raise ValueError(f"kind must be one of {PARTITION_DIR_KINDS}, not {kind!r}")
    unique_id = uuid.uuid4().hex if unique_id is None else unique_id
    if not re.fullmatch(f"[0-9a-f]{{{UNIQUE_ID_HEX_DIGITS}}}", unique_id):
        raise InvalidFileNameError(f"unique id {unique_id!r} is not {UNIQUE_ID_HEX_DIGITS} lowercase hex digits")
    suffix = f"-{partition}.{unique_id}-{kind}"
    if kind != FUTURE:
        topic = topic[:MAX_DIR_NAME_LENGTH - len(suffix)]
    return f"{topic}{suffix}"


def parse_segment_file_name(name: str) -> SegmentFileName:
    """Parse ``<base offset>.<log|index|timeindex|txnindex|snapshot>[.cleaned|.swap|.deleted]``.
    The base offset has at least 20 digits and fits an int64. Raises InvalidFileNameError."""
    match = _SEGMENT_FILE.fullmatch(name)
    if not match:
        raise InvalidFileNameError(f"{name!r} is not a segment, index or snapshot file name")
    base_offset = int(match["base"])
    if base_offset > INT64_MAX:
        raise InvalidFileNameError(f"{name!r}: base offset does not fit an int64")
    return SegmentFileName(base_offset, match["suffix"], match["temp"])


def format_segment_file_name(base_offset: int, suffix: str, temp: Optional[str] = None) -> str:
    """``<base offset as 20 zero-padded digits>.<suffix>[.<temp>]``."""
    if isinstance(base_offset, bool) or not isinstance(base_offset, int) or not 0 <= base_offset <= INT64_MAX:
        raise InvalidFileNameError(f"base offset {base_offset!r} is not an int64 >= 0")
    if suffix not in SEGMENT_SUFFIXES:
        raise InvalidFileNameError(f"suffix {suffix!r} is not one of {SEGMENT_SUFFIXES}")
    if temp is not None and temp not in TEMP_SUFFIXES:
        raise InvalidFileNameError(f"temporary suffix {temp!r} is not one of {TEMP_SUFFIXES}")
    name = f"{base_offset:0{OFFSET_DIGITS}d}.{suffix}"
    return name if temp is None else f"{name}.{temp}"


def offset_from_file_name(name: str) -> Optional[int]:
    """Kafka's lenient ``LogFileUtils.offsetFromFileName``: the text before the first ``.`` read as
    ``Long.parseLong`` does (optional sign, decimal digits, within a long); None where Kafka's call
    would throw (no dot, not a number, out of range)."""
    head, dot, _rest = name.partition(".")
    if not dot or not _JAVA_LONG.fullmatch(head):
        return None
    value = int(head)
    return value if INT64_MIN <= value <= INT64_MAX else None


def base_offset_of(path: Union[str, os.PathLike], suffix: str, *, hint: Optional[str] = None) -> int:
    """The base offset in the name of ``path``, which must be ``<base offset>.<suffix>``, optionally
    followed by ``.cleaned``/``.swap``/``.deleted`` (the strict parser); else InvalidFileNameError
    naming the file."""
    name = Path(path).name
    try:
        parsed = parse_segment_file_name(name)
    except InvalidFileNameError:
        parsed = None
    if parsed is None or parsed.suffix != suffix:
        raise InvalidFileNameError(f"file name {name!r} is not <20-digit base offset>.{suffix}",
                                   path=path, hint=hint)
    return parsed.base_offset
