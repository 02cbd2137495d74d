"""Building small Kafka log dirs for tests: partitions of segments with chosen offsets and timestamps."""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Optional, Sequence

import pyarrow as pa

from kafkalog.checkpoint.offset import write_offset_checkpoint
from kafkalog.fs.names import LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT, format_segment_file_name
from kafkalog.format.schema import HEADERS_TYPE, TIMESTAMP_TYPE
from kafkalog.log.records_io import write_segment


def records(first_offset: int, timestamps: Sequence[int], *, key_prefix: bytes = b"k") -> pa.Table:
    n = len(timestamps)
    return pa.table({
        "offset": pa.array(range(first_offset, first_offset + n), pa.int64()),
        "timestamp": pa.array(list(timestamps), TIMESTAMP_TYPE),
        "key": pa.array([key_prefix + b"%d" % (first_offset + i) for i in range(n)], pa.binary()),
        "value": pa.array([b"v" * 50] * n, pa.binary()),
        "headers": pa.array([[]] * n, HEADERS_TYPE),
    })


def make_partition(log_dir: Path, topic: str, partition: int, segments: Sequence[Sequence[int]], *,
                   first_offset: int = 0, empty_active: bool = False, mtime_ms: Optional[int] = None) -> Path:
    """One partition folder: ``segments`` lists each segment's record timestamps; offsets run on from
    ``first_offset``. ``empty_active`` adds an empty active segment at the log end."""
    folder = log_dir / f"{topic}-{partition}"
    folder.mkdir(parents=True, exist_ok=True)
    offset = first_offset
    for stamps in segments:
        log = write_segment(folder, records(offset, stamps), batch_bytes=300)
        if mtime_ms is not None:
            os.utime(log, (mtime_ms / 1000, mtime_ms / 1000))
        offset += len(stamps)
    if empty_active:
        for suffix in ("log", "index", "timeindex"):
            (folder / format_segment_file_name(offset, suffix)).touch()
    return folder


def write_checkpoints(log_dir: Path, *, high_watermarks=None, log_start_offsets=None) -> None:
    if high_watermarks is not None:
        write_offset_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT, high_watermarks)
    if log_start_offsets is not None:
        write_offset_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT, log_start_offsets)


def snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    """name -> (size, content) of every file in a folder tree, to compare before/after."""
    out = {}
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file():
            out[str(path.relative_to(folder))] = (path.stat().st_size, path.read_bytes())
    return out


_BUILT: dict[str, Path] = {}


def built_once(key: str, dest: Path, build: Callable[[Path], object]) -> Path:
    """A copy at ``dest`` of the log dir ``build(folder)`` writes, written once per test process: the first
    caller builds it in a temporary folder (removed at exit), every caller gets its own copy (cp -a: sizes,
    bytes and mtimes as written). For the big fixtures several slow tests start from (thousands of segments
    written one by one: seconds each time on 2 cores; the copy is a fraction of a second). ``key`` names
    what ``build`` writes: one key, one builder."""
    if key not in _BUILT:
        folder = Path(tempfile.mkdtemp(prefix=f"kafkalog-tests-{key}-"))
        atexit.register(shutil.rmtree, folder, True)
        build(folder / "logs")
        _BUILT[key] = folder / "logs"
    shutil.copytree(_BUILT[key], dest, symlinks=True)
    return dest
