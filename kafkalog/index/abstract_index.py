"""What the offset index and the time index share, as Kafka's ``AbstractIndex``: fixed-size big-endian
entries with no header, reading a file's slots (all of them, or up to the first zero slot of a
preallocated file), the binary search for the last entry at or below a target, the sanity check of
the last offset, and writing the trimmed file.

An index is a frozen pair of read-only int64 columns over ``base_offset``; a subclass names its
columns (``COLUMNS``), the one it is searched by (``KEY``), its entry size and its name in messages.
"""
from __future__ import annotations

import os
from typing import ClassVar, Optional, TYPE_CHECKING, Tuple
if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

import numpy as np
from numpy.typing import ArrayLike

from kafkalog.errors import CorruptIndexError, OffsetOverflowError
from kafkalog.java_types import INT32_MAX, INT32_MIN
from kafkalog.fs import filesystem

#: What an index reader says when a file is not named ``<base offset>.<suffix>``.
NAME_HINT = "pass base_offset= to read it anyway"


# --- data structures ---------------------------------------------------------------------------

class AbstractIndex:
    """Base of the frozen index dataclasses: two equal-length int64 columns over ``base_offset``."""

    ENTRY_SIZE: ClassVar[int]
    NAME: ClassVar[str]                   # "offset index", "time index"
    COLUMNS: ClassVar[Tuple[str, str]]    # the dataclass fields holding the entries, in entry order
    KEY: ClassVar[str]                    # the column lookups search (ascending)

    base_offset: int

    def __post_init__(self) -> None:
        first, second = (frozen_int64(getattr(self, name)) for name in self.COLUMNS)
        if first.shape != second.shape or first.ndim != 1:
            raise ValueError(
                f"{self.COLUMNS[0]} and {self.COLUMNS[1]} must be 1-d arrays of one length, got shapes "
                f"{first.shape} and {second.shape}"
            )
        object.__setattr__(self, "base_offset", int(self.base_offset))
        object.__setattr__(self, self.COLUMNS[0], first)
        object.__setattr__(self, self.COLUMNS[1], second)

    def __len__(self) -> int:
        return int(getattr(self, self.COLUMNS[0]).shape[0])

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.base_offset == other.base_offset and all(
            np.array_equal(getattr(self, name), getattr(other, name)) for name in self.COLUMNS)

    __hash__ = None  # type: ignore[assignment]  # holds arrays

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_offset={self.base_offset}, entries={len(self)})"

    def slot_at_or_below(self, target: int) -> int:
        """The slot of the last entry whose key is <= ``target``, -1 when there is none (Kafka's
        ``largestLowerBoundSlotFor``: a binary search over ascending keys)."""
        return int(np.searchsorted(getattr(self, self.KEY), target, side="right")) - 1

    def slots_at_or_below(self, targets: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`slot_at_or_below`."""
        return np.searchsorted(getattr(self, self.KEY), targets, side="right") - 1

    def check_last_offset(self, offsets: np.ndarray, path: Optional[os.PathLike | str]) -> None:
        """The sanity check both indexes make: a non-empty index whose last offset is below the base
        offset is corrupt (CorruptIndexError at the last entry)."""
        n = len(self)
        if n and int(offsets[-1]) < self.base_offset:
            raise CorruptIndexError(
                f"corrupt {self.NAME}: it has {n} entries but the last offset is "
                f"{int(offsets[-1])}, which is less than the base offset {self.base_offset}",
                path=path,
                position=(n - 1) * self.ENTRY_SIZE,
            )


# --- reading and writing slots -------------------------------------------------------------------

def read_slots(data: ReadableBuffer, dtype: np.dtype, name: str, *, path: Optional[os.PathLike | str],
               stop_at_zero_slot: bool, second_field: str) -> np.ndarray:
    """The entries of index bytes as a structured array of ``dtype``. The length must be a multiple of
    the entry size (else CorruptIndexError naming the size). With ``stop_at_zero_slot`` only the valid
    prefix of a preallocated file is returned (:func:`valid_prefix`, by ``relative_offset`` and
    ``second_field``); without it every slot counts, as in the broker (``length // entry size``)."""
    view = memoryview(data).cast("B")
    size = view.nbytes
    if size % dtype.itemsize:
        raise CorruptIndexError(
            f"{name} file size {size} bytes is not a multiple of the entry size {dtype.itemsize}",
            path=path,
            position=size - size % dtype.itemsize,
        )
    entries = np.frombuffer(view, dtype=dtype)
    if stop_at_zero_slot:
        entries = entries[: valid_prefix(entries["relative_offset"], entries[second_field])]
    return entries


def valid_prefix(relative_offsets: np.ndarray, second_field: np.ndarray) -> int:
    """Number of valid slots (DumpLogSegments' rule): stop at the first slot i > 0 with relative
    offset 0; an all-zero slot 0 means an empty (wholly preallocated) file."""
    n = relative_offsets.shape[0]
    if n == 0:
        return 0
    if relative_offsets[0] == 0 and second_field[0] == 0:
        return 0
    zero = np.flatnonzero(relative_offsets[1:] == 0)
    return int(zero[0]) + 1 if zero.size else n


def frozen_int64(values: ArrayLike) -> np.ndarray:
    """A read-only int64 copy (no copy when it already is one), so a frozen index stays frozen."""
    if isinstance(values, np.ndarray) and values.dtype == np.int64 and not values.flags.writeable:
        return values
    arr = np.array(values, dtype=np.int64, copy=True)
    arr.flags.writeable = False
    return arr


def check_int32(values: np.ndarray, what: str, entry_size: int, *, overflow: bool) -> None:
    """Refuse a value that does not fit an entry's 32-bit field: OffsetOverflowError for a relative
    offset (``overflow``), CorruptIndexError otherwise; the position is the entry's."""
    bad = np.flatnonzero((values < INT32_MIN) | (values > INT32_MAX))
    if bad.size:
        i = int(bad[0])
        cls = OffsetOverflowError if overflow else CorruptIndexError
        raise cls(
            f"entry {i}: {what} {int(values[i])} does not fit the index's 32-bit field",
            position=i * entry_size,
        )


def read_index_file(path: os.PathLike | str) -> bytes:
    """The whole content of an index file."""
    return filesystem.read_bytes(path)
