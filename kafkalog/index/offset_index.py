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
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

import numpy as np

from kafkalog.log.durable import replace_file
from kafkalog.errors import CorruptIndexError, InvalidFileNameError, OffsetOverflowError
from kafkalog.log import filesystem

OFFSET_ENTRY_SIZE = 8
RELATIVE_OFFSET_POS = 0
RELATIVE_OFFSET_SIZE = 4
POSITION_POS = RELATIVE_OFFSET_POS + RELATIVE_OFFSET_SIZE
POSITION_SIZE = 4
assert POSITION_POS + POSITION_SIZE == OFFSET_ENTRY_SIZE

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

#: One on-disk entry as a numpy record (itemsize 8, no alignment padding).
OFFSET_ENTRY_DTYPE = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
assert OFFSET_ENTRY_DTYPE.itemsize == OFFSET_ENTRY_SIZE

# Kafka writes 20-digit base offsets; the cleaner/loader append .cleaned/.swap/.deleted to names.
_TEMP_SUFFIXES = ("cleaned", "swap", "deleted")


@dataclass(frozen=True, eq=False)
class OffsetIndex:
    """The valid entries of one offset index: absolute offsets and their ``.log`` positions.

    ``offsets`` and ``positions`` are read-only int64 arrays of equal length, in file order.
    """

    base_offset: int
    offsets: np.ndarray
    positions: np.ndarray

    def __post_init__(self) -> None:
        offsets = _frozen_int64(self.offsets)
        positions = _frozen_int64(self.positions)
        if offsets.shape != positions.shape or offsets.ndim != 1:
            raise ValueError(
                f"offsets and positions must be 1-d arrays of one length, got shapes "
                f"{offsets.shape} and {positions.shape}"
            )
        object.__setattr__(self, "base_offset", int(self.base_offset))
        object.__setattr__(self, "offsets", offsets)
        object.__setattr__(self, "positions", positions)

    def __len__(self) -> int:
        return int(self.offsets.shape[0])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OffsetIndex):
            return NotImplemented
        return (
            self.base_offset == other.base_offset
            and np.array_equal(self.offsets, other.offsets)
            and np.array_equal(self.positions, other.positions)
        )

    __hash__ = None  # type: ignore[assignment]  # holds arrays

    def __repr__(self) -> str:
        return f"OffsetIndex(base_offset={self.base_offset}, entries={len(self)})"

    def lookup(self, target: int) -> Tuple[int, int]:
        """``(offset, position)`` of the entry with the largest offset <= target, else
        ``(base_offset, 0)`` (Kafka ``OffsetIndex.lookup``)."""
        i = int(np.searchsorted(self.offsets, target, side="right")) - 1
        if i < 0:
            return self.base_offset, 0
        return int(self.offsets[i]), int(self.positions[i])

    def lookup_many(self, targets) -> Tuple[np.ndarray, np.ndarray]:
        """Vectorised :meth:`lookup`: arrays of (offset, position), one per target."""
        targets = np.asarray(targets, dtype=np.int64)
        i = np.searchsorted(self.offsets, targets, side="right") - 1
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
        n = len(self)
        if n and int(self.offsets[-1]) < self.base_offset:
            raise CorruptIndexError(
                f"corrupt offset index: it has {n} entries but the last offset is "
                f"{int(self.offsets[-1])}, which is less than the base offset {self.base_offset}",
                path=path,
                position=(n - 1) * OFFSET_ENTRY_SIZE,
            )

    def to_bytes(self) -> bytes:
        """The trimmed file content: ``len(self) * 8`` bytes of (relativeOffset, position)."""
        relative = self.offsets - self.base_offset
        _check_int32(relative, "relative offset", OFFSET_ENTRY_SIZE, overflow=True)
        _check_int32(self.positions, "position", OFFSET_ENTRY_SIZE, overflow=False)
        out = np.empty(len(self), dtype=OFFSET_ENTRY_DTYPE)
        out["relative_offset"] = relative
        out["position"] = self.positions
        return out.tobytes()


