"""What is in one or many Kafka log dirs (what Kafka's ``LogManager.loadLogs`` walks): partition
folders, their segment files and leftovers, the log-dir checkpoints and metadata, and whether a live
broker holds the dir's ``.lock``. Scanning never raises for one bad folder: it is reported in
``LogDir.problems``. (File and folder names: ``kafkalog.fs.names``; the lock: ``kafkalog.fs.lock``.)
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Union

from kafkalog.checkpoint.clean_shutdown import read_clean_shutdown
from kafkalog.checkpoint.leader_epoch import read_leader_epoch_checkpoint
from kafkalog.checkpoint.meta_properties import MetaProperties, read_meta_properties
from kafkalog.checkpoint.offset import read_offset_checkpoint
from kafkalog.checkpoint.partition_metadata import read_partition_metadata
from kafkalog.errors import InvalidFileNameError, KafkalogError
from kafkalog.fs import filesystem
from kafkalog.fs.lock import is_locked, require_dir
from kafkalog.fs.names import (BOOTSTRAP_CHECKPOINT, CLEAN_SHUTDOWN_FILE, FUTURE, INDEX_SUFFIX, INDEX_SUFFIXES,
                                KRAFT_SNAPSHOT, LEADER_EPOCH_CHECKPOINT, LIVE, LOCK_FILE, LOG_SUFFIX, META_PROPERTIES,
                                OFFSET_CHECKPOINTS, PARTITION_METADATA, QUORUM_STATE, REMOTE_INDEX_CACHE_DIR,
                                SNAPSHOT_SUFFIX, TIME_INDEX_SUFFIX, TMP_SUFFIX, TXN_INDEX_SUFFIX,
                                parse_partition_dir_name, parse_segment_file_name)

PathLike = Union[str, os.PathLike]


# --- data structures ---------------------------------------------------------------------------

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

    ``leftovers`` are files a broker removes or completes at startup (``LogLoader.load``): ``.deleted``,
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


# --- scanning --------------------------------------------------------------------------------

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
        elif name == QUORUM_STATE or KRAFT_SNAPSHOT.fullmatch(name):
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
    exist or is not a directory raises FileNotFoundError / NotADirectoryError. ``path``: the log dir.

    Example::

        import kafkalog
        log_dir = kafkalog.scan_log_dir("logs")
        for p in log_dir.partitions:
            print(p.topic, p.partition, p.kind, len(p.segments))
    """
    path = Path(path)
    require_dir(path)
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
    dirs = [Path(p) for p in paths]
    seen: dict[Path, Path] = {}
    for path in dirs:
        resolved = path if filesystem.is_uri(path) else path.resolve()
        if resolved in seen:
            raise ValueError(f"log dir {path} is given twice (also as {seen[resolved]})")
        seen[resolved] = path
    log_dirs = [scan_log_dir(path) for path in dirs]
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


def partition_folders(log_dir: PathLike) -> list[str]:
    """Every folder directly inside a log dir, in name order, as the jobs list them: a folder that is
    not a partition's is kept (its report row says so, as a broker refuses such a dir).

    :param log_dir: the log dir
    """
    return [entry.path for entry in sorted(filesystem.scandir(log_dir), key=lambda e: e.name)
            if entry.is_dir(follow_symlinks=False) and entry.name != REMOTE_INDEX_CACHE_DIR]


def topic_of_folder(folder: PathLike) -> Optional[str]:
    """The topic of a partition folder's name, or None when the name is not a partition folder's.

    :param folder: the folder's path
    """
    try:
        return parse_partition_dir_name(os.path.basename(folder))[0]
    except KafkalogError:
        return None
