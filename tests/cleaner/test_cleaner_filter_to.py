"""The compiled recopy (``cleaner.filter_to``) and the C encoders it writes with: byte for byte what
the reference writers give (``compression.compress``, ``record_batch.encode_batch`` through the
cleaner's reference engine), and the compiled path really taken on plain windows, handing every
other window to ``fast_filter.filter_window``."""
from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.cleaner import cleaner as cleaner_mod, filter_to
from kafkalog.format import compression as C
from kafkalog.format import compression_accel as ca
from kafkalog.format.native import LZ4_STREAM_BYTES, native_functions

from test_cleaner_fast import _files, _log_dir_of
from cleaner_model import DAY, T0, clean, data, marker

NATIVE = native_functions()
needs_native = pytest.mark.skipif(not (NATIVE.lz4_compress_fast_continue and NATIVE.zstd_compress_stream2),
                                  reason="the lz4 / zstandard packages of this install export no C encoder")


def _lz4_native(raw: bytes) -> bytes:
    src = np.frombuffer(raw, np.uint8)
    out = np.empty(ca.lz4_frame_bound(len(src)) + 5, np.uint8)
    fns = np.array([NATIVE.lz4_reset_stream, NATIVE.lz4_compress_fast_continue], np.uintp)
    st_, end = ca.lz4_frame_compress(src, 0, len(src), out, 5, fns, np.zeros(LZ4_STREAM_BYTES, np.uint8))
    assert st_ == ca.COMP_OK
    return bytes(out[5:end])


def _zstd_native(raw: bytes) -> bytes:
    z = ca.zstd_compressor(C.ZSTD_LEVEL)
    src = np.frombuffer(raw, np.uint8)
    out = np.empty(ca.zstd_bound(len(src)) + 3, np.uint8)
    st_, end = ca.zstd_frame_compress(src, 0, len(src), out, 3, z.fns, np.uintp(z.cctx), z.io)
    assert st_ == ca.COMP_OK
    return bytes(out[3:end])


