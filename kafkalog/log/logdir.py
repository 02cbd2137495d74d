"""Find what is in one or many Kafka log dirs: partition folders, their segment files and leftovers,
the log-dir checkpoints and metadata, and whether a live broker holds the dir's ``.lock``.

Layout (spec §3.1, §3.2)::

    <log dir>/
      .lock                                  LOCK_FILE, held by the broker (POSIX record lock)
      .kafka_cleanshutdown                   only between a clean shutdown and the next start
      meta.properties
      recovery-point-offset-checkpoint       and the other three offset checkpoints (checkpoint.py)
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
``-``. Scanning never raises for one bad folder: it is reported in ``LogDir.problems``.

Locking: Kafka takes ``.lock`` with ``FileChannel.tryLock()``, which on Linux is a process-associated
POSIX record lock (``fcntl(F_SETLK)``, exclusive, whole file). ``is_locked`` asks the kernel with
``F_OFD_GETLK`` on a read-only descriptor: a pure query that never takes the lock itself (a broker
starting at that instant is not refused), needs no write permission (read-only copies and mounts
work), never creates the file, and also sees locks held by this very process. Any descriptor closed
on a file drops this process's POSIX locks on it, so locks taken with ``lock_log_dir`` are tracked
and never re-opened while held. Other platforms fall back to a ``lockf`` probe on a fresh descriptor.
"""
from __future__ import annotations

import errno
import os
import re
import socket
import struct
import sys
import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Optional, Union

from kafkalog.checkpoint import (
                                 CLEAN_SHUTDOWN_FILE,
                                 LEADER_EPOCH_CHECKPOINT,
                                 LOCK_FILE,
                                 META_PROPERTIES,
                                 OFFSET_CHECKPOINTS,
                                 PARTITION_METADATA,
                                 TMP_SUFFIX,
                                 MetaProperties,
                                 read_clean_shutdown,
                                 read_leader_epoch_checkpoint,
                                 read_meta_properties,
                                 read_offset_checkpoint,
                                 read_partition_metadata,
                                 )
from kafkalog.errors import InvalidFileNameError, KafkalogError, LogDirLockedError
from kafkalog.log import filesystem

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: Kafka's lock there is not a POSIX lock anyway
    fcntl = None  # type: ignore[assignment]

# --- names -----------------------------------------------------------------------------------

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

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

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
_KRAFT_SNAPSHOT = re.compile(r"[0-9]{20}-[0-9]{10}\.checkpoint(?:\.part|\.deleted)?")

PathLike = Union[str, os.PathLike]


# --- dataclasses -----------------------------------------------------------------------------

@dataclass(frozen=True)
class SegmentFileName:
    """A parsed segment-file name: ``<base_offset>.<suffix>[.<temp>]``."""

    base_offset: int
    suffix: str                 # one of SEGMENT_SUFFIXES
    temp: Optional[str] = None  # None or one of TEMP_SUFFIXES


@dataclass
class SegmentFiles:
    """The files of one segment (one base offset that has a ``.log``); missing files are None."""

    base_offset: int
    log: Optional[Path] = None
    index: Optional[Path] = None
    timeindex: Optional[Path] = None
    txnindex: Optional[Path] = None
    snapshot: Optional[Path] = None


@dataclass
class PartitionDir:
    """One partition folder as found on disk.

    ``leftovers`` are files a broker removes or completes at startup (§3.3): ``.deleted``,
    ``.cleaned`` and ``.swap`` files, index files with no ``.log`` beside them, and ``*.tmp`` files
    of interrupted checkpoint writes. ``stray_snapshots`` are ``.snapshot`` files whose offset is not
    a segment base (Kafka keeps only the latest one, taken at clean shutdown, when it lies above the
    last segment base). ``unknown`` are files and folders Kafka did not write; it ignores them.
    ``problems`` are metadata files Kafka would refuse to read."""

    log_dir: Optional[Path]
    path: Path
    topic: str
    partition: int
    kind: str                                   # one of PARTITION_DIR_KINDS
    segments: list[SegmentFiles] = field(default_factory=list)   # ascending base offset
    leftovers: list[Path] = field(default_factory=list)
    unknown: list[Path] = field(default_factory=list)
    has_leader_epoch_checkpoint: bool = False
    partition_metadata: Optional[Path] = None
    stray_snapshots: list[Path] = field(default_factory=list)
    kraft_files: list[Path] = field(default_factory=list)        # quorum-state, KRaft snapshots
    problems: list[str] = field(default_factory=list)


