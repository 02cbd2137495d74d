"""Decompressed windows the map pass keeps for the recopy, so that a compressed batch is not
decompressed twice in one round — within the part of the cleaner's budget
(``log.cleaner.dedupe.buffer.size`` / concurrent cleaners) that the key map and its bitsets leave.

The map pass (``key_walk``) offers each window it decompressed (``offer``) and trims the cache
whenever the map grows (``trim``): newest windows go first, so the cache never holds more than the
budget minus what the map holds. The recopy (``filter_to``) asks for the records regions of the
batches from index i of a segment (``take``): a window that holds batch i answers with its arrays
from there (the window's cut need not match the recopy's), and windows of a segment are dropped as
the recopy passes them. Only what is decompressed is kept: an uncompressed batch's records stay in
the segment's mapping, where both passes read them.

The kept bytes lie in one arena per thread (the map pass decompresses a window straight there when
the room allows, ``landing``; else ``offer`` copies it in), reused from round to round: its pages, once
touched, stay warm (a fresh allocation per window costs more in page faults than the copy). The
arena's touched pages count against the budget too: ``trim`` gives back (``madvise``) those past
the room the map leaves, so the map and the arena never hold more than the budget between them.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from kafkalog.format.buffer_pool import release_pages
from kafkalog.format.compression import OutputBuffer

LANDING_MIN_BYTES = 4 << 20          # arena room a window is decompressed into in place (a window: <= 2 MiB of records)


@dataclass(eq=False)
class CachedWindow:
    """Batches [first, first + count) of a segment, their records regions as ``decompress_batches``
    gives them: batch b's records lie in the segment's bytes (b_src 0) or ``dbuf`` (1) at
    [b_start, b_end)."""
    first: int
    b_src: np.ndarray
    b_start: np.ndarray
    b_end: np.ndarray
    dbuf: np.ndarray
    arena_end: int = 0                 # where its bytes end in the arena

    @property
    def count(self) -> int:
        return len(self.b_src)

    @property
    def nbytes(self) -> int:
        return self.dbuf.nbytes + 3 * 8 * self.count


_ARENAS = threading.local()


def _thread_arena(size: int) -> np.ndarray:
    """This thread's arena of at least ``size`` bytes (pages are touched only where written)."""
    arena = getattr(_ARENAS, "arena", None)
    if arena is None or len(arena) < size:
        arena = _ARENAS.arena = None          # let the old one go before the new one is made
        arena = _ARENAS.arena = np.empty(size, np.uint8)
        _ARENAS.touched = 0                   # bytes from its start whose pages may be resident
    return arena


