"""write_segment writes a .log with the .index/.timeindex Kafka's recovery builds; iter_segment streams
bounded windows that add up to read_segment."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from kafkalog.log import records_io as segment
from kafkalog.errors import KafkalogError
from kafkalog.format.file_records import scan_batches
from kafkalog.index.offset_index import read_offset_index
from kafkalog.index.time_index import read_time_index


def _table(n=3000, start=1000):
    rng = np.random.default_rng(7)
    ts = 1_700_000_000_000 + np.cumsum(rng.integers(-50, 200, n))      # not monotonic: CreateTime as produced
    return pa.table({
        "offset": pa.array(np.arange(start, start + n), pa.int64()),
        "timestamp": pa.array(ts, pa.timestamp("ms", tz="UTC")),
        "key": pa.array([b"k%d" % (i % 97) for i in range(n)], pa.binary()),
        "value": pa.array([b"v" * int(rng.integers(0, 300)) for _ in range(n)], pa.binary()),
    })


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_written_segment_and_its_indexes(tmp_path, compression):
    table = _table()
    log = segment.write_segment(tmp_path / "t-0", table, compression=compression, batch_bytes=1024)
    assert log.name == "00000000000000001000.log"
    batches = scan_batches(log).batches
    oi = read_offset_index(log.with_suffix(".index"))
    ti = read_time_index(log.with_suffix(".timeindex"))
    oi.sanity_check()
    ti.sanity_check()
    assert len(oi) > 0 and oi.base_offset == 1000
    pos_to_last = dict(zip(batches.column("position").to_pylist(), batches.column("lastOffset").to_pylist()))
    for off, pos in zip(oi.offsets.tolist(), oi.positions.tolist()):
        assert pos_to_last[pos] == off, "an entry maps a batch's last offset to its start (recovery)"
    # the roll/close entry: the segment's max timestamp, at the earliest batch carrying it
    max_ts = max(batches.column("maxTimestamp").to_pylist())
    first_with_max = batches.filter(pa.compute.equal(batches.column("maxTimestamp"), max_ts)).column("lastOffset")[0]
    assert ti.last_entry() == (max_ts, first_with_max.as_py())
    assert np.all(np.diff(ti.timestamps) > 0)
    back = segment.read_segment(log)
    assert back.column("offset").equals(table.column("offset"))
    assert back.column("value").equals(table.column("value"))
    assert back.column("timestamp").equals(table.column("timestamp"))


def test_existing_segment_is_not_replaced(tmp_path):
    segment.write_segment(tmp_path, _table(10))
    with pytest.raises(KafkalogError) as e:
        segment.write_segment(tmp_path, _table(10))
    assert "already exists" in str(e.value)
    segment.write_segment(tmp_path, _table(10), overwrite=True)
    assert not list(tmp_path.glob("*.tmp"))


def test_stream_windows_are_bounded_and_add_up(tmp_path):
    log = segment.write_segment(tmp_path / "t-0", _table(20_000), batch_bytes=2048)
    whole = segment.read_segment(log)
    parts = list(segment.iter_segment(log, window_bytes=64 << 10))
    assert len(parts) > 10
    assert max(p.nbytes for p in parts) < 1 << 20
    assert pa.Table.from_batches(parts).equals(whole)
    for threads in (1, 3):
        assert segment.read_segment(log, window_bytes=64 << 10, threads=threads).equals(whole)


def test_windows_share_a_file_evenly_between_threads():
    mib = 1 << 20
    assert segment.even_window_bytes(85_600_000, 16 * mib, 2) == 85_600_000 // 6 + 1   # 6, not 5 + a bit
    assert segment.even_window_bytes(9 * mib, 16 * mib, 2) == 9 * mib // 2              # one per thread
    assert segment.even_window_bytes(9 * mib, 16 * mib, 1) == 16 * mib
    assert segment.even_window_bytes(mib // 2, 16 * mib, 2) == 16 * mib                 # too small to cut
    assert segment.even_window_bytes(3 * mib, 2 * mib, 4) == mib                         # not below 1 MiB
    assert segment.even_window_bytes(90 * mib, 64 << 10, 2) == 64 << 10                  # never above the bound


def test_a_small_file_is_decoded_by_every_thread(tmp_path):
    log = segment.write_segment(tmp_path / "t-0", _table(60_000), compression="lz4")
    assert (1 << 20) < log.stat().st_size < segment.DEFAULT_WINDOW_BYTES
    parts = list(segment.iter_segment(log, threads=2))
    assert len(parts) == 2
    assert pa.Table.from_batches(parts).equals(segment.read_segment(log, threads=1))


def test_a_window_of_more_batches_than_its_header_slots_ends_early(tmp_path):
    """Header arrays start at FIRST_WINDOW_SLOTS batches and grow 4x after a window fills them."""
    n = segment.FIRST_WINDOW_SLOTS * 5 + 7
    log = segment.write_segment(tmp_path / "t-0", _table(n), batch_bytes=1)      # one record per batch
    whole = segment.read_segment(log, threads=1)
    assert whole.column("offset").to_pylist() == _table(n).column("offset").to_pylist()
    parts = list(segment.iter_segment(log, threads=1))          # one thread: windows are not cut by bytes
    assert [p.num_rows for p in parts] == [segment.FIRST_WINDOW_SLOTS, 4 * segment.FIRST_WINDOW_SLOTS, 7]
    assert pa.Table.from_batches(parts).equals(whole)


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_threaded_windows_for_every_codec(tmp_path, compression):
    """Windows decode concurrently; codec contexts must not be shared between threads."""
    log = segment.write_segment(tmp_path / "t-0", _table(30_000), compression=compression, batch_bytes=4096)
    one = segment.read_segment(log, threads=1, window_bytes=32 << 10)
    for _ in range(3):
        assert segment.read_segment(log, threads=4, window_bytes=32 << 10).equals(one)


def test_public_api_at_package_top(tmp_path):
    import kafkalog
    log = kafkalog.write_segment(tmp_path / "t-0", _table(50))
    assert kafkalog.read_segment(log).num_rows == 50
    assert sum(b.num_rows for b in kafkalog.iter_segment(log)) == 50
    assert kafkalog.scan_batches(log).valid_bytes == log.stat().st_size
