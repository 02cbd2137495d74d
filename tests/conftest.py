"""Shared test fixtures: where the real broker-written files live, and skipping without them."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker_harness import broker_factory, kafka_jars, module_broker  # noqa: F401  (a real Kafka broker: tests/broker)
from s3server import s3_env, s3_server  # noqa: F401  (session fixtures: a real S3 server for the object-store tests)
from warm_up_run import FOLDER as WARM_UP_FOLDER, USED_BY as WARM_UP_USED_BY, WarmUpRun

REPO = Path(__file__).resolve().parents[1]
# ../shared/fixtures/real beside the clone (CI has it; a user's clone does not).
REAL_FIXTURES = Path(os.environ.get("KAFKALOG_REAL_FIXTURES", REPO.parent / "shared" / "fixtures" / "real"))


def real_fixtures_or_skip() -> Path:
    if not (REAL_FIXTURES / "MANIFEST.tsv").is_file():
        pytest.skip(
            f"real Kafka fixtures not found at {REAL_FIXTURES} (they live in ../shared beside the "
            "project clone; set KAFKALOG_REAL_FIXTURES to point elsewhere)"
        )
    return REAL_FIXTURES


@pytest.fixture(scope="session")
def real_fixtures() -> Path:
    return real_fixtures_or_skip()


# --- Spark -----------------------------------------------------------------------------------
# JVM flags for every Spark JVM the tests start: the shared session's below and each ./spark-submit.sh run's
# (test_interrupts, test_faults, the export kill loop, test_delta_spark_tables' own process...), since Spark's
# launcher adds SPARK_SUBMIT_OPTS to the driver JVM it starts and the subprocesses inherit the environment.
# Test JVMs live seconds to minutes on 2 cores: C1 alone (TieredStopAtLevel=1) and the serial collector spare
# the CPU that C2's compiler threads and G1's threads take from the work, and -Dspark.ui.enabled=false (read
# from system properties by SparkConf) skips the web UI's Jetty start in the spark-submit runs. Measured (the
# machine shared): a session start plus a small groupBy, CPU of the Spark JVM itself (/proc/PID/stat), 23.5 s
# -> 10.8 s; test_interrupts.py (three spark-submit runs) 476 s -> 412 s wall. A value set by the caller wins.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Dspark.ui.enabled=false")
# The same pair for the test brokers (kafkalog.testing.broker.BROKER_JVM_OPTIONS_ENV): each broker starts in
# seconds and serves small topics; bench/ leaves it unset.
os.environ.setdefault("KAFKALOG_BROKER_JVM_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

# One SparkSession (local[2]) for every Spark test, built the way the jobs build theirs, with Spark's own
# Kafka source loaded for the parity tests (tests/broker/test_spark_kafka_parity.py): its jars are on the
# class path from the start (measured: no slower a start than without; only the first format("kafka")
# query pays for loading its classes). delta-spark is not loaded here: with it, every job test would write
# its tables through delta-spark instead of delta-rs (udfs.delta_tables picks it when present).

@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")
    from udfs.session import build_session

    session = build_session("kafkalog-tests", master="local[2]",
                            conf={"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                                  "spark.sql.shuffle.partitions": "2"},
                            packages=("kafka",))
    yield session
    session.stop()


# --- the warm-up's own run (tests/warm_up_run.py) ---------------------------------------------------
_warm_up: list = []          # the one WarmUpRun of the session, once started (None: no selected test needs it)


def pytest_runtest_setup(item):
    """Start the warm-up run with the first test of tests/tools when a selected test waits for it."""
    if not _warm_up and item.path.parent.name == WARM_UP_FOLDER:
        needed = any(WARM_UP_USED_BY in getattr(i, "fixturenames", ()) for i in item.session.items)
        _warm_up.append(WarmUpRun() if needed else None)


@pytest.fixture(scope="session")
def warm_up_run() -> WarmUpRun:
    """The run started above (started here if, oddly, no test of its folder came first)."""
    if not _warm_up or _warm_up[0] is None:
        _warm_up[:] = [WarmUpRun()]
    return _warm_up[0]


def pytest_sessionfinish(session):
    for run in _warm_up:
        if run is not None:
            run.stop()


# --- markers -----------------------------------------------------------------------------------
# ``spark``: the test needs the session above or runs spark-submit (minutes); ``slow``: end-to-end fault
# runs. ``pytest -m "not spark and not slow"`` is the core without Spark, in well under a minute.

SPARK_FOLDERS = {"udfs"}
SPARK_SUBMIT_MODULES = {"test_readme.py", "test_faults.py", "test_user_errors.py", "test_scripts.py",
                        "test_interrupts.py"}
# ``broker``: the test runs Apache Kafka's own broker or tools (tests/broker; tests/broker_harness.py).
BROKER_FOLDERS = {"broker"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        folder = item.path.parent.name
        if folder in BROKER_FOLDERS:
            item.add_marker(pytest.mark.broker)
        if ("spark" in getattr(item, "fixturenames", ()) or folder in SPARK_FOLDERS
                or item.path.name in SPARK_SUBMIT_MODULES):
            item.add_marker(pytest.mark.spark)
