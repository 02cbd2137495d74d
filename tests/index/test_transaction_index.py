"""Aborted-transaction index (.txnindex): layout, parsing quirks, search, and rebuilding it by
replaying producer state (build_transaction_index)."""
from __future__ import annotations

import os
import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.errors import CorruptIndexError, InvalidFileNameError
from kafkalog.index import (
                            TXN_ENTRY_SIZE,
                            AbortedTxn,
                            TransactionIndex,
                            build_transaction_index,
                            parse_transaction_index,
                            read_transaction_index,
                            replay_transactions,
                            write_transaction_index,
                            )

ABORT, COMMIT = 0, 1


def raw_entry(pid, first, last, lso, version_bytes=b"\x00\x00") -> bytes:
    return version_bytes + struct.pack(">qqqq", pid, first, last, lso)


aborted_txns = st.builds(
    AbortedTxn,
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1),
)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**62), st.lists(aborted_txns, max_size=20))
def test_bytes_round_trip_is_identical(base, entries):
    index = TransactionIndex(base, entries)
    data = index.to_bytes()
    assert data == b"".join(raw_entry(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset) for t in entries)
    again = parse_transaction_index(data, base)
    assert again == index and again.to_bytes() == data


def test_layout_matches_kafkas_aborted_txn():
    data = TransactionIndex(0, [AbortedTxn(7, 100, 105, 106)]).to_bytes()
    assert len(data) == TXN_ENTRY_SIZE == 34
    assert data.hex() == (
        "0000" "0000000000000007" "0000000000000064" "0000000000000069" "000000000000006a"
    )


def test_write_then_read(tmp_path):
    path = tmp_path / "00000000000000000100.txnindex"
    index = TransactionIndex(100, [AbortedTxn(7, 90, 105, 106), AbortedTxn(8, 101, 120, 121)])
    write_transaction_index(path, index)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    assert read_transaction_index(path) == index
    with pytest.raises(InvalidFileNameError):
        read_transaction_index(tmp_path / "00000000000000000100.index")


def test_partial_trailing_entry_is_ignored():
    data = raw_entry(1, 2, 3, 4) + raw_entry(5, 6, 7, 8)[:33]
    assert parse_transaction_index(data, 0).entries == (AbortedTxn(1, 2, 3, 4),)
    assert parse_transaction_index(b"\x00" * 33, 0).entries == ()