@dataclass
class LogDir:
    """One log dir. ``checkpoints`` maps each offset-checkpoint name present to its path;
    ``clean_shutdown`` is the presence of ``.kafka_cleanshutdown``; ``locked`` is None when the
    lock could not be tested. ``problems`` holds "<path>: <reason>" for everything a broker would
    refuse (folders that are not partition dirs, malformed checkpoints and metadata)."""

    path: Path
    partitions: list[PartitionDir] = field(default_factory=list)
    checkpoints: dict[str, Path] = field(default_factory=dict)
    meta_properties: Optional[MetaProperties] = None
    clean_shutdown: bool = False
    locked: Optional[bool] = None
    problems: list[str] = field(default_factory=list)
    lock_file: Optional[Path] = None
    leftovers: list[Path] = field(default_factory=list)   # *.tmp of interrupted checkpoint writes
    unknown: list[Path] = field(default_factory=list)     # other files Kafka did not write


# --- names: pure functions -------------------------------------------------------------------

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


# --- lock: the one place that talks to fcntl -------------------------------------------------

# struct flock on Linux with a 64-bit off_t: l_type, l_whence, l_start, l_len, l_pid (native alignment).
_FLOCK = struct.Struct("@hhqqi")
_USE_GETLK = sys.platform.startswith("linux") and fcntl is not None
_held_locks: dict[tuple[int, int], int] = {}   # (st_dev, st_ino) of a .lock -> fd holding it
_held_guard = threading.RLock()
_held_dirs: dict[tuple[int, int], str] = {}    # the same keys -> the log dir, for held_fences
_HOST = socket.gethostname()
_OPEN_FLAGS = getattr(os, "O_CLOEXEC", 0)


# kafkalog takes its lock over [0, KAFKALOG_LOCK_LENGTH): it overlaps the whole-file lock a broker
# takes (FileChannel.tryLock(): [0, Long.MAX_VALUE)), so either refuses the other, and the length tells
# a lock query which of the two holds the file without writing anything into it.
KAFKALOG_LOCK_LENGTH = 0x6B61666B61        # "kafka" as an integer: ~460 GB, far past a .lock's size
JAVA_WHOLE_FILE_LOCK_LENGTH = (1 << 63) - 1


@dataclass(frozen=True)
class LockHolder:
    """What the kernel says about a lock that refuses ours: the holder's pid (None when it cannot be
    known: an OFD lock, another host or PID namespace) and the locked range's length."""
    pid: Optional[int]
    length: int

    @property
    def is_kafkalog(self) -> bool:
        return self.length == KAFKALOG_LOCK_LENGTH

    def describe(self) -> str:
        """"another kafkalog job (PID 12, python jobs/compact.py …)", "a Kafka broker …", or "a broker or
        other process …", as far as the lock and /proc tell."""
        if self.is_kafkalog:
            who = "another kafkalog job"
        elif self.length == JAVA_WHOLE_FILE_LOCK_LENGTH:
            command = _command_line(self.pid)
            who = "a Kafka broker" if command and "kafka.Kafka" in command else "a broker or other Java process"
        else:
            who = "a broker or other process"
        if self.pid is None:
            return f"{who} (PID unknown: another host or PID namespace)"
        command = _command_line(self.pid)
        return f"{who} (PID {self.pid}{', ' + command if command else ''})"


