"""The one way kafkalog builds its SparkSession, for jobs and tests alike.

``conf/`` is the Spark conf dir (``spark-defaults.conf``, ``log4j2.properties``: UTC, Arrow, Parquet
timestamps Delta can read, WARN logging) unless ``SPARK_CONF_DIR`` is already set. Python workers run
the interpreter that runs the driver (``PYSPARK_PYTHON``), so they import the same pyarrow and kafkalog.
Delta through delta-spark is used when the session has Delta's extension and jars; otherwise tables are
written with delta-rs (``udfs.delta_tables``). Nothing here downloads anything: with no Maven access,
``configure_spark_with_delta_pip`` would fail, so it is never called.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Mapping, Optional

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = PROJECT_ROOT / "conf"
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
DEFAULT_MASTER = "local[*]"


def prepare_environment() -> None:
    """Set what the JVM and the Python workers need before a session starts (idempotent)."""
    if "SPARK_CONF_DIR" not in os.environ and CONF_DIR.is_dir():
        os.environ["SPARK_CONF_DIR"] = str(CONF_DIR)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("NUMBA_CACHE_DIR", "/tmp/kafkalog-numba-cache")


def build_session(app_name: str, *, master: Optional[str] = None, conf: Optional[Mapping[str, str]] = None):
    """Get or create the SparkSession. ``master``: the argument, else ``SPARK_MASTER``, else what
    spark-submit was given, else ``local[*]``. The session can read ``format("kafkalog")``
    (``udfs.kafkalog_source.register``)."""
    prepare_environment()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    master = master or os.environ.get("SPARK_MASTER")
    if SparkSession.getActiveSession() is None:
        from udfs.progress import message
        message(f"starting Spark ({master or os.environ.get('MASTER') or DEFAULT_MASTER}; the first start takes "
                "a few seconds)")
    if master:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:   # not launched by spark-submit, which sets --master
        builder = builder.master(DEFAULT_MASTER)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    from udfs.interrupts import while_spark_starts

    with while_spark_starts():          # Ctrl-C meanwhile stops the job once Spark is up (udfs.interrupts)
        spark = builder.getOrCreate()
    from udfs.kafkalog_source import register

    register(spark)
    return spark


def delta_spark_available(spark) -> bool:
    """True when this session can read and write Delta through delta-spark: the extension is
    configured and its classes are on the JVM's class path."""
    extensions = spark.conf.get("spark.sql.extensions", "") or ""
    if DELTA_EXTENSION not in extensions:
        return False
    try:
        spark._jvm.java.lang.Class.forName(DELTA_EXTENSION)   # noqa: SLF001 - the documented way to probe
        return True
    except Exception:
        return False
