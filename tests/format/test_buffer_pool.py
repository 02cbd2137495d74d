"""The output BufferPool: freed buffers come back and are reused, live ones are never handed out
twice, and idle memory stays under its cap and age limit."""
import gc
import time

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.format.buffer_pool import MIB, BufferPool, _env_limit
from kafkalog.log.records_io import read_segment, write_segment


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def pool(**kw) -> BufferPool:
    kw.setdefault("clock", FakeClock())
    kw.setdefault("background_trim", False)
    return BufferPool(**kw)


def test_a_freed_buffer_is_reused():
    p = pool()
    b = p.allocate(3 * MIB)
    address = b.address
    del b
    gc.collect()
    again = p.allocate(3 * MIB - 100)
    assert again.address == address
    assert (p.stats.created, p.stats.reused) == (1, 1)
    assert again.is_mutable and again.size == 3 * MIB - 100


def test_a_buffer_still_referenced_is_not_handed_out_again():
    p = pool()
    b = p.allocate(2 * MIB)
    view = np.frombuffer(b, np.uint8)           # Arrow buffer dropped, numpy still holds it
    del b
    gc.collect()
    other = p.allocate(2 * MIB)
    assert other.address != view.ctypes.data
    del view
    gc.collect()
    assert p.allocate(2 * MIB).address != other.address   # `other` is live
    assert p.stats.reused == 1


def test_small_requests_and_a_disabled_pool_go_to_arrow():
    p = pool()
    small = p.allocate(MIB - 1)
    assert small.is_mutable and small.size == MIB - 1
    off = pool(max_idle_bytes=0)
    big = off.allocate(4 * MIB)
    assert big.size == 4 * MIB
    assert (p.stats.passed, off.stats.passed, p.stats.leased, off.stats.leased) == (1, 1, 0, 0)


def test_idle_memory_stays_under_the_cap_as_buffers_come_back():
    p = pool(max_idle_bytes=5 * MIB)
    bufs = [p.allocate(2 * MIB) for _ in range(4)]
    del bufs
    gc.collect()
    assert p.stats.dropped == 2 and p.pending_bytes == 0      # applied on return, not on the next call
    assert p.idle_bytes == 4 * MIB


def test_a_background_timer_lets_idle_slabs_go():
    p = BufferPool(idle_seconds=0.2)
    b = p.allocate(2 * MIB)
    del b
    gc.collect()
    deadline = time.monotonic() + 10
    while p.stats.dropped == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert p.stats.dropped == 1
    time.sleep(0.5)
    assert p._timer is None                                   # nothing idle: no timer left running


def test_idle_slabs_expire():
    clock = FakeClock()
    p = pool(clock=clock, idle_seconds=30)
    b = p.allocate(2 * MIB)
    del b
    gc.collect()
    clock.now += 10
    p.trim()
    assert p.idle_bytes == 2 * MIB
    clock.now += 25
    p.trim()
    assert p.idle_bytes == 0 and p.stats.dropped == 1


def test_a_much_larger_idle_slab_is_not_pinned_by_a_small_request():
    p = pool()
    b = p.allocate(8 * MIB)
    del b
    gc.collect()
    small = p.allocate(2 * MIB)
    assert p.stats.created == 2 and p.stats.reused == 0
    assert p.idle_bytes == 8 * MIB
    del small


def test_environment_sets_the_process_cap(monkeypatch):
    monkeypatch.setenv("KAFKALOG_BUFFER_POOL_BYTES", "0")
    assert _env_limit() == 0
    monkeypatch.setenv("KAFKALOG_BUFFER_POOL_BYTES", "1048576")
    assert _env_limit() == MIB
    monkeypatch.setenv("KAFKALOG_BUFFER_POOL_BYTES", "lots")
    assert _env_limit() == 256 * MIB


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.integers(1 * MIB, 6 * MIB), st.integers(0, 20).map(lambda i: -1 - i)),
                min_size=1, max_size=40))
def test_live_buffers_never_share_bytes(ops):
    """Any sequence of allocations and frees: every live buffer keeps the bytes written to it."""
    p = pool(max_idle_bytes=16 * MIB)
    live = []
    for tag, op in enumerate(ops):
        if op < 0:
            if live:
                live.pop(-1 - op if -1 - op < len(live) else 0)
                # the popped buffer goes back to the pool as its last reference goes (refcounting); a young-
                # generation pass frees it were it ever in a cycle. A full gc.collect() here walked the whole
                # suite's heap (~0.03-0.1 s a call, hundreds of calls: most of this test's 9 s in the suite)
                gc.collect(0)
            continue
        b = p.allocate(op)
        a = np.frombuffer(b, np.uint8)
        a[::4096] = tag % 251
        a[-1] = tag % 251
        for other, other_a, _ in live:
            assert b.address + b.size <= other.address or other.address + other.size <= b.address
        live.append((b, a, tag % 251))
    for _, a, mark in live:
        assert (a[::4096] == mark).all() and a[-1] == mark


def _log(directory, rows, fill: bytes):
    records = pa.table({
        "offset": pa.array(range(rows), pa.int64()),
        "timestamp": pa.array([1_700_000_000_000 + i for i in range(rows)], pa.int64()),
        "key": pa.array([b"k%07d" % i for i in range(rows)]),
        "value": pa.array([(b"%07d" % i) + fill * 25 for i in range(rows)]),
        "headers": pa.array([[]] * rows, pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    })
    return write_segment(directory, records, compression="lz4")


def test_tables_stay_intact_while_later_reads_reuse_freed_memory(tmp_path, monkeypatch):
    """Only Arrow's own objects hold the first table's buffers; reads of other bytes reuse the
    pool's idle slabs and must never be handed those."""
    from kafkalog.format import record_columns
    p = BufferPool()
    monkeypatch.setattr(record_columns, "OUTPUT_POOL", p)
    rows = 60_000
    first = read_segment(_log(tmp_path / "a-0", rows, b"a"), engine="compiled", threads=1)
    kept = first.column("value").slice(rows - 10)          # a slice pins its whole buffer
    expected = kept.to_pylist()
    del first
    other = _log(tmp_path / "b-0", rows, b"b")
    for _ in range(4):
        again = read_segment(other, engine="compiled", threads=1)
        assert again.column("value").to_pylist()[-1] == b"%07d" % (rows - 1) + b"b" * 25
        del again
        gc.collect()
    assert p.stats.reused > 0
    assert kept.to_pylist() == expected
