"""A DataFrame of ``format("kafkalog")`` kept in a variable (and a temp view on it) answers every query as a
fresh DataFrame would, whatever ran before: sequences of filters on offset, partition, topic, timestamp,
key and ``IN``, none, and the same again; random sequences (hypothesis); and one snapshot of the log dirs
for every query of a DataFrame. PySpark 4.2 keeps a DataFrame's planned read on an object all its
queries share (``udfs.kafkalog_source``), which is what these tests pin down."""
from __future__ import annotations

import shutil
from contextlib import contextmanager

import pytest

pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")
from chispa import assert_df_equality  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kafka_python_logs import standard_log_dir, timestamps  # noqa: E402

pytestmark = pytest.mark.timeout(900)

ORDER = ["topic", "partition", "offset"]
# One row that changes when any record is added, dropped or swapped for another.
SUMMARY = ["count(*) AS n", "sum(offset) AS offset_sum", "sum(partition) AS partition_sum",
           "sum(crc32(coalesce(value, X''))) AS value_crc", "count(DISTINCT topic) AS topic_count",
           "min(timestamp) AS first_ts", "max(timestamp) AS last_ts"]


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("reuse-logs")
    parts = standard_log_dir(log_dir)
    return log_dir, parts


def _load(spark, log_dir):
    return spark.read.format("kafkalog").load(str(log_dir))


def _filters(parts) -> dict:
    """Named WHERE clauses of each kind Spark pushes (and one it cannot hand to Python)."""
    key = next(r["key"] for r in parts[("orders", 1)].records if r["key"])
    ts = int(timestamps(parts, ("orders", 0))[30])
    return {        # columns quoted: OFFSET and PARTITION are SQL keywords
        "offset": "`offset` < 20",
        "offset_range": "`offset` BETWEEN 25 AND 40",
        "partition": "`partition` = 1",
        "topic": "topic = 'payments'",
        "timestamp": f"`timestamp` >= timestamp_millis({ts})",
        "key": f"key = X'{key.hex()}'",
        "in": "`offset` IN (3, 17, 44) AND `partition` IN (0, 2)",
        "not_pushable": "length(value) > 3 OR `offset` > 1000",
        "none": None,
    }


def _summary(df, where):
    return (df if where is None else df.where(where)).selectExpr(*SUMMARY).collect()[0]


PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


@contextmanager
def _pushdown(spark, value: str):
    """Spark's Python filter pushdown on (Spark plans a filtered query in a worker of its own and keeps
    that plan for the DataFrame) or off (it never does), restored afterwards: the session is shared."""
    before = spark.conf.get(PUSHDOWN_CONF, None)
    spark.conf.set(PUSHDOWN_CONF, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(PUSHDOWN_CONF)
        else:
            spark.conf.set(PUSHDOWN_CONF, before)


@pytest.fixture(params=["true", "false"], ids=["pushdown-conf-on", "pushdown-conf-off"])
def pushdown_conf(spark, request):
    """Both settings: the answers must not depend on it."""
    with _pushdown(spark, request.param):
        yield request.param


@pytest.fixture
def pushdown_on(spark):
    """The setting under which Spark re-plans filtered queries (what register() used to set)."""
    with _pushdown(spark, "true"):
        yield


@pytest.fixture(scope="module")
def fresh(spark, logs):
    """{filter name: the summary a DataFrame loaded for that one query gives}, each computed once."""
    log_dir, parts = logs
    answers: dict = {}

    def answer(name: str):
        if name not in answers:
            answers[name] = _summary(_load(spark, log_dir), _filters(parts)[name])
            assert answers[name]["n"] > 0, name
        return answers[name]
    return answer


SEQUENCE = ["none", "offset", "none", "partition", "timestamp", "key", "in", "none", "offset", "offset", "topic",
            "not_pushable", "offset_range", "not_pushable"]


def test_one_dataframe_answers_each_query_as_a_fresh_one(spark, logs, fresh, pushdown_on):
    log_dir, parts = logs
    filters = _filters(parts)
    kept = _load(spark, log_dir)
    for step, name in enumerate(SEQUENCE):
        assert _summary(kept, filters[name]) == fresh(name), (step, name)


def test_a_temp_view_answers_each_sql_query_as_a_fresh_dataframe(spark, logs, fresh, pushdown_conf):
    log_dir, parts = logs
    filters = _filters(parts)
    _load(spark, log_dir).createOrReplaceTempView("kafkalog_reuse")
    try:
        for step, name in enumerate(SEQUENCE):
            where = filters[name]
            sql = f"SELECT {', '.join(SUMMARY)} FROM kafkalog_reuse" + (f" WHERE {where}" if where else "")
            assert spark.sql(sql).collect()[0] == fresh(name), (step, name)
    finally:
        spark.catalog.dropTempView("kafkalog_reuse")


def test_rows_after_a_filtered_query_are_a_fresh_dataframes(spark, logs, pushdown_on):
    """Whole rows, not a summary: the unfiltered query after a filtered one."""
    log_dir, parts = logs
    kept = _load(spark, log_dir)
    assert kept.where(_filters(parts)["partition"]).count() == 120       # orders-1 and payments-1
    assert_df_equality(kept.orderBy(*ORDER), _load(spark, log_dir).orderBy(*ORDER))
    assert kept.where("`offset` < 20").count() == 120             # 20 offsets of each of 6 partitions


def test_every_query_of_a_dataframe_reads_the_log_dirs_as_they_were_at_load(spark, logs, tmp_path, pushdown_conf):
    """Queries that push filters and queries that push none take different planning paths in PySpark
    4.2; both must read one snapshot, or a DataFrame's counts disagree with each other."""
    log_dir, _ = logs
    copy = tmp_path / "logs"
    shutil.copytree(log_dir, copy, ignore=shutil.ignore_patterns("payments-*"))
    df = _load(spark, copy)
    at_load = _summary(df, None)
    shutil.copytree(log_dir / "payments-0", copy / "payments-0")      # a partition appears after load()
    assert _summary(df, None) == at_load
    assert _summary(df, "offset >= 0") == at_load
    assert _summary(df, None) == at_load
    assert _summary(_load(spark, copy), None)["n"] == at_load["n"] + 60       # a new load() sees it


def test_pushdown_option_true_is_refused(spark, logs):
    log_dir, _ = logs
    with pytest.raises(Exception, match="kafkalog.pushdown"):
        spark.read.format("kafkalog").option("kafkalog.pushdown", "true").load(str(log_dir))
    rows = spark.read.format("kafkalog").option("kafkalog.pushdown", "false").load(str(log_dir)).count()
    assert rows == 360


NAMES = ["offset", "offset_range", "partition", "topic", "timestamp", "key", "in", "not_pushable", "none"]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=st.lists(st.sampled_from(NAMES), min_size=2, max_size=4))
def test_random_filter_sequences_answer_as_fresh_dataframes(spark, logs, fresh, pushdown_on, sequence):
    log_dir, parts = logs
    filters = _filters(parts)
    kept = _load(spark, log_dir)
    for name in sequence:
        assert _summary(kept, filters[name]) == fresh(name), (sequence, name)
