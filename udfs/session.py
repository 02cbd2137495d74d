"""The one way kafkalog builds its SparkSession, for jobs and tests alike.

``conf/`` is the Spark conf dir (``spark-defaults.conf``, ``log4j2.properties``: UTC, Arrow, Parquet
timestamps Delta can read, WARN logging) unless ``SPARK_CONF_DIR`` is already set. Python workers run
the interpreter that runs the driver (``PYSPARK_PYTHON``), so they import the same pyarrow and kafkalog.
Delta through delta-spark is used when the session has Delta's extension and jars; otherwise tables are
written with delta-rs (``udfs.delta_tables``).

**Spark packages, where asked.** ``build_session(..., packages=("kafka", "delta"))`` (or the environment's
``KAFKALOG_SPARK_PACKAGES=kafka,delta``, for jobs run by spark-submit.sh) loads Spark's own Kafka source
(``format("kafka")``) and/or delta-spark (``format("delta")``, with Delta's SQL extension and catalog) from
the jars ``udfs.spark_jars`` keeps in a cache (fetched from Maven Central the first time they are asked
for). Where they cannot be had (an offline machine, no Maven), the session says so in one line and starts
without them: tables are then written with delta-rs, as without the packages. Nothing is loaded unless
asked: jars are fixed when the JVM starts, and a package no query uses only costs start time.
``configure_spark_with_delta_pip`` is never called (see ``udfs.spark_jars`` for why).
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from pathlib import Path
from typing import Dict, Mapping, Optional, Sequence

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = PROJECT_ROOT / "conf"
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
DEFAULT_MASTER = "local[*]"
PACKAGES_ENV = "KAFKALOG_SPARK_PACKAGES"      # "kafka,delta": packages a job's session loads


def prepare_environment() -> None:
    """Set what the JVM and the Python workers need before a session starts (idempotent)."""
    if "SPARK_CONF_DIR" not in os.environ and CONF_DIR.is_dir():
        os.environ["SPARK_CONF_DIR"] = str(CONF_DIR)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("NUMBA_CACHE_DIR", "/tmp/kafkalog-numba-cache")


def requested_packages(packages: Optional[Sequence[str]] = None) -> tuple:
    """The packages asked for: the argument, else ``KAFKALOG_SPARK_PACKAGES`` (comma-separated), else none.
    An unknown name is an error (a typo would otherwise start a session without what was meant)."""
    from udfs.spark_jars import PACKAGES

    if packages is None:
        packages = [p.strip() for p in os.environ.get(PACKAGES_ENV, "").split(",") if p.strip()]
    wanted = tuple(dict.fromkeys(p.lower() for p in packages))
    unknown = [p for p in wanted if p not in PACKAGES]
    if unknown:
        raise ValueError(f"unknown Spark package(s) {unknown} (from the packages argument or {PACKAGES_ENV}); "
                         f"known: {', '.join(PACKAGES)}")
    return wanted


def package_conf(packages: Sequence[str]) -> Dict[str, str]:
    """The Spark settings that load ``packages`` from the jar cache (fetching them once if need be), or
    {} for those that cannot be had, after one line on stderr saying which and what happens instead."""
    if not packages:
        return {}
    from udfs.progress import message
    from udfs.spark_jars import DELTA, SparkJarsUnavailable, cached_jars, fetch

    found = cached_jars(packages)
    if len(found) < len(packages):
        try:
            fetch()
            found = cached_jars(packages)
        except SparkJarsUnavailable as e:
            reason = str(e).splitlines()[0]
            missing = [p for p in packages if p not in found]
            message(f"Spark package(s) {', '.join(missing)} unavailable ({reason}); starting without them: "
                    "Delta tables are written with delta-rs and format(\"kafka\") is not available")
    if not found:
        return {}
    jars = sorted({j for paths in found.values() for j in paths})
    conf = {"spark.jars": ",".join(jars)}
    if DELTA in found:
        conf["spark.sql.extensions"] = DELTA_EXTENSION
        conf["spark.sql.catalog.spark_catalog"] = DELTA_CATALOG
    return conf


def build_session(app_name: str, *, master: Optional[str] = None, conf: Optional[Mapping[str, str]] = None,
                  packages: Optional[Sequence[str]] = None):
    """Get or create the SparkSession. ``master``: the argument, else ``SPARK_MASTER``, else what
    spark-submit was given, else ``local[*]``. The session can read ``format("kafkalog")``
    (``udfs.kafkalog_source.register``).

    ``packages``: ``"kafka"`` (Spark's Kafka source) and/or ``"delta"`` (delta-spark) to load; default
    ``KAFKALOG_SPARK_PACKAGES``, else none. They load only into a session whose JVM this call starts."""
    prepare_environment()
    from pyspark.sql import SparkSession

    wanted = requested_packages(packages)

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
    settings = dict(package_conf(wanted) if SparkSession.getActiveSession() is None else {})
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    from udfs.interrupts import while_spark_starts

    with while_spark_starts(), _still_starting():   # Ctrl-C meanwhile stops the job once Spark is up
        spark = builder.getOrCreate()
    from udfs.kafkalog_source import register

    register(spark)
    return spark


STILL_STARTING_EVERY_S = 8.0     # a line at least this often while the JVM starts: no silence a user takes for a hang


@contextlib.contextmanager
def _still_starting(every_s: float = STILL_STARTING_EVERY_S):
    """While Spark's JVM starts (seconds idle, minutes on a loaded machine), say so every ``every_s``
    seconds on stderr, with the time spent so far; nothing when the session already exists."""
    from pyspark.sql import SparkSession

    if SparkSession.getActiveSession() is not None:
        yield
        return
    from udfs.progress import message

    done = threading.Event()
    started = time.monotonic()

    def tick() -> None:
        while not done.wait(every_s):
            message(f"still starting Spark ({time.monotonic() - started:.0f} s): the JVM loads Spark's classes")
    thread = threading.Thread(target=tick, name="kafkalog-spark-start", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=1)


def delta_spark_available(spark) -> bool:
    """True when this session can read and write Delta through delta-spark: the extension is
    configured and its classes are on the JVM's class path."""
    extensions = spark.conf.get("spark.sql.extensions", "") or ""
    if DELTA_EXTENSION not in extensions:
        return False
    try:
        # through the thread's context class loader: jars given as spark.jars (udfs.spark_jars) are on
        # Spark's class loader, not the JVM's system one that Class.forName(name) would ask
        jvm = spark._jvm   # noqa: SLF001 - the documented way to probe
        jvm.java.lang.Thread.currentThread().getContextClassLoader().loadClass(DELTA_EXTENSION)
        return True
    except Exception:
        return False
