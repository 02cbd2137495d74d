"""Index building: recovery's rebuild (build_indexes), the append path (IndexAppender), and the
comparison with real broker-written indexes."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engines import engine_param
from kafkalog.errors import CorruptIndexError, OffsetOverflowError
from kafkalog.index import (
                            IndexAppender,
                            OffsetIndex,
                            build_indexes,
                            read_offset_index,
                            read_time_index,
                            )

INT32_MAX = 2**31 - 1


# --- a literal transcription of LogSegment.recover / append, one batch at a time ------------------------

def reference_recover(base, batches, interval):
    """(offsets, positions, timestamps, time offsets) or the exception Kafka's recover would hit."""
    valid = last_entry = 0
    max_ts, max_off = -1, base
    offs, poss, tss, toffs = [], [], [], []

    def maybe_append(ts, off):
        if tss and off < toffs[-1]:
            raise CorruptIndexError("time", position=len(tss) * 12)
        if ts > (tss[-1] if tss else -1):
            tss.append(ts)
            toffs.append(off)

    for _pos, size, last, ts in batches:
        if not 0 <= last - base <= INT32_MAX:
            raise OffsetOverflowError("range", position=valid)
        if ts > max_ts:
            max_ts, max_off = ts, last
        if valid - last_entry > interval:
            if offs and last <= offs[-1]:
                raise CorruptIndexError("offset", position=len(offs) * 8)
            offs.append(last)
            poss.append(valid)
            maybe_append(max_ts, max_off)
            last_entry = valid
        valid += size
    maybe_append(max_ts, max_off)
    return offs, poss, tss, toffs


def run(fn):
    try:
        return fn()
    except (CorruptIndexError, OffsetOverflowError) as exc:
        return type(exc), exc.position


def as_lists(result):
    if not isinstance(result[0], OffsetIndex):
        return result  # an (exception type, position) pair or the reference's lists
    oi, ti = result
    return oi.offsets.tolist(), oi.positions.tolist(), ti.timestamps.tolist(), ti.offsets.tolist()


def arrays(batches):
    cols = list(zip(*batches)) if batches else [(), (), (), ()]
    return {name: np.array(col, np.int64) for name, col in
            zip(("positions", "sizes", "last_offsets", "max_timestamps"), cols)}


@st.composite
def segments(draw, *, valid_offsets=False):
    n = draw(st.integers(0, 60))
    sizes = draw(st.lists(st.one_of(st.integers(61, 1500), st.integers(1500, 6000)), min_size=n, max_size=n))
    modes = ["valid", "valid", "disorder", "disorder", "overflow"]
    mode = "valid" if valid_offsets else draw(st.sampled_from(modes))
    start = draw(st.integers(INT32_MAX - 40, INT32_MAX + 2) if mode == "overflow" else st.integers(-2, 3))
    if mode == "disorder":  # offsets that sometimes stand still or step back a little
        start = abs(start) + 10
        delta = st.integers(1, 20) | st.integers(1, 20) | st.integers(-5, 0)
    else:
        delta = st.integers(1, 6)
    if mode == "valid":
        start = abs(start)
    deltas = draw(st.lists(delta, min_size=n, max_size=n))
    timestamps = draw(st.lists(st.one_of(st.just(-1), st.integers(0, 25)), min_size=n, max_size=n))
    if mode == "disorder" and draw(st.booleans()):
        timestamps = sorted(timestamps)  # every step back then carries a new max timestamp
    base = draw(st.sampled_from([0, 1000, 2**40]))
    interval = draw(st.sampled_from([0, 1, 100, 1000, 4096, 10_000]))
    pos, batches, last = 0, [], base + start
    for size, delta, ts in zip(sizes, deltas, timestamps):
        last += delta
        batches.append((pos, size, last, 1_700_000_000_000 + ts if ts >= 0 else -1))
        pos += size
    return base, batches, interval


