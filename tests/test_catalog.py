"""The segment catalog: offsets, sizes and largest timestamps as a broker loads them (``LogLoader.load``,
``LogSegment.largestTimestamp``)."""
from __future__ import annotations

import os

import pyarrow as pa

from kafkalog.catalog import CATALOG_SCHEMA, LEFTOVER, catalog_table
from kafkalog.log.local_log import load_partition_path
from kafkalog.log.segment import FROM_BATCHES, FROM_MTIME, FROM_TIMEINDEX
from kafkalog.fs.names import format_segment_file_name

from logdirs import make_partition, write_checkpoints

MTIME = 1_700_000_000_000


def test_rolled_segments_use_the_last_time_index_entry(tmp_path):
    folder = make_partition(tmp_path, "orders", 0, [[5, 90, 20, 40], [100, 100, 300], [7, 8]], mtime_ms=MTIME)
    state = load_partition_path(folder)
    assert [s.base_offset for s in state.segments] == [0, 4, 7]
    assert [s.next_base_offset for s in state.segments] == [4, 7, None]
    assert [(s.largest_timestamp_ms, s.largest_timestamp_source) for s in state.segments] == [
        (90, FROM_TIMEINDEX), (300, FROM_TIMEINDEX), (8, FROM_BATCHES)]
    assert state.log_start_offset == 0 and state.log_end_offset == 9
    assert state.high_watermark_checkpoint is None and state.problems == []


def test_mtime_fallback_without_time_index_or_timestamps(tmp_path):
    folder = make_partition(tmp_path, "t", 0, [[10, 11], [-1, -1], [12]], mtime_ms=MTIME)
    os.unlink(folder / format_segment_file_name(0, "timeindex"))
    state = load_partition_path(folder)
    assert [(s.largest_timestamp_ms, s.largest_timestamp_source) for s in state.segments[:2]] == [
        (MTIME, FROM_MTIME), (MTIME, FROM_MTIME)]


def test_active_segment_ignores_a_zero_padded_time_index(tmp_path):
    folder = make_partition(tmp_path, "t", 0, [[1, 2], [50, 60, 55]])
    with open(folder / format_segment_file_name(2, "timeindex"), "ab") as f:
        f.truncate(10_485_756)                      # a running broker's preallocated index
    state = load_partition_path(folder)
    assert (state.segments[-1].largest_timestamp_ms, state.segments[-1].largest_timestamp_source) == (60, FROM_BATCHES)
    assert state.log_end_offset == 5


def test_corrupt_time_index_is_a_problem_and_falls_back_to_mtime(tmp_path):
    folder = make_partition(tmp_path, "t", 0, [[1, 2], [3]], mtime_ms=MTIME)
    with open(folder / format_segment_file_name(0, "timeindex"), "ab") as f:
        f.write(b"\x00" * 5)                         # no longer a multiple of 12
    state = load_partition_path(folder)
    assert state.segments[0].largest_timestamp_source == FROM_MTIME
    assert len(state.problems) == 1 and "00000000000000000000.timeindex" in state.problems[0]


def test_torn_tail_of_the_active_segment(tmp_path):
    folder = make_partition(tmp_path, "t", 0, [[1, 2], [3, 4, 5, 6]])
    log = folder / format_segment_file_name(2, "log")
    data = log.read_bytes()
    log.write_bytes(data[:-10])                      # the last batch is cut short
    state = load_partition_path(folder)
    assert state.log_end_offset < 6
    assert any("valid bytes" in p and str(log) in p for p in state.problems)


def test_offsets_from_the_checkpoints_and_an_empty_active_segment(tmp_path):
    make_partition(tmp_path, "t", 0, [[1, 2, 3], [4, 5]], first_offset=100, empty_active=True)
    write_checkpoints(tmp_path, high_watermarks={("t", 0): 104}, log_start_offsets={("t", 0): 50})
    state = load_partition_path(tmp_path / "t-0")
    assert state.log_start_offset == 100           # max(checkpoint, first base offset)
    assert state.log_end_offset == 105 and state.segments[-1].size == 0
    assert state.high_watermark_checkpoint == 104
    write_checkpoints(tmp_path, log_start_offsets={("t", 0): 102})
    assert load_partition_path(tmp_path / "t-0").log_start_offset == 102


def test_catalog_rows_include_leftovers(tmp_path):
    folder = make_partition(tmp_path, "t", 3, [[1], [2], [3]])
    for suffix in ("log", "index"):
        name = format_segment_file_name(0, suffix)
        os.rename(folder / name, folder / f"{name}.deleted")
    (folder / "00000000000000000001.log.cleaned").write_bytes(b"x" * 7)
    table = catalog_table([load_partition_path(folder)])
    assert table.schema == CATALOG_SCHEMA
    rows = table.to_pylist()
    segments = [r for r in rows if r["kind"] == "segment"]
    leftovers = [r for r in rows if r["kind"] == LEFTOVER]
    assert [r["base_offset"] for r in segments] == [1, 2]
    assert [r["is_active"] for r in segments] == [False, True]
    assert {(r["base_offset"], tuple(r["files"])) for r in leftovers} == {
        (0, ("00000000000000000000.index.deleted", "00000000000000000000.log.deleted",
             "00000000000000000000.timeindex")),
        (1, ("00000000000000000001.log.cleaned",))}
    assert all(r["topic"] == "t" and r["partition"] == 3 for r in rows)
    assert pa.Table.from_pylist(rows, schema=CATALOG_SCHEMA).num_rows == len(rows)


def test_a_folder_that_is_not_a_partition_is_an_error_row(tmp_path):
    from udfs.partitions import catalog_folder

    (tmp_path / "lost+found").mkdir()
    rows = catalog_folder(str(tmp_path), str(tmp_path / "lost+found"), {})
    assert len(rows) == 1 and rows[0]["kind"] == "error"
    assert "lost+found" in rows[0]["problems"][0] and "refuses" in rows[0]["problems"][0]
