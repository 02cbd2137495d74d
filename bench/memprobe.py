"""What first-touching memory costs on this machine: memory the process reuses, memory the guest
kernel had freed a moment ago, and memory that makes the process grow.

Why it is here: a reader that returns a 200 MiB table has to fault in 200 MiB that a bare codec loop
(which decompresses into one small reused buffer) never touches. On a VM whose host reclaims the
guest's free pages (virtio-balloon free page reporting) a page that was reported must come back from
the host, and that costs far more than zeroing it. This prints the three costs and the reporting
counters, so a decode benchmark's spread can be read against them.

    python -m bench.memprobe            # ~5 s
"""
from __future__ import annotations

import gc
import mmap
import statistics
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

MIB = 1 << 20
REPORTING = Path("/sys/module/page_reporting/parameters")


def _touch(array: np.ndarray) -> float:
    t0 = time.perf_counter()
    array[::4096] = 1
    return time.perf_counter() - t0


def reused(mib: int, reps: int) -> float:
    """ms per MiB to write one byte per page of a buffer the process already touched."""
    a = np.frombuffer(pa.allocate_buffer(mib * MIB), np.uint8)
    _touch(a)
    return statistics.median(_touch(a) for _ in range(reps)) * 1e3 / mib


def remapped(mib: int, reps: int) -> float:
    """ms per MiB for a new anonymous mapping right after an equal one was unmapped (the guest
    hands back pages it freed a moment ago)."""
    out = []
    for _ in range(reps):
        m = mmap.mmap(-1, mib * MIB, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if hasattr(mmap, "MADV_HUGEPAGE"):
            m.madvise(mmap.MADV_HUGEPAGE)
        a = np.frombuffer(m, np.uint8)
        out.append(_touch(a))
        del a
        m.close()
    return statistics.median(out) * 1e3 / mib


def growing(mib: int, steps: int) -> float:
    """ms per MiB for Arrow-pool buffers kept alive one after another (the process grows, as it does
    while read_segment builds a table)."""
    kept, out = [], []
    for _ in range(steps):
        b = pa.allocate_buffer(mib * MIB)
        out.append(_touch(np.frombuffer(b, np.uint8)))
        kept.append(b)
    del kept
    gc.collect()
    return statistics.median(out) * 1e3 / mib


def status_bytes(field: str, pid="self") -> int:
    """A memory line of ``/proc/<pid>/status`` in bytes (0 when missing): ``RssAnon`` is a process's
    own resident memory (heap, private maps), ``VmRSS`` adds the shared libraries' and files' pages
    (llvmlite, pyarrow), which are not ours to bound; compaction's memory is judged on ``RssAnon``."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def reporting_counters() -> dict:
    if not REPORTING.is_dir():
        return {}
    return {p.name: p.read_text().strip() for p in sorted(REPORTING.iterdir()) if p.is_file()}


def main() -> int:
    print(f"Arrow pool: {pa.default_memory_pool().backend_name}")
    print(f"reused buffer, 16 MiB:             {reused(16, 9):7.3f} ms/MiB")
    print(f"new mapping after unmap, 64 MiB:   {remapped(64, 5):7.3f} ms/MiB")
    print(f"growing by 16 MiB buffers (x12):   {growing(16, 12):7.3f} ms/MiB")
    print(f"this process: RssAnon {status_bytes('RssAnon') / MIB:,.0f} MiB "
          f"(VmRSS {status_bytes('VmRSS') / MIB:,.0f} MiB, shared library and file pages included)")
    counters = reporting_counters()
    if counters:
        print("free page reporting: " + ", ".join(f"{k}={v}" for k, v in counters.items()))
    else:
        print("free page reporting: no /sys/module/page_reporting on this machine")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
