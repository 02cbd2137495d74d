"""The as-of table (``option("asOf", T)``: per partition the cleaner's compiled key map, then the winners,
in one task, no shuffle) against the same answer from a Spark ``groupBy`` over ``format("kafkalog")``
(``endingTimestamp`` T — the same ListOffsets cut — then per key the record with the largest offset,
``max_by``, tombstones dropped): one run each after a warm-up query, records below the cut per second,
and their ratio. The two answers are checked equal (rows, sum of offsets, bytes of values).

Data (generated under ``--dir``, reused): topic ``kt``, ``--partitions`` partitions of ``--records``
records each, ``--keys`` distinct keys (16 bytes) drawn at random, 100-byte values, 5% tombstones,
one record a millisecond; the cut is at three quarters of the time.

    python -m bench.asof [--records 500000] [--partitions 2] [--keys 50000] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

TOPIC = "kt"
TS0 = 1_700_000_000_000


def make_log_dir(root: Path, *, records: int, partitions: int, keys: int, seed: int = 7) -> Path:
    """The bench's log dir (written once per shape, then reused)."""
    from kafkalog.log.writer import write_log_dir
    from kafkalog.testing import RECORDS_SCHEMA

    out = root / f"asof-{records}-{partitions}-{keys}"
    if (out / "meta.properties").exists():
        return out
    rnd = np.random.default_rng(seed)
    parts = []
    for p in range(partitions):
        n = records
        offsets = np.arange(n, dtype=np.int64)
        key_ids = rnd.integers(0, keys, n)
        key = pa.array([b"key-%012d" % k for k in key_ids.tolist()], pa.binary())
        tomb = rnd.random(n) < 0.05
        value = pa.array([None if t else b"v" * 100 for t in tomb.tolist()], pa.binary())
        base = offsets - offsets % 50
        table = pa.table({
            "offset": offsets, "key": key, "value": value, "timestamp": TS0 + offsets,
            "headers": pa.array([[]] * n, RECORDS_SCHEMA.field("headers").type),
            "baseOffset": base, "lastOffset": np.minimum(base + 49, n - 1), "batchPosition": base,
            "producerId": np.full(n, -1, np.int64), "producerEpoch": np.full(n, -1, np.int16),
            "baseSequence": np.full(n, -1, np.int32), "isTransactional": np.zeros(n, bool),
            "isControl": np.zeros(n, bool), "partitionLeaderEpoch": np.full(n, -1, np.int32),
            "timestampType": np.zeros(n, np.int32), "codec": np.zeros(n, np.int8)}, schema=RECORDS_SCHEMA)
        parts.append((TOPIC, p, table))
    write_log_dir(out, parts)
    return out


def _answer(df):
    from pyspark.sql import functions as F

    row = df.agg(F.count("*").alias("rows"), F.sum("offset").alias("offsets"),
                 F.sum(F.length("value")).alias("bytes")).collect()[0]
    return row["rows"], row["offsets"], row["bytes"]


def as_of_query(spark, path: Path, ts: int):
    return spark.read.format("kafkalog").option("asOf", str(ts)).load(str(path))


def group_by_query(spark, path: Path, ts: int):
    from pyspark.sql import functions as F

    records = spark.read.format("kafkalog").option("endingTimestamp", str(ts)).load(str(path))
    latest = (records.where("key IS NOT NULL").groupBy("topic", "partition", "key")
              .agg(F.max_by(F.struct("offset", "value"), "offset").alias("w")))
    return latest.where("w.value IS NOT NULL").select("topic", "partition", "key", "w.offset", "w.value")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000, help="records per partition")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--keys", type=int, default=50_000)
    parser.add_argument("--dir", default="/tmp/kafkalog-bench")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    from udfs.session import build_session

    path = make_log_dir(Path(args.dir), records=args.records, partitions=args.partitions, keys=args.keys)
    cut_ts = TS0 + args.records * 3 // 4
    below = args.partitions * (args.records * 3 // 4)
    spark = build_session("bench-asof", master=os.environ.get("SPARK_MASTER", "local[*]"),
                          conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": str(os.cpu_count() or 2)})
    _answer(as_of_query(spark, path, TS0 + 1000))             # warm-up: workers, numba caches
    _answer(group_by_query(spark, path, TS0 + 1000))
    results = {}
    for name, query in (("asOf option (key map in the task)", as_of_query),
                        ("groupBy + max_by over format(\"kafkalog\")", group_by_query)):
        started = time.monotonic()
        answer = _answer(query(spark, path, cut_ts))
        seconds = time.monotonic() - started
        results[name] = dict(seconds=round(seconds, 2), records_per_s=round(below / seconds), answer=answer)
    answers = {tuple(r["answer"]) for r in results.values()}
    assert len(answers) == 1, f"the two answers differ: {results}"
    (first, a), (second, b) = results.items()
    report = dict(records=args.records, partitions=args.partitions, keys=args.keys, records_below_cut=below,
                  rows=a["answer"][0], load_average=os.getloadavg()[0], results=results,
                  ratio=round(b["seconds"] / a["seconds"], 2))
    print(f"{below:,} records below the cut, {a['answer'][0]:,} rows; load {report['load_average']:.1f}")
    for name, r in results.items():
        print(f"  {name}: {r['seconds']} s, {r['records_per_s']:,} records/s")
    print(f"  groupBy time / asOf time: {report['ratio']}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
