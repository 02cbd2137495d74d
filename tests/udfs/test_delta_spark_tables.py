"""delta-spark reads every Delta table kafkalog's jobs write (issue 32): the catalog, the retention and
compaction audits, the reindex results, the lag rows, the lookup answers and the export table are written
by the jobs with their default writer (``--delta-engine auto``: delta-rs for every job, though this session
has delta-spark; ``udfs.delta_tables.JOB_WRITERS``), then
``spark.read.format("delta")`` must give the rows kafkalog reads back, column names and types included
(nullability aside: each reader reports it its own way), and Delta's history must list the job's commit
with kafkalog's commit metadata; the catalog, written twice, travels back to its first version.
(This test took over test_delta_spark.py's catalog checks: one delta-spark JVM for both.)

The export table also takes a user's delta-spark ``OPTIMIZE`` and ``MERGE`` between two export runs and
while a third runs: Delta's conflict rules decide, and afterwards every exported record is in the table
exactly once (nothing lost, nothing duplicated). delta-spark then appends to every table (the protocol
delta-rs wrote is one delta-spark writes) and delta-rs writes the catalog once more after it.

This runs in a Python process of its own: delta-spark refuses even a read
without its SQL extension (a session of the suite's own must not carry it)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")

from udfs import spark_jars  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
RECORDS = 6_000                 # per demo partition

SCRIPT = r'''
import json, sys, threading
from pathlib import Path
from udfs import (catalog_job, compact_job, delta_tables, export_job, lag_job, lookup_job, reindex_job,
                  retention_job)
from udfs.session import build_session, delta_spark_available

root = Path(sys.argv[1]); logs = str(root / "logs")
# Delta rebuilds a table's snapshot (its log replayed: a shuffle) in snapshotPartitions tasks, 50 unless set,
# for every read, history and time travel here: 50 tiny tasks each time on local[2]; 2 as for shuffles
spark = build_session("kafkalog-delta-spark-tables", master="local[2]", packages=("delta",),
                      conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                            "spark.databricks.delta.snapshotPartitions": "2"})
assert delta_spark_available(spark), "delta-spark did not load"
rs = []     # the jobs' default writer (--delta-engine auto) in a session with delta-spark: delta-rs
now = ["--now-ms", sys.argv[2]]
compacted = ["--topic-config", "demo-orders:cleanup.policy=compact", "--topic-config",
             "demo-orders:min.cleanable.dirty.ratio=0.01"]
retained = ["--topic-config", "demo-orders:retention.ms=3600000"]
queries = root / "q.csv"
queries.write_text("id,topic,partition,timestamp,offset\n1,demo-orders,0,1767225600500,\n2,demo-orders,1,,7\n")
t = {name: str(root / name) for name in ("catalog", "lookup", "reindex", "lag", "retention", "compact", "export")}
runs = {
    "export": (export_job, ["--log-dirs", logs, "--table", t["export"], "--checkpoint", str(root / "ckpt"),
                            "--max-records-per-batch", "4000"]),
    "catalog": (catalog_job, ["--log-dirs", logs, "--catalog", t["catalog"]]),
    "lookup": (lookup_job, ["--log-dirs", logs, "--queries", str(queries), "--output", t["lookup"]]),
    "reindex": (reindex_job, ["--log-dirs", logs, "--verify-only", "--results", t["reindex"]]),
    "lag": (lag_job, ["--log-dirs", logs, "--output", t["lag"]] + now),
    "retention": (retention_job, ["--log-dirs", logs, "--audit", t["retention"]] + now + retained),
    "compact": (compact_job, ["--log-dirs", logs, "--audit", t["compact"]] + now + compacted),
}
out = {}
# Rows compared as chispa's assert_df_equality(ignore_row_order=True) compares them (Row tuples, equal as
# multisets: each side sorted by its repr), but each side collected once: chispa sorted both DataFrames in
# Spark first (a shuffle per side on top of the Delta log replay), ~4 s a table on 2 cores. Column names and
# types (nullability aside: simpleString has none) are compared by the test from "types".
def same_rows(theirs, ours, what):
    assert sorted(theirs, key=repr) == sorted(ours, key=repr), (what, len(theirs), len(ours),
                                                               [r for r in theirs if r not in ours][:3],
                                                               [r for r in ours if r not in theirs][:3])
types = lambda df: [(f.name, f.dataType.simpleString()) for f in df.schema.fields]  # noqa: E731
def run_and_read(name):
    job, argv = runs[name]
    code = job.main(argv + rs, spark=spark)
    assert code == 0, (name, code)
    ours = delta_tables.read_table(spark, t[name], engine="rs")
    theirs = spark.read.format("delta").load(t[name])
    their_rows = theirs.collect()
    same_rows(their_rows, ours.collect(), name)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{t[name]}`").collect()
    out[name] = {"rows": len(their_rows), "schema_equal": types(theirs) == types(ours),
                 "types": [types(theirs), types(ours)],
                 "jobs": sorted({json.loads(h["userMetadata"] or "{}").get("kafkalog.job") for h in history}),
                 "engines": sorted({str(h["engineInfo"]) for h in history})}
for name in ("export", "catalog", "lookup", "reindex", "lag"):
    run_and_read(name)
first_catalog = spark.read.format("delta").load(t["catalog"]).collect()

# The export table under a user's OPTIMIZE and MERGE: compact its files, then a MERGE that rewrites rows of
# partition 0 while the next export (new records appended to the log first) commits beside it.
from kafkalog.checkpoint.offset import read_offset_checkpoint, write_offset_checkpoint
table = t["export"]
before = spark.read.format("delta").load(table).count()
spark.sql(f"OPTIMIZE delta.`{table}`")
hw_file = root / "logs" / "replication-offset-checkpoint"
hw = read_offset_checkpoint(hw_file)
write_offset_checkpoint(hw_file, {tp: (int(sys.argv[3]) if tp[0] == "demo-orders" else end) for tp, end in hw.items()})
conflicts = []
def user_merge():
    try:
        spark.sql(f"""MERGE INTO delta.`{table}` AS t
                      USING (SELECT topic, partition, offset FROM delta.`{table}` WHERE partition = 0 AND offset < 50) AS s
                      ON t.topic = s.topic AND t.partition = s.partition AND t.offset = s.offset
                      WHEN MATCHED THEN UPDATE SET t.value = t.value""")
    except Exception as exc:            # Delta's conflict rules may refuse the MERGE: the user retries
        conflicts.append(type(exc).__name__ + ": " + str(exc).splitlines()[0][:200])
merge = threading.Thread(target=user_merge); merge.start()
code = export_job.main(runs["export"][1] + rs, spark=spark)
merge.join()
assert code == 0, ("export after merge", code)
from collections import Counter
keys = Counter(tuple(r) for r in spark.read.format("delta").load(table).select("topic", "partition", "offset").collect())
out["export_concurrent"] = {"before": before, "after": sum(keys.values()),
                            "distinct": len(keys), "duplicated": sum(1 for n in keys.values() if n > 1),
                            "conflicts": conflicts,
                            "operations": [h["operation"] for h in spark.sql(f"DESCRIBE HISTORY delta.`{table}`").orderBy("version").collect()]}
for name in ("retention", "compact"):
    run_and_read(name)

# delta-spark appends to every table delta-rs wrote (its protocol and features are delta-spark's to write),
# and delta-rs writes the catalog again after delta-spark did
from deltalake import DeltaTable
for name, path in t.items():
    df = spark.read.format("delta").load(path)
    n = df.count()
    df.limit(1).write.format("delta").mode("append").save(path)
    p = DeltaTable(path).protocol()
    out[name].update(spark_appended=spark.read.format("delta").load(path).count() - n,
                     protocol=[p.min_reader_version, p.min_writer_version])

# The catalog again, after retention and compaction changed the log: version 2 (1 is delta-spark's append),
# and time travel to version 0 gives the first run's rows.
assert catalog_job.main(runs["catalog"][1] + rs, spark=spark) == 0
history = spark.sql(f"DESCRIBE HISTORY delta.`{t['catalog']}`").orderBy("version").collect()
earlier = spark.read.format("delta").option("versionAsOf", 0).load(t["catalog"])
same_rows(earlier.collect(), first_catalog, "catalog version 0")
out["catalog_history"] = {"versions": [h["version"] for h in history],
                          "jobs": [json.loads(h["userMetadata"] or "{}").get("kafkalog.job") for h in history],
                          "latest_rows": spark.read.format("delta").load(t["catalog"]).count(),
                          "first_rows": len(first_catalog)}
print(json.dumps(out))
'''


def test_delta_spark_reads_every_table_the_jobs_write_and_the_export_table_takes_optimize_and_merge(tmp_path):
    if "delta" not in spark_jars.cached_jars(("delta",)):
        pytest.skip("delta-spark's jars are not cached here (python -m udfs.spark_jars fetch; .ci/run does)")
    from kafkalog.checkpoint.offset import read_offset_checkpoint, write_offset_checkpoint
    from kafkalog.tools.demo import DEMO_TOPIC, generate_demo_log_dir
    logs = tmp_path / "logs"
    generate_demo_log_dir(logs, partitions=2, records=RECORDS, consumer_groups=2)
    # the first exports see half of each demo partition (the high watermark bounds them); the concurrent
    # export sees the rest once the script raises the checkpointed high watermark to the log end
    hw_file = logs / "replication-offset-checkpoint"
    write_offset_checkpoint(hw_file, {tp: (RECORDS // 2 if tp[0] == DEMO_TOPIC else end)
                                      for tp, end in read_offset_checkpoint(hw_file).items()})
    now_ms = 1_767_225_600_000 + 7 * 86_400_000
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), str(now_ms), str(RECORDS)],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-6000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in ("catalog", "lookup", "reindex", "lag", "retention", "compact", "export"):
        assert got[name]["rows"] > 0, (name, got[name])
        assert got[name]["schema_equal"], (f"delta-spark reads other column names or types in the {name} table",
                                           got[name]["types"])
        assert got[name]["jobs"] == [name], (name, got[name])
        # the writer per job (udfs.delta_tables.JOB_WRITERS): delta-rs, though the session has delta-spark
        assert not any("Delta-Lake" in e for e in got[name]["engines"]), (name, got[name]["engines"])
        assert got[name]["spark_appended"] == 1 and got[name]["protocol"] == [1, 2], (name, got[name])
    c = got["export_concurrent"]
    assert c["after"] == c["distinct"] and c["duplicated"] == 0, c      # nothing duplicated
    assert c["after"] == c["before"] + RECORDS, c        # nothing lost: the 2 x RECORDS/2 new records, once
    assert "OPTIMIZE" in c["operations"], c
    h = got["catalog_history"]                                           # history and time travel
    assert h["versions"] == [0, 1, 2] and h["jobs"] == ["catalog", None, "catalog"], h
    assert h["first_rows"] > 0 and h["latest_rows"] > 0, h
