"""Spark's Kafka source (a real broker), ``format("kafkalog")`` (the broker's log dir) and Spark's Parquet
reader on the same records, the same aggregation, in one process, interleaved (issue 32).

Data: a real Apache Kafka 4.4.0 broker (``kafkalog.testing.broker``) gets topic ``bench`` of 4
partitions, each produced by kafka-python with its own codec (none, snappy, lz4, zstd) from
``bench.gen``'s records (16-byte keys, 100-byte text-like values, ``--records`` per partition,
``retention.ms=-1``). The broker is stopped cleanly and its partition folders copied (the log dir
``format("kafkalog")`` reads), then started again for ``format("kafka")``; the copy's records are
written once as Parquet (pyarrow, snappy, the Kafka source's seven columns) for Spark's Parquet reader.

Measured: one SparkSession on ``local[*]`` with Spark's Kafka source loaded
(``udfs.session.build_session(packages=("kafka",))``); after one warm-up query per reader, ``--repeat``
rounds each run the four readers once, the order rotated by round, each on a DataFrame loaded for
it: ``groupBy(partition).agg(max(offset), sum(length(value)))`` over everything; ``format("kafkalog")``
twice, as loaded and narrowed to the query's columns by a user-specified schema (``narrow-schema``). The
answers must be equal. Reported: median seconds, MB/s of ``.log`` (the same records for all) and records/s of
each, the ratios, and the load average (1 min) before and after — the machine is shared.

    python -m bench.kafka_source [--records 250000] [--repeat 5] [--json out.json] [--readme]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from bench.datasource import _write_parquet
from bench.gen import make_records

DEFAULT_DIR = "/tmp/kafkalog-bench"
DEFAULT_RECORDS = 250_000
TOPIC = "bench"
CODECS = ("none", "snappy", "lz4", "zstd")
BASE_TS = 1_700_000_000_000
FORMAT_VERSION = 1
README_START = "<!-- bench.kafka_source: start -->"
README_END = "<!-- bench.kafka_source: end -->"
# format("kafkalog") narrowed to the aggregation's columns by a user-specified schema (udfs.kafkalog_source)
NARROW_SCHEMA = "partition INT, offset LONG, value BINARY"


def produce_partitions(broker, n: int, log=print) -> None:
    """``n`` records into each of the topic's 4 partitions, partition p with codec ``CODECS[p]``."""
    from kafkalog.testing.broker_client import create_topic, producer

    create_topic(broker, TOPIC, partitions=len(CODECS), configs={"retention.ms": -1})
    recs = make_records(n)
    for p, codec in enumerate(CODECS):
        t0 = time.perf_counter()
        client = producer(broker, codec=codec, idempotent=False, batch_size=16384, linger_ms=5,
                          max_in_flight_requests_per_connection=5)
        try:
            futures = None
            for i in range(n):
                futures = client.send(TOPIC, key=recs.keys[i], value=recs.values[i], partition=p,
                                      timestamp_ms=BASE_TS + i)
            client.flush()
            futures.get(timeout=60)
        finally:
            client.close(timeout=10)
        log(f"  produced partition {p} ({codec}): {n} records in {time.perf_counter() - t0:.1f} s")


def make_data(root: Path, n: int, log=print):
    """(base folder, running broker): produce once, stop cleanly, copy the log dir, write Parquet, restart."""
    from kafkalog.testing.broker import KafkaBroker

    base = root / f"kafka-source-{n}-v{FORMAT_VERSION}"
    logs, parquet, done = base / "logs", base / "parquet", base / "COMPLETE"
    if not done.exists():
        shutil.rmtree(base, ignore_errors=True)
    broker = KafkaBroker(base / "broker", heap="1g")
    if not done.exists():
        broker.start()
        try:
            produce_partitions(broker, n, log)
        finally:
            broker.stop(clean=True)
        for p in range(len(CODECS)):
            shutil.copytree(broker.partition_dir(TOPIC, p), logs / f"{TOPIC}-{p}")
        _write_parquet(logs, parquet)
        done.write_text("ok\n")
    broker.start()
    return base, broker


def log_bytes(logs: Path) -> int:
    return sum(f.stat().st_size for f in logs.glob("*/*.log"))


