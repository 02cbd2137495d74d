"""pytest fixtures for users' tests: ``kafkalog_spark``, one local SparkSession for the test session with
``format("kafkalog")`` registered. Enable with ``pytest_plugins = ["kafkalog.testing.fixtures"]`` in a
conftest.py. Spark is imported only when a test asks for the fixture."""
from __future__ import annotations

import os

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
