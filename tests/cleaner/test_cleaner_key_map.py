"""The compiled key map (``kafkalog.cleaner.key_map``/``key_walk``): exact under forced hash
collisions, within its byte budget, and in hash-slice passes when the keys do not fit — each time
the same round, byte for byte, as the reference engine's dict."""
from __future__ import annotations

import shutil

import numpy as np
import pyarrow as pa
import pytest

from kafkalog.cleaner import cleaner as cleaner_mod, plan_partition
from kafkalog.cleaner import key_map as km
from kafkalog.cleaner.key_hash import key_hash
from kafkalog.config import parse_broker_properties

from cleaner_model import DAY, T0, clean, data, log_config, write_partition


def _files(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def _keys_log(n_keys: int, rounds: int, *, key_len: int = 12, per_batch: int = 50):
    """Every key of one length (so a length-only hash sends all of them down one probe chain; their
    first bytes differ, which that hash's slices go by),
    written ``rounds`` times, with a tombstone for every seventh key in the last round; then an
    active segment."""
    keys = [bytes([i % 251 + 1]) + b"%0*d" % (key_len - 1, i) for i in range(n_keys)]
    recs = []
    for r in range(rounds):
        for i, k in enumerate(keys):
            recs.append((k, None if r == rounds - 1 and i % 7 == 0 else b"v%d-%d" % (r, i)))
    batches = [data(o, recs[o:o + per_batch]) for o in range(0, len(recs), per_batch)]
    leo = len(recs)
    return [batches, [data(leo, [(b"active", b"x")])]]


def _round(tmp_path, name, segments, monkeypatch, *, engine="compiled", weak=False, budget=None):
    src = tmp_path / "src"
    if not src.exists():
        write_partition(src, segments)
    work = tmp_path / name
    shutil.copytree(src, work)
    monkeypatch.setattr(cleaner_mod, "KEY_HASH_WEAK", weak)
    d = next(p for p in sorted(work.iterdir()) if p.is_dir())
    res = clean(d, T0 + 10 * DAY, map_budget_bytes=budget, engine=engine)
    assert res.error is None and res.cleaned
    return res, _files(d)


def test_forced_collisions_lose_nothing(tmp_path, monkeypatch):
    """A hash of the key length only: 2,000 distinct 12-byte keys share one hash value and one
    probe chain; only the byte comparison tells them apart. The round equals the reference's."""
    segs = _keys_log(2000, 2)
    ref, ref_files = _round(tmp_path, "ref", segs, monkeypatch, engine="reference")
    weak, weak_files = _round(tmp_path, "weak", segs, monkeypatch, weak=True)
    assert weak_files == ref_files
    assert weak.counts == ref.counts and weak.map_stats.keys == 2000 == ref.map_size
    assert weak.counts.records_superseded == 2000               # every first-round record, nothing else


def test_weak_hash_lookup_is_exact():
    m = km.KeyMap(1 << 16, 0.9, weak_hash=True)
    keys = [b"aaaa", b"aaab", b"baaa", b"abaa", b"", b"x" * 40]
    col = pa.array(keys, pa.binary())
    src = np.frombuffer(b"".join(keys), np.uint8)
    pos = np.cumsum([0] + [len(k) for k in keys])
    none = np.zeros(1, np.uint8)
    for i, k in enumerate(keys):
        h = key_hash(src, pos[i], len(k), True)
        assert km.map_put(*m.arrays(), m.state, src, pos[i], len(k), h, 100 + i, i, False, none, none)
    assert km.map_put(*m.arrays(), m.state, src, pos[0], len(keys[0]), key_hash(src, pos[0], 4, True), 7, 0, False, none,
                         none)
    assert len(m) == len(keys)
    got = m.lookup(col, np.arange(len(keys)))
    assert got.tolist() == [7] + [100 + i for i in range(1, len(keys))]
    other = pa.array([b"aaac", b"caaa", b"aaa"], pa.binary())
    assert m.lookup(other, np.arange(3)).tolist() == [km.NOT_FOUND] * 3


@pytest.mark.parametrize("weak", [False, True])
def test_more_keys_than_the_budget_holds_take_several_passes(tmp_path, monkeypatch, weak):
    """A 16 KiB budget holds ~300 keys; 3,000 distinct keys take several hash-slice passes and the
    result is the reference's, byte for byte (the whole range cleaned in one round)."""
    segs = _keys_log(3000, 3, per_batch=64)
    ref, ref_files = _round(tmp_path, "ref", segs, monkeypatch, engine="reference")
    res, files = _round(tmp_path, "sliced", segs, monkeypatch, weak=weak, budget=16 << 10)
    assert res.map_stats.passes > 1 and res.map_stats.keys == 3000
    assert res.map_stats.bytes <= res.map_stats.budget == 16 << 10
    assert files == ref_files and res.counts == ref.counts and res.end_offset == ref.end_offset


@pytest.mark.parametrize("key_bytes", [8, 16, 17, 40, 100])
def test_map_stays_within_its_budget_and_shares_it_between_slots_and_tails(monkeypatch, key_bytes):
    """Slots and the arena share the budget as they fill: whatever the keys' lengths, the map never
    holds more than the budget; keys of at most 16 bytes take no arena, so a budget holds
    budget / SLOT_BYTES x load factor of them (slots at their last step take what is left)."""
    monkeypatch.setattr(km, "INITIAL_CAPACITY", km.MIN_CAPACITY)
    budget = 64 << 10
    m = km.KeyMap(budget, 0.9)
    none = np.zeros(1, np.uint8)
    i = 0
    while True:
        src = np.frombuffer((b"%0*d" % (key_bytes, i))[-key_bytes:], np.uint8)
        h = np.uint64(key_hash(src, 0, key_bytes, False))
        if not km.map_put(*m.arrays(), m.state, src, 0, key_bytes, h, i, i, False, none, none):
            if not m.grow():
                break
            continue
        assert m.nbytes <= budget
        i += 1
    assert len(m) == i and m.nbytes <= budget
    per_key = km.SLOT_BYTES / 0.9 + max(key_bytes - km.INLINE_BYTES, 0)
    assert len(m) >= 0.7 * budget / per_key               # most of the budget went to keys (a doubling step apart)
    assert len(m) <= m.max_keys <= budget / per_key + 1    # the planning figure, from the tails seen
    if key_bytes <= km.INLINE_BYTES:
        assert int(m.state[1]) == 0 and len(m) == min(int(m.capacity * 0.9), m.capacity - 1)
        assert m.capacity == budget // km.SLOT_BYTES       # the last step took what the budget had left


def test_a_small_map_for_few_records_and_the_smallest_budget():
    for budget in (1, 1000, 1 << 20, (32 << 20) + 5):
        m = km.KeyMap(budget, 0.9)
        assert m.nbytes <= max(budget, km.MIN_BUDGET) and m.capacity <= m.limit
        assert m.max_keys <= 0.9 * m.limit
        small = km.KeyMap(budget, 0.9, max_records=100)
        assert small.nbytes <= max(budget, km.MIN_BUDGET) and small.capacity <= max(100 / 0.9 + 2, 16)


def test_budget_is_split_across_concurrent_cleaners():
    broker = parse_broker_properties({"log.cleaner.dedupe.buffer.size": str(64 << 20), "log.cleaner.threads": "4"})
    assert cleaner_mod.map_budget(broker) == 16 << 20
    assert cleaner_mod.map_budget(broker, concurrent_cleaners=2) == 32 << 20
    assert km.dedupe_budget(10, 3) == km.MIN_BUDGET


def test_a_full_map_is_not_a_wrong_map(tmp_path, monkeypatch):
    """The map pass refills from scratch when it runs out of room: no key's offset is stale."""
    segs = _keys_log(500, 4, per_batch=25)
    write_partition(tmp_path / "src", segs)
    d = tmp_path / "src" / next(p.name for p in (tmp_path / "src").iterdir() if p.is_dir())
    plan = plan_partition(d, config=log_config(segment_bytes=1 << 30), now_ms=T0 + 10 * DAY)
    verdicts = cleaner_mod.build_key_map(plan, budget=4 << 10)
    ref = cleaner_mod.build_partition_offset_map(plan)
    assert verdicts.stats.passes > 1 and verdicts.stats.keys == len(ref)


def test_the_map_grows_from_a_few_slots_and_loses_nothing(tmp_path, monkeypatch):
    """Slots start at 16 and double (rehashed from the stored hashes) while the walk resumes where
    the map filled: the round equals the reference's."""
    segs = _keys_log(1500, 2, per_batch=40)
    ref, ref_files = _round(tmp_path, "ref", segs, monkeypatch, engine="reference")
    monkeypatch.setattr(km, "INITIAL_CAPACITY", 16)
    res, files = _round(tmp_path, "grown", segs, monkeypatch)
    assert res.map_stats.passes == 1 and res.map_stats.capacity >= 1500 / 0.9
    assert files == ref_files and res.counts == ref.counts


def test_passes_do_not_depend_on_how_the_decoder_cuts_windows(tmp_path, monkeypatch):
    """Found by the benchmark: a verdict of the transaction tracker cached per window index went to
    the wrong batches when a later pass got other windows. Each pass now runs the tracker over its own
    windows; here every pass cuts them differently, around an aborted transaction whose record
    (a key written earlier) must not enter the map."""
    from kafkalog.format import control_record as cr
    from cleaner_model import marker

    batches, active = _keys_log(400, 2, per_batch=16)
    leo = active[0].base
    first_key = batches[0].records[0][1]
    segs = [batches + [data(leo, [(first_key, b"aborted")], pid=4, txn=True), marker(leo + 1, 4, cr.ABORT)],
            [data(leo + 2, [(b"active", b"x")])]]
    ref, ref_files = _round(tmp_path, "ref", segs, monkeypatch, engine="reference")
    from kafkalog.cleaner import key_walk
    real, calls = key_walk._windows, []

    def windows(seg, pos, max_batch_bytes, **where):        # (where: the window cache's landing, if any)
        calls.append(1)
        monkeypatch.setattr(key_walk, "WINDOW_BATCHES", 3 + 2 * (len(calls) % 5))
        return real(seg, pos, max_batch_bytes, **where)
    monkeypatch.setattr(key_walk, "_windows", windows)
    res, files = _round(tmp_path, "sliced", segs, monkeypatch, budget=8 << 10)
    assert res.map_stats.passes > 1 and len(calls) > 3
    assert files == ref_files and res.counts == ref.counts


# keys around the slot's inline limit (INLINE_BYTES = 16: held whole in the slot; longer ones keep
# their tail in the arena) and the 8-byte words the bytes are read in
_BOUNDARY_LENGTHS = (0, 1, 2, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 40, 300)


def _boundary_keys():
    """Per length: keys that differ from a base key in one byte only (first, last, and each byte
    next to an 8-byte word's edge), and the base key with a trailing zero byte (longer by one)."""
    keys = []
    for n in _BOUNDARY_LENGTHS:
        base = bytes((7 * j + n) % 250 + 1 for j in range(n))
        keys.append(base)
        for at in sorted({0, 6, 7, 8, 9, 14, 15, 16, 17, 23, 24, n - 1}):
            if 0 <= at < n:
                keys.append(base[:at] + bytes([base[at] ^ 0x5A]) + base[at + 1:])
        keys.append(base + b"\x00")
    return list(dict.fromkeys(keys))


def _put_all(m, keys, *, offset=0, junk=b"", at_end=False):
    """map_put every key, each read from a buffer where ``junk`` follows it (or where it ends the
    buffer): the bytes past a key must never count."""
    none = np.zeros(1, np.uint8)
    for i, k in enumerate(keys):
        src = np.frombuffer(k if at_end else junk + k + junk, np.uint8)
        if not len(src):
            src = np.zeros(1, np.uint8)[:0]
        p = 0 if at_end else len(junk)
        h = np.uint64(key_hash(src, p, len(k), m.weak_hash))
        while not km.map_put(*m.arrays(), m.state, src, p, len(k), h, offset + i, i, False, none, none):
            assert m.grow()


@pytest.mark.parametrize("weak", [True, False])
def test_keys_around_the_inline_limit_are_told_apart(monkeypatch, weak):
    """Keys of 0 to 300 bytes, many of one length differing in one byte only (with the weak hash:
    one probe chain per length, so only the bytes tell them apart), put from buffers with different
    bytes past them, with growing slots: each key keeps its own offset, a key not put is not found."""
    monkeypatch.setattr(km, "INITIAL_CAPACITY", km.MIN_CAPACITY)
    keys = _boundary_keys()
    m = km.KeyMap(1 << 20, 0.9, weak_hash=weak)
    _put_all(m, keys, offset=100, junk=b"\xff" * 9)
    assert len(m) == len(keys) and m.capacity > km.MIN_CAPACITY
    tails = sum(max(len(k) - km.INLINE_BYTES, 0) for k in keys)
    assert m.nbytes == m.capacity * km.SLOT_BYTES + tails           # only the tails past 16 bytes in the arena
    col = pa.array(keys, pa.binary())
    assert m.lookup(col, np.arange(len(keys))).tolist() == [100 + i for i in range(len(keys))]
    # the same keys again, from buffers where they end the data or other bytes follow: same keys
    _put_all(m, keys[::-1], offset=1000, at_end=True)
    _put_all(m, keys[::2], offset=5000, junk=b"\x00" * 3)
    assert len(m) == len(keys)
    want = [5000 + i // 2 if i % 2 == 0 else 1000 + len(keys) - 1 - i for i in range(len(keys))]
    assert m.lookup(col, np.arange(len(keys))).tolist() == want
    others = [k + b"\x01" for k in keys if k + b"\x01" not in set(keys)] + \
             [k[:-1] + bytes([k[-1] ^ 0x01]) for k in keys if k and k[:-1] + bytes([k[-1] ^ 0x01]) not in set(keys)]
    got = m.lookup(pa.array(others, pa.binary()), np.arange(len(others)))
    assert got.tolist() == [km.NOT_FOUND] * len(others)


@pytest.mark.parametrize("budget", [None, 4 << 10])
def test_keys_of_every_length_around_the_inline_limit_clean_as_the_reference(tmp_path, monkeypatch, budget):
    """A log of keys of 0 to 300 bytes (the inline limit's neighbours, differing in one byte), each
    written twice, cleaned with the weak hash (in one pass; and, keys of at most 40 bytes, in
    hash-slice passes within 4 KiB): the reference's round, byte for byte."""
    keys = [k for k in _boundary_keys() if budget is None or len(k) <= 40]
    recs = [(k, b"v%d-%d" % (r, i)) for r in range(2) for i, k in enumerate(keys)]
    batches = [data(o, recs[o:o + 20]) for o in range(0, len(recs), 20)]
    segs = [batches, [data(len(recs), [(b"active", b"x")])]]
    ref, ref_files = _round(tmp_path, "ref", segs, monkeypatch, engine="reference")
    res, files = _round(tmp_path, "weak", segs, monkeypatch, weak=True, budget=budget)
    assert files == ref_files and res.counts == ref.counts
    assert res.map_stats.keys == len(keys) == ref.map_size and res.counts.records_superseded == len(keys)
    assert (res.map_stats.passes > 1) == (budget is not None)
