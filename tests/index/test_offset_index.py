"""Offset index (.index): parse/write round trips, zero-padded files, lookups, sanity checks."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from kafkalog.errors import CorruptIndexError, InvalidFileNameError, OffsetOverflowError
from kafkalog.index import (
                            OFFSET_ENTRY_SIZE,
                            OffsetIndex,
                            empty_offset_index,
                            parse_offset_index,
                            read_offset_index,
                            write_offset_index,
                            )
from kafkalog.index.offset_index import OFFSET_ENTRY_DTYPE
from kafkalog.fs.names import base_offset_of

PREALLOCATED_INDEX_BYTES = 10 * 1024 * 1024  # segment.index.bytes default, 1,310,720 slots


def raw_entries(pairs) -> bytes:
    """Encode (relative offset, position) pairs independently of the module under test."""
    return b"".join(int(r).to_bytes(4, "big", signed=True) + int(p).to_bytes(4, "big", signed=True) for r, p in pairs)


@st.composite
def offset_indexes(draw, max_entries=60):
    base = draw(st.integers(0, 2**62))
    n = draw(st.integers(0, max_entries))
    rel = sorted(draw(st.sets(st.integers(1, 2**31 - 1), min_size=n, max_size=n)))
    pos = sorted(draw(st.sets(st.integers(1, 2**31 - 1), min_size=n, max_size=n)))
    return OffsetIndex(base, np.array(rel, np.int64) + base, np.array(pos, np.int64))


def brute_lookup(index: OffsetIndex, target: int):
    best = (index.base_offset, 0)
    for off, pos in zip(index.offsets.tolist(), index.positions.tolist()):
        if off <= target:
            best = (off, pos)
    return best


@settings(max_examples=200, deadline=None)
@given(offset_indexes(), st.lists(st.integers(-5, 2**31 + 5), min_size=1, max_size=20))
def test_lookup_agrees_with_a_brute_force_scan(index, rel_targets):
    targets = [index.base_offset + t for t in rel_targets]
    targets += [int(o) for o in index.offsets] + [int(o) - 1 for o in index.offsets]
    many_off, many_pos = index.lookup_many(targets)
    for t, mo, mp in zip(targets, many_off.tolist(), many_pos.tolist()):
        expected = brute_lookup(index, t)
        assert index.lookup(t) == expected
        assert (mo, mp) == expected


@settings(max_examples=100, deadline=None)
@given(offset_indexes())
def test_bytes_round_trip_is_identical(index):
    data = index.to_bytes()
    assert len(data) == len(index) * OFFSET_ENTRY_SIZE
    again = parse_offset_index(data, index.base_offset)
    assert again == index
    assert again.to_bytes() == data
    expected = raw_entries(zip((index.offsets - index.base_offset).tolist(), index.positions.tolist()))
    assert data == expected


def test_write_then_read_is_byte_identical_and_atomic(tmp_path):
    data = raw_entries([(73, 4065), (142, 8133), (300, 12345)])
    index = parse_offset_index(data, 368769)
    path = tmp_path / "00000000000000368769.index"
    write_offset_index(path, index)
    assert path.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temp file left behind
    assert read_offset_index(path) == index
    # Overwriting replaces the whole content (trimmed, no stale tail).
    write_offset_index(path, empty_offset_index(368769))
    assert path.read_bytes() == b""


def test_preallocated_zero_tail_ends_the_valid_prefix(tmp_path):
    path = tmp_path / "00000000000000001000.index"
    entries = [(10, 4100), (25, 8300), (31, 12500)]
    with open(path, "wb") as f:
        f.truncate(PREALLOCATED_INDEX_BYTES)  # sparse, like Kafka's preallocated active index
        f.write(raw_entries(entries))
    index = read_offset_index(path)
    assert index.base_offset == 1000
    assert len(index) == 3
    assert index.offsets.tolist() == [1010, 1025, 1031]
    assert index.positions.tolist() == [4100, 8300, 12500]
    # The broker's own view counts every slot; the padding reads as (base offset, 0).
    broker_view = read_offset_index(path, stop_at_zero_slot=False)
    assert len(broker_view) == PREALLOCATED_INDEX_BYTES // OFFSET_ENTRY_SIZE == 1_310_720
    assert broker_view.lookup(2_000_000) == (1000, 0)
    broker_view.sanity_check(path)  # OffsetIndex.sanityCheck: a zero-padded offset index passes Kafka's check


def test_all_zero_file_has_no_entries(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    with open(path, "wb") as f:
        f.truncate(PREALLOCATED_INDEX_BYTES)
    index = read_offset_index(path)
    assert len(index) == 0
    assert index.lookup(12345) == (0, 0)
    index.sanity_check(path)


def test_zero_relative_offset_after_slot_zero_stops_even_with_nonzero_position():
    data = raw_entries([(5, 4200), (9, 8400), (0, 777), (12, 9999)])
    assert parse_offset_index(data, 50).offsets.tolist() == [55, 59]
    assert len(parse_offset_index(data, 50, stop_at_zero_slot=False)) == 4


@pytest.mark.parametrize("size", [1, 7, 9, 8 * 5 + 3])
def test_size_not_a_multiple_of_eight_names_path_and_size(tmp_path, size):
    path = tmp_path / "00000000000000000042.index"
    path.write_bytes(b"\x01" * size)
    with pytest.raises(CorruptIndexError) as info:
        read_offset_index(path)
    err = info.value
    assert err.path == os.fspath(path)
    assert str(size) in err.message
    assert err.position == size - size % 8
    assert os.fspath(path) in str(err)


def test_sanity_check_negative_relative_offset_is_corrupt(tmp_path):
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(raw_entries([(5, 4200), (-3, 8400)]))
    index = read_offset_index(path)
    assert index.offsets.tolist() == [105, 97]
    with pytest.raises(CorruptIndexError) as info:
        index.sanity_check(path)
    assert info.value.path == os.fspath(path)
    assert info.value.position == 8  # the last entry, which Kafka's check looks at
    assert "97" in info.value.message and "100" in info.value.message
    empty_offset_index(100).sanity_check(path)


def test_sanity_check_only_looks_at_the_last_entry_like_kafka():
    # Kafka's check ignores unsorted middles: only entries != 0 && last offset < base fails.
    OffsetIndex(100, [150, 120, 130], [10, 5, 20]).sanity_check()


def test_file_names():
    assert base_offset_of("/x/00000000000000368769.index", "index") == 368769
    assert base_offset_of("00000000000000000007.index.swap", "index") == 7
    assert base_offset_of("00000000000000000007.index.cleaned", "index") == 7
    # the one strict segment-name parser takes Kafka's %020d as a minimum width, as the log-dir scan does
    assert base_offset_of("000000000000000368769.index", "index") == 368769
    for bad in ["368769.index", "00000000000000368769.timeindex", "0000000000000036876x.index",
                "00000000000000368769.index.tmp", "09223372036854775808.index"]:
        with pytest.raises(InvalidFileNameError) as info:
            base_offset_of(bad, "index")
        assert bad in str(info.value)


def test_reading_a_badly_named_file_needs_an_explicit_base_offset(tmp_path):
    path = tmp_path / "some.index"
    path.write_bytes(raw_entries([(4, 4100)]))
    with pytest.raises(InvalidFileNameError):
        read_offset_index(path)
    assert read_offset_index(path, base_offset=96).lookup(1000) == (100, 4100)


def test_to_bytes_rejects_offsets_that_do_not_fit_32_bits():
    with pytest.raises(OffsetOverflowError):
        OffsetIndex(0, [2**31], [4100]).to_bytes()
    with pytest.raises(CorruptIndexError):
        OffsetIndex(0, [10], [2**31]).to_bytes()


def test_index_is_immutable_and_compares_by_value():
    offsets = np.array([5, 9], np.int64)
    index = OffsetIndex(0, offsets, [4100, 8300])
    offsets[0] = 7  # the index holds its own copy
    assert index.offsets.tolist() == [5, 9]
    with pytest.raises(ValueError):
        index.offsets[0] = 1
    assert index == OffsetIndex(0, [5, 9], [4100, 8300])
    assert index != OffsetIndex(1, [5, 9], [4100, 8300])
    with pytest.raises(ValueError):
        OffsetIndex(0, [1, 2], [3])


def test_entry_dtype_is_kafkas_layout():
    assert OFFSET_ENTRY_DTYPE.itemsize == 8
    assert OFFSET_ENTRY_DTYPE.fields["relative_offset"][1] == 0
    assert OFFSET_ENTRY_DTYPE.fields["position"][1] == 4


def test_real_zero_filled_and_empty_index_files(real_fixtures):
    # A 0.8.2-era preallocated (1 MiB of zeros) index and clean-shutdown 0-byte indexes.
    zeros = real_fixtures / "apache__kafka/core/data/kafka-573957/test-topic-1/00000000000000000000.index"
    assert zeros.stat().st_size == 1024 * 1024
    assert len(read_offset_index(zeros)) == 0
    empties = sorted(real_fixtures.glob("apache__kafka/core/data/*/*/*.index"))
    empties = [p for p in empties if p.stat().st_size == 0]
    assert empties
    for path in empties:
        index = read_offset_index(path)
        assert len(index) == 0
        index.sanity_check(path)


def test_real_broker_indexes_parse_the_same_with_and_without_the_zero_slot_rule(real_fixtures):
    paths = sorted((real_fixtures / "pinterest__tiered-storage").rglob("*.index"))
    assert len(paths) == 151
    for path in paths:
        index = read_offset_index(path)
        assert index == read_offset_index(path, stop_at_zero_slot=False)
        assert len(index) == path.stat().st_size // OFFSET_ENTRY_SIZE
        index.sanity_check(path)
        assert index.to_bytes() == path.read_bytes()
        # Entries strictly increase and never point at position 0.
        assert (np.diff(index.offsets) > 0).all() and (np.diff(index.positions) > 0).all()
        assert (index.positions > 0).all()
