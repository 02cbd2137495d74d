"""The ``format("kafkalog")`` data source against Spark's own Parquet reader, on the same records.

Data (generated once, cached under ``--dir``/datasource-*): topic ``bench``, 4 partitions, each holding
the same ``--records`` records (default 2.9M: ~1.4 GB of records, ~1.04 GB of ``.log`` in all) of ``bench.gen`` (16-byte keys,
100-byte text-like values, 16 KiB batches) in a different codec — none, snappy, lz4, zstd — with
CreateTime timestamps spread evenly over 24 hours (±2 s of jitter, so not monotonic) and cut into 24
hourly segments with the ``.index``/``.timeindex`` Kafka's recovery builds; the last one is active.
The same records are written once as Parquet (pyarrow, snappy; the Kafka source's seven columns, one
file per segment) for Spark's Parquet reader.

Measured, in one process:

* ``iter_segment`` on one thread over every ``.log`` (decode + CRC): MB/s of ``.log``;
* one SparkSession on ``local[*]`` (``udfs.session.build_session``), after a warm-up query on each
  reader: ``groupBy(partition).agg(max(offset), sum(length(value)))`` over everything, by the data
  source and by Spark's Parquet reader (median of ``--repeat``), MB/s of ``.log`` both (the same
  records), and their ratio;
* a 1-hour slice of a 24-hour partition, two ways: the Kafka-source way
  (``startingTimestamp``/``endingTimestamp``: Kafka's ListOffsets gives the offset range), and a
  ``where partition = 0 and timestamp >= t and timestamp < t + 1h`` filter, which Spark applies to
  every row (the source prunes by no filter: ``udfs.kafkalog_source`` says why): rows, time, and the
  bytes of ``.log`` the tasks read (each task counts them and writes them to ``kafkalog.metricsDir``)
  against the partition's bytes.

Every query is of a DataFrame loaded for it (``load()`` plans the read), as a fresh DataFrame answers.

    python -m bench.datasource [--records 2300000] [--repeat 3] [--json out.json]
    python -m bench.datasource --quick     # 300k records per partition
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.gen import BATCH_BYTES, Records, frame_batch, make_batches, make_records
from kafkalog.format import compression as C

DEFAULT_DIR = "/tmp/kafkalog-bench"
DEFAULT_RECORDS = 2_900_000
QUICK_RECORDS = 300_000
CODECS = ("none", "snappy", "lz4", "zstd")
TOPIC = "bench"
HOURS = 24
HOUR_MS = 3_600_000
TS0 = 1_700_000_000_000 - 1_700_000_000_000 % HOUR_MS   # on the hour
JITTER_MS = 2_000
SLICE_HOUR = 12
FORMAT_VERSION = 1


def _hourly_records(n: int) -> Records:
    recs = make_records(n)
    rng = np.random.default_rng(7)
    ts = TS0 + (np.arange(n, dtype=np.int64) * (HOURS * HOUR_MS)) // n
    ts = np.clip(ts + rng.integers(-JITTER_MS, JITTER_MS + 1, n), TS0, TS0 + HOURS * HOUR_MS - 1)
    return Records(recs.keys, recs.values, ts.astype(np.int64))


def _write_partition(folder: Path, batches, codec: int) -> None:
    from kafkalog.index.builder import build_indexes
    from kafkalog.index.offset_index import write_offset_index
    from kafkalog.index.time_index import write_time_index
    from kafkalog.fs.names import format_segment_file_name

    folder.mkdir(parents=True, exist_ok=True)
    hours = np.array([(b.base_ts - TS0) // HOUR_MS for b in batches])
    for h in range(HOURS):
        chosen = [batches[i] for i in np.flatnonzero(hours == h)]
        if not chosen:
            continue
        base = chosen[0].base_offset
        frames = [frame_batch(b, codec) for b in chosen]
        sizes = np.array([len(f) for f in frames], np.int64)
        positions = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
        (folder / format_segment_file_name(base, "log")).write_bytes(b"".join(frames))
        oi, ti = build_indexes(base_offset=base, positions=positions, sizes=sizes,
                               last_offsets=[b.base_offset + b.count - 1 for b in chosen],
                               max_timestamps=[b.max_ts for b in chosen])
        write_offset_index(folder / format_segment_file_name(base, "index"), oi)
        write_time_index(folder / format_segment_file_name(base, "timeindex"), ti)


def ensure_data(root: Path, n: int, log=print) -> Path:
    """The log dir (and its Parquet copy beside it), generated once per parameter set."""
    base = root / f"datasource-{n}-v{FORMAT_VERSION}"
    log_dir, parquet, done = base / "logs", base / "parquet", base / "COMPLETE"
    if done.exists():
        return base
    shutil.rmtree(base, ignore_errors=True)
    t0 = time.perf_counter()
    recs = _hourly_records(n)
    batches = make_batches(recs, BATCH_BYTES)
    log(f"generated {n} records in {len(batches)} batches in {time.perf_counter() - t0:.1f} s")
    for p, name in enumerate(CODECS):
        t1 = time.perf_counter()
        _write_partition(log_dir / f"{TOPIC}-{p}", batches, C.parse_codec(name))
        log(f"  partition {p} ({name}): {_dir_bytes(log_dir / f'{TOPIC}-{p}') / 1e6:.0f} MB of .log "
            f"in {time.perf_counter() - t1:.1f} s")
    _write_parquet(log_dir, parquet)
    done.write_text("ok\n")
    return base


def _write_parquet(log_dir: Path, out: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    import kafkalog

    out.mkdir(parents=True, exist_ok=True)
    for log in sorted(log_dir.glob("*/*.log")):
        t = kafkalog.read_segment(log)
        t = pa.table({"key": t["key"], "value": t["value"], "topic": t["topic"], "partition": t["partition"],
                      "offset": t["offset"], "timestamp": t["timestamp"].cast(pa.timestamp("us", tz="UTC")),
                      "timestampType": t["timestampType"]})
        pq.write_table(t, out / f"{log.parent.name}-{log.stem}.parquet", compression="snappy")


def _dir_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.log"))


def iter_segment_mb_s(log_dir: Path) -> tuple[float, int, int]:
    import kafkalog

    files = sorted(log_dir.glob("*/*.log"))
    total = sum(f.stat().st_size for f in files)
    for f in files[:2]:                         # warm numba and the page cache of a few files
        for _ in kafkalog.iter_segment(f, threads=1):
            pass
    t0 = time.perf_counter()
    rows = 0
    for f in files:
        for batch in kafkalog.iter_segment(f, threads=1):
            rows += batch.num_rows
    return total / 1e6 / (time.perf_counter() - t0), total, rows


def tasks_in_process(log_dir: Path) -> tuple[float, int]:
    """The data source's own work without Spark: plan, then every task's read_task (decode, filter,
    shape to Spark's Arrow types) one after the other in this process, batches dropped."""
    from kafkalog.source.options import parse_source_options
    from kafkalog.source.scan_plan import Bounds, plan_scan
    from udfs.kafkalog_source import read_task, source_schema
    from pyspark.sql.pandas.types import to_arrow_schema

    opts = parse_source_options({"path": str(log_dir), "subscribe": TOPIC})
    target = to_arrow_schema(source_schema(opts), timezone="UTC")
    t0 = time.perf_counter()
    tasks = plan_scan(opts, Bounds(), parallelism=os.cpu_count() or 1)
    rows = 0
    for task in tasks:
        for batch in read_task(task, target):
            rows += batch.num_rows
    return time.perf_counter() - t0, len(tasks)


def _timed(fn, repeat: int):
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), result


