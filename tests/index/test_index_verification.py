"""Index verification and reindexing without Spark: the four classes on indexes damaged on purpose,
the active segment's rules, the transaction index, corrupt .log tails, and real broker files."""
from __future__ import annotations

import shutil
import struct
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from kafkalog.format import control_record as cr
from kafkalog.format import record_batch as rb
from kafkalog.format.file_records import scan_batches
from kafkalog.index.builder import IndexAppender, build_indexes
from kafkalog.index.offset_index import OffsetIndex, read_offset_index, write_offset_index
from kafkalog.index.time_index import read_time_index
from kafkalog.index.transaction_index import (AbortedTxn, TransactionIndex, parse_transaction_index,
                                              write_transaction_index)
from kafkalog.index.verdicts import CORRUPT, IDENTICAL, MISSING, VALID
from kafkalog.index.verify import verify_segment
from kafkalog.log.logdir import scan_partition_dir
from kafkalog.log.reindex import (CORRUPT_TAIL_PREFIX, corrupt_tail_file_name, rebuild_indexes, reindex_partition,
                                    truncate_corrupt_tail)
from kafkalog.log.records_io import read_segment

from logdirs import make_partition

T0 = 1_700_000_000_000


def partition(tmp_path, segments=3, records=150, *, empty_active=False) -> Path:
    """A partition whose segments are big enough for several index entries (~50 batches each)."""
    stamps = [[T0 + s * 10_000 + (i * 7919) % 1000 for i in range(records)] for s in range(segments)]
    return make_partition(tmp_path / "d", "t", 0, stamps, empty_active=empty_active)


def seg(folder: Path, k: int) -> Path:
    return sorted(folder.glob("*.log"))[k]


def verdicts(log: Path, **kw) -> dict:
    return {v.kind: v for v in verify_segment(log, **kw).verdicts}


# --- identical and the damaged classes -------------------------------------------------------------

def test_indexes_written_as_recovery_does_are_identical(tmp_path):
    folder = partition(tmp_path)
    for log in sorted(folder.glob("*.log")):
        got = verdicts(log)
        assert {k: v.status for k, v in got.items()} == {"index": IDENTICAL, "timeindex": IDENTICAL}
        assert got["index"].entries == got["index"].expected_entries >= 2   # not a trivial index
        assert got["timeindex"].entries >= 2


def test_missing_files(tmp_path):
    log = seg(partition(tmp_path), 0)
    log.with_suffix(".index").unlink()
    log.with_suffix(".timeindex").unlink()
    got = verdicts(log)
    assert got["index"].status == MISSING and got["timeindex"].status == MISSING
    assert got["index"].file_size is None and "startup" in got["index"].reason


@pytest.mark.parametrize("suffix, cut, entry_size", [(".index", 3, 8), (".timeindex", 5, 12)])
def test_a_size_that_is_not_a_multiple_of_the_entry_is_corrupt(tmp_path, suffix, cut, entry_size):
    log = seg(partition(tmp_path), 0)
    path = log.with_suffix(suffix)
    data = path.read_bytes()
    path.write_bytes(data[:-cut])
    v = verdicts(log)[suffix[1:]]
    whole = (len(data) - cut) // entry_size
    assert v.status == CORRUPT and "multiple" in v.reason
    assert (v.first_bad_entry, v.first_bad_position) == (whole, whole * entry_size)


def test_flipped_position_bytes_are_corrupt_at_that_entry(tmp_path):
    log = seg(partition(tmp_path), 0)
    path = log.with_suffix(".index")
    data = bytearray(path.read_bytes())
    data[8 + 7] ^= 0x01                                  # entry 1's position, lowest byte
    path.write_bytes(bytes(data))
    v = verdicts(log)["index"]
    assert v.status == CORRUPT and v.first_bad_entry == 1 and v.first_bad_position == 8
    assert "not the start of a batch" in v.reason


def test_out_of_order_entries_are_corrupt(tmp_path):
    log = seg(partition(tmp_path), 0)
    path = log.with_suffix(".index")
    data = path.read_bytes()
    path.write_bytes(data[8:16] + data[0:8] + data[16:])
    v = verdicts(log)["index"]
    assert v.status == CORRUPT and v.first_bad_entry == 1 and "out of order" in v.reason


