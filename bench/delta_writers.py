"""Which Delta writer a job should use (issue 32): delta-spark (``df.write.format("delta")``) against
kafkalog's delta-rs path (Spark writes the Parquet files, the driver commits them with ``deltalake``), on
the table shapes the jobs write, in one delta-spark session, interleaved.

- ``audit``: 200 rows appended (one per partition: the compaction and retention audits, lag, reindex);
- ``catalog``: 200,000 rows overwritten (one per segment of a large cluster: the catalog, the lookup answers).

    python -m bench.delta_writers [--reps 5] [--dir /tmp/kafkalog-bench/delta-writers]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from pathlib import Path

SHAPES = {"audit": (200, "append"), "catalog": (200_000, "overwrite")}


def frame(spark, rows: int):
    return spark.range(rows).selectExpr(
        "id", "concat('topic-', cast(id % 97 as string)) as topic", "cast(id % 12 as int) as partition",
        "id * 1024 as base_offset", "id * 7 as size_bytes", "timestamp_millis(1767225600000 + id) as largest_timestamp",
        "concat('/data/kafka/logs/topic-', cast(id % 97 as string)) as log_dir")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="delta-spark vs delta-rs on the jobs' table shapes")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dir", default="/tmp/kafkalog-bench/delta-writers")
    args = ap.parse_args(argv)
    from udfs import delta_tables
    from udfs.session import build_session, delta_spark_available

    spark = build_session("kafkalog-bench-delta-writers", master="local[2]", packages=("delta",),
                          conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
    assert delta_spark_available(spark), "delta-spark did not load"
    root = Path(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    times = {(shape, engine): [] for shape in SHAPES for engine in ("spark", "rs")}
    frames = {shape: frame(spark, rows).cache() for shape, (rows, _mode) in SHAPES.items()}
    for df in frames.values():
        df.count()
    for rep in range(args.reps + 1):                          # the first round warms both writers up
        for shape, (rows, mode) in SHAPES.items():
            order = ("spark", "rs") if rep % 2 == 0 else ("rs", "spark")
            for engine in order:
                t0 = time.perf_counter()
                delta_tables.write_table(frames[shape], root / f"{shape}-{engine}", mode=mode, engine=engine,
                                         metadata={"job": "bench"})
                if rep:
                    times[(shape, engine)].append(time.perf_counter() - t0)
    print("| table shape | rows | delta-spark s | delta-rs s | delta-rs ÷ delta-spark | load |")
    print("|---|---|---|---|---|---|")
    for shape, (rows, mode) in SHAPES.items():
        s, r = statistics.median(times[(shape, "spark")]), statistics.median(times[(shape, "rs")])
        print(f"| {shape} ({mode}) | {rows:,} | {s:.2f} | {r:.2f} | {r / s:.2f} | {os.getloadavg()[0]:.1f} |")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
