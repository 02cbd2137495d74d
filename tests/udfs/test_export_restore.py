"""The export and restore jobs end to end: export of kafka-python-written log dirs equals the oracle's
records (read back with delta-rs), a rerun after the log grew appends exactly the new records, a replayed
micro-batch the table already holds is skipped, a kill loop (SIGKILL of spark-submit's process group at
increasing delays until a run completes, then a clean run) leaves every record exactly once, and restore
gives segments kafka-python reads back equal, with the indexes Kafka's recovery builds."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")
from deltalake import DeltaTable  # noqa: E402

from kafkalog.checkpoint.meta_properties import read_meta_properties  # noqa: E402
from kafkalog.checkpoint.offset import read_offset_checkpoint, write_offset_checkpoint  # noqa: E402
from kafkalog.index.verify import verify_segment  # noqa: E402
from kafka_python_logs import (all_records, make_kafka_python_partition, make_transactional_partition,  # noqa: E402
                               standard_log_dir)
from oracle import read_all  # noqa: E402
from test_kafkalog_stream import grow  # noqa: E402
from udfs import export_job, restore_job  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
KILL_STEP_S = 1.0
pytestmark = pytest.mark.timeout(900)


def table_rows(table: Path, *, control: bool = False) -> list:
    """(key, value, topic, partition, offset, timestamp ms, headers) of the table, read by delta-rs."""
    t = DeltaTable(str(table)).to_pyarrow_table()
    if not control:
        t = t.filter(pa.compute.invert(t.column("isControl")))
    ts = t.column("timestamp").cast(pa.int64()).to_pylist()
    out = []
    for r, ms in zip(t.select(["key", "value", "topic", "partition", "offset", "headers"]).to_pylist(), ts):
        out.append((r["key"], r["value"], r["topic"], r["partition"], r["offset"], ms // 1000,
                    [(h["key"], h["value"]) for h in r["headers"] or []]))
    return sorted(out, key=lambda x: (x[2], x[3], x[4]))


def export(spark, logs, table, ckpt, report, *extra):
    rc = export_job.main(["--log-dirs", str(logs), "--table", str(table), "--checkpoint", str(ckpt),
                          "--report", str(report), *extra], spark=spark)
    assert rc == 0
    return json.loads(Path(report).read_text())


@pytest.fixture(scope="module")
def exported(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    logs = root / "logs"
    parts = standard_log_dir(logs)
    parts[("tx", 0)] = make_transactional_partition(logs, "tx", 0)
    report = export(spark, logs, root / "table", root / "ckpt", root / "r1.json")
    return root, logs, parts, report


def test_export_equals_the_oracle_and_reads_back_in_delta_rs(exported):
    root, _logs, parts, report = exported
    assert table_rows(root / "table") == sorted(all_records(parts), key=lambda x: (x[2], x[3], x[4]))
    # control records are kept for a faithful restore, flagged
    t = DeltaTable(str(root / "table")).to_pyarrow_table().filter(pa.compute.field("isControl"))
    assert sorted(t.column("offset").to_pylist()) == parts[("tx", 0)].control_offsets
    dt = DeltaTable(str(root / "table"))
    assert dt.metadata().partition_columns == ["topic"]
    assert dt.protocol().min_reader_version == 1 and dt.schema().to_arrow().field("timestamp").type.tz == "UTC"
    by_tp = {(p["topic"], p["partition"]): p for p in report["partitions"]}
    for (topic, p), pr in parts.items():
        extra = len(pr.control_offsets)
        assert by_tp[(topic, p)]["rows"] == len(pr.records) + extra
        assert by_tp[(topic, p)]["from_offset"] == 0 and by_tp[(topic, p)]["to_offset"] == pr.log_end_offset - 1
    assert report["data_loss"] == []


def test_rerun_appends_exactly_the_new_records(spark, exported):
    root, logs, parts, _ = exported
    report = export(spark, logs, root / "table", root / "ckpt", root / "r2.json")
    assert report["summary"]["rows"] == 0
    before = DeltaTable(str(root / "table")).version()
    more = grow(logs / "orders-0", parts[("orders", 0)].log_end_offset, 3, roll=True)
    new_part = make_kafka_python_partition(logs, "fresh", 0, codec=2, segments=1, batches_per_segment=2,
                                           records_per_batch=3, seed=9)
    # the high watermark bounds the export: payments-0's checkpointed HW is 10 below its log end
    hw_end = parts[("payments", 0)].log_end_offset - 10
    write_offset_checkpoint(logs / "replication-offset-checkpoint", {("payments", 0): hw_end})
    dry = root / "dry.json"
    assert export_job.main(["--log-dirs", str(logs), "--table", str(root / "table"), "--checkpoint",
                            str(root / "ckpt"), "--report", str(dry), "--dry-run"]) == 0
    assert DeltaTable(str(root / "table")).version() == before            # a dry run writes nothing
    planned = {(p["topic"], p["partition"]): (p["from_offset"], p["to_offset"])
               for p in json.loads(dry.read_text())["partitions"]}
    assert planned == {("orders", 0): (parts[("orders", 0)].log_end_offset, parts[("orders", 0)].log_end_offset + 12),
                       ("fresh", 0): (0, 6)}
    report = export(spark, logs, root / "table", root / "ckpt", root / "r3.json")
    assert report["summary"]["rows"] == 12 + 6
    rows = table_rows(root / "table")
    assert len(rows) == len(set((r[2], r[3], r[4]) for r in rows))
    new = [r for r in rows if (r[2] == "orders" and r[3] == 0 and r[4] >= parts[("orders", 0)].log_end_offset)
           or r[2] == "fresh"]
    assert sorted((r[2], r[4], r[1]) for r in new) == sorted(
        [("orders", r["offset"], r["value"]) for r in more] + [("fresh", r["offset"], r["value"]) for r in new_part.records])


def test_a_replayed_micro_batch_the_table_holds_is_skipped(spark, tmp_path):
    """A kill after the Delta commit and before Spark's commit mark leaves offsets/N without commits/N:
    removing commits/N recreates exactly that state; the replay must append nothing."""
    logs = tmp_path / "logs"
    make_kafka_python_partition(logs, "k", 0, codec=0, segments=2, batches_per_segment=3, records_per_batch=4, seed=3)
    export(spark, logs, tmp_path / "table", tmp_path / "ckpt", tmp_path / "r1.json", "--max-records-per-batch", "8")
    rows = table_rows(tmp_path / "table")
    commits = sorted((p for p in (tmp_path / "ckpt" / "commits").iterdir() if p.name.isdigit()),
                     key=lambda p: int(p.name))
    commits[-1].unlink()
    commits[-1].with_name(f".{commits[-1].name}.crc").unlink(missing_ok=True)
    report = export(spark, logs, tmp_path / "table", tmp_path / "ckpt", tmp_path / "r2.json")
    assert report["micro_batches"][0] == {"batch_id": int(commits[-1].name), "skipped": True}
    assert report["summary"]["rows"] == 0
    assert table_rows(tmp_path / "table") == rows


def test_a_table_exported_with_another_checkpoint_is_refused(spark, exported, tmp_path):
    root, logs, _parts, _ = exported
    from udfs.job import run

    before = DeltaTable(str(root / "table")).version()
    rc = run("export", lambda a: export_job.main(a, spark=spark),
             ["--log-dirs", str(logs), "--table", str(root / "table"), "--checkpoint", str(tmp_path / "other")])
    assert rc == 2 and DeltaTable(str(root / "table")).version() == before


def _spark_submit(args, log_path):
    env = dict(os.environ, SPARK_MASTER="local[2]")
    return subprocess.Popen([str(REPO / "spark-submit.sh"), *args], stdout=open(log_path, "w"),
                            stderr=subprocess.STDOUT, env=env, cwd=str(REPO), start_new_session=True)


def _logged_batches(ckpt: Path) -> int:
    folder = ckpt / "offsets"
    return sum(1 for p in folder.iterdir() if p.name.isdigit()) if folder.is_dir() else 0


@pytest.mark.slow
def test_kill_loop_leaves_every_record_exactly_once(spark, tmp_path):
    """SIGKILL of the whole process group k x KILL_STEP_S after the run's query logged its first micro-batch
    (k = 0, 1, 2, ...: before the table commit, around it, after Spark's commit mark, later), until a run
    completes; then one clean run. The clock starts when the query is up, not at spawn, so a loaded
    machine's slow JVM start does not turn every kill into a kill before anything happened."""
    logs, ckpt, table = tmp_path / "logs", tmp_path / "ckpt", tmp_path / "table"
    parts = {}
    for p in range(3):
        parts[("kill", p)] = make_kafka_python_partition(logs, "kill", p, codec=p, segments=2, batches_per_segment=5,
                                                         records_per_batch=20, seed=50 + p)
    args = ["export", "--log-dirs", str(logs), "--table", str(table), "--checkpoint", str(ckpt),
            "--max-records-per-batch", "120", "--report", str(tmp_path / "r.json")]
    kills, outcomes = 0, []
    while True:
        logged = _logged_batches(ckpt)
        job = _spark_submit(args, tmp_path / f"run-{kills}.log")
        while job.poll() is None and _logged_batches(ckpt) == logged:
            time.sleep(0.01)
        kill_at = time.monotonic() + kills * KILL_STEP_S
        while job.poll() is None and time.monotonic() < kill_at:
            time.sleep(0.01)
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(timeout=30)
            outcomes.append((kills * KILL_STEP_S, DeltaTable(str(table)).version()
                             if DeltaTable.is_deltatable(str(table)) else None, _logged_batches(ckpt)))
            kills += 1
            assert kills < 12, outcomes
            continue
        assert job.returncode == 0, (tmp_path / f"run-{kills}.log").read_text()[-3000:]
        break
    assert kills >= 2, f"the first runs should have been killed: {outcomes}"
    # the clean rerun on the tests' session: the run that completed went through spark-submit.sh already, and
    # this one's question (does a rerun append nothing?) is the job's, not the launcher's; one JVM start less
    assert export_job.main(args[1:], spark=spark) == 0
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["rows"] == 0
    rows = table_rows(table)
    assert rows == sorted(all_records(parts), key=lambda x: (x[2], x[3], x[4]))   # each record exactly once
    # what the kills hit, for the log of a failing run: (delay after the first logged micro-batch, table version,
    # micro-batches logged)
    print("kills:", outcomes)


def test_restore_reads_back_in_kafka_python_with_recovery_indexes(spark, exported, tmp_path):
    root, _logs, parts, _ = exported
    out = tmp_path / "restored"
    (tmp_path / "server.properties").write_text("node.id=7\nlog.segment.bytes=700\n")
    report = tmp_path / "restore.json"
    rc = restore_job.main(["--table", str(root / "table"), "--log-dir", str(out), "--broker-config",
                           str(tmp_path / "server.properties"), "--topic-config", "payments:segment.bytes=100000",
                           "--report", str(report)], spark=spark)
    assert rc == 0
    done = {(p["topic"], p["partition"]): p for p in json.loads(report.read_text())["partitions"]}
    table_now = DeltaTable(str(root / "table")).to_pyarrow_table()
    for (topic, p), pr in parts.items():
        folder = out / f"{topic}-{p}"
        logs = sorted(folder.glob("*.log"))
        got = [r for log in logs for r in read_all(log.read_bytes())]
        sub = table_now.filter((pa.compute.field("topic") == topic) & (pa.compute.field("partition") == p))
        assert sorted(r["offset"] for r in got) == sorted(sub.column("offset").to_pylist())   # markers too
        data = [r for r in got if r["offset"] not in set(pr.control_offsets)]
        # the records kafka-python wrote (a test before this one appended more to orders-0)
        assert [r for r in data if r["offset"] < pr.log_end_offset] == pr.records
        assert done[(topic, p)]["log_end_offset"] == max(sub.column("offset").to_pylist()) + 1
        if topic == "payments":
            assert len(logs) == 1
        elif topic != "tx":
            assert len(logs) > 1, "segment.bytes=700 rolls these partitions"
        open_txns: dict = {}
        for log in logs:
            v = verify_segment(log, open_txns=open_txns)
            open_txns = v.open_txns_after
            assert all(x.status == "identical" for x in v.verdicts), [(x.kind, x.status, x.reason) for x in v.verdicts]
    meta = read_meta_properties(out / "meta.properties")
    assert meta.node_id == 7
    hw = read_offset_checkpoint(out / "replication-offset-checkpoint")
    assert hw == {tp: d["log_end_offset"] for tp, d in done.items()}


def test_restore_dry_run_counts_and_writes_nothing(spark, exported, tmp_path):
    root, _logs, parts, _ = exported
    report = tmp_path / "dry.json"
    assert restore_job.main(["--table", str(root / "table"), "--log-dir", str(tmp_path / "new"), "--topics", "payments",
                             "--dry-run", "--report", str(report)], spark=spark) == 0
    got = {(p["topic"], p["partition"]): (p["records"], p["log_end_offset"])
           for p in json.loads(report.read_text())["partitions"]}
    assert got == {tp: (len(pr.records), pr.log_end_offset) for tp, pr in parts.items() if tp[0] == "payments"}
    assert not (tmp_path / "new").exists()


def test_restore_refuses_a_non_empty_log_dir(tmp_path, exported):
    root = exported[0]
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "meta.properties").write_text("x")
    from udfs.job import run
    assert run("restore", restore_job.main, ["--table", str(root / "table"), "--log-dir", str(tmp_path / "r")]) == 2
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["meta.properties"]