def _read_metrics(folder: Path) -> dict:
    out = {"bytes_read": 0, "rows": 0, "tasks": 0}
    for f in folder.glob("task-*.json"):
        m = json.loads(f.read_text())
        out["bytes_read"] += m["bytes_read"]
        out["rows"] += m["rows"]
        out["tasks"] += 1
    return out


def run(n: int, repeat: int, root: Path, log=print) -> dict:
    from pyspark.sql import functions as F

    from udfs.session import build_session

    base = ensure_data(root, n, log)
    log_dir, parquet = base / "logs", base / "parquet"
    log_bytes = sum(_dir_bytes(d) for d in log_dir.iterdir())
    part0 = _dir_bytes(log_dir / f"{TOPIC}-0")
    log(f"log dir: {log_bytes / 1e6:.0f} MB of .log, {4 * n} records; partition 0: {part0 / 1e6:.0f} MB")

    one_thread, _, rows = iter_segment_mb_s(log_dir)
    log(f"iter_segment, one thread: {one_thread:.0f} MB/s ({rows} rows)")
    tasks_s, n_tasks = tasks_in_process(log_dir)
    log(f"the source's {n_tasks} tasks run one after the other in one process, no Spark: {tasks_s:.2f} s")

    spark = build_session("kafkalog-bench-datasource", conf={
        "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4", "spark.driver.memory": "3g"})
    cores = spark.sparkContext.defaultParallelism

    def agg(df):
        return sorted(tuple(r) for r in df.groupBy("partition").agg(
            F.max("offset"), F.sum(F.length("value"))).collect())

    def source():
        return spark.read.format("kafkalog").option("subscribe", TOPIC).load(str(log_dir))

    expected = agg(spark.read.parquet(str(parquet)))             # warm-up, both
    if agg(source()) != expected:
        raise AssertionError("the data source and Parquet disagree on the aggregation")
    pq_s, pq_min, _ = _timed(lambda: agg(spark.read.parquet(str(parquet))), repeat)
    ds_s, ds_min, got = _timed(lambda: agg(source()), repeat)
    assert got == expected
    log(f"full aggregation: Parquet {pq_s:.2f} s, data source {ds_s:.2f} s -> {pq_s / ds_s:.2f}x Parquet's speed")

    lo = TS0 + SLICE_HOUR * HOUR_MS
    hi = lo + HOUR_MS
    slices = {}
    for how in ("startingTimestamp/endingTimestamp", "where timestamp (filter, no pruning)"):
        def query(metrics: str, how=how):
            reader = spark.read.format("kafkalog").option("kafkalog.metricsDir", metrics)
            if how.startswith("starting"):
                df = (reader.option("assign", json.dumps({TOPIC: [0]}))
                      .option("startingTimestamp", str(lo)).option("endingTimestamp", str(hi)).load(str(log_dir)))
            else:
                df = (reader.option("subscribe", TOPIC).load(str(log_dir))
                      .where((F.col("partition") == 0) & (F.col("timestamp") >= F.timestamp_millis(F.lit(lo)))
                             & (F.col("timestamp") < F.timestamp_millis(F.lit(hi)))))
            return df.agg(F.count("*"), F.min("timestamp"), F.max("timestamp")).collect()[0]

        times, metrics = [], None
        for _ in range(repeat + 1):
            folder = tempfile.mkdtemp(prefix="kafkalog-metrics-")
            t0 = time.perf_counter()
            row = query(folder)
            times.append(time.perf_counter() - t0)
            metrics = _read_metrics(Path(folder))
            shutil.rmtree(folder, ignore_errors=True)
        times = times[1:]      # the first run is the warm-up
        slices[how] = dict(rows=row[0], seconds=round(statistics.median(times), 3), bytes_read=metrics["bytes_read"],
                           fraction=metrics["bytes_read"] / part0, tasks=metrics["tasks"])
        log(f"slice ({how}): {row[0]} rows in {statistics.median(times):.2f} s, read "
            f"{metrics['bytes_read'] / 1e6:.1f} MB = {100 * metrics['bytes_read'] / part0:.2f}% of the partition")
    spark.stop()
    return dict(records=4 * n, log_bytes=log_bytes, partition_bytes=part0, cores=cores,
                iter_segment_mb_s=round(one_thread, 1), tasks_in_process_s=round(tasks_s, 3), tasks=n_tasks,
                parquet_s=round(pq_s, 3), parquet_min_s=round(pq_min, 3), source_s=round(ds_s, 3),
                source_min_s=round(ds_min, 3), parquet_mb_s=round(log_bytes / 1e6 / pq_s, 1),
                source_mb_s=round(log_bytes / 1e6 / ds_s, 1), ratio=round(pq_s / ds_s, 3), slices=slices)