@settings(max_examples=300, deadline=None)
@given(segments())
def test_build_indexes_equals_the_literal_recovery_loop(segment):
    base, batches, interval = segment
    expected = run(lambda: reference_recover(base, batches, interval))
    got = run(lambda: build_indexes(base_offset=base, index_interval_bytes=interval, **arrays(batches)))
    assert as_lists(got) == as_lists(expected)


def appender_result(base, batches, interval, chunks=None):
    """Feed batches to IndexAppender, one append per chunk (default: one batch per append)."""
    appender = IndexAppender(base, index_interval_bytes=interval)
    chunks = chunks or [1] * len(batches)
    i = 0
    for k in chunks:
        group = batches[i:i + k]
        i += k
        max_ts = max(b[3] for b in group)
        first_with_max = next(b for b in group if b[3] == max_ts)
        appender.append(
            position=group[0][0],
            size=sum(b[1] for b in group),
            largest_offset=group[-1][2],
            largest_timestamp=max_ts,
            offset_of_max_timestamp=first_with_max[2],
        )
    return appender.finish()


@settings(max_examples=300, deadline=None)
@given(segments())
def test_one_batch_appends_equal_the_recovery_rebuild(segment):
    base, batches, interval = segment
    rebuilt = run(lambda: build_indexes(base_offset=base, index_interval_bytes=interval, **arrays(batches)))
    appended = run(lambda: appender_result(base, batches, interval))
    assert as_lists(appended) == as_lists(rebuilt)


@settings(max_examples=200, deadline=None)
@given(segments(valid_offsets=True), st.lists(st.integers(1, 6), min_size=60, max_size=60))
def test_chunked_appends_stay_valid_for_lookups(segment, chunk_sizes):
    base, batches, interval = segment
    chunks, left = [], len(batches)
    for k in chunk_sizes:
        if left <= 0:
            break
        chunks.append(min(k, left))
        left -= chunks[-1]
    oi, ti = appender_result(base, batches, interval, chunks)
    # Each entry maps an append's last offset to the append's start position.
    starts = np.cumsum([0] + chunks[:-1])
    chunk_of = {batches[s][0]: (batches[s + k - 1][2]) for s, k in zip(starts, chunks)}
    for off, pos in zip(oi.offsets.tolist(), oi.positions.tolist()):
        assert chunk_of[pos] == off
    # Lookups stay correct: the batch holding the target starts at or after the position found.
    for pos, _size, last, _ts in batches:
        found_off, found_pos = oi.lookup(last)
        assert found_pos <= pos and found_off <= last
    assert (np.diff(ti.timestamps) > 0).all() and (np.diff(ti.offsets) >= 0).all()


@settings(max_examples=200, deadline=None)
@given(segments(valid_offsets=True))
def test_rolled_segment_ends_with_its_max_timestamp(segment):
    base, batches, interval = segment
    _, ti = build_indexes(base_offset=base, index_interval_bytes=interval, **arrays(batches))
    stamped = [b for b in batches if b[3] >= 0]
    if not stamped:
        assert len(ti) == 0
        return
    max_ts = max(b[3] for b in stamped)
    earliest = next(b for b in batches if b[3] == max_ts)
    assert ti.last_entry() == (max_ts, earliest[2])


# --- worked examples ----------------------------------------------------------------------------

def uniform(n, size=1000, records=10, timestamps=None):
    batches, pos = [], 0
    for j in range(n):
        ts = timestamps[j] if timestamps is not None else 1_700_000_000_000 + j
        batches.append((pos, size, records * (j + 1) - 1, ts))
        pos += size
    return batches


def test_spec_worked_example_1000_byte_batches():
    batches = uniform(30)  # batch j (1-based) holds offsets 10(j-1) .. 10j-1 at position 1000(j-1)
    oi, ti = build_indexes(base_offset=0, **arrays(batches))
    # Entries at the 6th, 11th, 16th, ... batch: entry k = (lastOffset of batch 5k+1, 5000k).
    assert oi.positions.tolist() == [5000 * k for k in range(1, 6)]
    assert oi.offsets.tolist() == [10 * (5 * k + 1) - 1 for k in range(1, 6)]
    assert 0 not in oi.positions.tolist()
    # Time index: the running max at each entry, then the final (roll) entry for the last batch.
    assert ti.timestamps.tolist() == [1_700_000_000_000 + 5 * k for k in range(1, 6)] + [1_700_000_000_029]
    assert ti.offsets.tolist() == oi.offsets.tolist() + [299]