@pytest.mark.parametrize("args,message", [
    (["--topic-config", "paymnts:segment.bytes=1000"],
     "--topic-config paymnts:segment.bytes=1000: no partition of topic paymnts in the table"),
    (["--topic-config", "paymnts:segment.bytes=1000", "--dry-run"], "(did you mean payments?)"),
    (["--topics", "ordrs"], "--topics: no records of ordrs in"),
    (["--topics", "ordrs", "--dry-run"], "(did you mean orders?)"),
])
def test_restore_refuses_names_the_table_does_not_hold(spark, exported, tmp_path, capsys, args, message):
    """A misspelt topic would restore with the default segment size, or restore nothing of it: exit 2,
    nothing written."""
    root = exported[0]
    from udfs.job import run
    rc = run("restore", lambda argv: restore_job.main(argv, spark=spark),
             ["--table", str(root / "table"), "--log-dir", str(tmp_path / "r"), *args])
    err = capsys.readouterr().err
    assert rc == 2 and message in err, err
    assert not (tmp_path / "r").exists()


def test_restore_a_filtered_data_source_frame(spark, tmp_path):
    logs = tmp_path / "logs"
    parts = standard_log_dir(logs)
    df = (spark.read.format("kafkalog").option("includeHeaders", "true").option("includeBatchColumns", "true")
          .load(str(logs)))
    written = restore_job.restore(df.where("topic = 'payments'"), tmp_path / "out")
    assert [(w.topic, w.partition) for w in written] == [("payments", 0), ("payments", 1)]
    for p in (0, 1):
        got = [r for log in sorted((tmp_path / "out" / f"payments-{p}").glob("*.log")) for r in read_all(log.read_bytes())]
        assert got == parts[("payments", p)].records
