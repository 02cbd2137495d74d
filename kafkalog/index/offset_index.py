"""The offset index (``<base>.index``): a sparse map from an offset to the byte position in the
``.log`` of the batch to start reading from, parsed, checked, looked up and written as Kafka does.

Byte layout (Kafka ``OffsetIndex``): no header, no padding, fixed 8-byte entries, big-endian::

    +0  int32  relativeOffset   entry offset - segment base offset (always a batch's last offset)
    +4  int32  position         byte position in the .log of the batch the entry points at

A rolled segment's file is trimmed to exactly ``entries * 8`` bytes. The active segment's file is
preallocated (``segment.index.bytes``, default 10,485,760 bytes) and its unused tail is zeros.
Kafka itself counts ``file length // 8`` entries; an offline reader has to find the end of the
valid prefix itself (``stop_at_zero_slot``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, TYPE_CHECKING, Tuple
if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

import numpy as np
from numpy.typing import ArrayLike

from kafkalog.index.abstract_index import NAME_HINT, AbstractIndex, check_int32, read_index_file, read_slots
from kafkalog.fs.durable import replace_file
from kafkalog.fs.names import INDEX_SUFFIX, base_offset_of

OFFSET_ENTRY_SIZE = 8
RELATIVE_OFFSET_POS = 0
RELATIVE_OFFSET_SIZE = 4
POSITION_POS = RELATIVE_OFFSET_POS + RELATIVE_OFFSET_SIZE
POSITION_SIZE = 4
assert POSITION_POS + POSITION_SIZE == OFFSET_ENTRY_SIZE

#: One on-disk entry as a numpy record (itemsize 8, no alignment padding).
OFFSET_ENTRY_DTYPE = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
assert OFFSET_ENTRY_DTYPE.itemsize == OFFSET_ENTRY_SIZE


@dataclass(frozen=True, eq=False, repr=False)
class OffsetIndex(AbstractIndex):
    """The valid entries of one offset index: absolute offsets and their ``.log`` positions.

    ``offsets`` and ``positions`` are read-only int64 arrays of equal length, in file order.
    """

    ENTRY_SIZE = OFFSET_ENTRY_SIZE
    NAME = "offset index"
    COLUMNS = ("offsets", "positions")
    KEY = "offsets"

    base_offset: int
    offsets: np.ndarray
    positions: np.ndarray

    def lookup(self, target: int) -> Tuple[int, int]:
        """``(offset, position)`` of the entry with the largest offset <= target, else
        ``(base_offset, 0)`` (Kafka ``OffsetIndex.lookup``)."""
        i = self.slot_at_or_below(target)
        if i < 0:
            return self.base_offset, 0
        return int(self.offsets[i]), int(self.positions[i])

    def lookup_many(self, targets: ArrayLike) -> Tuple[np.ndarray, np.ndarray]:
        """Vectorised :meth:`lookup`: arrays of (offset, position), one per target."""
        targets = np.asarray(targets, dtype=np.int64)
        i = self.slots_at_or_below(targets)
        hit = i >= 0
        safe = np.where(hit, i, 0)
        if len(self) == 0:
            return (np.full(targets.shape, self.base_offset, np.int64), np.zeros(targets.shape, np.int64))
        offsets = np.where(hit, self.offsets[safe], self.base_offset)
        positions = np.where(hit, self.positions[safe], 0)
        return offsets.astype(np.int64), positions.astype(np.int64)

    def sanity_check(self, path: Optional[os.PathLike | str] = None) -> None:
        """Kafka's ``OffsetIndex.sanityCheck``: a non-empty index whose last offset is below the
        base offset is corrupt. (The other half of Kafka's check, a file length that is not a
        multiple of 8, is enforced by :func:`parse_offset_index`.)"""
        self.check_last_offset(self.offsets, path)

    def to_bytes(self) -> bytes:
        """The trimmed file content: ``len(self) * 8`` bytes of (relativeOffset, position)."""
        relative = self.offsets - self.base_offset
        check_int32(relative, "relative offset", OFFSET_ENTRY_SIZE, overflow=True)
        check_int32(self.positions, "position", OFFSET_ENTRY_SIZE, overflow=False)
        out = np.empty(len(self), dtype=OFFSET_ENTRY_DTYPE)
        out["relative_offset"] = relative
        out["position"] = self.positions
        return out.tobytes()


def empty_offset_index(base_offset: int) -> OffsetIndex:
    return OffsetIndex(base_offset, np.empty(0, np.int64), np.empty(0, np.int64))


def parse_offset_index(
    data: ReadableBuffer,
    base_offset: int,
    *,
    path: Optional[os.PathLike | str] = None,
    stop_at_zero_slot: bool = True,
) -> OffsetIndex:
    """Decode offset-index bytes.

    The length must be a multiple of 8 (else :class:`CorruptIndexError` naming the size).
    With ``stop_at_zero_slot`` (default) the valid prefix ends at the first slot ``i > 0`` whose
    relative offset is 0 (DumpLogSegments' rule for preallocated, zero-padded files), and an
    all-zero first slot means no entries (a genuine entry never has position 0). With
    ``stop_at_zero_slot=False`` every slot counts, as in the broker (``length // 8``).
    """
    entries = read_slots(data, OFFSET_ENTRY_DTYPE, OffsetIndex.NAME, path=path,
                         stop_at_zero_slot=stop_at_zero_slot, second_field="position")
    offsets = entries["relative_offset"].astype(np.int64) + int(base_offset)
    positions = entries["position"].astype(np.int64)
    offsets.flags.writeable = positions.flags.writeable = False  # owned: no second copy
    return OffsetIndex(int(base_offset), offsets, positions)


def read_offset_index(
    path: os.PathLike | str,
    *,
    base_offset: Optional[int] = None,
    stop_at_zero_slot: bool = True,
) -> OffsetIndex:
    """Read an ``.index`` file; the base offset comes from its name unless given."""
    if base_offset is None:
        base_offset = base_offset_of(path, INDEX_SUFFIX, hint=NAME_HINT)
    data = read_index_file(path)
    return parse_offset_index(data, base_offset, path=path, stop_at_zero_slot=stop_at_zero_slot)


def write_offset_index(path: os.PathLike | str, index: OffsetIndex) -> None:
    """Write the trimmed index atomically (``durable.replace_file``: temp file in the same dir,
    fsync, rename, fsync dir, keeping the owner and mode of the file replaced)."""
    replace_file(path, index.to_bytes())