def test_counter_is_strictly_greater_than_the_interval():
    # 4096-byte batches: at the 2nd batch the counter is exactly 4096 (not > 4096).
    oi, _ = build_indexes(base_offset=0, **arrays(uniform(6, size=4096)))
    assert oi.positions.tolist() == [8192, 16384]  # then 4096 (12288) again is not enough
    oi, _ = build_indexes(base_offset=0, **arrays(uniform(5, size=4097)))
    assert oi.positions.tolist() == [4097, 8194, 12291, 16388]


def test_equal_timestamps_are_skipped_and_the_earliest_batch_keeps_the_slot():
    oi, ti = build_indexes(base_offset=0, **arrays(uniform(20, timestamps=[500] * 20)))
    assert len(oi) == 3
    assert list(zip(ti.timestamps.tolist(), ti.offsets.tolist())) == [(500, 9)]
    ts = [5, 9, 9, 3, 9, 9, 12, 12, 12, 12, 12, 12, 12, 1, 1, 1, 1, 1]
    _, ti = build_indexes(base_offset=0, **arrays(uniform(len(ts), timestamps=ts)))
    # entries at batches 5, 10, 15 (0-based) see running maxima 9 (from batch 1) and 12 (batch 6).
    assert list(zip(ti.timestamps.tolist(), ti.offsets.tolist())) == [(9, 19), (12, 69)]


def test_no_timestamps_give_an_empty_time_index():
    oi, ti = build_indexes(base_offset=0, **arrays(uniform(12, timestamps=[-1] * 12)))
    assert len(oi) == 2 and len(ti) == 0
    assert ti.last_entry() is None


def test_magic0_then_log_append_time_batches():
    # Old (no timestamp) batches, then LogAppendTime batches whose maxTimestamp is the append time.
    ts = [-1] * 7 + [1_700_000_000_000, 1_700_000_000_000, 1_700_000_000_007] + [1_700_000_000_007] * 4
    oi, ti = build_indexes(base_offset=0, **arrays(uniform(len(ts), timestamps=ts)))
    assert oi.offsets.tolist() == [59, 109]
    # At batch 5 (first entry) no timestamp yet: nothing appended; at batch 10, max 1..007 of batch 9.
    assert list(zip(ti.timestamps.tolist(), ti.offsets.tolist())) == [(1_700_000_000_007, 99)]


def test_empty_segment():
    oi, ti = build_indexes(base_offset=42, positions=[], sizes=[], last_offsets=[], max_timestamps=[])
    assert len(oi) == len(ti) == 0 and oi.base_offset == ti.base_offset == 42


def test_multi_batch_appends_differ_from_the_rebuild_as_spec_5_4_says():
    batches = uniform(24)
    chunked_oi, chunked_ti = appender_result(0, batches, 4096, chunks=[4] * 6)
    rebuilt_oi, rebuilt_ti = build_indexes(base_offset=0, **arrays(batches))
    # Appends start at 0, 4000, 8000, ...: the counter passes 4096 at the 3rd append (8000), whose
    # LAST offset (batch 12 -> 119) is mapped to its START position; then at the 5th (16000).
    assert list(zip(chunked_oi.offsets.tolist(), chunked_oi.positions.tolist())) == [(119, 8000), (199, 16000)]
    assert list(zip(rebuilt_oi.offsets.tolist(), rebuilt_oi.positions.tolist())) == [
        (59, 5000), (109, 10000), (159, 15000), (209, 20000)]
    assert chunked_oi != rebuilt_oi and chunked_ti != rebuilt_ti
    # DumpLogSegments' check (first batch at the position must end at the entry offset) flags the
    # chunk entries, though they are valid for lookups.
    last_at = {p: last for p, _s, last, _t in batches}
    assert all(last_at[p] == o for o, p in zip(rebuilt_oi.offsets.tolist(), rebuilt_oi.positions.tolist()))
    assert all(last_at[p] != o for o, p in zip(chunked_oi.offsets.tolist(), chunked_oi.positions.tolist()))
    # Both end with the segment's max timestamp; the chunked time index is chunk-granular.
    assert chunked_ti.last_entry() == rebuilt_ti.last_entry() == (1_700_000_000_023, 239)


