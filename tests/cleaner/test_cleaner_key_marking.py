"""The insert walk's bits (``key_map.map_put`` with ``mark``): for every record the recopy asks
about, the answer from the bits is the answer the finished map gives — on random logs with a clean
section, null keys, tombstones and transactions, in one pass and in hash-slice passes; and where
the bits could be wrong (offsets out of order, aborted data in the dirty range) the map answers."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkalog.cleaner.clean_options import CleanOptions
from kafkalog.cleaner import cleaner as cleaner_mod, plan_partition
from kafkalog.cleaner.key_map import NOT_FOUND
from kafkalog.cleaner.key_walk import MAP_ALWAYS, build_key_verdicts
from kafkalog.format import control_record as cr
from kafkalog.log.records_io import iter_segment

from cleaner_model import DAY, T0, data, flatten, log_config, marker, write_partition
from test_cleaner_properties import build

KEYS = [b"a", b"b", b"c", b"d", b"e", b"ff", None]
op = st.one_of(
    st.tuples(st.just("put"), st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from([b"1", None])),
                                       min_size=1, max_size=4)),
    st.tuples(st.just("txn"), st.integers(1, 2), st.lists(st.tuples(st.sampled_from(KEYS[:-1]), st.just(b"t")),
                                                          min_size=1, max_size=2)),
    st.tuples(st.just("end"), st.integers(1, 2), st.sampled_from([cr.COMMIT, cr.ABORT])),
    st.tuples(st.just("roll")),
)


def _answers(plan, verdicts):
    """The lookup answer of every data record with a key below the map's end, in recopy order."""
    keys, ordinals, offsets = [], [], []
    ordinal = 0
    for seg in plan.segments:
        if seg.base_offset >= verdicts.end_offset:
            break
        for t in iter_segment(seg.log_path):
            n = t.num_rows
            off = t.column("offset").to_numpy()
            ask = ~t.column("isControl").to_numpy(zero_copy_only=False) & t.column("key").is_valid().to_numpy(
                zero_copy_only=False) & (off < verdicts.end_offset)
            idx = np.flatnonzero(ask)
            keys.extend(t.column("key").take(pa.array(idx)).to_pylist())
            ordinals.extend((ordinal + idx).tolist())
            offsets.extend(off[idx].tolist())
            ordinal += n
    col = pa.array(keys, pa.binary())
    offsets = np.array(offsets, np.int64)
    found = verdicts.lookup(col, np.arange(len(keys)), np.array(ordinals, np.int64), offsets)
    # what the recopy makes of an answer: not in the map, superseded, or in the map and not superseded
    return np.where(found == NOT_FOUND, "absent", np.where(offsets < found, "superseded", "latest"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=3, max_size=30), checkpoint_at=st.floats(0, 1), slices=st.sampled_from([1, 3]))
def test_bits_answer_as_the_map(ops, checkpoint_at, slices):
    segments, _open = build(ops)
    leo = flatten(segments)[-1].last + 1
    with tempfile.TemporaryDirectory() as tmp:
        d = write_partition(Path(tmp), segments, checkpoint=int(checkpoint_at * leo))
        plan = plan_partition(d, config=log_config(), now_ms=T0 + 10 * DAY)
        if plan.upper_bound_offset <= plan.first_dirty_offset:
            return
        kw = dict(budget=1 << 20, load_factor=0.9, max_batch_bytes=1 << 20, slices=slices)
        marked = build_key_verdicts(plan, mark=True, **kw)
        looked_up = build_key_verdicts(plan, mark=False, **kw)
        assert _answers(plan, marked).tolist() == _answers(plan, looked_up).tolist()
        assert marked.stats.keys == looked_up.stats.keys


def _plan(tmp_path, segments, checkpoint=None):
    d = write_partition(tmp_path, segments, checkpoint=checkpoint)
    return plan_partition(d, config=log_config(), now_ms=T0 + 10 * DAY)


def test_one_pass_asks_the_map_only_below_the_first_dirty_offset(tmp_path):
    segs = [[data(0, [(b"a", b"1"), (b"b", b"1")])], [data(2, [(b"a", b"2"), (b"c", b"1")])],
            [data(4, [(b"z", b"x")])]]
    plan = _plan(tmp_path, segs, checkpoint=2)
    v = build_key_verdicts(plan, budget=1 << 20, load_factor=0.9, max_batch_bytes=1 << 20)
    assert v.map_below == 2 and v.key_map is not None
    bits = np.unpackbits(v.superseded_bits, bitorder="little")[:4].tolist()
    assert bits == [0, 0, 0, 0]           # record 0 (a@0) is below the first dirty offset: the map's
    found = np.unpackbits(v.found_bits, bitorder="little")[:4].tolist()
    assert found == [0, 0, 1, 1]
    assert _answers(plan, v).tolist() == ["superseded", "absent", "latest", "latest"]


def test_aborted_data_in_the_dirty_range_makes_the_map_answer(tmp_path):
    segs = [[data(0, [(b"a", b"1")]), data(1, [(b"a", b"t")], pid=3, txn=True), marker(2, 3, cr.ABORT),
             data(3, [(b"a", b"2")])], [data(4, [(b"z", b"x")])]]
    plan = _plan(tmp_path, segs)
    v = build_key_verdicts(plan, budget=1 << 20, load_factor=0.9, max_batch_bytes=1 << 20)
    assert v.map_below == MAP_ALWAYS
    looked_up = build_key_verdicts(plan, budget=1 << 20, load_factor=0.9, max_batch_bytes=1 << 20, mark=False)
    assert _answers(plan, v).tolist() == _answers(plan, looked_up).tolist() == ["superseded", "superseded", "latest"]


def test_offsets_out_of_order_make_the_map_answer(tmp_path):
    """A key met again at a lower offset (a damaged log): Kafka's map keeps the last offset walked,
    so both records are kept; the bits would say the first was superseded — the map answers."""
    segs = [[data(0, [(b"c", b"1")]), data(10, [(b"a", b"1")]), data(5, [(b"a", b"2")]), data(11, [(b"b", b"1")])],
            [data(12, [(b"z", b"x")])]]
    plan = _plan(tmp_path, segs)
    v = build_key_verdicts(plan, budget=1 << 20, load_factor=0.9, max_batch_bytes=1 << 20)
    assert v.map_below == MAP_ALWAYS
    assert _answers(plan, v).tolist() == ["latest", "latest", "latest", "latest"]
    res = cleaner_mod.clean_partition(plan.path, config=log_config(), now_ms=T0 + 10 * DAY,
                                      options=CleanOptions(dry_run=True, force=True))
    assert res.error is None
    assert res.counts.records_superseded == 0 and res.counts.records_kept == 4
