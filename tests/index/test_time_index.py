"""Time index (.timeindex): parse/write round trips, zero-padded files, lookups, sanity checks."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.errors import CorruptIndexError, InvalidFileNameError, OffsetOverflowError
from kafkalog.index import (
                            TIME_ENTRY_SIZE,
                            TimeIndex,
                            empty_time_index,
                            parse_time_index,
                            read_time_index,
                            write_time_index,
                            )
from kafkalog.index.time_index import TIME_ENTRY_DTYPE

PREALLOCATED_TIMEINDEX_BYTES = 10_485_756  # roundDown(10 MiB, 12): 873,813 slots


def raw_entries(pairs) -> bytes:
    """Encode (timestamp, relative offset) pairs independently of the module under test."""
    return b"".join(int(t).to_bytes(8, "big", signed=True) + int(r).to_bytes(4, "big", signed=True) for t, r in pairs)


@st.composite
def time_indexes(draw, max_entries=60):
    base = draw(st.integers(0, 2**62))
    n = draw(st.integers(0, max_entries))
    # Timestamp 0 at relative offset 0 would be indistinguishable from padding (documented).
    ts = sorted(draw(st.sets(st.integers(1, 2**50), min_size=n, max_size=n)))
    rel = sorted(draw(st.sets(st.integers(0, 2**31 - 1), min_size=n, max_size=n)))
    return TimeIndex(base, np.array(ts, np.int64), np.array(rel, np.int64) + base)


def brute_lookup(index: TimeIndex, target: int):
    best = (-1, index.base_offset)
    for ts, off in zip(index.timestamps.tolist(), index.offsets.tolist()):
        if ts <= target:
            best = (ts, off)
    return best


@settings(max_examples=200, deadline=None)
@given(time_indexes(), st.lists(st.integers(-3, 2**50 + 3), min_size=1, max_size=20))
def test_lookup_agrees_with_a_brute_force_scan(index, targets):
    targets = list(targets) + [int(t) for t in index.timestamps] + [int(t) - 1 for t in index.timestamps]
    for t in targets:
        assert index.lookup(t) == brute_lookup(index, t)


@settings(max_examples=100, deadline=None)
@given(time_indexes())
def test_bytes_round_trip_is_identical(index):
    data = index.to_bytes()
    assert len(data) == len(index) * TIME_ENTRY_SIZE
    rel = (index.offsets - index.base_offset).tolist()
    assert data == raw_entries(zip(index.timestamps.tolist(), rel))
    again = parse_time_index(data, index.base_offset, stop_at_zero_slot=False)
    assert again == index and again.to_bytes() == data
    # The zero-slot rule never drops a genuine entry (offsets strictly increase after slot 0).
    assert parse_time_index(data, index.base_offset) == index


def test_write_then_read_is_byte_identical_and_atomic(tmp_path):
    data = raw_entries([(1746499840761, 142), (1746499840765, 446)])
    path = tmp_path / "00000000000000000000.timeindex"
    index = parse_time_index(data, 0)
    write_time_index(path, index)
    assert path.read_bytes() == data
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    assert read_time_index(path) == index


def test_lookup_below_the_first_entry_and_last_entry():
    index = parse_time_index(raw_entries([(1000, 3), (1005, 9)]), 500)
    assert index.lookup(999) == (-1, 500)
    assert index.lookup(1000) == (1000, 503)
    assert index.lookup(1004) == (1000, 503)
    assert index.lookup(10**12) == (1005, 509)
    assert index.last_entry() == (1005, 509)
    assert empty_time_index(7).last_entry() is None
    assert empty_time_index(7).lookup(123) == (-1, 7)


def test_preallocated_zero_tail_ends_the_valid_prefix(tmp_path):
    path = tmp_path / "00000000000000002000.timeindex"
    # A genuine first entry may have relative offset 0 (first batch held the max timestamp).
    entries = [(1700000000000, 0), (1700000000500, 40), (1700000000900, 77)]
    with open(path, "wb") as f:
        f.truncate(PREALLOCATED_TIMEINDEX_BYTES)
        f.write(raw_entries(entries))
    index = read_time_index(path)
    assert index.timestamps.tolist() == [t for t, _ in entries]
    assert index.offsets.tolist() == [2000, 2040, 2077]
    index.sanity_check(path)
    # Kafka's view: every slot counts, and the zero padding makes its sanity check fail (TimeIndex.sanityCheck).
    broker_view = read_time_index(path, stop_at_zero_slot=False)
    assert len(broker_view) == 873_813
    with pytest.raises(CorruptIndexError) as info:
        broker_view.sanity_check(path)
    assert info.value.path == os.fspath(path)
    assert info.value.position == (873_813 - 1) * TIME_ENTRY_SIZE
    assert "timestamp" in info.value.message


def test_all_zero_time_index_is_empty_and_passes(tmp_path):
    path = tmp_path / "00000000000000000000.timeindex"
    with open(path, "wb") as f:
        f.truncate(PREALLOCATED_TIMEINDEX_BYTES)
    assert len(read_time_index(path)) == 0
    assert read_time_index(path).last_entry() is None
    broker_view = read_time_index(path, stop_at_zero_slot=False)
    assert len(broker_view) == 873_813
    broker_view.sanity_check(path)  # all-zero passes: last ts 0 == first ts 0, offset == base


@pytest.mark.parametrize("size", [1, 11, 13, 24 + 8])
def test_size_not_a_multiple_of_twelve_names_path_and_size(tmp_path, size):
    path = tmp_path / "00000000000000000000.timeindex"
    path.write_bytes(b"\x01" * size)
    with pytest.raises(CorruptIndexError) as info:
        read_time_index(path)
    assert info.value.path == os.fspath(path)
    assert str(size) in info.value.message
    assert info.value.position == size - size % 12


def test_sanity_check_last_offset_below_base_is_corrupt():
    index = parse_time_index(raw_entries([(10, 3), (20, -1)]), 100, stop_at_zero_slot=False)
    with pytest.raises(CorruptIndexError) as info:
        index.sanity_check("x.timeindex")
    assert info.value.position == 12 and "offset" in info.value.message


def test_sanity_check_last_timestamp_below_first_is_corrupt():
    index = parse_time_index(raw_entries([(50, 3), (60, 5), (40, 7)]), 0)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    # Kafka compares only last vs first.
    parse_time_index(raw_entries([(50, 3), (40, 5), (60, 7)]), 0).sanity_check()


def test_wrong_file_name(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(b"")
    with pytest.raises(InvalidFileNameError):
        read_time_index(path)


def test_to_bytes_rejects_relative_offsets_that_do_not_fit():
    with pytest.raises(OffsetOverflowError):
        TimeIndex(0, [5], [2**31]).to_bytes()


def test_entry_dtype_is_kafkas_layout():
    assert TIME_ENTRY_DTYPE.itemsize == 12
    assert TIME_ENTRY_DTYPE.fields["timestamp"][1] == 0
    assert TIME_ENTRY_DTYPE.fields["relative_offset"][1] == 8


def test_real_broker_time_indexes(real_fixtures):
    paths = sorted((real_fixtures / "pinterest__tiered-storage").rglob("*.timeindex"))
    assert len(paths) == 150
    for path in paths:
        index = read_time_index(path)
        assert index == read_time_index(path, stop_at_zero_slot=False)
        assert len(index) == path.stat().st_size // TIME_ENTRY_SIZE
        index.sanity_check(path)
        assert index.to_bytes() == path.read_bytes()
        assert (np.diff(index.timestamps) > 0).all() and (np.diff(index.offsets) > 0).all()
    for path in sorted(real_fixtures.glob("apache__kafka/core/data/*/*/*.timeindex")):
        assert path.stat().st_size == 0 and len(read_time_index(path)) == 0
