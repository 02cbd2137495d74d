"""spark-submit.sh diverge: several brokers' log dirs compared partition by partition inside Spark tasks; the
job's per-partition results equal ``kafkalog diverge``'s (the same function), its Delta table, report and page.

The replicas are written by our writer, as in tests/log/test_replica_divergence.py: a common prefix, then
copies appended differently under their own leader epochs (an unclean leader election simulated by copies).
"""
from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")

from kafkalog.log.replica_divergence import DIVERGED, IDENTICAL, LAGGING, diverge_log_dirs  # noqa: E402
from kafkalog.log.roll import RollConfig  # noqa: E402
from kafkalog.log.writer import write_log_dir  # noqa: E402
from log.test_replica_divergence import PREFIX, _table  # noqa: E402
from udfs import delta_tables, diverge_job  # noqa: E402

TOPIC = "orders"
LONG = PREFIX + [(1, [f"v{i}" for i in range(5)]) for _ in range(6)]          # offsets 0..38, one epoch change

# partition -> the batches each broker holds (None: the broker does not hold it)
SCENARIO = {
    0: (PREFIX, PREFIX, PREFIX),                                                # identical on three brokers
    1: (PREFIX + [(1, ["j", "k"])], PREFIX, None),                              # broker 2 only lags
    2: (LONG, LONG, None),                                                      # broker 2 rolled every ~200 bytes
    3: (PREFIX + [(1, ["x1", "x2", "x3"]), (1, ["x4", "x5", "x6"])],            # broker 1 led epoch 1, wrote 9..14
        PREFIX + [(2, ["y1", "y2", "y3"])], None),                              # broker 2 elected uncleanly, epoch 2
    4: (PREFIX, None, None),                                                    # one broker only: listed
}
EXPECTED = {0: IDENTICAL, 1: LAGGING, 2: IDENTICAL, 3: DIVERGED}


@pytest.fixture
def brokers(tmp_path):
    dirs = []
    for k in range(3):
        parts = [(TOPIC, p, _table(held[k])) for p, held in SCENARIO.items() if held[k] is not None]
        roll = RollConfig(segment_bytes=200 if k == 1 else 1 << 30)
        dirs.append(tmp_path / f"b{k + 1}")
        write_log_dir(dirs[-1], parts, roll=roll, node_id=k + 1)
    assert len(list((dirs[1] / f"{TOPIC}-2").glob("*.log"))) > 2
    assert len(list((dirs[0] / f"{TOPIC}-2").glob("*.log"))) == 1
    return dirs


def run_job(spark, tmp_path, *args):
    report = tmp_path / "diverge.json"
    code = diverge_job.main([*args, "--report", str(report)], spark=spark)
    return code, json.loads(report.read_text())


def test_job_equals_the_cli_per_partition_with_table_and_page(spark, brokers, tmp_path, capsys):
    b1, b2, b3 = brokers
    out, html = tmp_path / "table", tmp_path / "diverge.html"
    code, rep = run_job(spark, tmp_path, "--log-dirs", f"{b1},{b2},{b3}", "--output", str(out), "--html", str(html))
    assert code == 1                                             # a partition diverged, as kafkalog diverge's exit
    cli = [r.to_dict() for r in diverge_log_dirs([str(b1), str(b2), str(b3)])]
    assert rep["partitions"] == cli
    assert {p["partition"]: p["verdict"] for p in rep["partitions"]} == EXPECTED
    assert rep["single"] == [dict(topic=TOPIC, partition=4, broker=str(b1))]
    div = next(p for p in rep["partitions"] if p["partition"] == 3)
    old = next(r for r in div["replicas"] if r["replica"] == str(b1))
    assert div["leader"] == str(b2) and div["first_differing_offset"] == 9
    assert (old["log_end_offset"], old["kept_offset"], old["truncated"]) == (15, 9, 6)
    assert rep["summary"]["partitions_compared"] == 4 and rep["summary"]["partitions_single"] == 1
    assert rep["summary"]["truncated_offsets"] == 6 and rep["summary"]["errors"] == 0
    rows = delta_tables.read_table(spark, out).collect()
    assert len(rows) == 3 + 2 + 2 + 2 + 1
    assert {(r["partition"], r["replica"]): r["replica_verdict"] for r in rows if r["status"] == "compared"} == {
        (p, rr["replica"]): rr["verdict"] for p_ in cli for p, rr in ((p_["partition"], x) for x in p_["replicas"])}
    assert [(r["partition"], r["status"]) for r in rows if r["status"] != "compared"] == [(4, "single")]
    page = html.read_text()
    assert "kafkalog diverge" in page and "data-value='6'" in page
    assert "orders-3: diverged from offset 9" in capsys.readouterr().out


