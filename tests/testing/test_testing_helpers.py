"""kafkalog.testing and udfs.testing, the helpers users import in their pytest + chispa tests: log dirs built
from rows / Arrow / a DataFrame (topics, partitions, codecs, transactions, tombstones) that kafka-python reads
back and whose indexes are recovery's, readable diffs, the Spark fixture (udfs.testing) — and ``import
kafkalog`` (testing included) never importing Spark."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from kafkalog.index.verify import verify_segment
from kafkalog.testing import BASE_TIMESTAMP_MS, assert_log_dirs_equal, build_log_dir, diff_records, records_of
from oracle import read_all

REPO = Path(__file__).resolve().parents[2]

ROWS = [
    {"topic": "orders", "key": b"a", "value": b"1", "headers": [("h", b"x")]},
    {"topic": "orders", "key": "b", "value": "2"},
    {"topic": "orders", "key": b"a", "value": None},                                       # a tombstone
    {"topic": "orders", "partition": 1, "key": b"t", "value": b"kept", "producer_id": 7, "transactional": True},
    {"topic": "orders", "partition": 1, "key": b"u", "value": b"dropped", "producer_id": 8, "transactional": True},
    {"topic": "orders", "partition": 1, "control": "commit", "producer_id": 7},
    {"topic": "orders", "partition": 1, "control": "abort", "producer_id": 8},
    {"topic": "orders", "partition": 1, "key": b"z", "value": b"after", "offset": 10},        # a gap, as compacted
    {"topic": "audit", "value": b"v", "timestamp": 1_700_000_123_000},
]


def test_build_log_dir_from_rows_reads_back_in_kafka_python(tmp_path):
    out = build_log_dir(tmp_path / "logs", ROWS, codec="zstd", segment_bytes=200)
    p0 = [r for log in sorted((out / "orders-0").glob("*.log")) for r in read_all(log.read_bytes())]
    assert [(r["offset"], r["key"], r["value"], r["headers"]) for r in p0] == [
        (0, b"a", b"1", [("h", b"x")]), (1, b"b", b"2", []), (2, b"a", None, [])]
    assert [r["timestamp"] for r in p0] == [BASE_TIMESTAMP_MS + i for i in range(3)]
    p1 = [r for log in sorted((out / "orders-1").glob("*.log")) for r in read_all(log.read_bytes())]
    assert [r["offset"] for r in p1] == [0, 1, 2, 3, 10]          # markers at 2 and 3
    audit = records_of(out)
    assert audit.filter(pa.compute.field("topic") == "audit").column("timestamp").cast(pa.int64()).to_pylist() \
        == [1_700_000_123_000]          # read_segment: timestamp[ms]
    for folder in ("orders-0", "orders-1", "audit-0"):
        open_txns: dict = {}
        for log in sorted((out / folder).glob("*.log")):
            v = verify_segment(log, open_txns=open_txns)
            open_txns = v.open_txns_after
            assert all(x.status == "identical" for x in v.verdicts), (folder, log.name, v.verdicts)
    assert any((out / "orders-1").glob("*.txnindex"))


def test_build_log_dir_refuses_bad_rows(tmp_path):
    with pytest.raises(ValueError, match="topic"):
        build_log_dir(tmp_path / "a", [{"value": b"x"}])
    with pytest.raises(ValueError, match="control"):
        build_log_dir(tmp_path / "b", [{"topic": "t", "control": "commit"}])
    with pytest.raises(ValueError, match="not above"):
        build_log_dir(tmp_path / "c", [{"topic": "t", "offset": 5}, {"topic": "t", "offset": 3}])


def test_log_dirs_equal_and_the_diff_names_what_differs(tmp_path):
    a = build_log_dir(tmp_path / "a", ROWS)
    b = build_log_dir(tmp_path / "b", pa.Table.from_pylist([dict(r) for r in ROWS if "control" not in r
                                                            and r.get("partition", 0) == 0 and r["topic"] == "orders"]
                                                           ), codec="lz4")
    changed = [dict(r) for r in ROWS]
    changed[1]["value"] = b"changed"
    c = build_log_dir(tmp_path / "c", changed, codec="gzip", segment_bytes=100)
    assert_log_dirs_equal(a, build_log_dir(tmp_path / "a2", ROWS, codec="snappy", segment_bytes=120))
    with pytest.raises(AssertionError) as err:
        assert_log_dirs_equal(a, c)
    assert "orders-0 offset 1: value: expected b'2', got b'changed'" in str(err.value)
    lines = diff_records(records_of(a), records_of(b))
    assert "audit-0: missing (1 records expected)" in lines and any(line.startswith("orders-1: missing") for line in lines)


def test_from_a_dataframe_and_back_with_chispa(spark, tmp_path):
    from udfs.testing import assert_records_equal, read_log_dir

    src = build_log_dir(tmp_path / "src", ROWS)
    df = read_log_dir(spark, src)
    copy = build_log_dir(tmp_path / "copy", df)                       # a DataFrame with the source schema
    assert_records_equal(read_log_dir(spark, src), read_log_dir(spark, copy))
    # with the batch columns and control records, transactions come across too
    full = read_log_dir(spark, src, includeBatchColumns=True, includeControlRecords=True)
    again = build_log_dir(tmp_path / "again", full)
    assert_log_dirs_equal(src, again, include_control=True)
    assert any((again / "orders-1").glob("*.txnindex"))
    committed = read_log_dir(spark, src, **{"kafka.isolation.level": "read_committed"})
    assert sorted(r.value for r in committed.where("partition = 1").collect()) == [b"after", b"kept"]
    with pytest.raises(AssertionError):
        assert_records_equal(df, df.where("offset > 0"))


def test_the_spark_fixture_has_the_source_registered(kafkalog_spark, tmp_path):
    src = build_log_dir(tmp_path / "src", ROWS[:3])
    assert kafkalog_spark.read.format("kafkalog").load(str(src)).count() == 3


from udfs.testing import kafkalog_spark  # noqa: E402,F401  (the fixture, as a user's conftest would)


# --- layers: no Spark in kafkalog ------------------------------------------------------------------------

SPARK_MODULES = ("pyspark", "udfs", "chispa", "delta")


def test_importing_kafkalog_and_its_testing_helpers_imports_no_spark():
    code = ("import sys, kafkalog, kafkalog.testing, kafkalog.log.writer, kafkalog.log.roll, kafkalog.source.stream_offsets;"
            f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {SPARK_MODULES!r}); print(bad); "
            "sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_kafkalog_imports_no_spark_module_anywhere():
    """kafkalog (kafkalog.testing included) is below the Spark glue: no import of pyspark, udfs, chispa or
    delta, not even inside a function (the Spark side of testing is udfs.testing)."""
    found = []
    for path in sorted((REPO / "kafkalog").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found += [f"{path.relative_to(REPO)}:{node.lineno} imports {n}" for n in names
                      if n.split(".")[0] in SPARK_MODULES]
    assert found == [], "\n".join(found)


def test_the_readme_user_test_runs(spark, tmp_path):
    """The docs' 10-line user test (docs/testing.md), run as written (with the tests' session as its fixture);
    tests/test_readme.py leaves it to this test."""
    import re

    text = (REPO / "docs" / "testing.md").read_text()
    section = text[text.index("# Testing your pipelines"):]
    code = re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)
    scope: dict = {}
    exec(compile(code, "docs/testing.md", "exec"), scope)
    scope["test_drop_tombstones"](spark, tmp_path)
