"""Where ``format("kafkalog")`` loses to Parquet on a full aggregation: the Python-to-JVM hand-over taken apart
(issue 32), on ``bench.datasource``'s data, in one process, the readers interleaved.

Readers (each on a DataFrame loaded for it, ``groupBy(partition).agg(max(offset), sum(length(value)))``):

* ``parquet``: Spark's Parquet reader on the same rows (reads the 3 columns the query uses);
* ``kafkalog``: the data source as users get it (the 7 columns of Spark's Kafka source);
* ``narrow-schema``: the data source with a user-specified schema naming the 3 columns the query uses
  (``.schema("partition INT, offset LONG, value BINARY")``): the same plan and tasks, only those columns
  shaped and handed to the JVM (PySpark 4.2's Python data source has no column pruning; a user schema is
  Spark's way to narrow a source, ``udfs.kafkalog_source.narrowed_schema``);
* ``decode``: ``kafkalog``'s tasks, decoded and shaped in the Python worker, and each task hands the JVM
  no rows: the Python side's cost by itself.

    python -m bench.handover [--records 1000000] [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from bench.datasource import TOPIC, ensure_data
from udfs.kafkalog_source import KafkalogDataSource, KafkalogReader, TaskPartition, read_task

# The columns the aggregation uses, as a user narrows format("kafkalog") to them (a user-specified schema).
NARROW_SCHEMA = "partition INT, offset LONG, value BINARY"


class _DecodeOnlyReader(KafkalogReader):
    def read(self, partition: TaskPartition):
        for _batch in read_task(partition.task, self.arrow_schema):
            pass
        yield from ()


class DecodeOnlySource(KafkalogDataSource):
    """Bench only: the data source's tasks decode everything and hand the JVM nothing."""

    @classmethod
    def name(cls):
        return "kafkalog_bench_decode"

    def reader(self, schema):
        return _DecodeOnlyReader(self.parsed, schema, self.batch_tasks)


def run(n: int, repeat: int, root: Path, log=print) -> dict:
    from pyspark.sql import functions as F

    from udfs.session import build_session

    load_before = os.getloadavg()[0]
    base = ensure_data(root, n, log)
    log_dir, parquet = base / "logs", base / "parquet"
    spark = build_session("kafkalog-bench-handover", conf={
        "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4", "spark.driver.memory": "3g"})
    spark.dataSource.register(DecodeOnlySource)

    def agg(df):
        return sorted(tuple(r) for r in df.groupBy("partition").agg(
            F.max("offset"), F.sum(F.length("value"))).collect())

    def ds(name):
        return lambda: spark.read.format(name).option("subscribe", TOPIC).load(str(log_dir))

    readers = {"parquet": lambda: spark.read.parquet(str(parquet)), "kafkalog": ds("kafkalog"),
               "narrow-schema": lambda: spark.read.format("kafkalog").schema(NARROW_SCHEMA).option("subscribe", TOPIC)
               .load(str(log_dir)),
               "decode": lambda: spark.read.format("kafkalog_bench_decode").option("subscribe", TOPIC)
               .load(str(log_dir))}
    expected = agg(readers["parquet"]())
    for name in ("kafkalog", "narrow-schema"):
        assert agg(readers[name]()) == expected, name
    agg(readers["decode"]())
    names = list(readers)
    times = {k: [] for k in names}
    for r in range(repeat):
        for name in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.perf_counter()
            agg(readers[name]())
            times[name].append(time.perf_counter() - t0)
        log(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in times.items()))
    spark.stop()
    med = {k: statistics.median(v) for k, v in times.items()}
    return dict(load_before=round(load_before, 1), load_after=round(os.getloadavg()[0], 1), seconds=med,
                all_seconds=times, vs_parquet={k: round(med["parquet"] / v, 3) for k, v in med.items()})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/tmp/kafkalog-bench")
    ap.add_argument("--records", type=int, default=1_000_000, help="records per partition")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    r = run(args.records, args.repeat, Path(args.dir), log=lambda m: print(m, file=sys.stderr, flush=True))
    print(f"load {r['load_before']} -> {r['load_after']}")
    for k, v in r["seconds"].items():
        print(f"{k:14s} {v:6.2f} s  speed vs parquet {r['vs_parquet'][k]:.2f}x  all {[round(x, 2) for x in r['all_seconds'][k]]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