def _command_line(pid: Optional[int], limit: int = 120) -> Optional[str]:
    if pid is None or not sys.platform.startswith("linux"):
        return None
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    text = " ".join(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _lock_holder(fd: int) -> Optional[LockHolder]:
    """Who holds a lock that would refuse an exclusive lock on fd's file, or None. F_OFD_GETLK
    (Linux >= 3.15) also reports this process's own POSIX locks; F_GETLK, the fallback for older
    kernels, does not."""
    request = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
    command = getattr(fcntl, "F_OFD_GETLK", None)
    reply = None
    if command is not None:
        try:
            reply = fcntl.fcntl(fd, command, request)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
    if reply is None:
        reply = fcntl.fcntl(fd, fcntl.F_GETLK, request)
    lock_type, _whence, _start, length, pid = _FLOCK.unpack(reply)
    if lock_type == fcntl.F_UNLCK:
        return None
    return LockHolder(pid if pid > 0 else None, length)


def _probe_locked(lock_path: Path) -> bool:
    """Non-Linux fallback: try the lock on a fresh writable descriptor and release it at once."""
    fd = os.open(lock_path, os.O_RDWR | _OPEN_FLAGS)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                return True
            raise
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


_LOCKED_HINT_KAFKALOG = "wait for that job to finish (or stop it), then run again"


def process_start_time(pid: int) -> Optional[int]:
    """A process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22): with the pid,
    it names one process even after the pid is reused. None when it cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2:].split()      # after "pid (comm) "; comm may hold spaces
    return int(fields[19])


@dataclass(frozen=True)
class LockFence:
    """A job's claim on a log dir, shipped to the processes that work on it (``durable.fenced``): held
    while the ``.lock`` is locked by kafkalog in process ``pid`` (started at ``start_time``) on
    ``host``. Another host cannot see the pid: there it is held while a kafkalog job holds the lock."""
    log_dir: str
    pid: int
    start_time: Optional[int]
    host: str

    @property
    def local(self) -> bool:
        """This process holds the lock itself (no watchdog needed: it cannot lose it unseen)."""
        return self.pid == os.getpid() and self.host == _HOST

    def holds(self) -> bool:
        if self.local:
            with _held_guard:
                return bool(_own_lock(Path(self.log_dir) / LOCK_FILE))
        if not _USE_GETLK:           # no lock query here: held while someone holds it
            return is_locked(self.log_dir)
        holder = lock_holder(self.log_dir)
        if holder is None or not holder.is_kafkalog:
            return False
        if self.host != _HOST or holder.pid is None:
            return True
        return holder.pid == self.pid and process_start_time(self.pid) == self.start_time

    def describe(self) -> str:
        return f"the job (PID {self.pid} on {self.host}) that locked {self.log_dir}"


def held_fences() -> dict:
    """{log dir: LockFence} for every log dir whose lock this process holds (``lock_log_dir``)."""
    with _held_guard:
        dirs = list(_held_dirs.values())
    me, started = os.getpid(), process_start_time(os.getpid())
    return {d: LockFence(d, me, started, _HOST) for d in dirs}


def _own_lock(lock_path: Path) -> Optional[bool]:
    """Whether this process holds ``lock_path`` (``lock_log_dir``); None when it does not exist. Call
    it under _held_guard."""
    try:
        status = os.stat(lock_path)
    except FileNotFoundError:
        return None
    return (status.st_dev, status.st_ino) in _held_locks


def lock_holder(log_dir: PathLike) -> Optional[LockHolder]:
    """Who holds the log dir's ``.lock`` (None: nobody, or the file is absent; this process's own lock
    is reported too). Linux only; elsewhere None. Raises OSError when it cannot tell."""
    if not _USE_GETLK:
        return None
    lock_path = Path(log_dir) / LOCK_FILE
    with _held_guard:
        own = _own_lock(lock_path)
        if own is None:
            return None
        if own:                      # ours: another descriptor closed on it would drop it
            return LockHolder(os.getpid(), KAFKALOG_LOCK_LENGTH)
        fd = os.open(lock_path, os.O_RDONLY | _OPEN_FLAGS)
        try:
            return _lock_holder(fd)
        finally:
            os.close(fd)


def describe_lock_holder(log_dir: PathLike) -> str:
    """A phrase for messages: who holds the log dir's lock, as far as can be known."""
    try:
        holder = lock_holder(log_dir)
    except OSError:
        holder = None
    return holder.describe() if holder is not None else "a live process (a broker or another job)"


def is_locked(log_dir: PathLike) -> bool:
    """Whether a process holds the log dir's ``.lock`` (a running broker, or ``lock_log_dir``).
    An absent ``.lock`` is not locked and is not created. Raises OSError when it cannot tell."""
    if fcntl is None:  # pragma: no cover
        raise OSError(errno.ENOTSUP, "record locks are not available on this platform", os.fspath(log_dir))
    if filesystem.is_uri(log_dir):       # no broker runs on an object store; nothing there can be locked
        return False
    if _USE_GETLK:
        return lock_holder(log_dir) is not None
    lock_path = Path(log_dir) / LOCK_FILE
    with _held_guard:
        own = _own_lock(lock_path)
        if own is None:
            return False
        return own or _probe_locked(lock_path)   # never probe ours: closing the probe's fd would drop it


