"""Decoder memory bounded whatever the input (issue 18, items 6 and 7).

The hostile inputs: a 24 KB zstd segment whose one CRC-valid batch holds 37 million minimal records
(~250 MiB decompressed, under the 256 MiB cap), and a 32 KB zstd bomb (1 GiB of zeros). Each is read
in a subprocess under an address-space limit (RLIMIT_AS, 3 GiB); a read either succeeds or raises a
KafkalogError, never MemoryError/OSError, and peak RSS stays within ~10× the decompression cap.
"""
from __future__ import annotations

import json
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import crc32c
import pyarrow as pa
import pytest
import zstandard

import kafkalog.format.batch_slices as batch_slices
from kafkalog.errors import InvalidRecordError, KafkalogError
from kafkalog.format.compression import DEFAULT_MAX_BATCH_BYTES
from kafkalog.log.records_io import iter_segment, read_segment

from engines import ENGINES

REPO = Path(__file__).resolve().parents[2]
ADDRESS_SPACE = 3 << 30
PEAK_RSS_LIMIT = 10 * DEFAULT_MAX_BATCH_BYTES
MINIMAL_RECORD = b"\x0c\x00\x00\x00\x01\x01\x00"   # length 6, attributes, ts delta 0, offset delta 0, null key/value, 0 headers
ZSTD = 4


def v2_batch(records: bytes, count: int, *, codec: int = ZSTD, base_offset: int = 0) -> bytes:
    """One CRC-valid v2 batch holding ``records`` (the records region, before compression)."""
    payload = zstandard.ZstdCompressor(level=3).compress(records) if codec == ZSTD else records
    body = struct.pack(">hiqqqhii", codec, count - 1, 0, 0, -1, -1, -1, count) + payload
    return struct.pack(">qiibI", base_offset, 4 + 1 + 4 + len(body), 0, 2, crc32c.crc32c(body)) + body


def record(offset_delta: int, value: bytes) -> bytes:
    from kafkalog.format.varint import write_varint
    body = bytearray(b"\x00\x00")                       # attributes, timestamp delta 0
    write_varint(offset_delta, body)
    body += b"\x01"                                     # null key
    write_varint(len(value), body)
    body += value + b"\x00"
    out = bytearray()
    write_varint(len(body), out)
    return bytes(out + body)


