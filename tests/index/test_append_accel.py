"""``IndexAppender.append_batches`` on both engines (aiokafka's twin pattern): the compiled kernel
(kafkalog/index/append_accel.py) gives the reference Python loop's entries, state and errors, window
after window — offsets going backwards, timestamps going backwards, bad sizes and positions and
offsets outside the segment's range included."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.engine import COMPILED, REFERENCE
from kafkalog.errors import CorruptIndexError, OffsetOverflowError
from kafkalog.index import IndexAppender

from engines import engine_param

INT32_MAX = 2**31 - 1
BASE = 1000

# A fault planted at one batch (else the data's own disorder is the only way to fail).
FAULTS = (None, None, None, None, "size0", "size-", "position-", "below-base", "above-range", "top-of-range",
          "late-max", "late-max", "late-max")


def observe(appender, windows, base=BASE):
    """Everything ``append_batches`` leaves behind over ``windows`` (calls of 4 columns each): the
    state after each call, the first error (type, message, index-file position) and the state it
    leaves, and the finished indexes when nothing failed."""
    seen = []
    for columns in windows:
        try:
            appender.append_batches(*columns)
        except (ValueError, CorruptIndexError, OffsetOverflowError) as e:
            seen.append(("error", type(e), str(e), getattr(e, "position", None)))
            break
        finally:
            seen.append(state(appender))
    else:
        try:
            oi, ti = appender.finish()
        except CorruptIndexError as e:              # the final time entry behind the last one
            seen.append(("finish error", str(e), e.position))
        else:
            seen.append(("finished", oi.to_bytes(), ti.to_bytes()))
    return seen


def state(appender):
    return (appender._bytes_since_last_entry, appender._max_timestamp, appender._offset_of_max_timestamp,
            list(appender._offsets), list(appender._positions), list(appender._timestamps),
            list(appender._time_offsets))


@st.composite
def appends(draw):
    """(interval, a keyword append first or None, the windows): one batch after the other, offsets
    rising (steps 1..6) or not always (0..6, −3..6), timestamps anywhere in −3..40, window cuts
    anywhere, one planted fault sometimes, columns as int64 / int32 arrays or lists."""
    fault = draw(st.sampled_from(FAULTS))
    late_max = fault == "late-max"       # rising offsets, a few batches per index entry: the time index's error
    n = draw(st.integers(12 if late_max else 0, 40))
    fault = fault if n else None
    sizes = draw(st.lists(st.integers(1, 3000), min_size=n, max_size=n))
    low_step = 1 if late_max else draw(st.sampled_from([1, 1, 0, -3]))          # offsets rising, or not always
    steps = draw(st.lists(st.integers(low_step, 6), min_size=n, max_size=n))
    stamps = draw(st.lists(st.integers(-3, 40), min_size=n, max_size=n))
    positions = [int(p) for p in np.concatenate([[0], np.cumsum(sizes)[:-1]])] if n else []
    last = [int(x) for x in BASE + np.cumsum(steps)] if n else []
    if fault is not None:
        at = draw(st.integers(2, n - 4) if late_max else st.integers(0, n - 1))
        if fault == "size0":
            sizes[at] = 0
        elif fault == "size-":
            sizes[at] = -5
        elif fault == "position-":
            positions[at] = -1
        elif fault == "below-base":
            last[at] = BASE - 1
        elif fault == "above-range":
            last[at] = BASE + INT32_MAX + 1
        elif late_max:                              # a new max timestamp at an offset behind: the time index's
            last[at] = BASE                         # error when an entry offers it after a larger offset
            stamps[at] = 99
        else:
            last[at] = BASE + INT32_MAX             # the largest offset the segment holds: no error
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=4)))
    kind = draw(st.sampled_from(["int64", "int32", "list"]))
    windows = []
    for lo, hi in zip([0] + cuts, cuts + [n]):
        columns = [c[lo:hi] for c in (positions, sizes, last, stamps)]
        if kind != "list":
            columns = [np.array(c, dtype=np.int64 if kind == "int64" or j == 2 else kind) for j, c in enumerate(columns)]
        windows.append(columns)
    interval = 4096 if late_max else draw(st.sampled_from([0, 1, 700, 4096]))
    first = draw(st.one_of(st.none(), st.tuples(st.integers(1, 9000), st.integers(-3, 40))))
    return interval, first, windows


def run_engine(engine, interval, first, windows):
    appender = IndexAppender(BASE, index_interval_bytes=interval, engine=engine)
    if first is not None:                           # state carried in from the per-append path
        size, ts = first
        appender.append(position=0, size=size, largest_offset=BASE, largest_timestamp=ts,
                        offset_of_max_timestamp=BASE)
    return observe(appender, windows)


def outcome(seen):
    """What a run ended in: the error's type (and which index for a CorruptIndexError), else how
    ``finish`` ended."""
    last = seen[-2] if len(seen) > 1 else None
    if last is None or last[0] != "error":
        return seen[-1][0]                          # "finished", or "finish error" (the roll's time entry behind)
    return last[1].__name__ + (" time" if "time index" in last[2] else " offset" if "offset index" in last[2] else "")


def test_compiled_append_batches_equals_the_reference_loop():
    """Random windows of batches: both engines leave the same entries and state after every call,
    and fail with the same error at the same batch; the cases reach each error and successes."""
    outcomes = set()

    @settings(max_examples=150, deadline=None)
    @given(appends())
    def same(case):
        interval, first, windows = case
        expected = run_engine(REFERENCE, interval, first, windows)
        assert run_engine(COMPILED, interval, first, windows) == expected
        outcomes.add(outcome(expected))

    same()
    assert outcomes - {"finish error"} == {"finished", "ValueError", "OffsetOverflowError", "CorruptIndexError offset",
                                           "CorruptIndexError time"}           # each status of the kernel


@engine_param
def test_a_time_entry_behind_the_last_one_fails_after_its_offset_entry(engine):
    """A batch below the last time entry's offset raises the time index's error with the offset
    entry of the same batch already made (Kafka appends to the offset index first)."""
    appender = IndexAppender(0, index_interval_bytes=10, engine=engine)
    appender.append_batches(np.array([0, 20]), np.array([20, 20]), np.array([10, 20]), np.array([5, 1]))
    # entries so far: offset (20 @ 20), time (5 @ 10). Batch at 40 is due: offset (25 @ 40), time (6 @ 25);
    # batch at 45 (not due) takes the max, 30 at offset 12; batch at 75 is due: offset (30 @ 75), then
    # the time entry (30 @ 12) is behind (6 @ 25).
    with pytest.raises(CorruptIndexError, match="time index entry offset 12 is below the previous entry's offset 25") as e:
        appender.append_batches(np.array([40, 45, 75]), np.array([5, 30, 20]), np.array([25, 12, 30]),
                                np.array([6, 30, 2]))
    assert e.value.position == 24                   # the third time entry
    assert list(appender._offsets) == [20, 25, 30] and list(appender._timestamps) == [5, 6]
    assert (appender._max_timestamp, appender._offset_of_max_timestamp, appender._bytes_since_last_entry) == (30, 12, 35)


@engine_param
def test_offsets_near_the_top_of_int64(engine):
    """A base offset within 2**31 of int64's top: the range check cannot wrap."""
    base = 2**63 - 100
    appender = IndexAppender(base, index_interval_bytes=0, engine=engine)
    appender.append_batches(np.array([0, 10, 20]), np.array([10, 10, 10]), np.array([base, base + 5, 2**63 - 1]),
                            np.array([1, 2, 3]))
    oi, ti = appender.finish()
    assert list(oi.offsets) == [base + 5, 2**63 - 1] and list(ti.timestamps) == [2, 3]