@contextmanager
def lock_log_dir(log_dir: PathLike) -> Iterator[Path]:
    """Hold the log dir's ``.lock`` (created if absent) as a broker does, for jobs that modify the
    dir; released on exit (the file stays, as Kafka leaves it). Raises LogDirLockedError when another
    process, or this one, already holds it."""
    if fcntl is None:  # pragma: no cover
        raise OSError(errno.ENOTSUP, "record locks are not available on this platform", os.fspath(log_dir))
    log_dir = Path(log_dir)
    _require_dir(log_dir)
    lock_path = log_dir / LOCK_FILE
    with _held_guard:
        try:
            status = os.stat(lock_path)
        except FileNotFoundError:
            status = None
        if status is not None and (status.st_dev, status.st_ino) in _held_locks:
            raise LogDirLockedError("this process already holds the log dir lock", path=lock_path)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | _OPEN_FLAGS, 0o666)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, KAFKALOG_LOCK_LENGTH)
        except OSError as exc:
            holder = None
            if exc.errno in (errno.EACCES, errno.EAGAIN) and _USE_GETLK:
                try:
                    holder = _lock_holder(fd)
                except OSError:
                    holder = None
            os.close(fd)
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                who = holder.describe() if holder is not None else "another process"
                raise LogDirLockedError(f"the log dir is locked by {who}", path=lock_path,
                                        hint=_LOCKED_HINT_KAFKALOG if holder is not None and holder.is_kafkalog
                                        else None) from None
            raise
        status = os.fstat(fd)
        key = (status.st_dev, status.st_ino)
        _held_locks[key] = fd
        _held_dirs[key] = os.fspath(log_dir)
    try:
        yield log_dir
    finally:
        with _held_guard:
            _held_locks.pop(key, None)
            _held_dirs.pop(key, None)
            try:
                fcntl.lockf(fd, fcntl.LOCK_UN, KAFKALOG_LOCK_LENGTH)
            finally:
                os.close(fd)


# --- scanning --------------------------------------------------------------------------------

def _require_dir(path: Path) -> None:
    if not filesystem.exists(path):
        raise FileNotFoundError(errno.ENOENT, "log dir does not exist", filesystem.uri_for_display(path))
    if not filesystem.isdir(path):
        raise NotADirectoryError(errno.ENOTDIR, "log dir is not a directory", os.fspath(path))


def _sorted_entries(path: Path) -> list[os.DirEntry]:
    return sorted(filesystem.scandir(path), key=lambda entry: entry.name)


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def scan_partition_dir(path: PathLike, *, log_dir: Optional[PathLike] = None,
                       topic_partition: Optional[tuple[str, int]] = None) -> PartitionDir:
    """List one partition folder. The topic and partition come from the folder name (raises
    InvalidFileNameError if Kafka would not write it) unless ``topic_partition`` is given, for a
    copy under another name; such a folder is taken as live. OSError if it cannot be listed."""
    path = Path(path)
    if topic_partition is None:
        topic, partition, kind = parse_partition_dir_name(path.name)
    else:
        (topic, partition), kind = topic_partition, LIVE
    result = PartitionDir(log_dir=None if log_dir is None else Path(log_dir), path=path,
                          topic=topic, partition=partition, kind=kind)
    by_offset: dict[int, dict[str, Path]] = {}
    for entry in _sorted_entries(path):
        name, file = entry.name, Path(entry.path)
        if _is_dir(entry):
            result.unknown.append(file)
        elif name == LEADER_EPOCH_CHECKPOINT:
            result.has_leader_epoch_checkpoint = True
        elif name == PARTITION_METADATA:
            result.partition_metadata = file
        elif name == QUORUM_STATE or _KRAFT_SNAPSHOT.fullmatch(name):
            result.kraft_files.append(file)
        elif name.endswith(TMP_SUFFIX):
            result.leftovers.append(file)
        else:
            try:
                parsed = parse_segment_file_name(name)
            except InvalidFileNameError:
                result.unknown.append(file)
                continue
            if parsed.temp is not None:
                result.leftovers.append(file)
            else:
                by_offset.setdefault(parsed.base_offset, {})[parsed.suffix] = file
    for base_offset in sorted(by_offset):
        files = by_offset[base_offset]
        if LOG_SUFFIX in files:
            result.segments.append(SegmentFiles(
                base_offset, files.get(LOG_SUFFIX), files.get(INDEX_SUFFIX), files.get(TIME_INDEX_SUFFIX),
                files.get(TXN_INDEX_SUFFIX), files.get(SNAPSHOT_SUFFIX)))
            continue
        result.leftovers.extend(files[suffix] for suffix in INDEX_SUFFIXES if suffix in files)
        if SNAPSHOT_SUFFIX in files:
            result.stray_snapshots.append(files[SNAPSHOT_SUFFIX])
    result.leftovers.sort(key=lambda p: p.name)
    for checked, reader in ((path / LEADER_EPOCH_CHECKPOINT if result.has_leader_epoch_checkpoint else None,
                             read_leader_epoch_checkpoint),
                            (result.partition_metadata, read_partition_metadata)):
        if checked is not None:
            try:
                reader(checked)
            except KafkalogError as exc:
                result.problems.append(str(exc))
            except OSError as exc:
                result.problems.append(f"{checked}: cannot read ({exc.strerror or exc})")
    return result


