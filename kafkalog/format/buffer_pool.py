"""BufferPool: memory for decoded Arrow buffers that comes back when their table is freed, so the next
read reuses pages the process already holds (the idea of Kafka's producer BufferPool).

Why: a decoded table is mostly a few large buffers (~170 MiB per million records). Arrow's default
pool returns freed large blocks to the OS within milliseconds; the next read faults them back, and on
VMs whose host reclaims free guest memory (free page reporting) that costs up to a few ms per MiB —
more than decoding the records. Reading segment after segment (a job, a benchmark, iter_segment's
stream) is exactly that pattern.

How: buffers of ``min_bytes`` or more are slices of slabs (anonymous memory maps, a GRANULE
multiple). A slab is leased to exactly one Arrow buffer; when Arrow drops the last reference, the
lease's finaliser returns the slab. The next ``allocate`` takes the smallest idle slab that fits
without wasting more than a quarter of it. Idle slabs are capped at ``max_idle_bytes`` and unmapped
after ``idle_seconds`` unused (a background timer runs only while slabs are idle); smaller buffers
go to Arrow's pool as before. ``KAFKALOG_BUFFER_POOL_BYTES`` sets the cap of the process's pool
(0 turns it off).
"""
from __future__ import annotations

import bisect
import collections
import mmap
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, List, Optional, Tuple

import numpy as np
import pyarrow as pa

MIB = 1 << 20
DEFAULT_MAX_IDLE_BYTES = 256 * MIB
DEFAULT_MIN_BYTES = 1 * MIB
DEFAULT_IDLE_SECONDS = 30.0
GRANULE = 256 << 10           # slab sizes are multiples of this (and so of the page size)


@dataclass
class PoolStats:
    """Counters, for tests and benchmarks."""

    leased: int = 0           # allocations served from a slab (new or reused)
    reused: int = 0           # ... of which from an idle slab
    created: int = 0          # slabs mapped
    dropped: int = 0          # idle slabs unmapped (over the cap, or idle too long)
    passed: int = 0           # allocations below min_bytes, left to Arrow's pool


class _Lease(np.ndarray):
    """The bytes one Arrow buffer holds of a slab; when Arrow lets go of it, the slab returns.

    Only ``pa.py_buffer`` ever sees a lease. A plain ndarray view of it would name the slab, not the
    lease, as its base and so not keep the lease alive: never make one."""

    def __del__(self):
        back = self.__dict__.get("_back")
        if back is not None:
            back()


def _map(size: int) -> np.ndarray:
    """A slab: its own anonymous map, so dropping it gives the memory back to the OS at once."""
    if not hasattr(mmap, "MAP_ANONYMOUS"):
        return np.empty(size, np.uint8)
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if size >= 4 * MIB and hasattr(m, "madvise") and hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            m.madvise(mmap.MADV_HUGEPAGE)      # as numpy does for arrays this large
        except OSError:
            pass                               # THP off: 4 KiB pages, same behaviour, slower faults
    return np.frombuffer(m, np.uint8)          # the array holds the map; freeing it unmaps