def test_entries_pointing_past_the_log_are_corrupt(tmp_path):
    log = seg(partition(tmp_path), 0)
    index = read_offset_index(log.with_suffix(".index"))
    last = scan_batches(log).batches
    n = len(index)
    # an offset far beyond the log, at a position beyond the file
    write_offset_index(log.with_suffix(".index"), OffsetIndex(
        index.base_offset, list(index.offsets) + [int(last["lastOffset"][-1].as_py()) + 50],
        list(index.positions) + [log.stat().st_size + 100]))
    v = verdicts(log)["index"]
    assert v.status == CORRUPT and v.first_bad_entry == n and v.first_bad_position == 8 * n
    assert "past the end of the log" in v.reason
    # the time index: an entry for an offset past the log's last offset
    ti = log.with_suffix(".timeindex")
    ti.write_bytes(ti.read_bytes() + struct.pack(">qi", T0 + 10**9, 10_000))
    v = verdicts(log)["timeindex"]
    assert v.status == CORRUPT and "past the log's last offset" in v.reason


def test_time_index_timestamp_mismatch_and_missing_final_entry(tmp_path):
    log = seg(partition(tmp_path), 0)
    ti = log.with_suffix(".timeindex")
    data = ti.read_bytes()
    ts1 = struct.unpack_from(">q", data, 12)[0]
    ti.write_bytes(data[:12] + struct.pack(">q", ts1 - 1) + data[20:])      # entry 1's timestamp, one ms less
    v = verdicts(log)["timeindex"]
    assert v.status == CORRUPT and v.first_bad_entry == 1 and "max timestamp" in v.reason
    ti.write_bytes(data[:-12])                           # drop the final (roll) entry
    v = verdicts(log)["timeindex"]
    assert v.status == CORRUPT and v.first_bad_entry == len(data) // 12 - 1 and "final (roll) entry" in v.reason


def test_offset_index_truncated_at_an_entry_boundary_is_valid_but_explained(tmp_path):
    log = seg(partition(tmp_path), 0)
    path = log.with_suffix(".index")
    path.write_bytes(path.read_bytes()[:-8])
    v = verdicts(log)["index"]
    assert v.status == VALID and "ends early" in v.reason and v.entries == v.expected_entries - 1


def test_zero_padded_index_is_normal_only_in_the_active_segment(tmp_path):
    folder = partition(tmp_path, segments=2)
    for k in (0, 1):
        for suffix, size in ((".index", 80_000), (".timeindex", 120_000)):
            path = seg(folder, k).with_suffix(suffix)
            path.write_bytes(path.read_bytes().ljust(size, b"\0"))
    active = verdicts(seg(folder, 1), is_active=True, segment_index_bytes=80_000)
    assert active["index"].status == VALID and "preallocated to segment.index.bytes" in active["index"].reason
    assert active["timeindex"].status == VALID and "zero slots" in active["timeindex"].reason
    assert active["index"].entries == active["index"].expected_entries
    rolled = verdicts(seg(folder, 0))
    entries = len(read_offset_index(seg(folder, 0).with_suffix(".index")))   # stops at the zero slot
    assert rolled["index"].status == CORRUPT and rolled["index"].first_bad_entry == entries
    assert "untrimmed" in rolled["index"].reason
    assert rolled["timeindex"].status == CORRUPT and "untrimmed" in rolled["timeindex"].reason
    # data after the zero tail of an active file is a torn file
    path = seg(folder, 1).with_suffix(".index")
    data = bytearray(path.read_bytes())
    data[-5] = 1
    path.write_bytes(bytes(data))
    v = verdicts(seg(folder, 1), is_active=True)["index"]
    assert v.status == CORRUPT and v.first_bad_entry == len(data) // 8 - 1


def test_active_segment_without_final_entry_is_valid(tmp_path):
    log = seg(partition(tmp_path, segments=1), 0)
    ti = log.with_suffix(".timeindex")
    ti.write_bytes(ti.read_bytes()[:-12])
    assert verdicts(log)["timeindex"].status == CORRUPT
    v = verdicts(log, is_active=True)["timeindex"]
    assert v.status == VALID and "no final entry yet" in v.reason


def test_follower_style_chunk_indexes_are_valid(tmp_path):
    log = seg(partition(tmp_path, segments=1, records=400), 0)
    b = scan_batches(log).batches.to_pydict()
    appender = IndexAppender(0)
    for i in range(0, len(b["position"]), 3):            # a follower appends fetched chunks of 3 batches
        j = min(i + 3, len(b["position"]))
        ts = b["maxTimestamp"][i:j]
        first_max = i + ts.index(max(ts))
        appender.append(position=b["position"][i], size=sum(b["size"][i:j]), largest_offset=b["lastOffset"][j - 1],
                        largest_timestamp=max(ts), offset_of_max_timestamp=b["lastOffset"][first_max])
    oi, ti = appender.finish()
    write_offset_index(log.with_suffix(".index"), oi)
    log.with_suffix(".timeindex").write_bytes(ti.to_bytes())
    got = verdicts(log)
    assert got["index"].status == VALID and "multi-batch append" in got["index"].reason
    assert got["timeindex"].status in (VALID, IDENTICAL)