def scan_log_dir(path: PathLike) -> LogDir:
    """List one log dir. A folder that is not a partition dir, or a malformed checkpoint or metadata
    file, is recorded in ``problems`` (a broker would refuse the dir); a log dir that does not
    exist or is not a directory raises FileNotFoundError / NotADirectoryError."""
    path = Path(path)
    _require_dir(path)
    result = LogDir(path=path)
    entries = _sorted_entries(path)
    ahead = filesystem.in_parallel(           # remote folders are listed at once; local ones as walked
        lambda file: scan_partition_dir(file, log_dir=path),
        [Path(e.path) for e in entries if e.name != REMOTE_INDEX_CACHE_DIR and _is_dir(e)]) \
        if filesystem.is_uri(path) else {}
    for entry in entries:
        name, file = entry.name, Path(entry.path)
        if _is_dir(entry):
            if name == REMOTE_INDEX_CACHE_DIR:
                continue
            try:
                partition_dir = ahead[file].result() if file in ahead else scan_partition_dir(file, log_dir=path)
            except InvalidFileNameError as exc:
                result.problems.append(f"{file}: {exc.message}; a broker refuses a log dir holding it")
                continue
            except OSError as exc:
                result.problems.append(f"{file}: cannot list the partition folder ({exc.strerror or exc})")
                continue
            result.partitions.append(partition_dir)
            result.problems.extend(partition_dir.problems)
            continue
        try:
            if name in OFFSET_CHECKPOINTS:
                result.checkpoints[name] = file
                read_offset_checkpoint(file)
            elif name == META_PROPERTIES:
                result.meta_properties = read_meta_properties(file)
            elif name == CLEAN_SHUTDOWN_FILE:
                result.clean_shutdown = True
                read_clean_shutdown(file)
            elif name == LOCK_FILE:
                result.lock_file = file
            elif name.endswith(TMP_SUFFIX):
                result.leftovers.append(file)
            elif name != BOOTSTRAP_CHECKPOINT:
                result.unknown.append(file)
        except KafkalogError as exc:
            result.problems.append(str(exc))
        except OSError as exc:
            result.problems.append(f"{file}: cannot read ({exc.strerror or exc})")
    result.partitions.sort(key=lambda p: (p.topic, p.partition, p.kind, p.path.name))
    try:
        result.locked = is_locked(path)
    except OSError as exc:
        result.locked = None
        result.problems.append(f"{path / LOCK_FILE}: cannot test the lock ({exc.strerror or exc})")
    return result


def scan_log_dirs(paths: Iterable[PathLike]) -> list[LogDir]:
    """Scan several log dirs (one broker's ``log.dirs``), in the order given. A live or future
    partition present in two of them is recorded as a problem in both (a broker refuses to start)."""
    paths = [Path(p) for p in paths]
    seen: dict[Path, Path] = {}
    for path in paths:
        resolved = path if filesystem.is_uri(path) else path.resolve()
        if resolved in seen:
            raise ValueError(f"log dir {path} is given twice (also as {seen[resolved]})")
        seen[resolved] = path
    log_dirs = [scan_log_dir(path) for path in paths]
    owners: dict[tuple[str, int, str], list[tuple[LogDir, PartitionDir]]] = {}
    for log_dir in log_dirs:
        for partition_dir in log_dir.partitions:
            if partition_dir.kind in (LIVE, FUTURE):
                key = (partition_dir.topic, partition_dir.partition, partition_dir.kind)
                owners.setdefault(key, []).append((log_dir, partition_dir))
    for (topic, partition, kind), found in owners.items():
        if len(found) > 1:
            where = ", ".join(str(p.path) for _, p in found)
            for log_dir, partition_dir in found:
                log_dir.problems.append(
                    f"{partition_dir.path}: {kind} replica of {topic}-{partition} is in more than one log dir ({where})")
    return log_dirs
