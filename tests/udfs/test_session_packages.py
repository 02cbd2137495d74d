"""udfs.session's Spark packages (Spark's Kafka source, delta-spark): which are asked for, and the one-line
fallback where their jars cannot be had. No Spark is started here."""
from __future__ import annotations

import pytest

from udfs import session, spark_jars


def test_packages_come_from_the_argument_else_the_environment(monkeypatch):
    monkeypatch.setenv(session.PACKAGES_ENV, "Delta, kafka")
    assert session.requested_packages() == ("delta", "kafka")
    assert session.requested_packages(["kafka"]) == ("kafka",)
    monkeypatch.delenv(session.PACKAGES_ENV)
    assert session.requested_packages() == ()


def test_an_unknown_package_is_an_error_naming_it(monkeypatch):
    monkeypatch.setenv(session.PACKAGES_ENV, "kafka,detla")
    with pytest.raises(ValueError, match="detla"):
        session.requested_packages()


def test_offline_the_session_says_so_in_one_line_and_loads_nothing(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(spark_jars.CACHE_ENV, str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PATH", str(tmp_path))          # no mvn: as on a machine that cannot fetch
    assert session.package_conf(("kafka", "delta")) == {}
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "kafka, delta unavailable" in lines[0] and "delta-rs" in lines[0]


def test_cached_jars_give_spark_jars_and_deltas_settings(monkeypatch):
    found = spark_jars.cached_jars(("kafka", "delta"))
    if set(found) != {"kafka", "delta"}:
        pytest.skip("the Spark jars are not cached here (python -m udfs.spark_jars fetch)")
    conf = session.package_conf(("kafka", "delta"))
    jars = conf["spark.jars"].split(",")
    assert any("spark-sql-kafka-0-10_2.13" in j for j in jars) and any("delta-spark_" in j for j in jars)
    assert conf["spark.sql.extensions"] == session.DELTA_EXTENSION
    # Spark's own classes stay Spark's: nothing pyspark ships is loaded a second time
    assert not any("/jackson-core/" in j or "/hadoop-client-api/" in j or "scala-library" in j for j in jars)
    kafka_only = session.package_conf(("kafka",))
    assert "spark.sql.extensions" not in kafka_only
    assert not any("delta" in j.rsplit("/", 1)[-1] for j in kafka_only["spark.jars"].split(","))
