"""``spark-submit.sh reindex`` end to end on the session-scoped local[2] SparkSession: the rows equal the
local verifier's, verify-only changes nothing, a rebuild makes a second run all identical, corrupt tails
are cut with their bytes kept, locked log dirs are refused, bad arguments exit 2, real broker files."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")

from chispa import assert_df_equality  # noqa: E402

from kafkalog.log.reindex import REINDEX_SCHEMA, reindex_partition  # noqa: E402
from udfs import delta_tables, reindex_job  # noqa: E402
from udfs.job import run  # noqa: E402

from logdirs import make_partition, snapshot  # noqa: E402
from log.test_logdir import HOLD_LOCK  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000_000
COLUMNS = ["partition_dir", "base_offset", "file", "kind", "class", "reason", "entries", "first_bad_entry",
           "first_bad_position", "action"]


def stamps(segment: int, n: int = 120) -> list[int]:
    return [T0 + segment * 10_000 + (i * 7919) % 1000 for i in range(n)]


def damaged_log_dirs(tmp_path):
    """Two log dirs, three partitions; orders-0 has a flipped .index, orders-1 a missing .timeindex and a
    corrupt .log tail, events-0 (index.interval.bytes=1024 by topic config) is fine."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    o0 = make_partition(d1, "orders", 0, [stamps(0), stamps(1), stamps(2)])
    o1 = make_partition(d2, "orders", 1, [stamps(0), stamps(1), stamps(2)])
    make_partition(d2, "events", 0, [stamps(0), stamps(1)])
    index = sorted(o0.glob("*.index"))[0]
    data = bytearray(index.read_bytes())
    data[12] ^= 0x40                                      # entry 1's position
    index.write_bytes(bytes(data))
    sorted(o1.glob("*.timeindex"))[1].unlink()
    with open(sorted(o1.glob("*.log"))[0], "ab") as f:
        f.write(b"\x00" * 20 + b"torn")
    return d1, d2


def args_for(d1, d2, *extra):
    # events was written with the default interval: the topic config makes its indexes "valid", not identical
    return ["--log-dirs", f"{d1},{d2}", "--topic-config", "events:index.interval.bytes=1024", *extra]


def test_verify_then_rebuild_then_all_identical(spark, tmp_path):
    d1, d2 = damaged_log_dirs(tmp_path)
    before = snapshot(d1), snapshot(d2)
    results, report = tmp_path / "results", tmp_path / "verify.json"
    assert reindex_job.main(args_for(d1, d2, "--verify-only", "--results", str(results), "--report", str(report)),
                            spark=spark) == 0
    assert (snapshot(d1), snapshot(d2)) == before                          # verify-only touches nothing

    got = delta_tables.read_table(spark, results)
    local = []
    for log_dir, folder in [(d1, d1 / "orders-0"), (d2, d2 / "events-0"), (d2, d2 / "orders-1")]:
        local += reindex_partition(folder, log_dir=log_dir, verify_only=True,
                                   index_interval_bytes=1024 if "events" in folder.name else 4096).rows
    import pyarrow as pa
    expected = spark.createDataFrame(pa.Table.from_pylist(local, schema=REINDEX_SCHEMA))
    assert_df_equality(got.select(COLUMNS), expected.select(COLUMNS), ignore_row_order=True, ignore_nullable=True)

    r = json.loads(report.read_text())
    s = r["summary"]
    assert s["classes"]["index"] == {"identical": 3, "corrupt": 1, "valid": 1}
    assert s["classes"]["timeindex"]["missing"] == 1 and s["active_segments_skipped"] == 3
    assert s["classes"]["log"] == {"corrupt": 1, "skipped": 3}
    (bad,) = [c for c in s["corrupt"] if c["file"].endswith(".index")]
    assert (bad["entry"], bad["position"]) == (1, 8) and bad["action"] == "none"
    assert all(row["action"] == "none" for row in r["files"])

    assert reindex_job.main(args_for(d1, d2, "--truncate-corrupt-tail", "--results", str(results),
                                     "--report", str(tmp_path / "fix.json")), spark=spark) == 0
    fixed = json.loads((tmp_path / "fix.json").read_text())["summary"]
    assert fixed["actions"] == {"rebuilt": 3, "created": 1, "truncated": 1}
    assert len(list((d2 / "orders-1").glob("corrupt-tail-*-at-*.bin"))) == 1
    assert not (d1 / ".lock").read_bytes() and not list(d1.rglob("*.tmp"))

    assert reindex_job.main(args_for(d1, d2, "--report", str(tmp_path / "again.json")), spark=spark) == 0
    again = json.loads((tmp_path / "again.json").read_text())
    assert {row["class"] for row in again["files"] if row["kind"] != "log"} == {"identical"}
    assert {row["class"] for row in again["files"] if row["kind"] == "log"} == {"skipped"}
    assert again["summary"]["actions"] == {}
    history = delta_tables.table_history(results)
    assert len(history) == 2 and all(h.get("kafkalog.job") == "reindex" for h in history)


