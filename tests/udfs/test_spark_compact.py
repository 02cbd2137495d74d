"""``spark-submit.sh compact`` end to end on generated multi-partition log dirs: the Spark job's result is
byte for byte the single-process cleaner's (kafkalog.cleaner), dry runs and second runs change nothing,
the audit table, --explain, a locked log dir, bad arguments — on the session-scoped local[2] session."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")

from chispa import assert_df_equality  # noqa: E402

from kafkalog.cleaner.clean_options import CleanOptions
from kafkalog.checkpoint.offset import read_offset_checkpoint, write_offset_checkpoint  # noqa: E402
from kafkalog.fs.names import CLEANER_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT  # noqa: E402
from kafkalog.cleaner import clean_log_dir, clean_partition  # noqa: E402
from kafkalog.config import configs_from_mappings  # noqa: E402
from kafkalog.format import control_record as cr  # noqa: E402
from udfs import compact_job, delta_tables  # noqa: E402

from logdirs import make_partition, snapshot  # noqa: E402
from cleaner.test_cleaner_crash import LOCK_HOLDER, crash_log  # noqa: E402
from cleaner_model import DAY, T0, TOPIC, data, example_log, marker, write_partition  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NOW = T0 + 10 * DAY
TOPIC_SETTINGS = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.3", "delete.retention.ms": str(DAY),
                  "segment.bytes": "700"}          # small: several groups per partition


def k(i: int) -> bytes:
    return b"k%d" % i


def checkpointed_log():
    """Cleaned once up to offset 5 (the checkpoint); the dirty part supersedes clean records, deletes
    k2, commits a transaction and leaves a tombstone with an old horizon."""
    return [
        [data(0, [(k(1), b"a" * 30), (k(2), b"b" * 30), (k(3), b"c" * 30)]), data(3, [(k(4), b"d" * 30), (k(5), b"e")])],
        [data(5, [(k(1), b"f" * 30), (k(2), None)]), data(7, [(k(6), b"g")], pid=3, txn=True), marker(8, 3, cr.COMMIT),
         data(9, [(k(3), b"h"), (k(6), b"i"), (k(9), b"j")])],
        [data(12, [(k(4), b"x"), (k(1), b"y")]), data(14, [(None, b"no key"), (k(7), None)])],
        [data(16, [(k(8), b"active")])],
    ]


def build(root: Path) -> list[Path]:
    """d1: compacted-0 (aborted txn, tombstone, null key), compacted-1 (checkpoint at 5, committed txn);
    d2: compacted-2 (aborted + committed txns), compacted-3 (ratio below the minimum: not cleaned),
    orders-0 (cleanup.policy=delete: not compacted)."""
    d1, d2 = root / "d1", root / "d2"
    hw = {}
    layout = [(d1, 0, crash_log(), None), (d1, 1, checkpointed_log(), 5), (d2, 2, example_log(), None),
              (d2, 3, checkpointed_log(), 12)]
    cleaner = {}
    for d, p, segments, checkpoint in layout:
        write_partition(d, segments, partition=p)
        hw.setdefault(d, {}).update(read_offset_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT))
        if checkpoint is not None:
            cleaner.setdefault(d, {})[(TOPIC, p)] = checkpoint
    make_partition(d2, "orders", 0, [[T0, T0], [T0]])
    hw[d2][("orders", 0)] = 3
    for d in (d1, d2):
        write_offset_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT, hw[d])
        if d in cleaner:
            write_offset_checkpoint(d / CLEANER_OFFSET_CHECKPOINT, cleaner[d])
    return [d1, d2]


def job_args(dirs, *extra):
    args = ["--log-dirs", ",".join(map(str, dirs)), "--now-ms", str(NOW)]
    for key, value in TOPIC_SETTINGS.items():
        args += ["--topic-config", f"{TOPIC}:{key}={value}"]
    return args + list(extra)


def local_configs():
    return configs_from_mappings(topics={TOPIC: dict(TOPIC_SETTINGS)})


def tree(root: Path) -> dict:
    return {k: v for k, v in snapshot(root).items() if not k.endswith(".lock")}


def test_compact_equals_the_local_cleaner_then_dry_run_and_second_run_change_nothing(spark, tmp_path):
    dirs = build(tmp_path / "spark")
    shutil.copytree(tmp_path / "spark", tmp_path / "local")
    before = tree(tmp_path / "spark")
    audit_path, report_path = tmp_path / "audit", tmp_path / "dry.json"

    # dry run: the full computation, nothing written in the log dirs
    assert compact_job.main(job_args(dirs, "--dry-run", "--report", str(report_path), "--audit", str(audit_path)),
                            spark=spark) == 0
    assert tree(tmp_path / "spark") == before
    dry = json.loads(report_path.read_text())
    assert {(p["topic"], p["partition"]): p["status"] for p in dry["partitions"]} == {
        (TOPIC, 0): "would-clean", (TOPIC, 1): "would-clean", (TOPIC, 2): "would-clean", (TOPIC, 3): "skipped",
        ("orders", 0): "skipped"}

    # the real run equals the single-process cleaner, file for file, byte for byte
    local = {}
    for d in ("d1", "d2"):
        for r in clean_log_dir(tmp_path / "local" / d, configs=local_configs(), now_ms=NOW):
            local[(r.topic, r.partition)] = r
    assert {tp for tp, r in local.items() if r.cleaned} == {(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)}
    assert compact_job.main(job_args(dirs, "--report", str(tmp_path / "run.json"), "--audit", str(audit_path)),
                            spark=spark) == 0
    after = tree(tmp_path / "spark")
    assert after != before
    assert after == tree(tmp_path / "local")
    run = json.loads((tmp_path / "run.json").read_text())
    parts = {(p["topic"], p["partition"]): p for p in run["partitions"]}
    for tp, r in local.items():
        if not r.cleaned:
            continue
        a = r.audit()
        got = parts[tp]
        assert got["status"] == "cleaned"
        assert {k: got[k] for k in ("records_read", "records_kept", "records_superseded", "tombstones_removed",
                                    "aborted_records_removed", "markers_removed", "bytes_written", "end_offset",
                                    "map_size")} == \
            {k: a[k] for k in ("records_read", "records_kept", "records_superseded", "tombstones_removed",
                               "aborted_records_removed", "markers_removed", "bytes_written", "end_offset",
                               "map_size")}
        assert got["bytes_before"] - got["bytes_after"] == sum(g.bytes_before - g.bytes_after for g in r.groups)
    assert parts[(TOPIC, 1)]["records_superseded"] > 0 and parts[(TOPIC, 0)]["aborted_records_removed"] > 0
    assert parts[(TOPIC, 3)]["reason"].startswith("dirty ratio is not above")
    assert parts[(TOPIC, 3)]["cleanable_ratio"] is not None
    assert parts[("orders", 0)]["reason"] == "cleanup.policy does not contain compact"
    # the dry run predicted exactly what the run did
    dry_parts = {(p["topic"], p["partition"]): p for p in dry["partitions"]}
    for tp in [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)]:
        assert dry_parts[tp]["records_kept"] == parts[tp]["records_kept"]
        assert dry_parts[tp]["bytes_after"] == parts[tp]["bytes_after"]

    # a second run with the same inputs changes nothing
    assert compact_job.main(job_args(dirs, "--report", str(tmp_path / "again.json")), spark=spark) == 0
    assert tree(tmp_path / "spark") == after
    again = json.loads((tmp_path / "again.json").read_text())
    assert again["summary"]["statuses"] == {"skipped": 5}
    assert 0 < again["summary"]["stage_s"] <= again["summary"]["duration_s"]     # the stage's part of the run

    # the audit table: one row per partition and run, appended (dry run, then run)
    table = delta_tables.read_table(spark, audit_path)
    got = table.where("topic = 'compacted' and status in ('cleaned', 'would-clean')").select(
        "dry_run", "topic", "partition", "status", "records_before", "records_after", "records_superseded",
        "tombstones_removed", "aborted_records_removed", "bytes_after")
    expected_rows = []
    for dry_run in (True, False):
        for (topic, partition), r in sorted(local.items()):
            if r.cleaned:
                a = r.audit()
                expected_rows.append((dry_run, topic, partition, "would-clean" if dry_run else "cleaned",
                                      a["records_read"], a["records_kept"], a["records_superseded"],
                                      a["tombstones_removed"], a["aborted_records_removed"],
                                      parts[(topic, partition)]["bytes_after"]))
    expected = spark.createDataFrame(expected_rows, got.schema)
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)
    assert table.count() == 10
    assert [h.get("kafkalog.job") for h in delta_tables.table_history(audit_path)] == ["compact", "compact"]


def test_explain_matches_the_local_cleaner(spark, tmp_path, capsys):
    dirs = build(tmp_path / "spark")
    shutil.copytree(tmp_path / "spark", tmp_path / "local")
    offsets = [0, 2, 3, 5, 8]            # superseded, aborted, marker, tombstone, kept
    args = [a for o in offsets for a in ("--explain", f"{TOPIC}:0:{o}")]
    assert compact_job.main(job_args(dirs, "--dry-run", "--explain", f"{TOPIC}:3:1", *args), spark=spark) == 0
    out = capsys.readouterr().out
    local = clean_partition(tmp_path / "local" / "d1" / f"{TOPIC}-0", config=local_configs().for_topic(TOPIC),
                            now_ms=NOW, options=CleanOptions(dry_run=True))
    for o in offsets:
        assert f"explain {TOPIC}-0@{o}: {local.explain(o)}\n" in out
    assert "removed — superseded: a later record has the same key" in out
    assert "removed — aborted: data of an aborted transaction" in out
    assert "DELETE_EMPTY" not in out and "written rewritten" not in out
    assert f"explain {TOPIC}-3@1: offset 1: partition not cleaned (dirty ratio is not above" in out


def test_a_log_dir_locked_by_a_live_broker_is_refused(spark, tmp_path):
    dirs = build(tmp_path)
    before = tree(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(dirs[0] / ".lock")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert compact_job.main(job_args(dirs, "--report", str(tmp_path / "r.json")), spark=spark) == 1
        report = json.loads((tmp_path / "r.json").read_text())
        assert [r["log_dir"] for r in report["summary"]["log_dirs_refused"]] == [str(dirs[0])]
        after = tree(tmp_path)
        assert {k: v for k, v in after.items() if k.startswith("d1/")} == \
            {k: v for k, v in before.items() if k.startswith("d1/")}
        assert {(p["topic"], p["partition"]) for p in report["partitions"] if p["status"] == "cleaned"} == \
            {(TOPIC, 2)}                      # the other log dir is cleaned
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)


@pytest.mark.parametrize("argv, message", [
    (["--explain", "compacted:x:1"], "PARTITION and OFFSET must be integers"),
    (["--explain", "nope:0:1"], "--explain nope:0:1: the run covers no partition nope-0"),
    (["--now-ms", "yesterday"], "neither epoch milliseconds nor an ISO-8601 time"),
    (["--topic-config", "compacted:min.cleanable.dirty.ratio=2"], "min.cleanable.dirty.ratio"),
])
def test_bad_arguments_exit_2_without_a_traceback(tmp_path, capsys, argv, message):
    (tmp_path / "d").mkdir()
    assert compact_job.entry(["--log-dirs", str(tmp_path / "d"), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_spark_submit_lists_the_job_and_rejects_a_missing_log_dir(tmp_path):
    listing = subprocess.run([str(REPO / "spark-submit.sh"), "--help"], capture_output=True, text=True, timeout=60)
    assert "compact      Kafka's log compaction" in listing.stdout
    proc = subprocess.run([sys.executable, str(REPO / "jobs" / "compact.py"), "--log-dirs", str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=60, cwd=REPO, env={"PYTHONPATH": str(REPO),
                                                                                     "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2
    assert "does not exist" in proc.stderr and "Traceback" not in proc.stderr


def crash_log_partitions(d: Path, n: int) -> Path:
    """A log dir with ``n`` partitions of crash_log, each fully replicated."""
    hw = {}
    for p in range(n):
        write_partition(d, crash_log(), partition=p)
        hw.update(read_offset_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT))
    write_offset_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT, hw)
    return d


def test_every_cleaned_partition_gets_its_checkpoint_entry(spark, tmp_path):
    """Found in review: rewriting tasks run in parallel, and each rewrote the shared
    cleaner-offset-checkpoint (lost entries, a torn file). Each task now writes its partition's entry
    right after its swap, under a lock of the log dir."""
    d = crash_log_partitions(tmp_path / "d", 6)
    report = tmp_path / "r.json"
    assert compact_job.main(job_args([d], "--report", str(report)), spark=spark) == 0
    cleaned = {(p["topic"], p["partition"]): p["end_offset"] for p in json.loads(report.read_text())["partitions"]
               if p["status"] == "cleaned"}
    assert len(cleaned) == 6
    assert read_offset_checkpoint(d / CLEANER_OFFSET_CHECKPOINT) == cleaned


def test_a_failed_partition_is_reported_as_failed_and_counts_nothing(spark, tmp_path, capsys):
    """One partition's segment is corrupt (a flipped byte): it fails with its error, counts no record,
    leaves no temporary file; the other is cleaned; the job exits 1 and stdout counts only the cleaned
    one's records."""
    d = crash_log_partitions(tmp_path / "d", 2)
    bad = d / f"{TOPIC}-1" / "00000000000000000004.log"
    raw = bytearray(bad.read_bytes())
    raw[-3] ^= 0xFF
    bad.write_bytes(bytes(raw))
    before = {k: v for k, v in tree(d).items() if k.startswith(f"{TOPIC}-1/")}
    report = tmp_path / "r.json"
    assert compact_job.main(job_args([d], "--report", str(report)), spark=spark) == 1
    out = capsys.readouterr().out
    rep = json.loads(report.read_text())
    rows = {p["partition"]: p for p in rep["partitions"]}
    assert rows[1]["status"] == "error" and rows[1]["outcome"] == "failed" and "CRC" in rows[1]["reason"]
    assert rows[1]["records_read"] in (None, 0) and rows[1]["bytes_removed"] in (None, 0)
    assert rows[0]["status"] == "cleaned" and rows[0]["outcome"] == "done" and rows[0]["passes"] == 1
    assert rows[0]["map_keys"] > 0 and rows[0]["map_bytes"] <= rows[0]["map_budget"]
    assert rep["summary"]["outcomes"] == {"done": 1, "failed": 1}
    removed = rows[0]["records_read"] - rows[0]["records_kept"]
    assert f"1 of 2 partitions cleaned, {rows[0]['bytes_removed']:,} bytes and {removed:,} records removed" in out
    assert {k: v for k, v in tree(d).items() if k.startswith(f"{TOPIC}-1/")} == before
    assert read_offset_checkpoint(d / CLEANER_OFFSET_CHECKPOINT) == {(TOPIC, 0): rows[0]["end_offset"]}
