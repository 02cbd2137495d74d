"""Bulk lookups per second: many (topic, partition, timestamp | offset) queries against a generated log dir
(kafkalog.tools.demo: P partitions of 5,000-record segments), answered

- one by one   a fresh ``PartitionLog`` per query (what ``kafkalog offsets`` does for one question);
- grouped      ``kafkalog.lookup.bulk.answer_queries``: one handle per partition, reused by its queries
               (the code each Spark task runs);
- spark        (``--spark``) the lookup job's ``lookup_frame`` on local[2], queries repartitioned by
               partition, answers collected.

Every path's answers are checked equal before timing is reported.

    python -m bench.lookup_bulk                   # 8 partitions x 100k records, 20k queries
    python -m bench.lookup_bulk --quick --spark
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from bench.readme import update_block

from kafkalog.tools.demo import START_MS, generate_demo_log_dir

CACHE = Path("/tmp/kafkalog-bench")
README_START = "<!-- bench:lookup-bulk:start -->"
README_END = "<!-- bench:lookup-bulk:end -->"


def ensure_log_dir(partitions: int, records: int) -> Path:
    root = CACHE / f"bulk-{partitions}x{records}"
    if not (root / "meta.properties").exists():
        generate_demo_log_dir(root, partitions=partitions, records=records)
    return root


def make_queries(root: Path, partitions: int, records: int, n: int, seed: int = 3) -> list[dict]:
    rng = np.random.default_rng(seed)
    span = records * 1000            # the demo advances ~1 s per record on average
    queries = []
    for i in range(n):
        p = int(rng.integers(0, partitions))
        if i % 2:
            queries.append(dict(id=str(i), topic="demo-orders", partition=str(p), offset=str(int(rng.integers(0, records))),
                                timestamp=None))
        else:
            queries.append(dict(id=str(i), topic="demo-orders", partition=str(p), offset=None,
                                timestamp=str(START_MS + int(rng.integers(0, span)))))
    return queries


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="bulk lookup throughput (see module docstring)")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=20_000)
    ap.add_argument("--quick", action="store_true", help="4 partitions x 20k records, 4k queries")
    ap.add_argument("--spark", action="store_true")
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--readme", metavar="PATH")
    args = ap.parse_args(argv)
    if args.quick:
        args.partitions, args.records, args.queries = 4, 20_000, 4_000
    import pyarrow as pa

    from kafkalog.lookup.bulk import QUERY_SCHEMA, answer_queries
    from udfs.lookup_job import partition_folders

    root = ensure_log_dir(args.partitions, args.records)
    queries = make_queries(root, args.partitions, args.records, args.queries)
    folders = partition_folders(None, [root], None)
    table = pa.Table.from_pylist(queries, schema=QUERY_SCHEMA)
    answer_queries(table.slice(0, 50), folders, isolation="log_end")            # warm numba and the page cache

    one_n = min(len(queries), 2000)
    start = time.perf_counter()
    one = [answer_queries(table.slice(i, 1), folders, isolation="log_end").to_pylist()[0] for i in range(one_n)]
    one_s = time.perf_counter() - start

    grouped_queries = pa.Table.from_pylist(sorted(queries, key=lambda q: int(q["partition"])), schema=QUERY_SCHEMA)
    start = time.perf_counter()
    grouped = answer_queries(grouped_queries, folders, isolation="log_end").to_pylist()
    grouped_s = time.perf_counter() - start
    by_id = {r["id"]: r for r in grouped}
    assert all(by_id[r["id"]] == r for r in one), "grouped answers differ from one-by-one answers"
    assert sum(r["found"] for r in grouped) > 0.9 * len(grouped)

    rows = [dict(path="one by one (fresh PartitionLog per query)", queries=one_n, seconds=round(one_s, 3),
                 per_second=round(one_n / one_s))]
    rows.append(dict(path="grouped (one handle per partition)", queries=len(queries), seconds=round(grouped_s, 3),
                     per_second=round(len(queries) / grouped_s)))
    if args.spark:
        from udfs.lookup_job import lookup_frame
        from udfs.session import build_session
        spark = build_session("kafkalog-bench-lookup", master="local[2]",
                              conf={"spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "4"})
        df = spark.createDataFrame(table).cache()
        df.count()
        lookup_frame(df, folders, isolation="log_end").count()          # warm the workers
        start = time.perf_counter()
        answers = lookup_frame(df, folders, isolation="log_end").toArrow()
        spark_s = time.perf_counter() - start
        got = {r["id"]: (r["found"], r["offset"]) for r in answers.to_pylist()}
        assert got == {k: (v["found"], v["offset"]) for k, v in by_id.items()}, "Spark answers differ"
        rows.append(dict(path="Spark lookup job, local[2]", queries=len(queries), seconds=round(spark_s, 3),
                         per_second=round(len(queries) / spark_s)))
        spark.stop()
    table = "\n".join([f"{args.partitions} partitions x {args.records:,} records (5,000-record segments), "
                       f"{len(queries):,} queries (half timestamps, half offsets)", "",
                       "| path | queries | seconds | lookups / s |", "|---|---|---|---|"] +
                      [f"| {r['path']} | {r['queries']:,} | {r['seconds']:.2f} | {r['per_second']:,} |" for r in rows])
    print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    if args.readme:
        update_block(Path(args.readme), README_START, README_END, "## `bench/lookup_bulk.py` — bulk lookups", table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
