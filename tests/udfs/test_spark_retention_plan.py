"""Retention decisions as DataFrames (chispa): the retention examples of
tests/retention/test_retention.py planned from a catalog DataFrame
by the grouped Spark planner, and the same plan from the local planner."""
from __future__ import annotations

import os

import pyarrow as pa
import pytest

pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")

from chispa import assert_df_equality  # noqa: E402

from kafkalog.catalog import CATALOG_SCHEMA  # noqa: E402
from kafkalog.config import load_configs  # noqa: E402
from kafkalog.retention.catalog_plan import plan_catalog_table  # noqa: E402
from udfs.catalog_job import catalog_frame  # noqa: E402
from udfs.retention_job import plan_catalog  # noqa: E402

from logdirs import make_partition, write_checkpoints  # noqa: E402

MB = 1000          # those examples' megabytes, scaled down
DAY = 86_400_000
NOW = 1000 * DAY


def partition_rows(topic, partition, segments, *, log_start=None, log_end=None, hw="leo"):
    """Catalog rows: ``segments`` is [(base offset, size, largest timestamp)]; the last is active."""
    bases = [s[0] for s in segments]
    if log_end is None:
        log_end = bases[-1] + (10 if segments[-1][1] else 0)
    rows = []
    for i, (base, size, ts) in enumerate(segments):
        rows.append(dict(log_dir="/logs", topic=topic, partition=partition, partition_dir=f"/logs/{topic}-{partition}",
                         partition_kind="live", kind="segment", base_offset=base,
                         next_base_offset=bases[i + 1] if i + 1 < len(bases) else None, size=size,
                         largest_timestamp=ts, largest_timestamp_ms=ts, largest_timestamp_source="timeindex",
                         is_active=i == len(bases) - 1, files=[], problems=[],
                         log_start_offset=bases[0] if log_start is None else log_start, log_end_offset=log_end,
                         high_watermark_checkpoint=log_end if hw == "leo" else hw))
    return rows


# (topic, rows, expected [(decision, rule)] per segment)
OLD = 1
SCENARIOS = []
for n, (retention_mb, active_mb, deleted) in enumerate([(2000, 0, 0), (2000, 600, 1), (1400, 0, 1),
                                                         (1400, 100, 1), (1400, 700, 2), (700, 0, 2)]):
    SCENARIOS.append((f"size-{n}", f"retention.bytes={retention_mb * MB}",
                      [(0, 700 * MB, NOW), (10, 700 * MB, NOW), (20, 700 * MB, NOW), (30, active_mb * MB, NOW)],
                      {}, ["retention.bytes"] * deleted + [None] * (4 - deleted)))
SCENARIOS += [
    # log start offset 25 with segments at 0, 11, 23 and 30: the first two go
    ("lso", "cleanup.policy=compact", [(0, 100, NOW), (11, 100, NOW), (23, 100, NOW), (30, 100, NOW)],
     dict(log_start=25), ["log_start_offset", "log_start_offset", None, None]),
    # a future timestamp in the second segment pins the walk: the old third segment stays
    ("future", "retention.ms=86400000", [(0, 10, OLD), (10, 10, NOW + DAY), (20, 10, OLD), (30, 10, NOW)],
     {}, ["retention.ms", None, None, None]),
    # HW 15 lies inside the second segment: only the first may go
    ("hw", "retention.ms=86400000", [(0, 10, OLD), (10, 10, OLD), (20, 10, OLD)], dict(hw=15),
     ["retention.ms", None, None]),
    # everything old and replicated: roll, then all of it goes
    ("roll", "retention.ms=86400000", [(0, 10, OLD), (10, 10, OLD)], {}, ["retention.ms", "retention.ms"]),
    # no topic override: the broker's log.retention.minutes (2 days) beats log.retention.hours (1000 days)
    ("broker", None, [(0, 10, NOW - 3 * DAY), (10, 10, NOW - 1 * DAY), (20, 10, NOW)], {},
     ["retention.ms", None, None]),
]


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    server = tmp_path_factory.mktemp("conf") / "server.properties"
    server.write_text("log.retention.hours=24000\nlog.retention.minutes=2880\n")
    return load_configs(broker_config=server, topic_configs=[f"{t}:{c}" for t, c, *_ in SCENARIOS if c])


def test_seed_examples_as_decision_dataframes(spark, configs):
    rows = [r for topic, _, segs, kw, _ in SCENARIOS for r in partition_rows(topic, 0, segs, **kw)]
    catalog = spark.createDataFrame(pa.Table.from_pylist(rows, schema=CATALOG_SCHEMA))
    got = plan_catalog(catalog, configs=configs, now=NOW).select("topic", "base_offset", "decision", "rule")
    expected_rows = [(topic, segs[i][0], "keep" if rule is None else "delete", rule)
                     for topic, _, segs, _, rules in SCENARIOS for i, rule in enumerate(rules)]
    expected = spark.createDataFrame(expected_rows, "topic string, base_offset long, decision string, rule string")
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)

    local = plan_catalog_table(pa.Table.from_pylist(rows, schema=CATALOG_SCHEMA), configs, NOW)
    assert sorted(zip(local["topic"].to_pylist(), local["base_offset"].to_pylist(), local["rule"].to_pylist()),
                  key=str) == sorted(((t, b, r) for t, b, _, r in expected_rows), key=str)
    roll = local.filter(pa.compute.equal(local["topic"], "roll"))
    assert set(roll["roll_at"].to_pylist()) == {20} and set(roll["new_log_start_offset"].to_pylist()) == {20}


def test_mtime_fallback_from_disk_through_the_catalog(spark, tmp_path, configs):
    folder = make_partition(tmp_path, "broker", 0, [[NOW - 10 * DAY], [NOW - 10 * DAY], [NOW]])
    write_checkpoints(tmp_path, high_watermarks={("broker", 0): 3})
    os.unlink(folder / "00000000000000000001.timeindex")            # the broker falls back to mtime
    os.utime(folder / "00000000000000000001.log", (NOW / 1000, NOW / 1000))
    catalog, _ = catalog_frame(spark, [tmp_path])
    got = plan_catalog(catalog, configs=configs, now=NOW).select("base_offset", "largest_timestamp_ms", "decision")
    expected = spark.createDataFrame([(0, NOW - 10 * DAY, "delete"), (1, NOW, "keep"), (2, NOW, "keep")],
                                     "base_offset long, largest_timestamp_ms long, decision string")
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)