def _payload(kind: int, n: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    if kind == 0:
        return rng.integers(0, 256, n, dtype=np.uint8).tobytes()
    if kind == 1:
        return rng.integers(97, 123, n, dtype=np.uint8).tobytes()
    words = [b"key-%06d" % i for i in rng.integers(0, 50, max(n // 10, 1))]
    return b" ".join(words)[:n]


@needs_native
@pytest.mark.parametrize("n", [0, 1, 17, 2817, 16_000, 65_534, 65_535, 65_536, 65_537, 200_000, 1 << 20])
@pytest.mark.parametrize("kind", [0, 1, 2])
def test_c_encoders_write_the_reference_bytes(n, kind):
    raw = _payload(kind, n, n + kind)
    assert _lz4_native(raw) == C.compress(C.LZ4, raw)
    assert _zstd_native(raw) == C.compress(C.ZSTD, raw)


@needs_native
@settings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=3000), repeat=st.integers(1, 60))
def test_c_encoders_on_random_bytes(raw, repeat):
    raw = raw * repeat
    assert _lz4_native(raw) == C.compress(C.LZ4, raw)
    assert _zstd_native(raw) == C.compress(C.ZSTD, raw)


def _compiled_windows(monkeypatch) -> list:
    """Counts the windows the kernel did (True) and handed back (False)."""
    seen = []
    run = filter_to._run

    def counting(*a, **k):
        out = run(*a, **k)
        seen.append(out is not None)
        return out
    monkeypatch.setattr(filter_to, "_run", counting)
    return seen


def _both(src: Path, tmp: Path, monkeypatch, now: int, **kw):
    """The reference engine and the compiled recopy on copies of ``src``: same files and counts."""
    out = {}
    for name, engine in (("ref", "reference"), ("compiled", "fast")):
        shutil.copytree(src, tmp / name)
        monkeypatch.setattr(cleaner_mod, "ENGINE", engine)
        d = next(p for p in sorted((tmp / name).iterdir()) if p.is_dir())
        out[name] = (clean(d, now, record_decisions=False, **kw), _files(d))
    (ref, ref_files), (got, files) = out["ref"], out["compiled"]
    assert files == ref_files
    assert got.counts == ref.counts
    return got


@needs_native
@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("log_append", [False, True])
@pytest.mark.parametrize("tiny_map", [False, True])
def test_plain_windows_take_the_kernel_and_write_the_reference_bytes(tmp_path, monkeypatch, codec, log_append,
                                                                     tiny_map):
    values = [b"v" * (40 + 13 * i) for i in range(30)]
    segs = [[replace(data(0, [(b"a", values[0]), (b"b", values[1]), (b"a", values[2]), (b"c", None), (None, b"n")]),
                     codec=codec, log_append_time=log_append),
             replace(data(5, [(b"k%d" % i, values[i % 30]) for i in range(25)]), codec=codec,
                     log_append_time=log_append),             # every record kept: copied whole
             replace(data(30, [(b"b", b"4"), (b"d", None)]), codec=codec, log_append_time=log_append),
             replace(data(32, [(b"a", b"x"), (b"b", b"y")]), codec=codec, log_append_time=log_append)],
            [data(34, [(b"q", b"last below the upper bound")])],       # its own window: filter_window's
            [data(35, [(b"z", b"active")])]]
    seen = _compiled_windows(monkeypatch)
    res = _both(_log_dir_of(tmp_path, segs), tmp_path, monkeypatch, T0 + 10 * DAY,
                map_budget_bytes=1 if tiny_map else None)
    assert res.cleaned and res.counts.horizons_stamped >= 1 and res.counts.batches_copied >= 1
    assert res.counts.batches_rewritten >= 1
    # gzip and snappy have no C encoder here: their rewritten windows go back to filter_window
    assert seen == [codec in (0, 3, 4)], seen


@needs_native
def test_windows_end_before_transactions_and_markers(tmp_path, monkeypatch):
    segs = [[replace(data(0, [(b"a", b"1"), (b"b", b"2"), (b"a", b"3")]), codec=4),
             replace(data(3, [(b"c", b"1"), (b"b", None)]), codec=3),
             data(5, [(b"e", b"x")], pid=4, txn=True), marker(6, 4, 0),
             replace(data(7, [(b"b", b"4")]), codec=3)],
            [replace(data(8, [(b"a", b"5"), (b"c", None)]), codec=4), data(10, [(b"f", b"y")], pid=5, txn=True),
             marker(11, 5, 1), data(12, [(b"g", b"z")])],
            [data(13, [(b"z", b"active")])]]
    seen = _compiled_windows(monkeypatch)
    res = _both(_log_dir_of(tmp_path, segs), tmp_path, monkeypatch, T0 + 10 * DAY)
    # the batches before each segment's first transactional one go to the kernel; from there on
    # the decoder's window (to the end of these small segments) goes to filter_window
    assert res.cleaned and res.counts.markers_removed + res.counts.markers_kept == 2 and seen == [True, True]


@needs_native
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(st.tuples(st.sampled_from([None, b"a", b"b", b"c", b"dd", b"e" * 30]),
                                           st.one_of(st.none(), st.binary(max_size=60))), min_size=1, max_size=8),
                        min_size=1, max_size=12),
       codecs=st.lists(st.sampled_from([0, 3, 4]), min_size=1, max_size=3), log_append=st.booleans(),
       tiny_map=st.booleans(), later=st.booleans())
def test_random_plain_logs(tmp_path_factory, monkeypatch, batches, codecs, log_append, tiny_map, later):
    tmp = tmp_path_factory.mktemp("plain")
    segs, offset = [[]], 0
    for i, recs in enumerate(batches):
        segs[0].append(replace(data(offset, recs), codec=codecs[i % len(codecs)], log_append_time=log_append))
        offset += len(recs)
    segs.append([data(offset, [(b"z", b"last")])])
    segs.append([data(offset + 1, [(b"z", b"active")])])
    _both(_log_dir_of(tmp, segs), tmp, monkeypatch, T0 + (30 if later else 10) * DAY,
          map_budget_bytes=1 if tiny_map else None)


