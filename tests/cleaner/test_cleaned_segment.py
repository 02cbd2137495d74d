"""``GroupOutput.write_batches`` (a window of filtered batches, headers read by one kernel) writes and
indexes exactly what ``GroupOutput.write`` does batch by batch (headers read with struct), and fails
the same way on bytes that are not a run of whole batches."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.cleaner.cleaned_segment import CleanedSink, GroupOutput
from kafkalog.cleaner.record_filter import FilterCounts
from kafkalog.format import record_batch as rb
from kafkalog.index.builder import IndexAppender

BASE = 5000


def output(interval: int, engine: str = "compiled") -> GroupOutput:
    return GroupOutput(BASE, [], CleanedSink(None), IndexAppender(BASE, index_interval_bytes=interval, engine=engine),
                       [], FilterCounts())


def batch(offset: int, records: int, value_bytes: int, ts: int) -> bytes:
    return rb.encode_batch([rb.V2Record(offset + i, ts + (i * 7) % 5, b"k%d" % i, b"v" * value_bytes)
                            for i in range(records)])


def window(batches, kept, pad=0):
    """(data, start, end) as filter_to lays a window out: the kept batches back to back (from ``pad``)."""
    data, start, end, at = bytearray(pad), [], [], pad
    for raw, keep in zip(batches, kept):
        start.append(at)
        if keep:
            data += raw
            at += len(raw)
        end.append(at)
    return np.frombuffer(bytes(data), np.uint8), np.array(start, np.int64), np.array(end, np.int64)


def indexes(out: GroupOutput):
    oi, ti = out.appender.finish()
    return out.sink.size, oi.to_bytes(), ti.to_bytes()


@settings(max_examples=30, deadline=None)
@given(shapes=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 200), st.integers(0, 50), st.booleans()),
                       min_size=1, max_size=30),
       cuts=st.lists(st.integers(0, 30), max_size=3),
       interval=st.sampled_from([0, 150, 4096]), pad=st.integers(0, 3))
def test_write_batches_equals_one_write_per_batch(shapes, cuts, interval, pad):
    batches, offset = [], BASE
    for records, value_bytes, ts, _ in shapes:
        batches.append(batch(offset, records, value_bytes, 1_000 + ts))
        offset += records + 2                       # gaps: earlier cleanings removed records
    kept = [keep for *_, keep in shapes]
    one, many = output(interval), output(interval)
    for raw, keep in zip(batches, kept):
        if keep:
            one.write(one.begin_chunk(), raw, 0, 0, 0)
    bounds = sorted({min(c, len(batches)) for c in cuts} | {0, len(batches)})
    for lo, hi in zip(bounds, bounds[1:]):          # windows, each with its own data buffer
        many.write_batches(*window(batches[lo:hi], kept[lo:hi], pad))
    assert indexes(many) == indexes(one)


def test_refused_windows():
    raws = [batch(BASE, 2, 30, 7), batch(BASE + 2, 1, 10, 9)]
    data, start, end = window(raws, [True, True])
    gap = output(0)
    with pytest.raises(ValueError, match="not back to back"):
        gap.write_batches(data, start, end + np.array([0, 1]))     # the second batch starts after a gap
    with pytest.raises(ValueError, match="not back to back"):
        gap.write_batches(data, start, end + 1)                      # runs past the data
    assert gap.sink.size == 0                                        # nothing written
    bad = data.copy()
    bad[len(raws[0]) + rb.LENGTH_OFFSET + 3] ^= 1                    # the second batch's length field
    wrong = output(0)
    with pytest.raises(ValueError, match="length field does not match"):
        wrong.write_batches(bad, start, end)
    assert wrong.sink.size == len(data)                              # written, then refused (as before)
    short = np.zeros(rb.RECORD_BATCH_OVERHEAD - 1, np.uint8)
    short[rb.LENGTH_OFFSET + 3] = rb.RECORD_BATCH_OVERHEAD - 1 - rb.LOG_OVERHEAD   # length consistent, no header
    with pytest.raises(ValueError, match="length field does not match"):
        output(0).write_batches(short, np.array([0]), np.array([len(short)]))
    nothing = output(0)
    nothing.write_batches(data, start, start)                        # every batch removed
    assert indexes(nothing) == indexes(output(0))