def table(r: dict) -> str:
    lines = [
        f"{r['records']:,} records, {r['log_bytes'] / 1e6:,.0f} MB of .log (4 partitions: none, snappy, lz4, zstd; "
        f"24 hourly segments each), local[*] = {r['cores']} cores",
        "",
        "| measure | result |",
        "|---|---|",
        f"| `iter_segment`, one thread | {r['iter_segment_mb_s']:,.0f} MB/s of .log |",
        f"| full `groupBy(partition).agg(max(offset), sum(length(value)))`: Spark Parquet reader | "
        f"{r['parquet_s']:.2f} s ({r['parquet_mb_s']:,.0f} MB/s of .log-equivalent) |",
        f"| the same, `format(\"kafkalog\")` | {r['source_s']:.2f} s ({r['source_mb_s']:,.0f} MB/s of .log) |",
        f"| data source ÷ Parquet speed | **{r['ratio']:.2f}×** |",
        f"| the source's {r['tasks']} tasks in one process without Spark (decode, filter, shape), serially | "
        f"{r['tasks_in_process_s']:.2f} s: {r['tasks_in_process_s'] / r['cores'] / r['source_s'] * 100:.0f}% of the "
        f"query's {r['cores']}-core time |",
    ]
    for how, s in r["slices"].items():
        lines.append(f"| 1-hour slice of partition 0, {how} | {s['rows']:,} rows, {s['seconds']:.2f} s, "
                     f"{s['bytes_read'] / 1e6:.1f} MB of .log read = **{100 * s['fraction']:.2f}%** of the "
                     f"partition's {r['partition_bytes'] / 1e6:.0f} MB ({s['tasks']} tasks) |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=DEFAULT_DIR)
    ap.add_argument("--records", type=int, default=DEFAULT_RECORDS, help="records per partition")
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_RECORDS} records per partition")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    n = QUICK_RECORDS if args.quick else args.records
    result = run(n, args.repeat, Path(args.dir), log=lambda m: print(m, file=sys.stderr, flush=True))
    print(table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
