"""spark-submit.sh lag and the coordinator DataFrames: the job's lag equals the lag computed by hand
(and kafkalog lag's) on a generated cluster; its Delta table and report."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")

from kafkalog.coordinator import lag  # noqa: E402
from kafkalog.coordinator.log_dirs import consumer_lag  # noqa: E402
from kafkalog.format import record_batch as rb  # noqa: E402
from logdirs import make_partition, write_checkpoints  # noqa: E402
from coordinator.test_coordinator import T0, coordinator_segment, i16, s, txn_value  # noqa: E402
from udfs import coordinator_frames, delta_tables, lag_job  # noqa: E402


@pytest.fixture
def two_brokers(tmp_path):
    """orders-0 on broker 1 (HW 100), orders-1 on broker 2 (no HW checkpoint entry: log end 80),
    __consumer_offsets-7 on broker 1, __transaction_state-0 on broker 2."""
    b1, b2 = tmp_path / "b1", tmp_path / "b2"
    make_partition(b1, "orders", 0, [range(0, 60), range(60, 120)])
    make_partition(b2, "orders", 1, [range(0, 80)])
    (b1 / "__consumer_offsets-7").mkdir()
    (b1 / "__consumer_offsets-7" / "00000000000000000000.log").write_bytes(coordinator_segment())
    (b2 / "__transaction_state-0").mkdir()
    (b2 / "__transaction_state-0" / "00000000000000000000.log").write_bytes(
        rb.encode_batch([rb.V2Record(0, T0, i16(0) + s("txn-1"), txn_value(1))]))
    write_checkpoints(b1, high_watermarks={("orders", 0): 100})
    write_checkpoints(b2, high_watermarks={})
    return b1, b2


def test_lag_job_equals_hand_and_cli(spark, two_brokers, tmp_path, capsys):
    b1, b2 = two_brokers
    # by hand: g1 committed 15 on orders-0 (HW 100) and 25 on orders-1 (transactional, committed; no HW
    # entry, so the log end 80 is used and said so)
    expected = {("g1", "orders", 0): 85, ("g1", "orders", 1): 55}
    out = tmp_path / "lag-table"
    report = tmp_path / "lag.json"
    code = lag_job.main(["--log-dirs", f"{b1},{b2}", "--now-ms", str(T0), "--output", str(out),
                         "--report", str(report)], spark=spark)
    assert code == 0
    rep = json.loads(report.read_text())
    assert {(r["group"], r["topic"], r["partition"]): r["lag"] for r in rep["rows"]} == expected
    assert {r["high_watermark_source"] for r in rep["rows"]} == {lag.HW_CHECKPOINT, lag.HW_LOG_END}
    assert rep["summary"]["pending_transactional_commits"] == 1 and rep["summary"]["errors"] == 0
    cli = consumer_lag([b1, b2], now_ms=T0)
    assert [dict(r) for r in cli.rows] == rep["rows"]
    table = delta_tables.read_table(spark, out)
    assert sorted((r["group"], r["topic"], r["partition"], r["lag"]) for r in table.collect()) == \
        sorted((g, t, p, v) for (g, t, p), v in expected.items())
    assert "g1: lag 140 over 2 partition(s)" in capsys.readouterr().out
    # a group filter that matches nothing: no rows, still exit 0; dry run writes no table
    assert lag_job.main(["--log-dirs", str(b1), "--group-pattern", "nobody.*", "--dry-run",
                         "--report", str(report)], spark=spark) == 0
    assert json.loads(report.read_text())["rows"] == []


def test_lag_job_bad_arguments(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert lag_job.entry(["--log-dirs", str(empty)]) == 2          # no __consumer_offsets
    assert lag_job.entry(["--log-dirs", str(empty), "--group-pattern", "("]) == 2


def test_coordinator_frames(spark, two_brokers):
    b1, b2 = two_brokers
    groups = coordinator_frames.consumer_offsets_frame(spark, [b1, b2])
    rows = groups.orderBy("offset").collect()
    assert len(rows) == 12 and rows[2]["committed_offset"] == 15 and rows[4]["tombstone"] is True
    assert [r["control_type"] for r in rows if r["control_type"]] == ["COMMIT", "ABORT"]
    txns = coordinator_frames.transaction_state_frame(spark, [b1, b2]).collect()
    assert [(r["transactional_id"], r["state"], r["previous_producer_id"]) for r in txns] == [("txn-1", "Ongoing", 999)]
