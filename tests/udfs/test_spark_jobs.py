"""The Spark jobs end to end on generated log dirs: catalog and retention, their Delta tables, reports,
exit codes and safety rules — on the one session-scoped local[2] SparkSession."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")

from chispa import assert_df_equality  # noqa: E402

from kafkalog.catalog import catalog_table  # noqa: E402
from kafkalog.log.local_log import load_partition_path  # noqa: E402
from kafkalog.retention.deletion import deletion_stamp_ns, run_tag  # noqa: E402
from udfs import catalog_job, delta_tables, retention_job  # noqa: E402
from udfs.job import run  # noqa: E402
from kafkalog.checkpoint.offset import read_offset_checkpoint
from kafkalog.fs.names import LOG_START_OFFSET_CHECKPOINT

from logdirs import make_partition, snapshot, write_checkpoints  # noqa: E402
from log.test_logdir import HOLD_LOCK  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DAY = 86_400_000
NOW = 400 * DAY


def two_log_dirs(tmp_path):
    """Two log dirs: orders (3 partitions, old and new segments) and a compacted topic."""
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    for i, d in enumerate(dirs):
        for p in range(i, 3, 2):
            make_partition(d, "orders", p, [[DAY + p, DAY + 9], [2 * DAY], [NOW - DAY, NOW - DAY], [NOW - 5]],
                           first_offset=10 * p)
        write_checkpoints(d, high_watermarks={("orders", p): 10 * p + 6 for p in range(i, 3, 2)},
                          log_start_offsets={})
    make_partition(dirs[1], "state", 0, [[DAY], [DAY], [NOW]])
    write_checkpoints(dirs[1], high_watermarks={("orders", 1): 16, ("state", 0): 3}, log_start_offsets={})
    return dirs


def test_catalog_job_writes_a_delta_table_equal_to_the_local_catalog(spark, tmp_path):
    dirs = two_log_dirs(tmp_path)
    (dirs[0] / "not-a-partition").mkdir()
    table_path, report_path = tmp_path / "catalog", tmp_path / "catalog.json"
    code = catalog_job.main(["--log-dirs", f"{dirs[0]},{dirs[1]}", "--catalog", str(table_path),
                             "--report", str(report_path)], spark=spark)
    assert code == 1                                   # the odd folder is reported, the rest is catalogued
    report = json.loads(report_path.read_text())
    assert report["summary"]["segments"] == 15 and report["summary"]["failed_folders"] == 1
    assert any("not-a-partition" in p["partition_dir"] for p in report["problems"])

    got = delta_tables.read_table(spark, table_path).where("kind = 'segment'")
    states = [load_partition_path(folder) for d in dirs for folder in sorted(d.glob("*-[0-9]*"))]
    expected = spark.createDataFrame(catalog_table(states))
    columns = ["topic", "partition", "base_offset", "next_base_offset", "size", "largest_timestamp",
               "largest_timestamp_source", "is_active", "log_start_offset", "log_end_offset",
               "high_watermark_checkpoint"]
    assert_df_equality(got.select(columns), expected.select(columns), ignore_row_order=True, ignore_nullable=True)

    catalog_job.main(["--log-dirs", str(dirs[1]), "--catalog", str(table_path)], spark=spark)
    history = delta_tables.table_history(table_path)
    assert [h["version"] for h in history] == [1, 0]
    assert all(h.get("kafkalog.job") == "catalog" for h in history)
    assert delta_tables.read_table(spark, table_path).select("partition_dir").distinct().count() == 2
    from deltalake import DeltaTable
    protocol = DeltaTable(str(table_path)).protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 2)


def test_retention_dry_run_then_execute_then_nothing(spark, tmp_path):
    dirs = two_log_dirs(tmp_path)
    args = ["--log-dirs", str(dirs[0]), "--log-dirs", str(dirs[1]), "--now-ms", str(NOW),
            "--topic-config", "state:cleanup.policy=compact", "--audit", str(tmp_path / "audit")]
    before = snapshot(tmp_path / "d1"), snapshot(tmp_path / "d2")
    assert retention_job.main(args + ["--report", str(tmp_path / "plan.json")], spark=spark) == 0
    assert (snapshot(tmp_path / "d1"), snapshot(tmp_path / "d2")) == before
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["executed"] is False and plan["summary"]["dry_run"] is True
    decided = {(s["topic"], s["partition"], s["base_offset"]): (s["decision"], s["rule"]) for s in plan["segments"]}
    for p in range(3):   # the two segments from days 1-2 are older than 7 days; the walk stops at day NOW-1
        base = 10 * p
        assert decided[("orders", p, base)] == ("delete", "retention.ms")
        assert decided[("orders", p, base + 2)] == ("delete", "retention.ms")
        assert decided[("orders", p, base + 3)] == ("keep", None)
        assert decided[("orders", p, base + 5)] == ("keep", None)
    assert {decided[("state", 0, b)] for b in (0, 1, 2)} == {("keep", None)}   # compact only: no time rule
    assert set(plan["segments"][0]) >= {"topic", "partition", "base_offset", "size", "decision", "rule"}
    assert plan["summary"]["topics"]["orders"]["segments_deleted"] == 6

    assert retention_job.main(args + ["--execute", "--report", str(tmp_path / "done.json")], spark=spark) == 0
    done = json.loads((tmp_path / "done.json").read_text())
    assert done["summary"]["segments_deleted"] == 6 and done["summary"]["statuses"] == {"applied": 4}
    for p in range(3):
        folder = dirs[p % 2] / f"orders-{p}"
        assert sorted(n for n in os.listdir(folder) if n.endswith(".log")) == [
            f"{10 * p + 3:020d}.log", f"{10 * p + 5:020d}.log"]
        deleted = [folder / n for n in os.listdir(folder) if n.endswith(".deleted")]
        assert len(deleted) == 6
        # stamped with the run, so a retried task of this run would report them (test_log_deletion)
        assert {f.stat().st_mtime_ns for f in deleted} == {deletion_stamp_ns(NOW, run_tag(done["run_id"]))}

    after = snapshot(tmp_path / "d1"), snapshot(tmp_path / "d2")
    assert retention_job.main(args + ["--execute"], spark=spark) == 0
    assert (snapshot(tmp_path / "d1"), snapshot(tmp_path / "d2")) == after      # idempotent

    audit = delta_tables.read_table(spark, tmp_path / "audit")
    assert audit.select("run_id").distinct().count() == 3
    assert audit.where("executed and decision = 'delete'").count() == 6
    assert len(delta_tables.table_history(tmp_path / "audit")) == 3


def test_log_start_offset_checkpoint_is_rewritten(spark, tmp_path):
    folder = make_partition(tmp_path / "d", "t", 0, [[NOW] * 3, [NOW] * 3, [NOW]])
    write_checkpoints(tmp_path / "d", high_watermarks={("t", 0): 7}, log_start_offsets={("t", 0): 4, ("x", 0): 2})
    code = retention_job.main(["--log-dirs", str(tmp_path / "d"), "--now-ms", str(NOW), "--execute"], spark=spark)
    assert code == 0
    assert not (folder / "00000000000000000000.log").exists()
    assert read_offset_checkpoint(tmp_path / "d" / LOG_START_OFFSET_CHECKPOINT) == {
        ("t", 0): 4, ("x", 0): 2}


def test_retention_takes_kafka_delete_records_json(spark, tmp_path, capsys):
    """--delete-records-json: the dry run plans as if the log start offsets had moved and writes
    nothing; --execute moves them (checkpoint) and deletes the segments wholly below in the same run."""
    folder = make_partition(tmp_path / "d", "t", 0, [[NOW] * 3, [NOW] * 3, [NOW]])
    write_checkpoints(tmp_path / "d", high_watermarks={("t", 0): 7}, log_start_offsets={})
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0, "offset": 4}]}))
    args = ["--log-dirs", str(tmp_path / "d"), "--now-ms", str(NOW), "--delete-records-json", str(spec)]
    before = snapshot(tmp_path / "d")
    assert retention_job.main(args + ["--report", str(tmp_path / "plan.json")], spark=spark) == 0
    assert snapshot(tmp_path / "d") == before
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert [(s["base_offset"], s["decision"], s["rule"]) for s in plan["segments"]] == [
        (0, "delete", "log_start_offset"), (3, "keep", None), (6, "keep", None)]
    assert plan["partitions"][0]["new_log_start_offset"] == 4
    assert retention_job.main(args + ["--execute"], spark=spark) == 0
    assert sorted(p.name for p in folder.glob("*.log")) == [f"{3:020d}.log", f"{6:020d}.log"]
    assert read_offset_checkpoint(tmp_path / "d" / LOG_START_OFFSET_CHECKPOINT) == {("t", 0): 4}
    # a partition the log dirs do not hold: exit 2, nothing touched
    after = snapshot(tmp_path / "d")
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": "nope", "partition": 0, "offset": 4}]}))
    assert run("retention", retention_job.main, args + ["--execute"]) == 2
    assert "nope-0" in capsys.readouterr().err
    assert {k: v for k, v in snapshot(tmp_path / "d").items() if k != ".lock"} == \
        {k: v for k, v in after.items() if k != ".lock"}


def test_a_log_dir_locked_by_a_live_broker_is_refused(spark, tmp_path, capsys):
    dirs = two_log_dirs(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(dirs[0] / ".lock")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = snapshot(dirs[0])
        report = tmp_path / "r.json"
        code = retention_job.main(["--log-dirs", f"{dirs[0]},{dirs[1]}", "--now-ms", str(NOW), "--execute",
                                   "--report", str(report)], spark=spark)
        assert code == 1
        assert snapshot(dirs[0]) == before
        result = json.loads(report.read_text())
        assert [r["log_dir"] for r in result["summary"]["log_dirs_refused"]] == [str(dirs[0])]
        assert result["summary"]["topics"]["orders"]["segments_deleted"] == 2   # d2's orders-1 went ahead
        assert "refused" in capsys.readouterr().out
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)


@pytest.mark.parametrize("argv, message", [
    ([], "--log-dirs"),
    (["--log-dirs", "/nonexistent/x"], "does not exist"),
    (["--log-dirs", "{d}", "--topic-config", "orders:retention.ms=soon"], "retention.ms"),
    (["--log-dirs", "{d}", "--now-ms", "yesterday"], "ISO-8601"),
    (["--log-dirs", "{d}", "--bogus"], "unrecognized arguments"),
])
def test_bad_arguments_exit_2_with_one_line(tmp_path, capsys, argv, message):
    argv = [a.replace("{d}", str(tmp_path)) for a in argv]
    assert run("retention", retention_job.main, argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_spark_submit_script_runs_a_job_with_the_zip(tmp_path):
    two_log_dirs(tmp_path)
    env = dict(os.environ, SPARK_MASTER="local[1]")
    listing = subprocess.run([str(REPO / "spark-submit.sh"), "--help"], capture_output=True, text=True, env=env)
    assert listing.returncode == 0 and "retention" in listing.stdout and "catalog" in listing.stdout
    unknown = subprocess.run([str(REPO / "spark-submit.sh"), "nope"], capture_output=True, text=True, env=env)
    assert unknown.returncode == 2 and "unknown job" in unknown.stderr
    report = tmp_path / "r.json"
    done = subprocess.run([str(REPO / "spark-submit.sh"), "retention", "--log-dirs", str(tmp_path / "d1"),
                           "--now-ms", str(NOW), "--report", str(report)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "to be freed" in done.stdout
    # results alone on stdout; progress (partitions done) and Spark's log on stderr
    assert "[kafkalog" not in done.stdout and "WARN" not in done.stdout
    assert re.search(r"\] planning retention: (\d+)/\1 partitions$", done.stderr, re.M), done.stderr
    assert "starting Spark" in done.stderr
    assert json.loads(report.read_text())["summary"]["segments_deleted"] == 4
    # issue 33: a successful run says nothing alarming — no ERROR line, no stack trace (Python or Java)
    assert not re.search(r"^\S+ \S+ ERROR |Traceback|Exception|^\s+at [\w.$]+\(", done.stderr, re.M), done.stderr


def test_delta_engine_choice_without_delta_jars(spark, tmp_path):
    # these machines have no Delta jars (no Maven): auto falls back to delta-rs, forcing spark is a clear error
    assert delta_tables.choose_engine(spark, "auto") == "rs"
    with pytest.raises(RuntimeError, match="--delta-engine rs"):
        delta_tables.choose_engine(spark, "spark")
    df = spark.createDataFrame([(1, "a"), (2, "b")], "n long, s string")
    first = delta_tables.write_table(df, tmp_path / "t", engine="rs", metadata={"job": "test"})
    second = delta_tables.write_table(df.limit(1), tmp_path / "t", mode="overwrite", engine="rs")
    assert (first.version, first.rows, second.version, second.rows) == (0, 2, 1, 1)
    assert sorted(r.n for r in delta_tables.read_table(spark, tmp_path / "t").collect()) == [1]
    assert [h["operation"] for h in delta_tables.table_history(tmp_path / "t")][0] in ("WRITE", "CREATE OR REPLACE TABLE")


def test_an_unexpected_failure_is_exit_3_with_what_to_do(capsys):
    def main(argv):
        raise RuntimeError("Python worker exited unexpectedly (crashed)\nmore lines")
    assert run("retention", main, []) == 3
    err = capsys.readouterr().err
    assert "failed: RuntimeError: Python worker exited unexpectedly (crashed)" in err
    assert "kafkalog recover" in err and "run the job again" in err


def test_python_workers_cap_their_buffer_pool_from_spark_defaults(spark):
    """conf/spark-defaults.conf gives each Python worker a smaller idle pool than a lone process's."""
    from kafkalog.format.buffer_pool import DEFAULT_MAX_IDLE_BYTES

    def worker_pool_cap(_rows):      # defined here so it is pickled by value, not by module name
        from kafkalog.format.buffer_pool import OUTPUT_POOL
        yield OUTPUT_POOL.max_idle_bytes

    caps = set(spark.sparkContext.parallelize(range(2), 2).mapPartitions(worker_pool_cap).collect())
    assert caps == {64 << 20}
    assert DEFAULT_MAX_IDLE_BYTES > 64 << 20


def test_the_summary_counts_what_a_retried_tasks_lost_attempt_freed(capsys):
    from kafkalog.retention.run import retention_summary
    outcome = dict(topic="t", status="applied", partition_dir="d/t-0", message=None, decisions=[{}] * 4,
                   segments_deleted=1, bytes_freed=100, segments_deleted_earlier=2, bytes_freed_earlier=250,
                   bytes_purged=0)
    summary = retention_summary([outcome])
    summary.update(log_dirs_refused=[])
    retention_job._print_summary(dict(summary=summary, executed=True, now_ms=5))
    out = capsys.readouterr().out
    assert "3 of 4 segments, 350 bytes freed (2 segments, 250 bytes of them by an earlier attempt" in out
    assert "  t: 3 segments, 350 bytes freed in 1 partitions (2 segments, 250 bytes" in out