def test_appender_finish_is_idempotent():
    appender = IndexAppender(0)
    for p, s, last, ts in uniform(12):
        appender.append(position=p, size=s, largest_offset=last, largest_timestamp=ts, offset_of_max_timestamp=last)
    first = appender.finish()
    assert appender.finish() == first


# --- errors -------------------------------------------------------------------------------------

def test_offset_past_the_32_bit_range_is_an_overflow():
    batches = uniform(3)
    batches[2] = (2000, 1000, 2**31, 1)
    with pytest.raises(OffsetOverflowError) as info:
        build_indexes(base_offset=0, **arrays(batches))
    assert info.value.position == 2000 and "2147483648" in info.value.message
    with pytest.raises(OffsetOverflowError):
        build_indexes(base_offset=100, **arrays(uniform(3)))  # offsets 9.. are below base 100
    with pytest.raises(OffsetOverflowError):
        IndexAppender(100).append(position=0, size=70, largest_offset=99, largest_timestamp=-1,
                                  offset_of_max_timestamp=99)


def test_non_increasing_offset_when_an_entry_is_due_is_corrupt():
    batches = uniform(12)
    batches[10] = (10000, 1000, 40, batches[10][3])  # second entry (offset 40 <= 59)
    with pytest.raises(CorruptIndexError) as info:
        build_indexes(base_offset=0, **arrays(batches))
    assert info.value.position == 8 and "10000" in info.value.message
    # The same disorder on a batch that gets no entry goes unnoticed, as in Kafka.
    batches = uniform(12)
    batches[7] = (7000, 1000, 40, batches[7][3])
    oi, _ = build_indexes(base_offset=0, **arrays(batches))
    assert oi.offsets.tolist() == [59, 109]


def test_time_index_offset_going_backwards_is_corrupt():
    # The running max moves to a batch whose last offset is below the previous time entry.
    # Entry at 5000 -> time entry (200, 20); the unindexed batch at 5100 ends at offset 15 but
    # holds the new max 300; the entry at 10200 (offset 30 > 20, fine for the offset index)
    # offers (300, 15) to the time index, below its last offset 20.
    batches = [(0, 5000, 10, 100), (5000, 100, 20, 200), (5100, 100, 15, 300), (5200, 5000, 25, 1),
               (10200, 100, 30, 1)]
    with pytest.raises(CorruptIndexError) as info:
        build_indexes(base_offset=0, **arrays(batches))
    assert "time index" in info.value.message and info.value.position == 12
    with pytest.raises(CorruptIndexError) as info:
        appender_result(0, batches, 4096)
    assert "time index" in info.value.message and info.value.position == 12


def test_inconsistent_input_is_a_value_error():
    with pytest.raises(ValueError, match="one value per batch"):
        build_indexes(base_offset=0, positions=[0, 100], sizes=[100], last_offsets=[0], max_timestamps=[0])
    with pytest.raises(ValueError, match="position"):
        build_indexes(base_offset=0, positions=[0, 150], sizes=[100, 100], last_offsets=[0, 1],
                      max_timestamps=[0, 0])
    with pytest.raises(ValueError, match="size"):
        build_indexes(base_offset=0, positions=[0, 0], sizes=[0, 100], last_offsets=[0, 1],
                      max_timestamps=[0, 0])