def test_brokers_with_several_log_dirs_named_by_id(spark, brokers, tmp_path):
    """A JBOD broker: --broker 1=DIR,DIR; replicas are named by the broker ids; the leader can be named."""
    b1, b2, _ = brokers
    jbod = tmp_path / "b2-second"
    jbod.mkdir()
    (b2 / f"{TOPIC}-3").rename(jbod / f"{TOPIC}-3")
    code, rep = run_job(spark, tmp_path, "--broker", f"1={b1}", "--broker", f"2={b2},{jbod}", "--topics", TOPIC,
                        "--dry-run", "--leader", "1")
    by = {p["partition"]: p for p in rep["partitions"]}
    assert set(by) == {0, 1, 2, 3} and all(p["leader"] == "1" for p in by.values())
    new = next(r for r in by[3]["replicas"] if r["replica"] == "2")
    assert new["verdict"] == DIVERGED and new["truncated"] == 3          # broker 2's epoch-2 writes go
    assert next(r for r in rep["rows"] if r["partition"] == 3 and r["replica"] == "2")["log_dir"] == str(jbod)
    assert rep["table"] is None and code == 1


def test_a_partition_that_cannot_be_read_is_reported_and_the_job_goes_on(spark, brokers, tmp_path):
    b1, b2, _ = brokers
    (b2 / f"{TOPIC}-1" / "leader-epoch-checkpoint").write_text("0\nnot a number\n")
    code, rep = run_job(spark, tmp_path, "--log-dirs", f"{b1},{b2}", "--topics", TOPIC)
    by = {p["partition"]: p for p in rep["partitions"]}
    assert by[1]["verdict"] == "error" and "leader-epoch-checkpoint" in by[1]["error"]
    assert by[0]["verdict"] == IDENTICAL and by[3]["verdict"] == DIVERGED and code == 1
    assert rep["summary"]["errors"] == 1


def test_bad_arguments_are_refused_before_anything_is_read(brokers, tmp_path, capsys):
    b1, b2, b3 = brokers
    other = tmp_path / "other"
    write_log_dir(other, [("payments", 0, _table(PREFIX))], node_id=9)
    assert diverge_job.entry(["--log-dirs", str(b1)]) == 2                                   # one broker
    assert diverge_job.entry(["--broker", f"1={b1}", "--broker", f"9={other}", "--topics", TOPIC]) == 2
    err = capsys.readouterr().err
    assert "broker 9" in err and "holds none of --topics" in err
    assert diverge_job.entry(["--log-dirs", f"{b1},{b2}", "--topics", "ordres"]) == 2
    assert diverge_job.entry(["--log-dirs", f"{b1},{b2}", "--leader", "b7"]) == 2
    assert diverge_job.entry(["--broker", f"1={b1}", "--broker", f"1={b2}"]) == 2
    assert diverge_job.entry(["--broker", "1", "--broker", f"2={b2}"]) == 2
    assert diverge_job.entry(["--broker", f"1={b1}", "--broker", f"2={b1}"]) == 2             # one dir, two brokers
