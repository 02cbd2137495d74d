"""Read and write Kafka's producer-state snapshots, ``<offset>.snapshot`` in a partition folder
(``ProducerStateManager.readSnapshot/writeSnapshot`` in Kafka's ``ProducerStateManager.java``,
ProducerSnapshot.json version 1).

Layout (big-endian)::

    offset  size
    0       2    int16  version = SNAPSHOT_VERSION (1)
    2       4    uint32 CRC-32C of bytes [6, EOF)
    6       4    int32  entry count (>= 0)
    10      46*n entries, each:
                   int64 producerId, int16 producerEpoch, int32 lastSequence,
                   int64 lastOffset (-1 if none), int32 offsetDelta (lastSeq - firstSeq of the last batch),
                   int64 timestamp, int32 coordinatorEpoch, int64 currentTxnFirstOffset (-1 if none)

The file name's offset is the producer-state end offset (exclusive) when the snapshot was taken.
Entry order is Java HashMap order; it is kept as found.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Union

import crc32c

from kafkalog.fs.durable import replace_file
from kafkalog.errors import CheckpointError, InvalidFileNameError
from kafkalog.fs import filesystem
from kafkalog.fs.names import SNAPSHOT_SUFFIX, format_segment_file_name, parse_segment_file_name

SNAPSHOT_VERSION = 1
VERSION_OFFSET = 0
CRC_OFFSET = 2
ENTRY_COUNT_OFFSET = 6
CRC_COVERAGE_START = ENTRY_COUNT_OFFSET   # the CRC covers the count and every entry, up to EOF
ENTRIES_OFFSET = 10
HEADER_SIZE = ENTRIES_OFFSET
ENTRY_SIZE = 46

_HEADER = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")
assert _HEADER.size == HEADER_SIZE and _ENTRY.size == ENTRY_SIZE

PathLike = Union[str, os.PathLike]


# --- dataclasses -----------------------------------------------------------------------------

@dataclass(frozen=True)
class ProducerSnapshotEntry:
    """The last state of one producer id, as the broker snapshotted it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


@dataclass(frozen=True)
class ProducerSnapshot:
    """A ``<offset>.snapshot`` file: its offset (from the file name) and its entries in file order."""

    offset: int
    entries: list[ProducerSnapshotEntry] = field(default_factory=list)


# --- bytes <-> dataclasses -------------------------------------------------------------------

def parse_producer_snapshot(data: bytes, offset: int, *, path: Optional[PathLike] = None) -> ProducerSnapshot:
    """Decode a snapshot's bytes, checked in Kafka's order: version, CRC-32C, then the entries.
    The size must be exactly ``10 + 46 * count``. Problems raise CheckpointError at a byte position."""
    data = bytes(data)
    if len(data) < HEADER_SIZE:
        raise CheckpointError(f"snapshot is {len(data)} bytes, shorter than its {HEADER_SIZE}-byte header",
                              path=path, position=len(data))
    version, stored_crc, count = _HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CheckpointError(f"unknown producer snapshot version {version} (expected {SNAPSHOT_VERSION})",
                              path=path, position=VERSION_OFFSET)
    computed_crc = crc32c.crc32c(data[CRC_COVERAGE_START:])
    if stored_crc != computed_crc:
        raise CheckpointError(f"CRC-32C mismatch: stored {stored_crc:#010x}, computed {computed_crc:#010x}",
                              path=path, position=CRC_OFFSET)
    if count < 0:
        raise CheckpointError(f"negative entry count {count}", path=path, position=ENTRY_COUNT_OFFSET)
    expected_size = HEADER_SIZE + count * ENTRY_SIZE
    if len(data) != expected_size:
        problem = "truncated" if len(data) < expected_size else "has trailing bytes"
        raise CheckpointError(
            f"{count} entries need {expected_size} bytes but the snapshot is {len(data)} ({problem})",
            path=path, position=min(len(data), expected_size))
    entries = [ProducerSnapshotEntry(*fields) for fields in _ENTRY.iter_unpack(data[ENTRIES_OFFSET:])]
    return ProducerSnapshot(offset, entries)


def format_producer_snapshot(entries: Iterable[ProducerSnapshotEntry]) -> bytes:
    """Encode entries (in the order given) as a version-1 snapshot with its CRC-32C."""
    entries = list(entries)
    body = bytearray(struct.pack(">i", len(entries)))
    for index, entry in enumerate(entries):
        try:
            body += _ENTRY.pack(entry.producer_id, entry.producer_epoch, entry.last_sequence, entry.last_offset,
                                entry.offset_delta, entry.timestamp, entry.coordinator_epoch,
                                entry.current_txn_first_offset)
        except struct.error as exc:
            raise CheckpointError(f"entry {index} does not fit the snapshot layout: {exc}") from None
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c.crc32c(bytes(body))) + bytes(body)


def snapshot_file_name(offset: int) -> str:
    """``<offset as 20 zero-padded digits>.snapshot``."""
    return format_segment_file_name(offset, SNAPSHOT_SUFFIX)


# --- files -----------------------------------------------------------------------------------

def read_producer_snapshot(path: PathLike, *, offset: Optional[int] = None) -> ProducerSnapshot:
    """Read a snapshot file. Its offset comes from the name (``<offset>.snapshot``, also with a
    ``.deleted`` etc. suffix) unless ``offset`` is given; another name raises InvalidFileNameError."""
    path = Path(path)
    if offset is None:
        parsed = parse_segment_file_name(path.name)
        if parsed.suffix != SNAPSHOT_SUFFIX:
            raise InvalidFileNameError(f"{path.name!r} is a .{parsed.suffix} file, not a producer snapshot",
                                       path=path)
        offset = parsed.base_offset
    return parse_producer_snapshot(filesystem.read_bytes(path), offset, path=path)


def write_producer_snapshot(partition_dir: PathLike, snapshot: ProducerSnapshot, *, sync: bool = True) -> Path:
    """Write ``<partition_dir>/<offset>.snapshot`` atomically (temp file, fsync, rename, fsync dir)
    and return its path. Kafka itself writes the file in place; the bytes are the same."""
    path = Path(partition_dir) / snapshot_file_name(snapshot.offset)
    replace_file(path, format_producer_snapshot(snapshot.entries), sync=sync)
    return path
