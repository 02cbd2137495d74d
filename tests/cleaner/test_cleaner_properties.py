"""Random logs (keys, tombstones, null keys, several segments, a cleaner checkpoint anywhere,
interleaved transactions that commit, abort or stay open) cleaned by kafkalog.cleaner and by the
reference of test_cleaner_model: same result, plus the invariants a compacted log must keep."""
from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings, strategies as st

from kafkalog.checkpoint.offset import write_offset_checkpoint
from kafkalog.fs.names import REPLICATION_OFFSET_CHECKPOINT, format_segment_file_name
from kafkalog.format import control_record as cr

from cleaner_model import (DAY, T0, TOPIC, clean, data, encode, flatten, marker, read_partition,
                           records_of, reference_round, write_partition, aborted_txns)

KEYS = [b"a", b"b", b"c", b"d", b"e", None]

op = st.one_of(
    st.tuples(st.just("put"), st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from([b"1", b"22", None])),
                                       min_size=1, max_size=3)),
    st.tuples(st.just("txn"), st.integers(1, 3), st.lists(st.tuples(st.sampled_from(KEYS[:-1]), st.just(b"t")),
                                                          min_size=1, max_size=2)),
    st.tuples(st.just("end"), st.integers(1, 3), st.sampled_from([cr.COMMIT, cr.ABORT])),
    st.tuples(st.just("roll")),
    st.tuples(st.just("roll")),
)


def build(ops):
    segments, current, offset, open_txn = [], [], 0, set()
    for o in ops:
        if o[0] == "put":
            current.append(data(offset, o[1]))
            offset += len(o[1])
        elif o[0] == "txn":
            current.append(data(offset, o[2], pid=o[1], txn=True))
            open_txn.add(o[1])
            offset += len(o[2])
        elif o[0] == "end":
            if o[1] in open_txn:
                current.append(marker(offset, o[1], o[2]))
                open_txn.discard(o[1])
                offset += 1
        elif current:
            segments.append(current)
            current = []
    if current:
        segments.append(current)
    segments.append([data(offset, [(b"z", b"active")])])    # the active segment
    return segments, open_txn


def active_last_data(segments, open_txn, all_active):
    last = {}
    for b in flatten(segments):
        if b.pid >= 0 and not b.control:
            last[b.pid] = b.last
    return {p: o for p, o in last.items() if all_active or p in open_txn}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=3, max_size=30), checkpoint_at=st.one_of(st.just(0.0), st.floats(0, 1)), producers_active=st.booleans())
def test_random_logs_match_the_reference_and_keep_the_invariants(ops, checkpoint_at, producers_active):
    segments, open_txn = build(ops)
    leo = flatten(segments)[-1].last + 1
    checkpoint = int(checkpoint_at * leo)
    now = T0 + (1000 if producers_active else 10 * DAY)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        d = write_partition(tmp, segments, checkpoint=checkpoint)
        before_files = {p.name: p.read_bytes() for p in d.iterdir()}
        res = clean(d, now)
        assert res.error is None, res.error
        actives = active_last_data(segments, open_txn, producers_active)
        expected, upper = reference_round(segments, first_dirty=checkpoint, now=now, delete_retention_ms=DAY,
                                          active_last_data=actives)
        got = read_partition(d)
        event(f"cleaned={res.cleaned} second={len(segments) > 2}")
        if not res.cleaned:                    # nothing cleanable: nothing touched
            assert upper <= checkpoint or upper == 0 or not any(b.base < upper for b in flatten(segments))
            assert {p.name: p.read_bytes() for p in d.iterdir()} == before_files
            return
        assert res.end_offset == upper
        assert got == expected

        before_records = records_of(flatten(segments))
        after_records = records_of(flatten(got))
        offsets = [o for o, _k, _v in after_records]
        assert offsets == sorted(set(offsets)), "offsets strictly increase"
        by_offset = {o: (k, v) for o, k, v in before_records}
        assert all(by_offset[o] == (k, v) for o, k, v in after_records), "records are originals, in order"
        # the latest (non-aborted) value of every key in the cleanable range survives the first pass
        latest = {}
        aborted = aborted_txns(flatten(segments))
        aborted_offsets = {o for b in flatten(segments) if b.txn and not b.control
                           and any(a.pid == b.pid and a.first <= b.last < a.marker for a in aborted)
                           for o, _k, _v in b.records}
        for o, k, v in before_records:
            if k is not None and checkpoint <= o < upper:
                latest[k] = o
        kept = {o for o, _k, _v in after_records}
        for k, o in latest.items():
            assert o in kept or o in aborted_offsets
        # tombstones that survived carry a horizon
        for b in flatten(got):
            if not b.control and any(v is None for _o, _k, v in b.records) and b.base < upper:
                assert b.horizon == now + DAY or (b.horizon is not None and b.horizon > now)
        # nothing at or past the upper bound changed
        for name, content in before_files.items():
            base = int(name.split(".")[0])
            if base >= upper and name.endswith(".log"):
                assert (d / name).read_bytes() == content
        # a second run right after the first changes nothing
        snapshot = {p.name: p.read_bytes() for p in d.iterdir()}
        again = clean(d, now)
        assert not again.cleaned
        assert {p.name: p.read_bytes() for p in d.iterdir()} == snapshot
        # a later round past every horizon (the log got new data) drops the tombstones
        new_base = leo
        (d / format_segment_file_name(new_base, "log")).write_bytes(encode(data(new_base, [(b"new", b"x")])))
        write_offset_checkpoint(tmp / REPLICATION_OFFSET_CHECKPOINT, {(TOPIC, 0): new_base + 1})
        later = now + 3 * DAY
        res2 = clean(d, later)
        event(f"second round cleaned={res2.cleaned}")
        if res2.cleaned:
            expected2, _ = reference_round(got + [[data(new_base, [(b"new", b"x")])]], first_dirty=upper, now=later,
                                           delete_retention_ms=DAY,
                                           active_last_data=active_last_data(got, open_txn, False))
            got2 = read_partition(d)
            assert got2 == expected2
            for b in flatten(got2):
                if b.base < upper and not b.control:
                    assert all(v is not None for _o, _k, v in b.records), "tombstones past the horizon are gone"