def test_an_offset_before_its_batch_start_is_lookup_unsafe(tmp_path):
    log = seg(partition(tmp_path), 0)
    index = read_offset_index(log.with_suffix(".index"))
    offsets = list(index.offsets)
    offsets[1] = offsets[0] + 1                          # below the batch that ends before entry 1's position
    write_offset_index(log.with_suffix(".index"), OffsetIndex(index.base_offset, offsets, list(index.positions)))
    v = verdicts(log)["index"]
    assert v.status == CORRUPT and v.first_bad_entry == 1 and "would start after their batch" in v.reason


# --- rebuild, reindex_partition, the active segment ----------------------------------------------

def test_rebuild_then_everything_is_identical(tmp_path):
    folder = partition(tmp_path)
    damaged = seg(folder, 1)
    damaged.with_suffix(".index").write_bytes(b"\1" * 13)
    damaged.with_suffix(".timeindex").unlink()
    first = reindex_partition(folder, verify_only=False)
    assert first.skipped_active == int(seg(folder, 2).name[:20])          # the active segment is left alone
    by_file = {r["file"]: r for r in first.rows}
    assert by_file[damaged.with_suffix(".index").name]["class"] == CORRUPT
    assert by_file[damaged.with_suffix(".index").name]["action"] == "rebuilt"
    assert by_file[damaged.with_suffix(".timeindex").name]["action"] == "created"
    active_rows = [r for r in first.rows if r["file"].startswith(seg(folder, 2).name[:20])]
    assert [(r["kind"], r["class"], r["action"]) for r in active_rows] == [("log", "skipped", "none")]
    second = reindex_partition(folder, verify_only=False, include_active=True)
    assert {r["class"] for r in second.rows} == {IDENTICAL} and {r["action"] for r in second.rows} == {"none"}
    assert len(second.rows) == 6
    assert not list(folder.glob("*.tmp"))


def test_verify_only_changes_nothing(tmp_path):
    folder = partition(tmp_path)
    seg(folder, 0).with_suffix(".index").write_bytes(b"")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    result = reindex_partition(folder)                                    # verify_only is the default
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert {r["class"] for r in result.rows} >= {VALID}   # an empty offset index is sparse, not wrong
    assert all(r["action"] == "none" for r in result.rows)


def test_include_active_rebuilds_a_preallocated_active_segment_trimmed(tmp_path):
    folder = partition(tmp_path, segments=2)
    active = seg(folder, 1)
    for suffix, size in ((".index", 10_485_760), (".timeindex", 10_485_756)):
        path = active.with_suffix(suffix)
        data = path.read_bytes()
        if suffix == ".timeindex":
            data = data[:-12]                          # a running broker has no final entry yet
        path.write_bytes(data.ljust(size, b"\0"))
    rows = {r["file"]: r for r in reindex_partition(folder, include_active=True, verify_only=False).rows}
    assert rows[active.with_suffix(".index").name]["class"] == VALID
    assert rows[active.with_suffix(".index").name]["action"] == "rebuilt"
    assert active.with_suffix(".index").stat().st_size < 10_000
    assert verdicts(active, is_active=True)["timeindex"].status == IDENTICAL


# --- transaction index -----------------------------------------------------------------------------

def _marker(offset: int, pid: int, kind: int) -> bytes:
    record = rb.V2Record(offset, T0 + offset, cr.CONTROL_KEY.pack(0, kind), cr.END_TXN_MARKER_VALUE.pack(0, 5))
    return rb.encode_batch([record], base_offset=offset, last_offset_delta=0, transactional=True, control=True,
                           producer_id=pid, producer_epoch=0, partition_leader_epoch=0)


def _data(offset: int, pid: int = -1, txn: bool = False) -> bytes:
    return rb.encode_batch([rb.V2Record(offset, T0 + offset, b"k", b"v" * 40)], base_offset=offset,
                           last_offset_delta=0, transactional=txn, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                           base_sequence=0 if pid >= 0 else -1, partition_leader_epoch=0)