@dataclass
class BufferPool:
    max_idle_bytes: int = DEFAULT_MAX_IDLE_BYTES
    min_bytes: int = DEFAULT_MIN_BYTES
    idle_seconds: float = DEFAULT_IDLE_SECONDS
    clock: Callable[[], float] = time.monotonic
    background_trim: bool = True      # tests with a fake clock turn the timer off
    stats: PoolStats = field(default_factory=PoolStats)

    def __post_init__(self):
        self._returned: Deque[Tuple[np.ndarray, float]] = collections.deque()   # slabs back, not yet sorted
        self._idle: List[Tuple[int, int, np.ndarray, float]] = []   # (size, id, slab, since), by size
        self._lock = threading.Lock()
        self._timer: Optional[threading.Timer] = None

    # --- the one entry point ---------------------------------------------------------------

    def allocate(self, size: int) -> pa.Buffer:
        """A mutable, uninitialised buffer of ``size`` bytes."""
        if size < self.min_bytes or self.max_idle_bytes <= 0:
            with self._lock:
                self.stats.passed += 1
            return pa.allocate_buffer(size)
        want = -(-size // GRANULE) * GRANULE
        with self._lock:
            self._settle()
            slab = self._take(want)
        reused = slab is not None
        if not reused:
            slab = _map(want)                  # outside the lock; a MemoryError leaves the pool as it was
        with self._lock:
            self.stats.leased += 1
            if reused:
                self.stats.reused += 1
            else:
                self.stats.created += 1
        lease = slab[:size].view(_Lease)
        lease._back = self._returner(slab)
        return pa.py_buffer(lease)

    @property
    def idle_bytes(self) -> int:
        with self._lock:
            self._settle()
            return sum(e[0] for e in self._idle)

    @property
    def pending_bytes(self) -> int:
        """Bytes returned by finalisers that could not take the lock, not yet counted against the cap."""
        return sum(len(s) for s, _ in list(self._returned))

    def trim(self) -> None:
        """Apply the cap and the age limit now."""
        with self._lock:
            self._settle()

    def clear(self) -> None:
        """Unmap every idle slab (leased ones still come back later, up to the cap)."""
        with self._lock:
            self._settle()
            self.stats.dropped += len(self._idle)
            self._idle.clear()

    def after_fork(self) -> None:
        """In a forked child (Spark's Python workers): the parent's lock and timer thread are not ours."""
        self._lock = threading.Lock()
        self._timer = None

    # --- returning ---------------------------------------------------------------------------

    def _returner(self, slab: np.ndarray) -> Callable[[], None]:
        pool = self

        def back():
            # Runs wherever the last reference died, maybe inside a garbage collection on a thread
            # that holds the lock: never wait for it. Uncontended (the usual case) the cap applies
            # at once; otherwise the next allocate or trim settles the slab.
            pool._returned.append((slab, pool.clock()))
            lock = pool._lock                  # looked up now: after_fork replaces it
            if lock.acquire(blocking=False):
                try:
                    pool._settle()
                finally:
                    lock.release()
        return back

    # --- under the lock ----------------------------------------------------------------------

    def _settle(self) -> None:
        """Sort returned slabs in; unmap the ones over the cap (oldest first) or idle too long."""
        while self._returned:
            slab, since = self._returned.popleft()
            bisect.insort(self._idle, (len(slab), id(slab), slab, since))
        now = self.clock()
        keep = [e for e in self._idle if now - e[3] <= self.idle_seconds]
        total = sum(e[0] for e in keep)
        while total > self.max_idle_bytes:
            oldest = min(keep, key=lambda e: e[3])
            keep.remove(oldest)
            total -= oldest[0]
        self.stats.dropped += len(self._idle) - len(keep)
        self._idle = keep
        if keep:
            self._schedule_trim()

    def _take(self, want: int):
        """The smallest idle slab of ``want`` bytes or more that wastes at most a quarter of itself."""
        i = bisect.bisect_left(self._idle, (want,))
        if i < len(self._idle) and self._idle[i][0] <= want + want // 3:
            return self._idle.pop(i)[2]
        return None

    def _schedule_trim(self) -> None:
        """One timer at a time, and only while slabs are idle: it settles, which schedules the next."""
        if self._timer is not None or not self.background_trim or self.idle_seconds <= 0:
            return
        timer = threading.Timer(self.idle_seconds + 0.1, self._on_timer)
        timer.daemon = True
        try:
            timer.start()
        except RuntimeError:        # no threads left, or the interpreter is shutting down
            return
        self._timer = timer

    def _on_timer(self) -> None:
        with self._lock:
            self._timer = None
            self._settle()


_LIBC: Any = None      # libc, loaded once (False where it cannot be)
PAGE = mmap.PAGESIZE


def release_pages(mapped: np.ndarray, start: int, end: int) -> None:
    """Drop the whole pages of ``mapped[start:end)`` — a read-only view of a file mapping — from the
    process's resident set (``madvise(MADV_DONTNEED)``): the kernel's page cache keeps them and a later
    read faults them back, so nothing changes but the RSS a walk over a large segment leaves behind.
    Does nothing where madvise is not there."""
    global _LIBC
    if not hasattr(mmap, "MADV_DONTNEED") or end <= start:
        return
    if _LIBC is None:
        import ctypes
        import ctypes.util

        try:
            _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        except OSError:
            _LIBC = False
    if not _LIBC:
        return
    base = mapped.ctypes.data
    lo = (base + start + PAGE - 1) // PAGE * PAGE
    hi = (base + min(end, len(mapped))) // PAGE * PAGE
    if hi > lo:
        import ctypes

        _LIBC.madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), mmap.MADV_DONTNEED)


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


def available_memory_bytes() -> Optional[int]:
    """What this process can still allocate, as far as Linux tells: the least of MemAvailable, the
    address-space limit (RLIMIT_AS) minus the current address space, and the cgroup's memory.max
    minus its usage. None where none of these can be read."""
    limits = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    limits.append(int(line.split()[1]) * 1024)
                    break
    except OSError:
        pass
    try:
        import resource
        soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmSize:"):
                        limits.append(soft - int(line.split()[1]) * 1024)
                        break
    except (OSError, ImportError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            text = f.read().strip()
        if text != "max":
            with open("/sys/fs/cgroup/memory.current") as f:
                limits.append(int(text) - int(f.read()))
    except (OSError, ValueError):
        pass
    return max(0, min(limits)) if limits else None
