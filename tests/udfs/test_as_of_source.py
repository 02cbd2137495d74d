"""``spark.read.format("kafkalog").option("asOf", ...)`` and ``spark-submit.sh asof`` against the plain
replay of the records (``kafkalog.source.as_of_table.reference_rows``): two partitions with tombstones,
an aborted and an open transaction, timestamps out of order; the job's per-partition refusal of a
partition compacted past its cut (tests/source/test_as_of.py holds the library to the replay)."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")
from chispa import assert_df_equality  # noqa: E402

from kafkalog.format.control_record import COMMIT, parse_control_type  # noqa: E402
from kafkalog.source.as_of_table import reference_rows  # noqa: E402
from kafkalog.testing import build_log_dir, records_of  # noqa: E402

pytestmark = pytest.mark.timeout(600)
T = 1_700_000_000_000
ORDER = ["topic", "partition", "offset"]


def _log(path):
    rows = []
    for p in (0, 1):
        rows += [
            {"topic": "kt", "partition": p, "key": "a", "value": f"a1-{p}", "timestamp": T + 10},
            {"topic": "kt", "partition": p, "key": "b", "value": "b1", "timestamp": T + 20},
            {"topic": "kt", "partition": p, "key": "a", "value": None, "timestamp": T + 30},      # tombstone
            {"topic": "kt", "partition": p, "key": "c", "value": "ab", "producer_id": 9, "transactional": True,
             "timestamp": T + 31},
            {"topic": "kt", "partition": p, "control": "abort", "producer_id": 9, "timestamp": T + 32},
            {"topic": "kt", "partition": p, "key": "b", "value": "late", "timestamp": T + 5},     # out of order
            {"topic": "kt", "partition": p, "key": "d", "value": "open", "producer_id": 8, "transactional": True,
             "timestamp": T + 40},
            {"topic": "kt", "partition": p, "key": "a", "value": "a2", "timestamp": T + 50 + p * 100},
            {"topic": "kt", "partition": p, "control": "commit", "producer_id": 8, "timestamp": T + 60 + p * 100},
        ]
    return build_log_dir(path, rows)


def _expected(spark, path, cuts):
    from pyspark.sql.types import StructType
    from udfs.kafkalog_source import KAFKA_FIELDS

    records = records_of(path, include_control=True).to_pylist()
    data = []
    for p, cut in cuts.items():
        mine = [dict(r) for r in records if r["partition"] == p]
        for r in mine:
            if r["isControl"]:
                r["control"] = "commit" if parse_control_type(r["key"]) == COMMIT else "abort"
        for r in reference_rows(mine, cut):
            data.append((r["key"], r["value"], "kt", p, r["offset"],
                         r["timestamp"], 0))
    return spark.createDataFrame(data, StructType(KAFKA_FIELDS)).orderBy(*ORDER)


def test_as_of_option_equals_the_replay(spark, tmp_path):
    path = _log(tmp_path / "logs")
    read = spark.read.format("kafkalog")
    df = read.option("asOf", str(T + 55)).load(str(path))
    assert df.schema == read.load(str(path)).schema            # the normal read's schema
    # the first timestamp >= T+55: partition 0's commit marker (offset 8, T+60), partition 1's a2 (offset 7,
    # T+150); producer 8's transaction is open at both cuts
    assert_df_equality(df.orderBy(*ORDER), _expected(spark, path, {0: 8, 1: 7}), ignore_nullable=True)
    by_offsets = spark.read.format("kafkalog").option("asOfOffsets", json.dumps({"kt": {"0": -1, "1": 3}})) \
        .load(str(path))
    assert_df_equality(by_offsets.orderBy(*ORDER), _expected(spark, path, {0: 9, 1: 3}), ignore_nullable=True)


def test_asof_job_writes_the_table_and_leaves_out_a_partition_compacted_past_its_cut(spark, tmp_path):
    import kafkalog
    from udfs import asof_job, delta_tables

    path = _log(tmp_path / "logs")
    rows = [{"topic": "cfg", "key": "k%d" % (i % 3), "value": "v%d" % i, "timestamp": T + i} for i in range(40)]
    build_log_dir(tmp_path / "cfg", rows, segment_bytes=300)
    kafkalog.clean_log_dir(tmp_path / "cfg", configs=kafkalog.configs_from_mappings(
        topics={"cfg": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}}), now_ms=T + 10_000_000)
    report, table = tmp_path / "report.json", tmp_path / "table"
    dirs = f"{path},{tmp_path / 'cfg'}"
    assert asof_job.main(["--log-dirs", dirs, "--as-of", str(T + 3), "--table", str(table), "--dry-run",
                          "--report", str(report), "--topic-config", "cfg:cleanup.policy=compact"], spark=spark) == 1
    planned = json.loads(report.read_text())
    assert not (table / "_delta_log").exists()
    by_tp = {(p["topic"], p["partition"]): p for p in planned["partitions"]}
    assert not by_tp[("cfg", 0)]["exact"] and "compacted offsets below" in by_tp[("cfg", 0)]["problem"]
    assert by_tp[("kt", 0)]["exact"] and planned["summary"]["left_out"] == 1
    assert "cleanup.policy=delete has no compact" in by_tp[("kt", 1)]["policy_warning"]      # answered all the same
    assert by_tp[("cfg", 0)]["policy_warning"] is None
    assert asof_job.main(["--log-dirs", dirs, "--as-of", str(T + 55), "--topics", "kt", "--table", str(table),
                          "--report", str(report)], spark=spark) == 0
    written = delta_tables.read_table(spark, table).select(*_expected(spark, path, {}).columns)
    assert_df_equality(written.orderBy(*ORDER), _expected(spark, path, {0: 8, 1: 7}), ignore_nullable=True)
    from udfs.job import run

    assert run("asof", asof_job.main, ["--log-dirs", dirs, "--as-of", "yesterday", "--table", str(table)]) == 2