def write_log(folder: Path, base: int, parts) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"{base:020d}.log"
    log.write_bytes(b"".join(parts))
    b = scan_batches(log).batches
    oi, ti = build_indexes(base_offset=base, positions=b["position"], sizes=b["size"], last_offsets=b["lastOffset"],
                           max_timestamps=b["maxTimestamp"])
    log.with_suffix(".index").write_bytes(oi.to_bytes())
    log.with_suffix(".timeindex").write_bytes(ti.to_bytes())
    return log


def transactional_segment(tmp_path) -> Path:
    return write_log(tmp_path / "d" / "tx-0", 0, [
        _data(0, 7, True), _data(1, 7, True), _data(2, 9, True), _marker(3, 7, cr.ABORT), _data(4),
        _marker(5, 9, cr.COMMIT), _data(6, 8, True), _marker(7, 8, cr.ABORT), _marker(8, 8, cr.ABORT)])


def test_transaction_index_classes(tmp_path):
    log = transactional_segment(tmp_path)
    v = verify_segment(log)
    assert [(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset) for t in v.txn_index.entries] == [
        (7, 0, 3, 2), (8, 6, 7, 8)]                     # LSO of the first: pid 9's open txn; empty abort at 8: none
    assert v.verdict("txnindex").status == MISSING
    write_transaction_index(log.with_suffix(".txnindex"), v.txn_index)
    assert verdicts(log)["txnindex"].status == IDENTICAL
    path = log.with_suffix(".txnindex")
    good = path.read_bytes()
    path.write_bytes(good[:34 + 18] + struct.pack(">q", 6) + good[34 + 26:])    # entry 1 ends at a data batch
    got = verdicts(log)["txnindex"]
    assert got.status == CORRUPT and got.first_bad_entry == 1 and got.first_bad_position == 34
    assert "no ABORT marker" in got.reason
    path.write_bytes(good[:34])                                                  # an aborted txn left out
    got = verdicts(log)["txnindex"]
    assert got.status == CORRUPT and "not indexed" in got.reason
    path.write_bytes(b"\x01" + good[1:])                                         # version 1
    assert verdicts(log)["txnindex"].status == CORRUPT
    path.write_bytes(good + b"\0" * 5)                                           # a torn trailing entry
    got = verdicts(log)["txnindex"]
    assert got.status == CORRUPT and got.first_bad_entry == 2 and "partial" in got.reason
    path.write_bytes(b"")
    rows = reindex_partition(log.parent, include_active=True, verify_only=False).rows
    assert {r["file"]: r["action"] for r in rows}[path.name] == "rebuilt" and path.read_bytes() == good


def test_transaction_that_began_before_the_known_state_is_kept(tmp_path):
    # pid 7's transaction began at offset 0, in a segment retention has deleted; no producer snapshot
    log = write_log(tmp_path / "d" / "tx-0", 2, [_data(2, 9, True), _marker(3, 7, cr.ABORT), _data(4)])
    entry = AbortedTxn(7, 0, 3, 2)
    write_transaction_index(log.with_suffix(".txnindex"), TransactionIndex(2, [entry]))
    v = verify_segment(log, open_txns={}, txn_state_known=False)
    assert v.verdict("txnindex").status == IDENTICAL and v.txn_index.entries == (entry,)
    known = verify_segment(log, open_txns={}, txn_state_known=True).verdict("txnindex")
    assert known.status == CORRUPT and "no data" in known.reason
    # reindex_partition knows the state is unknown (first segment above 0, no snapshot) and keeps it
    rows = reindex_partition(log.parent, include_active=True, verify_only=False).rows
    assert {r["kind"]: r["class"] for r in rows}["txnindex"] == IDENTICAL
    assert parse_transaction_index(log.with_suffix(".txnindex").read_bytes(), 2).entries == (entry,)


# --- corrupt .log tails ------------------------------------------------------------------------------