def test_version_above_zero_is_corrupt_and_names_the_entry(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(raw_entry(1, 2, 3, 4) + raw_entry(5, 6, 7, 8, version_bytes=b"\x01\x00"))
    with pytest.raises(CorruptIndexError) as info:
        read_transaction_index(path)
    assert info.value.path == os.fspath(path)
    assert info.value.position == TXN_ENTRY_SIZE
    assert "version 1" in info.value.message


def test_version_is_the_first_byte_only_as_kafka_reads_it():
    # Kafka reads buffer.get(0): the second byte is ignored, a negative byte is not "> 0".
    low = parse_transaction_index(raw_entry(1, 2, 3, 4, version_bytes=b"\x00\x05"), 0)
    assert low.entries[0].version == 0
    negative = parse_transaction_index(raw_entry(1, 2, 3, 4, version_bytes=b"\xff\x00"), 0)
    assert negative.entries[0].version == -1
    assert negative.to_bytes() == raw_entry(1, 2, 3, 4, version_bytes=b"\xff\x00")


def test_sanity_check():
    index = TransactionIndex(100, [AbortedTxn(1, 50, 100, 101), AbortedTxn(2, 60, 99, 101)])
    with pytest.raises(CorruptIndexError) as info:
        index.sanity_check("seg.txnindex")
    assert info.value.position == TXN_ENTRY_SIZE and info.value.path == "seg.txnindex"
    TransactionIndex(100, [AbortedTxn(1, 50, 100, 101)]).sanity_check()
    TransactionIndex(100).sanity_check()


def test_collect_aborted_txns():
    a = AbortedTxn(1, first_offset=10, last_offset=20, last_stable_offset=15)
    b = AbortedTxn(2, first_offset=12, last_offset=30, last_stable_offset=31)
    c = AbortedTxn(3, first_offset=40, last_offset=50, last_stable_offset=51)
    index = TransactionIndex(0, [a, b, c])
    # lastOffset >= fetch offset and firstOffset < upper bound.
    assert index.collect_aborted_txns(21, 100).aborted == (b, c)
    assert index.collect_aborted_txns(0, 12).aborted == (a,)
    # The scan stops after the first entry whose LSO >= upper bound, and says so.
    result = index.collect_aborted_txns(0, 31)
    assert result.aborted == (a, b) and result.is_complete
    result = index.collect_aborted_txns(0, 15)
    assert result.aborted == (a,) and result.is_complete  # a's LSO 15 >= 15 ends the scan at a
    assert index.collect_aborted_txns(0, 1000).is_complete is False


def test_collect_stops_right_after_the_entry_that_reaches_the_bound():
    a = AbortedTxn(1, 0, 5, 100)
    b = AbortedTxn(2, 1, 6, 101)
    result = TransactionIndex(0, [a, b]).collect_aborted_txns(0, 50)
    assert result.aborted == (a,) and result.is_complete


# --- rebuilding from batches ------------------------------------------------------------------

def rows(*batches):
    """Parallel columns from (base_offset, producer_id, is_transactional, is_control, control_type)."""
    names = ["base_offset", "producer_id", "is_transactional", "is_control", "control_type"]
    return {name: [b[i] for b in batches] for i, name in enumerate(names)}


def data(offset, pid, txn=True):
    return (offset, pid, txn, False, -1)


def marker(offset, pid, kind):
    return (offset, pid, True, True, kind)


def test_abort_with_data_yields_an_entry_with_lso_after_the_marker():
    batches = rows(data(100, 7), data(101, 7), marker(102, 7, ABORT))
    index = build_transaction_index(base_offset=100, batches=batches)
    assert index.entries == (AbortedTxn(7, 100, 102, 103),)


def test_commit_closes_without_an_entry():
    batches = rows(data(0, 7), marker(1, 7, COMMIT), data(2, 7), marker(3, 7, ABORT))
    assert build_transaction_index(base_offset=0, batches=batches).entries == (AbortedTxn(7, 2, 3, 4),)


def test_empty_transaction_marker_yields_nothing():
    batches = rows(marker(5, 7, ABORT), data(6, 8, txn=False), marker(7, 7, COMMIT))
    assert build_transaction_index(base_offset=0, batches=batches).entries == ()


def test_lso_is_the_earliest_other_open_transaction():
    batches = rows(
        data(10, 1), data(11, 2), data(12, 3), data(13, 1),
        marker(14, 1, ABORT),  # 2 (first 11) and 3 (first 12) still open -> LSO 11
        marker(15, 2, COMMIT),
        marker(16, 3, ABORT),  # nobody else open -> 17
    )
    index = build_transaction_index(base_offset=10, batches=batches)
    assert index.entries == (AbortedTxn(1, 10, 14, 11), AbortedTxn(3, 12, 16, 17))


def test_transactions_carried_in_from_earlier_segments():
    batches = rows(data(205, 9), marker(210, 4, ABORT), marker(211, 9, ABORT))
    aborted, still_open = replay_transactions(batches=batches, open_txn_first_offsets={4: 150, 5: 120})
    assert aborted == (AbortedTxn(4, 150, 210, 120), AbortedTxn(9, 205, 211, 120))
    assert still_open == {5: 120}
    # A producer whose transaction is open does not restart it on its next data batch.
    aborted, still_open = replay_transactions(batches=rows(data(300, 5), marker(301, 5, ABORT)),
                                              open_txn_first_offsets=still_open)
    assert aborted == (AbortedTxn(5, 120, 301, 302),) and still_open == {}


def test_batches_without_producer_and_other_control_types_are_ignored():
    batches = rows(
        (0, -1, True, False, -1),   # no producer id: producer state is not touched
        data(1, 3),
        (2, 3, False, True, 2),     # LEADER_CHANGE-like control type: no effect
        (3, -1, True, True, ABORT), # marker without producer id
        marker(4, 3, ABORT),
    )
    assert build_transaction_index(base_offset=0, batches=batches).entries == (AbortedTxn(3, 1, 4, 5),)


def test_arrow_table_with_camel_case_columns_and_null_control_types():
    table = pa.table({
        "baseOffset": pa.array([0, 1, 2], pa.int64()),
        "lastOffset": pa.array([0, 1, 2], pa.int64()),
        "producerId": pa.array([7, 7, 8], pa.int64()),
        "isTransactional": [True, True, False],
        "isControl": [False, True, False],
        "controlType": pa.array([None, ABORT, None], pa.int16()),
    })
    assert build_transaction_index(base_offset=0, batches=table).entries == (AbortedTxn(7, 0, 1, 2),)


def test_missing_column_is_named():
    with pytest.raises(ValueError, match="control_type"):
        build_transaction_index(base_offset=0, batches={"base_offset": [1], "producer_id": [1],
                                                        "is_transactional": [True], "is_control": [False]})


def test_markers_going_backwards_are_corrupt():
    batches = rows(data(10, 1), marker(12, 1, ABORT), data(5, 2), marker(11, 2, ABORT))
    with pytest.raises(CorruptIndexError) as info:
        build_transaction_index(base_offset=0, batches=batches)
    assert info.value.position == TXN_ENTRY_SIZE