def test_a_million_batches_build_quickly():
    rng = np.random.default_rng(7)
    sizes = rng.integers(80, 3000, 1_000_000)
    positions = np.concatenate(([0], np.cumsum(sizes[:-1])))
    last = np.cumsum(rng.integers(1, 4, sizes.size))
    ts = 1_700_000_000_000 + np.cumsum(rng.integers(-2, 4, sizes.size))
    oi, ti = build_indexes(base_offset=0, positions=positions, sizes=sizes, last_offsets=last, max_timestamps=ts)
    assert len(oi) > 100_000 and len(ti) > 10_000
    assert ti.last_entry()[0] == ts.max()


# --- real broker data ---------------------------------------------------------------------------

# The first segments of these two partitions were indexed at every batch: written with an
# index.interval.bytes below 118 bytes (the smallest batch gap there), not the default 4096.
SMALL_INTERVAL_SEGMENTS = {
    "log-files/test_topic_a-1/00000000000000000000.log",
    "log-files/test_topic_a-2/00000000000000000000.log",
}


def pinterest_segments(real_fixtures):
    from kafkalog.format.file_records import scan_batches

    root = real_fixtures / "pinterest__tiered-storage"
    out = []
    for log in sorted(root.rglob("*.log")):
        if not log.with_suffix(".index").exists():
            continue
        scan = scan_batches(log)
        assert scan.error is None and scan.invalid_bytes == 0
        table = scan.batches
        cols = {name: table[name].to_numpy().astype(np.int64)
                for name in ("position", "size", "baseOffset", "lastOffset", "maxTimestamp")}
        out.append((log, int(log.stem), cols))
    return out


def rebuild(base, cols, interval=4096):
    return build_indexes(base_offset=base, positions=cols["position"], sizes=cols["size"],
                         last_offsets=cols["lastOffset"], max_timestamps=cols["maxTimestamp"],
                         index_interval_bytes=interval)


def short(log: Path) -> str:
    return "/".join(log.parts[-2:]) if log.parts[-3] != "log-files" else "/".join(log.parts[-3:])


def test_pinterest_broker_index_lookups_land_on_batches(real_fixtures):
    segments = pinterest_segments(real_fixtures)
    assert len(segments) == 148
    for log, base, cols in segments:
        oi = read_offset_index(log.with_suffix(".index"))
        ti = read_time_index(log.with_suffix(".timeindex"))
        oi.sanity_check(log.with_suffix(".index"))
        ti.sanity_check(log.with_suffix(".timeindex"))
        pos, first, last, mts = cols["position"], cols["baseOffset"], cols["lastOffset"], cols["maxTimestamp"]
        # Every entry points at a batch start, and that batch ends at the entry offset.
        at = np.searchsorted(pos, oi.positions)
        assert (pos[at] == oi.positions).all() and (last[at] == oi.offsets).all()
        # Looking up any offset gives a batch start at or before the batch holding it.
        for targets in (first, last):
            found_off, found_pos = oi.lookup_many(targets)
            assert np.isin(found_pos, pos).all() and (found_pos <= pos).all() and (found_off <= targets).all()
        # Time entries: the batch holding the entry offset carries the entry timestamp as its max.
        holder = np.searchsorted(last, ti.offsets)
        assert (first[holder] <= ti.offsets).all() and (mts[holder] == ti.timestamps).all()