def test_corrupt_tail_is_reported_cut_saved_and_reindexed(tmp_path):
    folder = partition(tmp_path)
    log = seg(folder, 1)
    size = log.stat().st_size
    garbage = bytes(range(256)) * 3
    with open(log, "ab") as f:
        f.write(garbage)
    v = verify_segment(log)
    assert v.log.corrupt and (v.log.valid_bytes, v.log.size, v.log.first_bad_position) == (size, size + 768, size)
    assert {x.status for x in v.verdicts} == {IDENTICAL}          # indexes judged on the valid prefix

    verify = reindex_partition(folder)
    log_row = next(r for r in verify.rows if r["kind"] == "log" and r["class"] != "skipped")
    assert (log_row["class"], log_row["first_bad_position"], log_row["action"]) == (CORRUPT, size, "none")
    assert log.stat().st_size == size + 768

    before = read_segment(log, on_corrupt="stop")
    result = reindex_partition(folder, verify_only=False, truncate_tail=True)
    log_row = next(r for r in result.rows if r["kind"] == "log" and r["class"] != "skipped")
    assert log_row["action"] == "truncated" and "1 later segment(s) kept" in log_row["action_detail"]
    side = folder / corrupt_tail_file_name(int(log.name[:20]), size)
    assert side.name.startswith(CORRUPT_TAIL_PREFIX) and side.read_bytes() == garbage
    assert log.stat().st_size == size
    assert read_segment(log).equals(before)                           # reads back whole, CRCs checked
    assert truncate_corrupt_tail(log) is None                         # nothing more to cut
    again = reindex_partition(folder, verify_only=False, truncate_tail=True, include_active=True)
    assert {r["class"] for r in again.rows} == {IDENTICAL}
    # a broker ignores the side file: it is not a segment file, and kafkalog lists it as unknown
    assert side in scan_partition_dir(folder).unknown


def test_a_log_cut_in_the_middle_of_a_batch_truncates_to_the_last_whole_batch(tmp_path):
    folder = partition(tmp_path, segments=1)
    log = seg(folder, 0)
    b = scan_batches(log).batches
    keep_end = int(b["position"][10].as_py())
    data = log.read_bytes()
    log.write_bytes(data[:keep_end + 30])                             # a torn write inside batch 10
    cut = truncate_corrupt_tail(log)
    assert (cut.position, cut.length) == (keep_end, 30) and cut.side_file.read_bytes() == data[keep_end:keep_end + 30]
    v = verify_segment(log)
    assert v.verdict("index").status == CORRUPT                       # still indexes batches that are gone
    rebuild_indexes(v)
    assert {x.status for x in verify_segment(log).verdicts} == {IDENTICAL}


# --- real broker data --------------------------------------------------------------------------------

def pinterest_logs(root: Path) -> list[Path]:
    return [log for log in sorted(root.rglob("*.log")) if log.with_suffix(".index").exists()]


def test_pinterest_fixtures_are_classified_as_the_spec_says(real_fixtures):
    logs = pinterest_logs(real_fixtures / "pinterest__tiered-storage")
    assert len(logs) == 148
    counts, reasons = Counter(), Counter()
    for log in logs:
        for v in verify_segment(log).verdicts:
            counts[(v.kind, v.status)] += 1
            if v.status == VALID:
                reasons[(v.kind, "interval" if "index.interval.bytes" in v.reason else "")] += 1
                if v.kind == "timeindex":
                    assert "offset of the record with the max timestamp" in v.reason
    assert counts == {("index", IDENTICAL): 146, ("index", VALID): 2, ("timeindex", IDENTICAL): 35,
                      ("timeindex", VALID): 113}
    assert reasons[("index", "interval")] == 2          # both written with a small index.interval.bytes
    assert reasons[("timeindex", "interval")] == 1      # test_topic_a-1's first segment: both causes


def test_pinterest_rebuild_makes_every_index_identical(real_fixtures, tmp_path):
    root = tmp_path / "pinterest"
    shutil.copytree(real_fixtures / "pinterest__tiered-storage", root)   # a scratch copy, never the fixtures
    logs = pinterest_logs(root)
    for log in logs:
        rebuild_indexes(verify_segment(log))
    assert Counter(v.status for log in logs for v in verify_segment(log).verdicts) == {IDENTICAL: 296}
    # the timestamps a broker reads (largestTimestamp = last entry) did not change
    for log in logs[:20]:
        original = read_time_index(real_fixtures / "pinterest__tiered-storage" / log.relative_to(root).with_suffix(".timeindex"))
        assert read_time_index(log.with_suffix(".timeindex")).timestamps[-1] == original.timestamps[-1]
        assert np.array_equal(read_time_index(log.with_suffix(".timeindex")).timestamps, original.timestamps) or \
            "test_topic_a-1" in str(log)


# --- found in review: the tail a broker's recovery keeps or cuts -----------------------------------

def _batch_positions(log: Path):
    b = scan_batches(log).batches
    return [int(p) for p in b["position"].to_pylist()], [int(s) for s in b["size"].to_pylist()]


