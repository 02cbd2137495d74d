"""Retention planning throughput: plan a synthetic segment catalog of N partitions x 20 segments, for
N = 10k, 30k, 100k, and show that the time grows linearly with N.

The catalog is generated in memory (CATALOG_SCHEMA rows, Arrow): 100 topics with mixed policies and
limits (time only, size only, both, compact), segments of 1 GiB ± 10 % an hour apart, some partitions
with a log start offset inside their history or a high watermark behind the log end. Timed:

- local   ``kafkalog.retention.catalog_plan.plan_catalog_table`` in this process (the planner every path
          runs per partition);
- spark   (``--spark``) ``udfs.retention_job.plan_catalog`` on a local[2] session: the catalog
          DataFrame grouped by partition with applyInArrow, counted.

    python -m bench.retention                 # local planner, 10k/30k/100k partitions
    python -m bench.retention --spark         # + the Spark planner
    python -m bench.retention --quick         # 1k/3k/10k
    python -m bench.retention --json out.json --readme bench/README.md
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from bench.readme import update_block
import pyarrow as pa

from kafkalog.catalog import CATALOG_SCHEMA
from kafkalog.config import configs_from_mappings
from kafkalog.retention.catalog_plan import plan_catalog_table

SEGMENTS = 20
HOUR = 3_600_000
GIB = 1 << 30
NOW = 1_800_000_000_000
README_START = "<!-- bench:retention:start -->"
README_END = "<!-- bench:retention:end -->"


def synthetic_catalog(partitions: int, *, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = partitions * SEGMENTS
    part = np.repeat(np.arange(partitions), SEGMENTS)
    seg = np.tile(np.arange(SEGMENTS), partitions)
    topic_ids = part % 100
    base = seg.astype(np.int64) * 1_000_000
    size = (GIB * rng.uniform(0.9, 1.1, n)).astype(np.int64)
    age_hours = (SEGMENTS - seg) * 12 + rng.integers(0, 6, n)
    largest = NOW - age_hours * HOUR
    log_end = np.full(n, SEGMENTS * 1_000_000 - 500_000, np.int64)
    lso = np.where(part % 7 == 0, 3_500_000, 0).astype(np.int64)
    hw = np.where(part % 11 == 0, log_end - 2_000_000, log_end)
    topics = np.array([f"topic-{i:03d}" for i in range(100)], dtype=object)[topic_ids]
    return pa.table({
        "log_dir": pa.array(np.array(["/data/kafka-logs-%d" % (i % 4) for i in range(4)], dtype=object)[part % 4]),
        "topic": pa.array(topics, pa.string()),
        "partition": pa.array(part // 100, pa.int32()),
        "partition_dir": pa.array(np.full(n, "-", dtype=object), pa.string()),
        "partition_kind": pa.array(np.full(n, "live", dtype=object), pa.string()),
        "kind": pa.array(np.full(n, "segment", dtype=object), pa.string()),
        "base_offset": pa.array(base), "size": pa.array(size),
        "largest_timestamp_ms": pa.array(largest), "log_start_offset": pa.array(lso),
        "log_end_offset": pa.array(log_end), "high_watermark_checkpoint": pa.array(hw),
    })


def topic_configs():
    topics = {}
    for i in range(100):
        kind = i % 4
        if kind == 0:
            topics[f"topic-{i:03d}"] = {"retention.ms": str(7 * 24 * HOUR)}
        elif kind == 1:
            topics[f"topic-{i:03d}"] = {"retention.bytes": str(12 * GIB), "retention.ms": "-1"}
        elif kind == 2:
            topics[f"topic-{i:03d}"] = {"retention.bytes": str(15 * GIB), "retention.ms": str(5 * 24 * HOUR)}
        else:
            topics[f"topic-{i:03d}"] = {"cleanup.policy": "compact"}
    return configs_from_mappings({"log.retention.hours": "168"}, topics)


def time_local(table: pa.Table, configs, reps: int) -> tuple[float, int]:
    times, deleted = [], 0
    for _ in range(reps):
        start = time.perf_counter()
        plan = plan_catalog_table(table, configs, NOW)
        times.append(time.perf_counter() - start)
        deleted = int(pa.compute.sum(pa.compute.equal(plan["decision"], "delete")).as_py())
    return statistics.median(times), deleted


def time_spark(spark, table: pa.Table, configs, reps: int) -> float:
    from udfs.retention_job import plan_catalog

    df = spark.createDataFrame(table.cast(pa.schema([CATALOG_SCHEMA.field(n) for n in table.column_names])))
    df = df.cache()
    df.count()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        plan_catalog(df, configs=configs, now=NOW).count()
        times.append(time.perf_counter() - start)
    df.unpersist()
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="retention planning benchmark (see module docstring)")
    ap.add_argument("--quick", action="store_true", help="1k/3k/10k partitions")
    ap.add_argument("--sizes", default=None, help="comma-separated partition counts")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--spark", action="store_true", help="also time the Spark planner (local[2])")
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--readme", metavar="PATH")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (
        [1_000, 3_000, 10_000] if args.quick else [10_000, 30_000, 100_000])
    configs = topic_configs()
    spark = None
    if args.spark:
        from udfs.session import build_session
        spark = build_session("kafkalog-bench-retention", master="local[2]",
                              conf={"spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "4"})
    plan_catalog_table(synthetic_catalog(100), configs, NOW)      # warm imports
    rows = []
    for partitions in sizes:
        table = synthetic_catalog(partitions)
        seconds, deleted = time_local(table, configs, args.reps)
        row = dict(partitions=partitions, segments=table.num_rows, local_s=round(seconds, 3),
                   local_us_per_partition=round(seconds / partitions * 1e6, 1), deleted=deleted)
        if spark is not None:
            row["spark_s"] = round(time_spark(spark, table, configs, args.reps), 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
    first = rows[0]
    for row in rows:
        row["growth_vs_first"] = round(row["local_s"] / first["local_s"], 2)
        row["size_vs_first"] = round(row["partitions"] / first["partitions"], 2)
    table_md = render(rows, spark is not None)
    print(table_md)
    result = dict(machine=platform.node(), python=platform.python_version(), rows=rows)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if args.readme:
        update_readme(Path(args.readme), table_md)
    if spark is not None:
        spark.stop()
    return 0


def render(rows, with_spark: bool) -> str:
    head = "| partitions × 20 segments | catalog rows | local planner | µs / partition | time vs first | size vs first |"
    sep = "|---|---|---|---|---|---|"
    if with_spark:
        head += " Spark planner (local[2]) |"
        sep += "---|"
    lines = [head, sep]
    for r in rows:
        line = (f"| {r['partitions']:,} | {r['segments']:,} | {r['local_s']:.2f} s | {r['local_us_per_partition']:.0f} | "
                f"{r['growth_vs_first']:.2f}× | {r['size_vs_first']:.0f}× |")
        if with_spark:
            line += f" {r['spark_s']:.2f} s |"
        lines.append(line)
    return "\n".join(lines)


def update_readme(path: Path, table_md: str) -> None:
    update_block(path, README_START, README_END,
                 "## `bench/retention.py` — retention planning at catalog scale", table_md)


if __name__ == "__main__":
    raise SystemExit(main())