@needs_native
@pytest.mark.parametrize("budget", [None, 6000])
def test_the_recopy_takes_the_map_pass_windows_however_they_are_cut(tmp_path, monkeypatch, budget):
    """The map pass keeps its decompressed windows (cut every 3 batches here, from the first dirty
    batch on) while the budget allows; the recopy (cut its own way, from the segment's start) takes
    the batches they hold and decompresses the rest: the reference's bytes either way."""
    from kafkalog.cleaner import key_walk, window_cache

    monkeypatch.setattr(key_walk, "WINDOW_BATCHES", 3)
    taken = []
    take = window_cache.WindowCache.take

    def counting(self, *a):
        got = take(self, *a)
        taken.append(0 if got is None else got[0])
        return got
    monkeypatch.setattr(window_cache.WindowCache, "take", counting)
    batches, offset = [], 0
    for i in range(20):
        recs = [(b"k%d" % ((i * 7 + j) % 23), b"value %d %d " % (i, j) * 8) for j in range(6)]
        batches.append(replace(data(offset, recs), codec=(3, 4, 0)[i % 3]))
        offset += len(recs)
    segs = [batches, [data(offset, [(b"z", b"active")])]]
    res = _both(_log_dir_of(tmp_path, segs, checkpoint=40), tmp_path, monkeypatch, T0 + 10 * DAY,
                map_budget_bytes=budget)
    assert res.cleaned and res.counts.records_superseded > 0
    hits = sum(taken)
    if budget is None:
        assert hits >= 12           # every batch from the first dirty window's on (13 of the 20 batches)
    else:
        assert 0 < hits < 12        # a 6,000-byte budget keeps a few windows (its map: 84 40-byte slots)


def test_the_window_arena_gives_back_what_the_map_needs():
    """The arena's touched pages and the map share the budget: trimming to a smaller room drops the
    newest windows and releases the pages past the room, so a later round's map has its bytes."""
    from kafkalog.cleaner import window_cache as wc

    cache = wc.WindowCache(1 << 20)
    cache.trim(0)                   # (the thread's arena may hold an earlier test's pages)
    src = np.zeros(4, np.int64)
    for i in range(4):
        assert cache.offer(7, 10 * i, np.ones(10, np.int64), src[:0].repeat(10), src[:0].repeat(10),
                           np.full(100_000, i, np.uint8), room=1 << 20)
    assert cache.bytes == 4 * (100_000 + 240) and wc._ARENAS.touched == 400_000
    cache.trim(250_000)
    assert cache.bytes == 2 * (100_000 + 240) and wc._ARENAS.touched == 250_000
    n, b_src, _s, _e, dbuf = cache.take(7, 15, 100)
    assert n == 5 and len(b_src) == 5 and int(dbuf[0]) == 1
    assert cache.take(7, 25, 100) is None            # the window of batches 20-29 went in the trim
    assert not cache.offer(7, 40, np.ones(10, np.int64), src[:0].repeat(10), src[:0].repeat(10),
                           np.zeros(300_000, np.uint8), room=300_000)      # no room left for it
    cache.trim(0)
    assert cache.bytes == 0 and wc._ARENAS.touched == 0


def test_a_newer_window_cache_in_the_thread_takes_the_arena():
    """Two map passes' verdicts alive at once in one thread: the arena is the newer one's, and the
    older cache gives nothing (its recopy decompresses) rather than bytes the newer one overwrote."""
    from kafkalog.cleaner import window_cache as wc

    zeros = np.zeros(10, np.int64)
    old = wc.WindowCache(1 << 20)
    assert old.offer(1, 0, np.ones(10, np.int64), zeros, zeros, np.full(1000, 7, np.uint8), room=1 << 20)
    new = wc.WindowCache(1 << 20)
    assert new.offer(1, 0, np.ones(10, np.int64), zeros, zeros, np.full(1000, 9, np.uint8), room=1 << 20)
    assert old.take(1, 0, 10) is None and old.bytes == 0
    assert not old.offer(1, 10, np.ones(10, np.int64), zeros, zeros, np.full(10, 1, np.uint8), room=1 << 20)
    n, _src, _s, _e, dbuf = new.take(1, 0, 10)
    assert n == 10 and int(dbuf[0]) == 9