class WindowCache:
    """The windows kept, per segment base offset, in batch order; their bytes in this thread's
    arena. The arena has one owner at a time: the newest cache made in the thread; an older one
    then keeps and gives nothing (its windows' bytes may be overwritten), so its recopy decompresses."""

    def __init__(self, limit: int):
        self.limit = max(int(limit), 0)
        self._arena = _thread_arena(self.limit) if self.limit else np.empty(0, np.uint8)
        _ARENAS.owner = self
        self._at = 0                        # arena bytes in use (windows are kept and trimmed last in, first out)
        self._pinned = 0                    # arena bytes up to which a window being walked lies (``landed``)
        self.bytes = 0
        self._order: List[Tuple[int, CachedWindow]] = []
        self._by_segment: Dict[int, List[CachedWindow]] = {}

    def landing(self, room: int) -> Optional[OutputBuffer]:
        """Where the next window may be decompressed straight into the arena (its first free byte
        on), so that ``offer`` keeps it without a copy: None when the room the map leaves (``room``)
        or the arena cannot take a whole window (the caller decompresses into its own buffer)."""
        if not self._owns_arena():
            return None
        free = min(len(self._arena) - self._at, room - self.bytes, self.limit - self.bytes)
        if free < LANDING_MIN_BYTES:
            return None
        out = OutputBuffer(0)
        out.array = self._arena[self._at:self._at + free]
        _ARENAS.touched = max(_ARENAS.touched, self._at + free)    # (however much the window writes)
        return out

    def landed(self, dbuf: np.ndarray) -> None:
        """``dbuf`` was decompressed into the arena (``landing``) and is being walked: its pages are
        touched, and ``trim`` leaves them alone until ``unpin``."""
        end = self._arena_position(dbuf)
        if end is not None:
            end += len(dbuf)
            self._pinned = end
            _ARENAS.touched = max(_ARENAS.touched, end)

    def unpin(self) -> None:
        """The window from ``landing`` is no longer read: ``trim`` may give its pages back."""
        self._pinned = 0

    def _arena_position(self, dbuf: np.ndarray) -> Optional[int]:
        """Where ``dbuf`` starts in this cache's arena, None when it is not in it."""
        if not len(dbuf) or not len(self._arena):
            return None
        at = dbuf.ctypes.data - self._arena.ctypes.data
        return at if 0 <= at and at + len(dbuf) <= len(self._arena) else None

    def offer(self, segment_base: int, first: int, b_src: np.ndarray, b_start: np.ndarray, b_end: np.ndarray,
              dbuf: np.ndarray, room: int) -> bool:
        """Keep the window when it has decompressed bytes and fits in ``room`` (the budget's bytes
        the map does not hold) and the cache's limit: in place when it was decompressed at the
        arena's first free byte (``landing``), else as a copy there."""
        if not self._owns_arena() or not len(dbuf) or not (b_src != 0).any():
            return False
        w = CachedWindow(first, b_src.copy(), b_start.copy(), b_end.copy(), np.empty(0, np.uint8))
        need = dbuf.nbytes + w.nbytes
        if self.bytes + need > min(room, self.limit):
            return False
        n = len(dbuf)
        if self._at + n > len(self._arena):
            return False
        w.dbuf = self._arena[self._at:self._at + n]
        if self._arena_position(dbuf) != self._at:
            w.dbuf[:] = dbuf
        self._at += n
        w.arena_end = self._at
        _ARENAS.touched = max(_ARENAS.touched, self._at)
        self._order.append((segment_base, w))
        self._by_segment.setdefault(segment_base, []).append(w)
        self.bytes += w.nbytes
        return True

    def trim(self, room: int) -> None:
        """Drop the newest windows until the cache holds at most ``room`` bytes, and give back the
        arena's pages past that."""
        if not self._owns_arena():
            return
        while self._order and self.bytes > room:
            base, w = self._order.pop()
            self._by_segment[base].remove(w)
            self.bytes -= w.nbytes
            self._at = self._order[-1][1].arena_end if self._order else 0
        keep = max(self._at, room, self._pinned, 0)
        if len(self._arena) and _ARENAS.touched > keep:
            release_pages(self._arena, keep, _ARENAS.touched)
            _ARENAS.touched = keep

    def take(self, segment_base: int, i: int, most: int) -> Optional[Tuple[int, np.ndarray, np.ndarray, np.ndarray,
                                                                          np.ndarray]]:
        """The records regions of batches [i, i + n) of the segment, n <= ``most``, from a window
        that holds batch i: (n, b_src, b_start, b_end, dbuf); None when none does. Windows that end
        at or before batch i are dropped (the recopy reads a segment once, forward)."""
        if not self._owns_arena():
            return None
        windows = self._by_segment.get(segment_base)
        while windows and windows[0].first + windows[0].count <= i:
            self._drop(segment_base, windows[0])
        if not windows or windows[0].first > i:
            return None
        w = windows[0]
        k = i - w.first
        n = min(w.count - k, most)
        return n, w.b_src[k:k + n], w.b_start[k:k + n], w.b_end[k:k + n], w.dbuf

    def _owns_arena(self) -> bool:
        if getattr(_ARENAS, "owner", None) is self:
            return True
        self._order, self._by_segment, self.bytes, self._at = [], {}, 0, 0     # its bytes are another's now
        return False

    def drop_segment(self, segment_base: int) -> None:
        for w in list(self._by_segment.get(segment_base, ())):
            self._drop(segment_base, w)

    def _drop(self, base: int, w: CachedWindow) -> None:
        self._by_segment[base].remove(w)
        self._order.remove((base, w))
        self.bytes -= w.nbytes
        self._at = self._order[-1][1].arena_end if self._order else 0


__all__ = ["CachedWindow", "WindowCache"]
