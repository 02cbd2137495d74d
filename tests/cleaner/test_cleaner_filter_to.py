"""The compiled recopy (``cleaner.filter_to``) and the C encoders it writes with: byte for byte what
the reference writers give (``compression.compress``, ``record_batch.encode_batch`` through the
cleaner's reference engine), and the compiled path really taken on plain windows, handing every
other window to ``filter_to.filter_window``."""
from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.cleaner import filter_to
from kafkalog.format import compression as C
from kafkalog.format import record_batch as rb
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
    for name, engine in (("ref", "reference"), ("compiled", "compiled")):
        shutil.copytree(src, tmp / name)
        d = next(p for p in sorted((tmp / name).iterdir()) if p.is_dir())
        out[name] = (clean(d, now, record_decisions=False, engine=engine, **kw), _files(d))
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
    res = _both(_log_dir_of(tmp_path, segs, high_watermark=hw_at_active(segs)), tmp_path, monkeypatch, T0 + 10 * DAY,
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
    res = _both(_log_dir_of(tmp_path, segs, high_watermark=hw_at_active(segs)), tmp_path, monkeypatch,
                T0 + 10 * DAY)
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


# --- hand-made records: the kernel's one walk decides and checks what the verbatim copy needs ---

def _uvarint(u: int, pad: int = 0) -> bytes:
    """LEB128 of ``u``; ``pad`` extra bytes make it longer than the shortest form (same value)."""
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    for _ in range(pad):
        out[-1] |= 0x80
        out.append(0)
    return bytes(out)


def _varint(v: int, pad: int = 0) -> bytes:
    return _uvarint(((v << 1) ^ (v >> 63)) & ((1 << 64) - 1), pad)


def _nullable(b, odd: bool = False, null_as: int = -1) -> bytes:
    if b is None:
        return _varint(null_as)
    return _varint(len(b), 1 if odd else 0) + b


# the ways a record can differ from what the reference writer would write for it; the first ones
# lie only in fields a rewrite writes anew (length, attributes, timestampDelta), the others in the
# part the kernel copies verbatim, so a batch that keeps such a record goes to filter_window
REWRITTEN_ANEW = ["length", "attributes", "timestamp_delta"]
NOT_VERBATIM = ["offset_delta", "key_length", "key_length_bit_32", "value_length", "null_value_-2",
                "header_count", "header_key_length", "header_key_not_ascii", "header_value_length",
                "null_header_value_-3"]


def _raw_record(offset_delta: int, ts_delta: int, key, value, odd: Optional[str] = None) -> bytes:
    headers = []
    if odd and odd.startswith(("header", "null_header")):
        headers = [(b"h\xff\x01" if odd == "header_key_not_ascii" else b"h", None if "null_header" in odd else b"x")]
    body = bytes([5 if odd == "attributes" else 0]) + _varint(ts_delta, 2 if odd == "timestamp_delta" else 0)
    body += _varint(offset_delta, 1 if odd == "offset_delta" else 0)
    if odd == "key_length_bit_32":          # a fifth byte with bits past 32: the decoder drops them
        body += _uvarint(((len(key) << 1) | (1 << 32)), 0) + key
    else:
        body += _nullable(key, odd == "key_length")
    if odd == "null_value_-2":
        value = None
    body += _nullable(value, odd == "value_length", -2 if odd == "null_value_-2" else -1)
    body += _varint(len(headers), 1 if odd == "header_count" else 0)
    for hk, hv in headers:
        body += _varint(len(hk), 1 if odd == "header_key_length" else 0) + hk
        body += _nullable(hv, odd == "header_value_length", -3 if odd == "null_header_value_-3" else -1)
    return _varint(len(body), 1 if odd == "length" else 0) + body


def _raw_batch(base: int, recs, codec: int, *, log_append: bool = False, odd_at: int = -1,
               odd: Optional[str] = None) -> bytes:
    """A batch of ``recs`` ((key, value) at base, base + 1, ... with timestamps T0 + offset) framed
    as ``encode_batch`` frames it, record ``odd_at`` written the ``odd`` way."""
    template = rb.encode_batch([rb.V2Record(base + i, T0 + base + i, k, v) for i, (k, v) in enumerate(recs)],
                               base_offset=base, codec=codec,
                               timestamp_type=rb.LOG_APPEND_TIME if log_append else rb.CREATE_TIME,
                               max_timestamp=T0 + base + len(recs) + 5 if log_append else None)
    raw = b"".join(_raw_record(i, i, k, v, odd if i == odd_at else None) for i, (k, v) in enumerate(recs))
    out = bytearray(template[:rb.RECORDS_OFFSET] + (C.compress(codec, raw) if codec else raw))
    out[8:12] = (len(out) - rb.LOG_OVERHEAD).to_bytes(4, "big", signed=True)
    out[rb.CRC_OFFSET:rb.ATTRIBUTES_OFFSET] = rb.compute_crc(out).to_bytes(4, "big")
    return bytes(out)


def hw_at_active(segs) -> int:
    """The high watermark these logs are written with: the active segment's base, so the batch right
    below it (its own segment, "last below the upper bound") ends at the HW and is kept even if
    emptied (Kafka 4.4, KAFKA-20452) — never a plain batch, and the window counts stay as designed."""
    return segs[-1][0].base


def _raw_log_dir(tmp: Path, segments) -> Path:
    """A partition folder of raw segments (lists of batch bytes; the last one active), its high
    watermark at the active segment's base (see ``hw_at_active``)."""
    from kafkalog.checkpoint.offset import write_offset_checkpoint
    from kafkalog.fs.names import REPLICATION_OFFSET_CHECKPOINT, format_segment_file_name

    d = tmp / "src" / "compacted-0"
    d.mkdir(parents=True)
    for seg in segments:
        base = int.from_bytes(seg[0][:8], "big")
        (d / format_segment_file_name(base, "log")).write_bytes(b"".join(seg))
    hw = int.from_bytes(segments[-1][0][:8], "big")
    write_offset_checkpoint(tmp / "src" / REPLICATION_OFFSET_CHECKPOINT, {("compacted", 0): hw})
    return tmp / "src"


def _odd_log(tmp: Path, codec: int, odd: Optional[str], odd_at: int, later_keys, *, log_append=False) -> Path:
    first = [(b"a", b"1" * 30), (b"b", b"2" * 40), (b"c", None), (b"d", b"4" * 50)]
    return _raw_log_dir(tmp, [
        [_raw_batch(0, first, codec, odd_at=odd_at, odd=odd, log_append=log_append),
         _raw_batch(4, [(k, b"later %s" % k) for k in later_keys], codec, log_append=log_append),
         _raw_batch(4 + len(later_keys), [(b"g", b"7")], codec, log_append=log_append)],
        [_raw_batch(5 + len(later_keys), [(b"q", b"last below the upper bound")], 0)],
        [_raw_batch(6 + len(later_keys), [(b"z", b"active")], 0)]])


@needs_native
@pytest.mark.parametrize("codec", [0, 3, 4])
@pytest.mark.parametrize("odd", REWRITTEN_ANEW + NOT_VERBATIM)
@pytest.mark.parametrize("where", ["dropped", "kept"])
def test_records_the_verbatim_copy_cannot_write(tmp_path, monkeypatch, codec, odd, where):
    """A record the reference writer would write differently from its source bytes: dropped (it is
    the batch's first record, superseded by a later "a"), the kernel rewrites the batch; kept (the
    batch is rewritten anyway: its kept tombstone gets a horizon), the window goes to filter_window
    unless the difference lies only in fields a rewrite writes anew. The reference's bytes always."""
    later = [b"a", b"e"] if where == "dropped" else [b"e", b"f"]
    seen = _compiled_windows(monkeypatch)
    res = _both(_odd_log(tmp_path, codec, odd, 0, later), tmp_path, monkeypatch, T0 + 10 * DAY)
    assert res.cleaned and res.counts.horizons_stamped == 1 and res.counts.batches_rewritten >= 1
    assert res.counts.records_superseded == (1 if where == "dropped" else 0)
    assert seen == [where == "dropped" or odd in REWRITTEN_ANEW], seen


@needs_native
@pytest.mark.parametrize("codec", [0, 3, 4])
@pytest.mark.parametrize("log_append", [False, True])
@pytest.mark.parametrize("later", [[b"a", b"b"], [b"b", b"d"], [b"a", b"b", b"d"], [b"c", b"e"], [b"e", b"f"]])
def test_base_timestamp_of_a_rewritten_batch(tmp_path, monkeypatch, codec, log_append, later):
    """Which records survive decides the rewritten batch's base timestamp: the horizon when its kept
    tombstone needs one (the tombstone after kept records, or the first kept record), the first kept
    record's timestamp when the tombstone goes (a dropped first record then moves it); every kept
    record's timestampDelta follows."""
    seen = _compiled_windows(monkeypatch)
    res = _both(_odd_log(tmp_path, codec, None, -1, later, log_append=log_append), tmp_path, monkeypatch,
                T0 + 10 * DAY)
    assert res.cleaned and res.counts.horizons_stamped == (0 if b"c" in later else 1) and seen == [True]


@needs_native
@pytest.mark.parametrize("codec", [0, 3, 4])
def test_a_batch_with_a_horizon_keeps_it_as_its_base(tmp_path, monkeypatch, codec):
    """A second round: the batch stamped in the first keeps its horizon as base timestamp (before
    it passes: its tombstone stays) while more of its records go."""
    src = _odd_log(tmp_path / "one", codec, None, -1, [b"e", b"f"])
    d = src / "compacted-0"
    assert clean(d, T0 + 10 * DAY, record_decisions=False, engine="reference").counts.horizons_stamped == 1
    from kafkalog.fs.names import format_segment_file_name
    seg = d / format_segment_file_name(8, "log")            # the active segment, rolled; then a new one
    seg.write_bytes(seg.read_bytes() + _raw_batch(9, [(b"b", b"again")], codec))
    (d / format_segment_file_name(10, "log")).write_bytes(_raw_batch(10, [(b"z", b"active")], 0))
    from kafkalog.checkpoint.offset import write_offset_checkpoint
    from kafkalog.fs.names import REPLICATION_OFFSET_CHECKPOINT
    write_offset_checkpoint(src / REPLICATION_OFFSET_CHECKPOINT, {("compacted", 0): 11})
    seen = _compiled_windows(monkeypatch)
    res = _both(src, tmp_path, monkeypatch, T0 + 10 * DAY + 1000)
    assert res.cleaned and res.counts.records_superseded == 1 and res.counts.horizons_stamped == 0
    assert res.counts.tombstones_kept == 1 and True in seen
