"""The export job against the data source's plain scan of the same bytes, and restore against
``write_segment`` in one process — one run, one SparkSession, ratios within it.

Data: ``bench.datasource``'s log dir (topic ``bench``, 4 partitions in none / snappy / lz4 / zstd, 24
hourly segments each, 16-byte keys, 100-byte values), generated once and cached under ``--dir``.

Measured:

* **scan**: ``format("kafkalog")`` with the columns the export writes (headers, batch columns, control
  records) into Spark's ``noop`` sink (every row produced, nothing written): MB/s of ``.log``;
* **export**: ``spark-submit.sh export``'s ``main`` into a new Delta table (Trigger.AvailableNow, one
  micro-batch unless ``--max-records-per-batch``): MB/s of the same ``.log``; the ratio export ÷ scan
  (target >= 0.5);
* **restore**: the table back into a new log dir with ``udfs.restore_job.restore_table`` (what the job
  runs: one Spark task per partition reading the table's Parquet files), MB/s of ``.log`` written, against ``kafkalog.write_segment`` of the same records (each
  partition read with ``read_segment``, written as one segment, one process, one thread).

    python -m bench.export [--records 1000000] [--repeat 1] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

from bench.datasource import DEFAULT_DIR, ensure_data

DEFAULT_RECORDS = 1_000_000


def _log_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*.log"))


def _timed(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def run(n: int, repeat: int, root: Path, max_records: int | None, log=print) -> dict:
    import pyarrow as pa

    import kafkalog
    from udfs import delta_tables, export_job, restore_job
    from udfs.session import build_session

    base = ensure_data(root, n, log=log)
    logs = base / "logs"
    size = _log_bytes(logs)
    work = root / "export-bench"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    spark = build_session("kafkalog-bench-export")
    log(f"{size / 1e6:.0f} MB of .log in {logs}")

    def scan():
        (spark.read.format("kafkalog").option("includeHeaders", "true").option("includeBatchColumns", "true")
         .option("includeControlRecords", "true").load(str(logs)).write.format("noop").mode("overwrite").save())

    scan()                                                     # warm-up: workers, numba cache
    scan_s, _ = _timed(scan, repeat)
    runs = iter(range(repeat))

    def export():
        i = next(runs)
        args = ["--log-dirs", str(logs), "--table", str(work / f"table-{i}"), "--checkpoint", str(work / f"ckpt-{i}")]
        if max_records:
            args += ["--max-records-per-batch", str(max_records)]
        assert export_job.main(args, spark=spark) == 0
        return work / f"table-{i}"

    export_s, table = _timed(export, repeat)
    rows = delta_tables.read_table(spark, table, engine=delta_tables.RS).count()

    restores = iter(range(repeat))

    def restore():
        out = work / f"restored-{next(restores)}"
        restore_job.restore_table(spark, str(table), out)
        return out

    restore_s, restored = _timed(restore, repeat)
    restored_bytes = _log_bytes(restored)

    def write_segments():
        t_write = 0.0
        for folder in sorted(p for p in logs.iterdir() if p.is_dir()):
            records = pa.concat_tables([kafkalog.read_segment(s) for s in sorted(folder.glob("*.log"))])
            out = work / "write_segment" / folder.name
            shutil.rmtree(out, ignore_errors=True)
            t0 = time.perf_counter()
            kafkalog.write_segment(out, records)
            t_write += time.perf_counter() - t0
        return t_write

    ws_s = statistics.median(write_segments() for _ in range(repeat))
    ws_bytes = _log_bytes(work / "write_segment")
    r = dict(records=rows, log_bytes=size, scan_s=round(scan_s, 3), export_s=round(export_s, 3),
             scan_mb_s=round(size / scan_s / 1e6, 1), export_mb_s=round(size / export_s / 1e6, 1),
             export_vs_scan=round(scan_s / export_s, 3), restore_s=round(restore_s, 3),
             restore_bytes=restored_bytes, restore_mb_s=round(restored_bytes / restore_s / 1e6, 1),
             write_segment_s=round(ws_s, 3), write_segment_bytes=ws_bytes,
             write_segment_mb_s=round(ws_bytes / ws_s / 1e6, 1),
             restore_vs_write_segment=round((restored_bytes / restore_s) / (ws_bytes / ws_s), 3),
             max_records_per_batch=max_records, repeat=repeat,
             parallelism=spark.sparkContext.defaultParallelism)
    return r


def table(r: dict) -> str:
    return "\n".join([
        "| measure | seconds | MB/s of .log |",
        "|---|---|---|",
        f"| data source plain scan (export's columns, noop sink) | {r['scan_s']} | {r['scan_mb_s']} |",
        f"| export job (new Delta table) | {r['export_s']} | {r['export_mb_s']} |",
        f"| **export ÷ scan (target >= 0.5)** | | **{r['export_vs_scan']}** |",
        f"| restore job (table -> new log dir) | {r['restore_s']} | {r['restore_mb_s']} |",
        f"| write_segment, one process | {r['write_segment_s']} | {r['write_segment_mb_s']} |",
        f"| **restore ÷ write_segment** | | **{r['restore_vs_write_segment']}** |",
    ])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.export", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=DEFAULT_RECORDS, help="records per partition")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--max-records-per-batch", type=int, help="export micro-batch size (default: one batch)")
    parser.add_argument("--dir", default=DEFAULT_DIR)
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args(argv)
    r = run(args.records, args.repeat, Path(args.dir), args.max_records_per_batch,
            log=lambda m: print(m, file=sys.stderr))
    print(table(r))
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