@pytest.fixture(scope="module")
def hostile_segment(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("hostile") / "t-0"
    folder.mkdir()
    path = folder / "00000000000000000000.log"
    count = 37_000_000
    path.write_bytes(v2_batch(MINIMAL_RECORD * count, count))
    assert path.stat().st_size < 32 << 10
    return path


@pytest.fixture(scope="module")
def zstd_bomb(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("bomb") / "t-0"
    folder.mkdir()
    co = zstandard.ZstdCompressor(level=19).compressobj()
    zeros = bytes(1 << 20)
    payload = b"".join([co.compress(zeros) for _ in range(1024)] + [co.flush()])
    body = struct.pack(">hiqqqhii", ZSTD, 999, 0, 0, -1, -1, -1, 1000) + payload
    path = folder / "00000000000000000000.log"
    path.write_bytes(struct.pack(">qiibI", 0, 9 + len(body), 0, 2, crc32c.crc32c(body)) + body)
    return path


LIMITED = """\
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
from kafkalog.errors import KafkalogError
out = {{}}
try:
{body}
except KafkalogError as e:
    out["error"] = type(e).__name__ + ": " + str(e)
out["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(out))
"""


def run_limited(body: str, *args, limit: int = ADDRESS_SPACE, timeout: int = 300) -> dict:
    script = LIMITED.format(limit=limit, body=textwrap.indent(textwrap.dedent(body), " " * 4))
    done = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=str(REPO))
    assert done.returncode == 0, done.stderr[-3000:]          # no MemoryError/OSError traceback
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_iter_segment_streams_bounded_batches_from_one_huge_batch(hostile_segment):
    out = run_limited("""
        from kafkalog.log.records_io import iter_segment
        rows = biggest = 0
        for b in iter_segment(sys.argv[1]):
            rows += b.num_rows
            biggest = max(biggest, b.num_rows)
        out.update(rows=rows, biggest=biggest)
    """, hostile_segment)
    assert "error" not in out, out
    assert out["rows"] == 37_000_000 and out["biggest"] <= batch_slices.SLICE_RECORDS
    assert out["peak"] <= PEAK_RSS_LIMIT, out


def test_read_segment_python_engine_succeeds_or_raises_a_kafkalog_error(hostile_segment):
    out = run_limited("""
        from kafkalog.log.records_io import read_segment
        out["rows"] = read_segment(sys.argv[1], engine="reference").num_rows
    """, hostile_segment)
    assert out.get("rows") == 37_000_000 or out["error"].startswith("OutOfMemoryError"), out
    if "error" in out:
        assert str(hostile_segment) in out["error"] and "iter_segment" in out["error"]
    assert out["peak"] <= PEAK_RSS_LIMIT, out


def test_read_segment_accel_succeeds_or_raises_a_kafkalog_error(hostile_segment):
    out = run_limited("""
        from kafkalog.log.records_io import read_segment
        out["rows"] = read_segment(sys.argv[1]).num_rows
    """, hostile_segment)
    assert out.get("rows") == 37_000_000 or out["error"].startswith("OutOfMemoryError"), out
    assert out["peak"] <= PEAK_RSS_LIMIT, out


def test_dump_deep_iteration_streams_a_huge_batch(hostile_segment):
    """Records are listed as they are parsed (a chunk or a slice at a time), so the first lines come out
    and memory stays flat, on the per-record path and on the bulk one (slices of BULK_SLICE_RECORDS);
    the test stops after 350k lines."""
    for bulk in (False, True):
        out = run_limited("""
            import kafkalog.tools.dump.batch_walk as batch_walk
            from kafkalog.tools.dump.dumper import Dumper
            from kafkalog.tools.dump.options import DumpOptions
            batch_walk.RECORD_CHUNK = 100_000
            lines = 0
            for line in Dumper(DumpOptions(deep_iteration=True), bulk=sys.argv[2] == "True").dump_files([sys.argv[1]]):
                lines += line.text.count(b"\\n") if line.stream == "stdout-bytes" else 1
                if lines >= 350_000:
                    break
            out["lines"] = lines
        """, hostile_segment, str(bulk))
        assert out.get("lines", 0) >= 350_000, (bulk, out)
        assert out["peak"] <= PEAK_RSS_LIMIT, (bulk, out)


def test_a_rejected_bomb_is_freed_when_the_error_is_raised(zstd_bomb):
    """Issue 18 (7): six reads of a 32 KB zstd bomb grew RSS by 1.3 GB until the GC ran."""
    for engine in ("compiled", "reference"):
        out = run_limited("""
            import gc
            from kafkalog.errors import DecompressedSizeError
            from kafkalog.log.records_io import read_segment
            gc.disable()                                  # freed at the raise, not by the collector
            def rss():
                for line in open("/proc/self/status"):
                    if line.startswith("VmRSS"):
                        return int(line.split()[1]) * 1024
            sizes = []
            for _ in range(6):
                try:
                    read_segment(sys.argv[1], engine=sys.argv[2])
                except DecompressedSizeError:
                    sizes.append(rss())
            out["rss"] = sizes
        """, zstd_bomb, engine)
        assert len(out["rss"]) == 6, out
        assert out["rss"][-1] - out["rss"][0] < DEFAULT_MAX_BATCH_BYTES // 2, (engine, out)
        assert out["peak"] <= PEAK_RSS_LIMIT, out


# --- slicing is exact ------------------------------------------------------------------------------

def sliced_segment(tmp_path: Path, n: int = 2500, bad_at: int = -1, codec: int = ZSTD) -> Path:
    records = b"".join(record(i, b"v%d" % i) if i != bad_at else b"\x0c\x00\x00\x00\x01\x10\x00"
                       for i in range(n))
    folder = tmp_path / "s-0"
    folder.mkdir(exist_ok=True)
    path = folder / "00000000000000000000.log"
    small = v2_batch(record(0, b"first"), 1, codec=0, base_offset=0)
    big = v2_batch(records, n, codec=codec, base_offset=1)
    path.write_bytes(small + big + v2_batch(record(0, b"last"), 1, codec=0, base_offset=n + 1))
    return path


@pytest.mark.parametrize("codec", [0, ZSTD], ids=["none", "zstd"])
@pytest.mark.parametrize("engine", ENGINES)
def test_a_sliced_batch_gives_the_rows_an_unsliced_read_gives(tmp_path, monkeypatch, engine, codec):
    path = sliced_segment(tmp_path, codec=codec)
    whole = read_segment(path, engine=engine)
    monkeypatch.setattr(batch_slices, "SLICE_RECORDS", 1000)
    batches = list(iter_segment(path, engine=engine))
    assert max(b.num_rows for b in batches) <= 1000
    assert pa.Table.from_batches(batches).equals(whole)
    assert whole.num_rows == 2502 and whole.column("offset").to_pylist() == list(range(2502))


@pytest.mark.parametrize("engine", ENGINES)
def test_an_error_in_a_late_slice_comes_before_any_row_of_the_batch(tmp_path, monkeypatch, engine):
    path = sliced_segment(tmp_path, bad_at=2200)
    monkeypatch.setattr(batch_slices, "SLICE_RECORDS", 1000)
    rows = []
    with pytest.raises(InvalidRecordError) as info:
        for b in iter_segment(path, engine=engine):
            rows.extend(b.column("offset").to_pylist())
    assert rows == [0] and info.value.path == str(path)
    kept = read_segment(path, engine=engine, on_corrupt="stop")
    assert kept.column("offset").to_pylist() == [0]       # Kafka's recovery keeps the batches before it


def test_out_of_memory_is_a_kafkalog_error_naming_file_and_batch(tmp_path, monkeypatch):
    path = sliced_segment(tmp_path)

    def no_memory(*_args, **_kwargs):
        raise MemoryError()
    monkeypatch.setattr(batch_slices, "SLICE_RECORDS", 1000)
    monkeypatch.setattr(batch_slices.BatchSlices, "validate", no_memory)
    with pytest.raises(KafkalogError) as info:
        read_segment(path, on_corrupt="stop")                 # not mistaken for corruption
    assert type(info.value).__name__ == "OutOfMemoryError"
    first_batch = len(v2_batch(record(0, b"first"), 1, codec=0))
    assert info.value.path == str(path) and info.value.position == first_batch   # the huge (second) batch
