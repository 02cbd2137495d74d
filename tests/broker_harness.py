"""Fixtures for the real-broker tests (imported by tests/conftest.py; a conftest.py of its own in tests/broker
would shadow tests/conftest.py for the modules that import it by name): Apache Kafka's own broker (kafkalog.testing.broker) as the judge.

Every test here is marked ``broker``. Where the broker cannot run (no Java or Maven, Maven Central out
of reach) the tests skip with the reason — unless ``KAFKALOG_BROKER_REQUIRED=1`` (set by .ci/run), where
a broker that cannot start is a failure with its log's tail, never a silent skip.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, List

import pytest

from kafkalog.testing.broker import REQUIRED_ENV, BrokerUnavailable, KafkaBroker, fetch_jars, random_cluster_id


def _unavailable(reason: str):
    if os.environ.get(REQUIRED_ENV) == "1":
        pytest.fail(f"the real broker is required here ({REQUIRED_ENV}=1) but cannot run: {reason}", pytrace=False)
    pytest.skip(f"no real Kafka broker: {reason}")


def start_or_unavailable(broker: KafkaBroker) -> KafkaBroker:
    """Start ``broker``; where it cannot run, skip the test (fail it under ``KAFKALOG_BROKER_REQUIRED=1``)."""
    try:
        return broker.start()
    except BrokerUnavailable as e:
        _unavailable(str(e))
        raise  # unreachable


def new_cluster_id() -> str:
    """A cluster id as ``StorageTool random-uuid`` prints it (the harness makes it without a JVM)."""
    return random_cluster_id()


@pytest.fixture(scope="session")
def kafka_jars() -> Path:
    """Apache Kafka's jars, fetched once into the cache (skip or fail where they cannot be had)."""
    try:
        return fetch_jars()
    except (BrokerUnavailable, OSError) as e:
        _unavailable(str(e))
        raise  # unreachable


@pytest.fixture
def broker_factory(kafka_jars, tmp_path) -> Iterator:
    """Make brokers in this test's tmp folder: ``broker_factory(**KafkaBroker kwargs)`` returns a started
    KafkaBroker; all are stopped (killed if need be) at the end of the test."""
    made: List[KafkaBroker] = []

    def make(name: str = "broker", *, start: bool = True, **kwargs) -> KafkaBroker:
        kwargs.setdefault("cluster_id", new_cluster_id())
        broker = KafkaBroker(tmp_path / name, **kwargs)
        made.append(broker)
        if start:
            start_or_unavailable(broker)
        return broker

    yield make
    for broker in made:
        broker.kill()


@pytest.fixture(scope="module")
def module_broker(kafka_jars, tmp_path_factory) -> Iterator[KafkaBroker]:
    """One running broker shared by a module's tests (each test uses topics of its own)."""
    broker = start_or_unavailable(KafkaBroker(tmp_path_factory.mktemp("module-broker"), cluster_id=new_cluster_id()))
    yield broker
    broker.kill()
