"""BufferPool: memory for decoded Arrow buffers that comes back when their table is freed, so the next
read reuses pages the process already holds (the idea of Kafka's producer BufferPool).

Why: a decoded table is mostly a few large buffers (~170 MiB per million records). Arrow's default
pool returns freed large blocks to the OS within milliseconds; the next read faults them back, and on
VMs whose host reclaims free guest memory (free page reporting) that costs up to a few ms per MiB —
more than decoding the records. Reading segment after segment (a job, a benchmark, iter_segment's
stream) is exactly that pattern.

How: buffers of ``min_bytes`` or more are slices of slabs (numpy arrays, a granule multiple). A slab
is leased to exactly one Arrow buffer; when Arrow drops the last reference, the lease's finaliser
puts the slab on a returned queue (no lock: it may run inside a garbage collection anywhere). The
next ``allocate`` takes the smallest idle slab that fits without wasting more than a quarter of it.
Idle slabs are capped at ``max_idle_bytes`` and dropped after ``idle_seconds`` unused; smaller
buffers go to Arrow's pool as before. ``KAFKALOG_BUFFER_POOL_BYTES`` sets the cap of the process's
pool (0 turns it off).
"""
from __future__ import annotations

import bisect
import collections
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Deque, List, Tuple

import numpy as np
import pyarrow as pa

MIB = 1 << 20
DEFAULT_MAX_IDLE_BYTES = 256 * MIB
DEFAULT_MIN_BYTES = 1 * MIB
DEFAULT_IDLE_SECONDS = 30.0
GRANULE = 1 * MIB
ALIGNMENT = 64                # Arrow's buffer alignment


@dataclass
class PoolStats:
    """Counters, for tests and benchmarks."""

    leased: int = 0           # allocations served from a slab (new or reused)
    reused: int = 0           # ... of which from an idle slab
    created: int = 0          # slabs made
    dropped: int = 0          # idle slabs let go (over the cap, or idle too long)
    passed: int = 0           # allocations below min_bytes, left to Arrow's pool


class _Lease(np.ndarray):
    """The bytes one Arrow buffer holds of a slab; when Arrow lets go of it, the slab returns."""

    def __del__(self):
        back = self.__dict__.get("_back")
        if back is not None:
            back()


@dataclass
class BufferPool:
    max_idle_bytes: int = DEFAULT_MAX_IDLE_BYTES
    min_bytes: int = DEFAULT_MIN_BYTES
    idle_seconds: float = DEFAULT_IDLE_SECONDS
    clock: Callable[[], float] = time.monotonic
    stats: PoolStats = field(default_factory=PoolStats)

    def __post_init__(self):
        self._returned: Deque[Tuple[np.ndarray, float]] = collections.deque()   # appended by finalisers
        self._idle: List[Tuple[int, int, np.ndarray, float]] = []   # (size, id, slab, since), sorted
        self._idle_bytes = 0
        self._lock = threading.Lock()
        self._timer: "threading.Timer | None" = None
        self._out = 0                                               # slabs leased, not yet back

    # --- the one entry point ---------------------------------------------------------------

    def allocate(self, size: int) -> pa.Buffer:
        """A mutable, uninitialised buffer of ``size`` bytes."""
        if size < self.min_bytes or self.max_idle_bytes <= 0:
            self.stats.passed += 1
            return pa.allocate_buffer(size)
        want = -(-size // GRANULE) * GRANULE
        with self._lock:
            self._settle()
            slab = self._take(want)
            if slab is None:
                slab = np.empty(want + ALIGNMENT, np.uint8)
                self.stats.created += 1
            else:
                self.stats.reused += 1
            self.stats.leased += 1
            self._out += 1
            self._schedule_trim()
        start = -slab.ctypes.data % ALIGNMENT
        lease = slab[start:start + size].view(_Lease)
        returned = self._returned
        clock = self.clock
        lease._back = lambda: returned.append((slab, clock()))
        return pa.py_buffer(lease)

    @property
    def idle_bytes(self) -> int:
        with self._lock:
            self._settle()
            return self._idle_bytes

    def trim(self) -> None:
        """Drop slabs idle longer than ``idle_seconds`` (runs on a timer while slabs are idle)."""
        with self._lock:
            self._timer = None
            self._settle()
            if self._idle or self._out:
                self._schedule_trim()

    def clear(self) -> None:
        """Drop every idle slab (leased ones come back and are kept again, up to the cap)."""
        with self._lock:
            self._settle()
            self.stats.dropped += len(self._idle)
            self._idle.clear()
            self._idle_bytes = 0

    # --- under the lock ----------------------------------------------------------------------

    def _settle(self) -> None:
        """Move returned slabs to the idle list; keep the cap and the age limit."""
        while self._returned:
            slab, since = self._returned.popleft()
            bisect.insort(self._idle, (len(slab) - ALIGNMENT, id(slab), slab, since))
            self._out -= 1
        now = self.clock()
        keep = [e for e in self._idle if now - e[3] <= self.idle_seconds]
        while sum(e[0] for e in keep) > self.max_idle_bytes:   # the oldest go first
            keep.remove(min(keep, key=lambda e: e[3]))
        self.stats.dropped += len(self._idle) - len(keep)
        self._idle = keep
        self._idle_bytes = sum(e[0] for e in keep)

    def _take(self, want: int):
        """The smallest idle slab of ``want`` bytes or more that wastes at most a quarter of itself."""
        i = bisect.bisect_left(self._idle, (want,))
        if i < len(self._idle) and self._idle[i][0] <= want + want // 3:
            size, _, slab, _ = self._idle.pop(i)
            self._idle_bytes -= size
            return slab
        return None

    def after_fork(self) -> None:
        """In a forked child (Spark's Python workers): the parent's lock and timer thread are not ours."""
        self._lock = threading.Lock()
        self._timer = None

    def _schedule_trim(self) -> None:
        if self._timer is None and self.idle_seconds > 0:
            self._timer = threading.Timer(self.idle_seconds, self.trim)
            self._timer.daemon = True
            self._timer.start()


def _env_limit() -> int:
    raw = os.environ.get("KAFKALOG_BUFFER_POOL_BYTES")
    if raw is None or not raw.strip():
        return DEFAULT_MAX_IDLE_BYTES
    try:
        return max(0, int(raw))
    except ValueError:
        return DEFAULT_MAX_IDLE_BYTES


OUTPUT_POOL = BufferPool(max_idle_bytes=_env_limit())
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=OUTPUT_POOL.after_fork)