def empty_offset_index(base_offset: int) -> OffsetIndex:
    return OffsetIndex(base_offset, np.empty(0, np.int64), np.empty(0, np.int64))


def parse_offset_index(
    data,
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
    view = memoryview(data).cast("B")
    size = view.nbytes
    if size % OFFSET_ENTRY_SIZE:
        raise CorruptIndexError(
            f"offset index file size {size} bytes is not a multiple of the entry size "
            f"{OFFSET_ENTRY_SIZE}",
            path=path,
            position=size - size % OFFSET_ENTRY_SIZE,
        )
    entries = np.frombuffer(view, dtype=OFFSET_ENTRY_DTYPE)
    if stop_at_zero_slot:
        entries = entries[: _valid_prefix(entries["relative_offset"], entries["position"])]
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
        base_offset = base_offset_from_index_name(path, "index")
    data = _read_file(path)
    return parse_offset_index(data, base_offset, path=path, stop_at_zero_slot=stop_at_zero_slot)


def write_offset_index(path: os.PathLike | str, index: OffsetIndex) -> None:
    """Write the trimmed index atomically (temp file in the same dir, fsync, rename, fsync dir)."""
    atomic_write(path, index.to_bytes())


# --- helpers shared by the index modules ----------------------------------------------------

def base_offset_from_index_name(path: os.PathLike | str, suffix: str) -> int:
    """The base offset in a name ``<20 digits>.<suffix>`` (optionally followed by Kafka's
    ``.cleaned``/``.swap``/``.deleted``), else :class:`InvalidFileNameError`."""
    name = Path(path).name
    pattern = rf"(\d{{20}})\.{re.escape(suffix)}(?:\.(?:{'|'.join(_TEMP_SUFFIXES)}))?"
    match = re.fullmatch(pattern, name)
    if match is None:
        raise InvalidFileNameError(
            f"file name {name!r} is not <20-digit base offset>.{suffix}; pass base_offset= to "
            "read it anyway",
            path=path,
        )
    value = int(match.group(1))
    if value > 2**63 - 1:
        raise InvalidFileNameError(f"base offset {value} in {name!r} does not fit a long", path=path)
    return value


def atomic_write(path: os.PathLike | str, data: bytes) -> None:
    """Write ``data`` to ``path`` through ``<path>.tmp``: write, fsync, rename, fsync the dir, keeping
    the owner and mode of the file replaced (``durable.replace_file``)."""
    replace_file(path, data)


def _read_file(path: os.PathLike | str) -> bytes:
    return filesystem.read_bytes(path)


def _valid_prefix(relative_offsets: np.ndarray, second_field: np.ndarray) -> int:
    """Number of valid slots: stop at the first slot i > 0 with relative offset 0; an all-zero
    slot 0 means an empty (wholly preallocated) file."""
    n = relative_offsets.shape[0]
    if n == 0:
        return 0
    if relative_offsets[0] == 0 and second_field[0] == 0:
        return 0
    zero = np.flatnonzero(relative_offsets[1:] == 0)
    return int(zero[0]) + 1 if zero.size else n


def _frozen_int64(values) -> np.ndarray:
    """A read-only int64 copy (no copy when it already is one), so a frozen index stays frozen."""
    if isinstance(values, np.ndarray) and values.dtype == np.int64 and not values.flags.writeable:
        return values
    arr = np.array(values, dtype=np.int64, copy=True)
    arr.flags.writeable = False
    return arr


def _check_int32(values: np.ndarray, what: str, entry_size: int, *, overflow: bool) -> None:
    bad = np.flatnonzero((values < INT32_MIN) | (values > INT32_MAX))
    if bad.size:
        i = int(bad[0])
        cls = OffsetOverflowError if overflow else CorruptIndexError
        raise cls(
            f"entry {i}: {what} {int(values[i])} does not fit the index's 32-bit field",
            position=i * entry_size,
        )
