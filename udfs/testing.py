"""The Spark side of testing pipelines over Kafka log dirs (the Spark-free helpers are ``kafkalog.testing``):
the ``kafkalog_spark`` pytest fixture, one local SparkSession for the test session with
``format("kafkalog")`` registered; ``read_log_dir``, a log dir read through the data source; and
``assert_records_equal``, two record DataFrames compared by chispa. Enable the fixture with
``pytest_plugins = ["udfs.testing"]`` in a conftest.py. Spark and chispa are imported only when a test
asks for them, so loading the plugin works where pyspark is not installed (the fixture then skips)."""
from __future__ import annotations

import os
from typing import Sequence, Tuple, Union

import pytest

MASTER_ENV = "KAFKALOG_TEST_MASTER"      # default local[2]


@pytest.fixture(scope="session")
def kafkalog_spark():
    """A local SparkSession (UTC, Arrow on, the kafkalog source registered), stopped at the end."""
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install kafkalog[spark])")
    from udfs.session import build_session

    session = build_session("kafkalog-user-tests", master=os.environ.get(MASTER_ENV, "local[2]"),
                            conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                                  "spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


def read_log_dir(spark, path: Union[str, os.PathLike, Sequence], **options):
    """``spark.read.format("kafkalog")`` of ``path`` with ``options`` (Spark's Kafka-source names; the
    source is registered first if needed). Headers are included unless includeHeaders=false."""
    from udfs.kafkalog_source import register

    register(spark)
    reader = spark.read.format("kafkalog").option("includeHeaders", "true")
    for k, v in options.items():
        reader = reader.option(k, v if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v))
    paths = [os.fspath(path)] if isinstance(path, (str, os.PathLike)) else [os.fspath(p) for p in path]
    return reader.load(",".join(paths))


def assert_records_equal(expected_df, actual_df, *, ignore_row_order: bool = True,
                         ignore_nullable: bool = True) -> None:
    """Two record DataFrames equal, by chispa (its colored row diff), ordered by topic, partition, offset
    when those columns exist. chispa's own errors are raised as AssertionError (pytest shows the diff)."""
    import chispa
    from chispa import assert_df_equality

    order = [c for c in ("topic", "partition", "offset") if c in expected_df.columns and c in actual_df.columns]
    if ignore_row_order and order:
        expected_df, actual_df = expected_df.orderBy(*order), actual_df.orderBy(*order)
        ignore_row_order = False
    try:
        assert_df_equality(expected_df, actual_df, ignore_row_order=ignore_row_order, ignore_nullable=ignore_nullable)
    except (chispa.DataFramesNotEqualError, chispa.SchemasNotEqualError) as exc:
        raise AssertionError(str(exc)) from exc


__all__: Tuple[str, ...] = ("assert_records_equal", "kafkalog_spark", "read_log_dir")