def test_a_second_cut_at_the_same_place_never_overwrites_the_first_side_file(tmp_path):
    folder = partition(tmp_path, segments=1)
    log = seg(folder, 0)
    end = log.stat().st_size
    with open(log, "ab") as f:
        f.write(b"FIRST-TORN-TAIL" * 3)
    first = truncate_corrupt_tail(log)
    with open(log, "ab") as f:
        f.write(b"SECOND" * 3)                   # the broker appended again from the cut, then tore again
    second = truncate_corrupt_tail(log)
    assert first.position == second.position == end and first.side_file != second.side_file
    assert first.side_file.read_bytes() == b"FIRST-TORN-TAIL" * 3
    assert second.side_file.read_bytes() == b"SECOND" * 3
    with open(log, "ab") as f:
        f.write(b"SECOND" * 3)                   # the same bytes again: the existing side file is reused
    assert truncate_corrupt_tail(log).side_file == second.side_file


def test_indexes_are_not_rebuilt_while_a_corrupt_tail_stays(tmp_path):
    folder = partition(tmp_path, segments=1)
    log = seg(folder, 0)
    positions, _sizes = _batch_positions(log)
    data = bytearray(log.read_bytes())
    data[positions[len(positions) // 2] + 70] ^= 0xFF          # a bad CRC in the middle; CRC-valid batches after it
    log.write_bytes(bytes(data))
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    out = reindex_partition(folder, verify_only=False, include_active=True)
    rows = {r["kind"]: r for r in out.rows}
    assert rows["log"]["class"] == CORRUPT and rows["log"]["action"] == "none"
    assert all(r["action"] in ("none", "not rebuilt") for r in out.rows)
    assert any(r["action"] == "not rebuilt" and "cut the tail first" in (r["action_detail"] or "") for r in out.rows)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def _rewrite_batch(data: bytearray, position: int, *, magic=None, count=None, flip=False, fix_crc=True) -> None:
    if flip:
        data[position + 70] ^= 0xFF              # inside the CRC-32C's range (the magic byte is not)
    if magic is not None:
        data[position + rb.MAGIC_OFFSET] = magic & 0xFF
    if count is not None:
        struct.pack_into(">i", data, position + 57, count)
    if fix_crc:
        size = struct.unpack_from(">i", data, position + 8)[0] + 12
        struct.pack_into(">I", data, position + rb.CRC_OFFSET, rb.compute_crc(bytes(data[position:position + size])))


@pytest.mark.parametrize("change, kafka_keeps", [
    (dict(magic=3), True),                  # a CRC-valid batch with magic > 2: Kafka takes it as v2 and keeps it
    (dict(magic=3, flip=True, fix_crc=False), False),  # ... with a bad CRC: recovery truncates there
    (dict(count=-1), True),                 # a negative record count under a valid CRC: Kafka never looks
    (dict(magic=-126), False),              # a negative magic is read as legacy and fails its CRC-32
])
def test_the_tail_is_cut_exactly_where_kafkas_recovery_cuts(tmp_path, change, kafka_keeps):
    folder = partition(tmp_path, segments=1)
    log = seg(folder, 0)
    positions, _sizes = _batch_positions(log)
    at = positions[len(positions) // 2]
    data = bytearray(log.read_bytes())
    _rewrite_batch(data, at, **change)
    log.write_bytes(bytes(data))
    cut = truncate_corrupt_tail(log)
    if kafka_keeps:
        assert cut is None and log.stat().st_size == len(data)
    else:
        assert cut.position == at and cut.side_file.read_bytes() == bytes(data[at:])


def test_a_valid_txnindex_is_kept_when_the_producer_state_is_unknown(tmp_path):
    """Found in review: a rebuild from partial producer state could only be less exact."""
    log = write_log(tmp_path / "d" / "tx-0", 2, [_data(2, 7, True), _marker(3, 7, cr.ABORT), _data(4)])
    entry = AbortedTxn(7, 0, 3, 0)               # began before this segment (offset 0): only the broker knew
    write_transaction_index(log.with_suffix(".txnindex"), TransactionIndex(2, [entry]))
    before = log.with_suffix(".txnindex").read_bytes()
    assert verify_segment(log, open_txns={}, txn_state_known=False).verdict("txnindex").status == VALID
    rows = {r["kind"]: r for r in reindex_partition(log.parent, include_active=True, verify_only=False).rows}
    assert rows["txnindex"]["action"] == "not rebuilt" and "unknown" in rows["txnindex"]["action_detail"]
    assert log.with_suffix(".txnindex").read_bytes() == before
