"""The time index (``<base>.timeindex``): a sparse map from a timestamp to the last offset of the
batch up to which that timestamp is the segment's maximum, parsed, checked, looked up and written
as Kafka does.

Byte layout (Kafka ``TimeIndex``): no header, no padding, fixed 12-byte entries, big-endian::

    +0  int64  timestamp        largest timestamp in the segment up to and including the batch...
    +8  int32  relativeOffset   ...whose last offset is base offset + relativeOffset

Timestamps and offsets strictly increase. A rolled segment's file is trimmed and ends with the
(segment max timestamp, offset) entry; the active segment's file is preallocated to
10,485,756 bytes (873,813 slots) and zero-padded.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, TYPE_CHECKING, Tuple
if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

import numpy as np

from kafkalog.errors import CorruptIndexError
from kafkalog.format.record_batch import NO_TIMESTAMP
from kafkalog.index.abstract_index import NAME_HINT, AbstractIndex, check_int32, read_index_file, read_slots
from kafkalog.fs.durable import replace_file
from kafkalog.fs.names import TIME_INDEX_SUFFIX, base_offset_of

TIME_ENTRY_SIZE = 12
TIMESTAMP_POS = 0
TIMESTAMP_SIZE = 8
RELATIVE_OFFSET_POS = TIMESTAMP_POS + TIMESTAMP_SIZE
RELATIVE_OFFSET_SIZE = 4
assert RELATIVE_OFFSET_POS + RELATIVE_OFFSET_SIZE == TIME_ENTRY_SIZE

#: One on-disk entry as a numpy record (itemsize 12, packed).
TIME_ENTRY_DTYPE = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])
assert TIME_ENTRY_DTYPE.itemsize == TIME_ENTRY_SIZE


@dataclass(frozen=True, eq=False, repr=False)
class TimeIndex(AbstractIndex):
    """The valid entries of one time index: timestamps and absolute offsets, in file order
    (read-only int64 arrays of equal length). An empty index's lookup answers
    ``(NO_TIMESTAMP, base_offset)``, Kafka's ``RecordBatch.NO_TIMESTAMP``."""

    ENTRY_SIZE = TIME_ENTRY_SIZE
    NAME = "time index"
    COLUMNS = ("timestamps", "offsets")
    KEY = "timestamps"

    base_offset: int
    timestamps: np.ndarray
    offsets: np.ndarray

    def lookup(self, timestamp: int) -> Tuple[int, int]:
        """``(timestamp, offset)`` of the entry with the largest timestamp <= the target, else
        ``(-1, base_offset)`` (Kafka ``TimeIndex.lookup``)."""
        i = self.slot_at_or_below(timestamp)
        if i < 0:
            return NO_TIMESTAMP, self.base_offset
        return int(self.timestamps[i]), int(self.offsets[i])

    def last_entry(self) -> Optional[Tuple[int, int]]:
        """``(timestamp, offset)`` of the last entry, or None when empty. This is what
        ``LogSegment.largestTimestamp`` reads (Kafka itself reports ``(-1, base_offset)`` for an
        empty index)."""
        if len(self) == 0:
            return None
        return int(self.timestamps[-1]), int(self.offsets[-1])

    def sanity_check(self, path: Optional[os.PathLike | str] = None) -> None:
        """Kafka's ``TimeIndex.sanityCheck``: a non-empty index is corrupt when its last
        timestamp is below its first, or its last offset is below the base offset. (A length
        that is not a multiple of 12 is rejected by :func:`parse_time_index`.)"""
        n = len(self)
        if n == 0:
            return
        last = (n - 1) * TIME_ENTRY_SIZE
        if int(self.timestamps[-1]) < int(self.timestamps[0]):
            raise CorruptIndexError(
                f"corrupt time index: it has {n} entries but the last timestamp is "
                f"{int(self.timestamps[-1])}, which is less than the first timestamp "
                f"{int(self.timestamps[0])}",
                path=path,
                position=last,
            )
        self.check_last_offset(self.offsets, path)

    def to_bytes(self) -> bytes:
        """The trimmed file content: ``len(self) * 12`` bytes of (timestamp, relativeOffset)."""
        relative = self.offsets - self.base_offset
        check_int32(relative, "relative offset", TIME_ENTRY_SIZE, overflow=True)
        out = np.empty(len(self), dtype=TIME_ENTRY_DTYPE)
        out["timestamp"] = self.timestamps
        out["relative_offset"] = relative
        return out.tobytes()


def empty_time_index(base_offset: int) -> TimeIndex:
    return TimeIndex(base_offset, np.empty(0, np.int64), np.empty(0, np.int64))


def parse_time_index(
    data: ReadableBuffer,
    base_offset: int,
    *,
    path: Optional[os.PathLike | str] = None,
    stop_at_zero_slot: bool = True,
) -> TimeIndex:
    """Decode time-index bytes.

    The length must be a multiple of 12 (else :class:`CorruptIndexError` naming the size).
    With ``stop_at_zero_slot`` (default) the valid prefix ends at the first slot ``i > 0`` whose
    relative offset is 0 (DumpLogSegments' rule), and an all-zero first slot means no entries
    (so a preallocated all-zero file is empty; a genuine first entry of (0, base offset) cannot be
    told apart from padding). With ``stop_at_zero_slot=False`` every slot counts, as in the broker.
    """
    entries = read_slots(data, TIME_ENTRY_DTYPE, TimeIndex.NAME, path=path,
                         stop_at_zero_slot=stop_at_zero_slot, second_field="timestamp")
    timestamps = entries["timestamp"].astype(np.int64)
    offsets = entries["relative_offset"].astype(np.int64) + int(base_offset)
    timestamps.flags.writeable = offsets.flags.writeable = False  # owned: no second copy
    return TimeIndex(int(base_offset), timestamps, offsets)


def read_time_index(
    path: os.PathLike | str,
    *,
    base_offset: Optional[int] = None,
    stop_at_zero_slot: bool = True,
) -> TimeIndex:
    """Read a ``.timeindex`` file; the base offset comes from its name unless given."""
    if base_offset is None:
        base_offset = base_offset_of(path, TIME_INDEX_SUFFIX, hint=NAME_HINT)
    data = read_index_file(path)
    return parse_time_index(data, base_offset, path=path, stop_at_zero_slot=stop_at_zero_slot)


def write_time_index(path: os.PathLike | str, index: TimeIndex) -> None:
    """Write the trimmed index atomically (``durable.replace_file``)."""
    replace_file(path, index.to_bytes())
