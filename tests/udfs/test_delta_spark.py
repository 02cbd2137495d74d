"""delta-spark — the Delta reader kafkalog's users have — reads the tables kafkalog's jobs write (issue 32):
``spark.read.format("delta")`` gives the job's rows, Delta's history lists each run with kafkalog's commit
metadata, and time travel gives an earlier run's rows.

delta-spark 4.4 refuses even a read without its SQL extension and catalog, and a session with them makes
every job write through delta-spark (udfs.delta_tables' ``auto``); so this runs in a Python process of its
own with ``build_session(packages=("delta",))`` instead of the suite's shared session, and the job writes
with ``--delta-engine rs`` (delta-rs: what the jobs write with by default)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")

from udfs import spark_jars  # noqa: E402

from test_spark_jobs import two_log_dirs  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import json, sys
from chispa import assert_df_equality
from udfs import catalog_job, delta_tables
from udfs.session import build_session, delta_spark_available

d1, d2, table = sys.argv[1:4]
spark = build_session("kafkalog-delta-spark-test", master="local[1]", packages=("delta",),
                      conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1"})
assert delta_spark_available(spark), "delta-spark did not load"
rs = ["--delta-engine", "rs"]
assert catalog_job.main(["--log-dirs", f"{d1},{d2}", "--catalog", table] + rs, spark=spark) == 0
first = delta_tables.read_table(spark, table).collect()
assert catalog_job.main(["--log-dirs", d2, "--catalog", table] + rs, spark=spark) == 0
ours = delta_tables.read_table(spark, table)

theirs = spark.read.format("delta").load(table)
assert_df_equality(theirs, ours, ignore_row_order=True, ignore_nullable=True)
history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").orderBy("version").collect()
earlier = spark.read.format("delta").option("versionAsOf", 0).load(table)
assert_df_equality(earlier, spark.createDataFrame(first, ours.schema).select(earlier.columns),
                   ignore_row_order=True, ignore_nullable=True)
print(json.dumps({"rows": theirs.count(), "first_rows": len(first), "schema_equal": theirs.schema == ours.schema,
                  "versions": [h["version"] for h in history],
                  "metadata": [h["userMetadata"] for h in history]}))
'''


def test_delta_spark_reads_the_catalog_table_its_history_and_an_earlier_version(tmp_path):
    if "delta" not in spark_jars.cached_jars(("delta",)):
        pytest.skip("delta-spark's jars are not cached here (python -m udfs.spark_jars fetch; .ci/run does)")
    dirs = two_log_dirs(tmp_path)
    table = tmp_path / "catalog"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(dirs[0]), str(dirs[1]), str(table)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["versions"] == [0, 1]
    assert [json.loads(m or "{}").get("kafkalog.job") for m in got["metadata"]] == ["catalog", "catalog"], got
    assert got["first_rows"] > got["rows"] > 0          # the second run catalogued one log dir of two
    assert got["schema_equal"], "delta-spark reads other column types than kafkalog wrote"
