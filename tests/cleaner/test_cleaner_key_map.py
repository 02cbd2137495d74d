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


def _round(tmp_path, name, segments, monkeypatch, *, engine="fast", weak=False, budget=None):
    src = tmp_path / "src"
    if not src.exists():
        write_partition(src, segments)
    work = tmp_path / name
    shutil.copytree(src, work)
    monkeypatch.setattr(cleaner_mod, "ENGINE", engine)
    monkeypatch.setattr(cleaner_mod, "KEY_HASH_WEAK", weak)
    d = next(p for p in sorted(work.iterdir()) if p.is_dir())
    res = clean(d, T0 + 10 * DAY, map_budget_bytes=budget)
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
        h = km.key_hash(src, pos[i], len(k), True)
        assert km.map_put(*m.arrays(), m.state, src, pos[i], len(k), h, 100 + i, i, False, none, none)
    assert km.map_put(*m.arrays(), m.state, src, pos[0], len(keys[0]), km.key_hash(src, pos[0], 4, True), 7, 0, False, none,
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


def test_map_stays_within_its_budget():
    for budget in (1, 1000, 1 << 20, (32 << 20) + 5):
        m = km.KeyMap(budget, 0.9)
        assert m.nbytes <= m.reserved_bytes <= max(budget, km.MIN_BUDGET)
        small = km.KeyMap(budget, 0.9, max_records=100)
        assert small.reserved_bytes <= max(budget, km.MIN_BUDGET) and small.capacity <= max(100 / 0.9 + 2, 16)
        assert m.max_keys <= 0.9 * m.limit and m.capacity <= m.limit


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

    def windows(seg, pos, max_batch_bytes):
        calls.append(1)
        monkeypatch.setattr(key_walk, "WINDOW_BATCHES", 3 + 2 * (len(calls) % 5))
        return real(seg, pos, max_batch_bytes)
    monkeypatch.setattr(key_walk, "_windows", windows)
    res, files = _round(tmp_path, "sliced", segs, monkeypatch, budget=8 << 10)
    assert res.map_stats.passes > 1 and len(calls) > 3
    assert files == ref_files and res.counts == ref.counts