def test_a_locked_log_dir_is_refused_when_modifying(spark, tmp_path):
    d1, d2 = damaged_log_dirs(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(d1 / ".lock")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = snapshot(d1)
        report = tmp_path / "r.json"
        assert reindex_job.main(args_for(d1, d2, "--report", str(report)), spark=spark) == 1
        assert snapshot(d1) == before
        s = json.loads(report.read_text())["summary"]
        assert [r["log_dir"] for r in s["log_dirs_refused"]] == [str(d1)]
        assert s["actions"]["created"] == 1                                # d2 went ahead
        # verifying a locked dir is allowed: it reads what is on disk
        assert reindex_job.main(args_for(d1, d2, "--verify-only"), spark=spark) == 0
        assert snapshot(d1) == before
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)


def test_pinterest_log_dir_verified_by_the_job(spark, real_fixtures, tmp_path):
    log_dir = real_fixtures / "pinterest__tiered-storage/ts-consumer/src/test/resources/log-files"
    report = tmp_path / "r.json"
    assert reindex_job.main(["--log-dirs", str(log_dir), "--verify-only", "--include-active",
                             "--report", str(report)], spark=spark) == 0
    files = json.loads(report.read_text())["files"]
    index = [f for f in files if f["kind"] == "index"]
    timeindex = [f for f in files if f["kind"] == "timeindex"]
    assert len(index) == len(timeindex) == 113
    assert sorted(f["file"] for f in index if f["class"] == "valid") == ["00000000000000000000.index"] * 2
    assert all("index.interval.bytes" in f["reason"] for f in index if f["class"] == "valid")
    assert {f["class"] for f in index + timeindex} == {"identical", "valid"}
    assert all("record with the max timestamp" in f["reason"] for f in timeindex if f["class"] == "valid")


@pytest.mark.parametrize("argv, message", [
    ([], "--log-dirs"),
    (["--log-dirs", "/nonexistent/x"], "does not exist"),
    (["--log-dirs", "{d}", "--verify-only", "--truncate-corrupt-tail"], "cannot be combined"),
    (["--log-dirs", "{d}", "--topic-config", "t:index.interval.bytes=lots"], "index.interval.bytes"),
    (["--log-dirs", "{d}", "--bogus"], "unrecognized arguments"),
])
def test_bad_arguments_exit_2_with_one_line(tmp_path, capsys, argv, message):
    argv = [a.replace("{d}", str(tmp_path)) for a in argv]
    assert run("reindex", reindex_job.main, argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_spark_submit_lists_the_job():
    listing = subprocess.run([str(REPO / "spark-submit.sh"), "--help"], capture_output=True, text=True)
    assert listing.returncode == 0
    line = next(l for l in listing.stdout.splitlines() if l.strip().startswith("reindex"))
    assert "rebuild" in line
    help_text = subprocess.run([str(REPO / "spark-submit.sh"), "reindex", "--help"], capture_output=True, text=True)
    assert help_text.returncode == 0 and "--truncate-corrupt-tail" in help_text.stdout