def run(n: int, repeat: int, root: Path, log=print) -> dict:
    from pyspark.sql import functions as F

    from udfs.session import build_session

    load_before = os.getloadavg()[0]
    base, broker = make_data(root, n, log)
    try:
        logs, parquet = base / "logs", base / "parquet"
        total = log_bytes(logs)
        records = n * len(CODECS)
        log(f"{records} records, {total / 1e6:.0f} MB of .log; broker at {broker.bootstrap}")
        spark = build_session("kafkalog-bench-kafka-source", packages=("kafka",), conf={
            "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "4", "spark.driver.memory": "3g"})
        cores = spark.sparkContext.defaultParallelism

        def agg(df):
            return sorted(tuple(r) for r in df.groupBy("partition").agg(
                F.max("offset"), F.sum(F.length("value"))).collect())

        readers = {
            "kafka": lambda: (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
                              .option("subscribe", TOPIC).option("startingOffsets", "earliest")
                              .option("endingOffsets", "latest").load()),
            "kafkalog": lambda: spark.read.format("kafkalog").option("subscribe", TOPIC).load(str(logs)),
            "narrow-schema": lambda: (spark.read.format("kafkalog").schema(NARROW_SCHEMA).option("subscribe", TOPIC)
                                      .load(str(logs))),
            "parquet": lambda: spark.read.parquet(str(parquet)),
        }
        expected = None
        for name, df in readers.items():                      # warm-up, and the answers must agree
            got = agg(df())
            if expected is None:
                expected = got
            elif got != expected:
                raise AssertionError(f"{name} disagrees: {got} != {expected}")
        times = {name: [] for name in readers}
        names = list(readers)
        for r in range(repeat):
            for name in names[r % len(names):] + names[:r % len(names)]:
                t0 = time.perf_counter()
                got = agg(readers[name]())
                times[name].append(time.perf_counter() - t0)
                assert got == expected, name
            log(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()))
        spark.stop()
    finally:
        broker.stop(clean=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    out = dict(records=records, log_bytes=total, cores=cores, repeat=repeat,
               load_before=round(load_before, 1), load_after=round(os.getloadavg()[0], 1),
               seconds={k: round(v, 3) for k, v in med.items()},
               all_seconds={k: [round(x, 3) for x in v] for k, v in times.items()},
               mb_s={k: round(total / 1e6 / v, 1) for k, v in med.items()},
               records_s={k: round(records / v) for k, v in med.items()},
               kafkalog_vs_parquet=round(med["parquet"] / med["kafkalog"], 3),
               narrow_schema_vs_parquet=round(med["parquet"] / med["narrow-schema"], 3),
               kafkalog_vs_kafka=round(med["kafka"] / med["kafkalog"], 3),
               window_bytes=int(os.environ.get("KAFKALOG_SOURCE_WINDOW_BYTES", 0)) or None)
    return out


def table(r: dict) -> str:
    lines = [
        f"{r['records']:,} records, {r['log_bytes'] / 1e6:,.0f} MB of .log written by a Kafka 4.4.0 broker "
        f"(4 partitions: none, snappy, lz4, zstd), local[*] = {r['cores']} cores, median of {r['repeat']} "
        f"interleaved rounds, load average {r['load_before']} before / {r['load_after']} after",
        "",
        "| reader, `groupBy(partition).agg(max(offset), sum(length(value)))` | s (median) | MB/s of .log | records/s |"
        " speed ÷ Parquet's |",
        "|---|---|---|---|---|",
    ]
    label = {"kafka": '`format("kafka")`, the running broker', "kafkalog": '`format("kafkalog")`, its log dir (copy '
             'after a clean stop)', "narrow-schema": '`format("kafkalog")` with `.schema("partition INT, offset LONG, '
             'value BINARY")` (the columns the query uses)', "parquet": "Spark's Parquet reader, the same rows"}
    for k in ("kafka", "kafkalog", "narrow-schema", "parquet"):
        lines.append(f"| {label[k]} | {r['seconds'][k]:.2f} | {r['mb_s'][k]:,.0f} | {r['records_s'][k]:,} | "
                     f"{r['seconds']['parquet'] / r['seconds'][k]:.2f}× |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=DEFAULT_DIR)
    ap.add_argument("--records", type=int, default=DEFAULT_RECORDS, help="records per partition")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--readme", action="store_true", help="write the table into README.md's Performance section")
    args = ap.parse_args(argv)
    result = run(args.records, args.repeat, Path(args.dir), log=lambda m: print(m, file=sys.stderr, flush=True))
    print(table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if args.readme:
        from bench.readme import update_block

        update_block(Path(__file__).resolve().parents[1] / "README.md", README_START, README_END,
                     "### Spark's Kafka source, `format(\"kafkalog\")` and Parquet (`python -m bench.kafka_source`)",
                     table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