def test_pinterest_rebuild_matches_the_broker(real_fixtures):
    segments = pinterest_segments(real_fixtures)
    index_same, index_differs = 0, set()
    ts_identical, ts_offset_differs, ts_differs = 0, 0, set()
    identical_with_own_interval, offset_differs_with_own_interval = 0, 0
    for log, base, cols in segments:
        broker_index = log.with_suffix(".index").read_bytes()
        broker_ti = read_time_index(log.with_suffix(".timeindex"))
        oi, ti = rebuild(base, cols)
        if oi.to_bytes() == broker_index:
            index_same += 1
        else:
            index_differs.add(short(log))
        if ti.to_bytes() == log.with_suffix(".timeindex").read_bytes():
            ts_identical += 1
        elif np.array_equal(ti.timestamps, broker_ti.timestamps):
            ts_offset_differs += 1
        else:
            ts_differs.add(short(log))

        if short(log) in SMALL_INTERVAL_SEGMENTS:
            oi, ti = rebuild(base, cols, interval=0)
            assert oi.to_bytes() == broker_index
            assert rebuild(base, cols, interval=117)[0].to_bytes() == broker_index
        # With the interval the broker used, every timestamp matches; where the offset differs
        # the broker stored the offset of the max-timestamp RECORD, inside the batch that the
        # rebuilt entry (that batch's last offset) points at.
        assert np.array_equal(ti.timestamps, broker_ti.timestamps)
        if np.array_equal(ti.offsets, broker_ti.offsets):
            identical_with_own_interval += 1
            continue
        offset_differs_with_own_interval += 1
        holder = np.searchsorted(cols["lastOffset"], ti.offsets)
        assert (cols["lastOffset"][holder] == ti.offsets).all()
        assert (cols["baseOffset"][holder] <= broker_ti.offsets).all()
        assert (broker_ti.offsets <= ti.offsets).all()

    assert index_same == 146
    assert index_differs == SMALL_INTERVAL_SEGMENTS
    # As measured when the rule was written (pinterest broker data, the default interval everywhere):
    # 35 identical, 112 same timestamps.
    assert (ts_identical, ts_offset_differs) == (35, 112)
    assert ts_differs == {"log-files/test_topic_a-1/00000000000000000000.log"}
    # With each segment's own interval all 148 carry the broker's timestamps.
    assert (identical_with_own_interval, offset_differs_with_own_interval) == (35, 113)


def test_build_indexes_accepts_arrow_columns(real_fixtures):
    from kafkalog.format.file_records import scan_batches

    log = real_fixtures / "pinterest__tiered-storage/ts-common/src/test/resources/log-files/timeindex_test/00000000000000007729.log"
    table = scan_batches(log).batches
    oi, ti = build_indexes(base_offset=7729, positions=table["position"], sizes=table["size"],
                           last_offsets=table["lastOffset"], max_timestamps=table["maxTimestamp"])
    assert oi.to_bytes() == log.with_suffix(".index").read_bytes()
    assert np.array_equal(ti.timestamps, read_time_index(log.with_suffix(".timeindex")).timestamps)


@engine_param
@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 9000), min_size=1, max_size=60),
       gaps=st.lists(st.integers(1, 5), min_size=60, max_size=60),
       stamps=st.lists(st.integers(-1, 50), min_size=60, max_size=60),
       interval=st.sampled_from([1, 4096, 10_000]),
       back=st.one_of(st.none(), st.integers(0, 59)))
def test_append_batches_equals_one_append_per_batch(engine, sizes, gaps, stamps, interval, back):
    """The recopy's ``append_batches`` (a window of batches in one call) keeps the indexes exactly as
    one ``append`` per batch does, offsets going backwards included (the same error)."""
    n = len(sizes)
    positions = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    last = 999 + np.cumsum(np.array(gaps[:n]))
    if back is not None and back < n:
        last[back:] -= 20                                      # offsets going backwards from there (or below the base)
    ts = np.array(stamps[:n], np.int64)
    one = IndexAppender(1000, index_interval_bytes=interval)
    many = IndexAppender(1000, index_interval_bytes=interval, engine=engine)
    try:
        for p, s, o, t in zip(positions.tolist(), sizes, last.tolist(), ts.tolist()):
            one.append(position=p, size=s, largest_offset=o, largest_timestamp=t, offset_of_max_timestamp=o)
        expected = one.finish()
    except (CorruptIndexError, OffsetOverflowError) as e:
        with pytest.raises(type(e)) as got:
            many.append_batches(positions, np.array(sizes), last, ts)
        assert str(got.value) == str(e)
        return
    many.append_batches(positions[:n // 2], np.array(sizes[:n // 2]), last[:n // 2], ts[:n // 2])   # two windows
    many.append_batches(positions[n // 2:], np.array(sizes[n // 2:]), last[n // 2:], ts[n // 2:])
    got = many.finish()
    assert got[0].to_bytes() == expected[0].to_bytes() and got[1].to_bytes() == expected[1].to_bytes()
