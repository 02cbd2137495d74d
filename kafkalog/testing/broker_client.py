"""What a test does to a real broker through a Python client (kafka-python, a test-only oracle): create
topics with configs, produce keyed and unkeyed records with headers in any codec (idempotent or not,
in committed or aborted transactions), commit group offsets, consume everything, ListOffsets,
DeleteRecords, read a group's committed offsets and describe the group.

    from kafkalog.testing.broker import KafkaBroker
    from kafkalog.testing import broker_client as bc

    with KafkaBroker(tmp_path).started() as broker:
        bc.create_topic(broker, "orders", configs={"cleanup.policy": "compact"})
        bc.produce(broker, "orders", [bc.Record(b"k", b"v", timestamp_ms=1_700_000_000_000)], codec="zstd")
        rows = bc.consume_all(broker, "orders")
        bc.list_offsets(broker, "orders", 0, bc.LATEST)    # the high watermark

kafka-python is imported inside the functions, so importing this module needs only kafkalog.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

LATEST = -1          # ListOffsets: the high watermark (the LSO under read_committed)
EARLIEST = -2        # the log start offset
MAX_TIMESTAMP = -3   # the record with the largest timestamp (KIP-734)
EARLIEST_LOCAL = -4  # the first offset on local disk (KIP-405)

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CLIENT_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class Record:
    """One record to produce. ``value`` None is a tombstone; ``timestamp_ms`` None lets the client stamp it."""
    key: Optional[bytes]
    value: Optional[bytes]
    headers: Sequence[Tuple[str, bytes]] = ()
    timestamp_ms: Optional[int] = None
    partition: int = 0


@dataclass(frozen=True)
class Consumed:
    """One record as a consumer received it."""
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    timestamp_type: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: Tuple[Tuple[str, bytes], ...] = field(default_factory=tuple)


def _admin(broker):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=CLIENT_TIMEOUT_MS)


@contextlib.contextmanager
def admin(broker) -> Iterator[Any]:
    """A kafka-python admin client on the broker, closed after use."""
    client = _admin(broker)
    try:
        yield client
    finally:
        client.close()


def create_topic(broker, name: str, *, partitions: int = 1, configs: Optional[Mapping[str, object]] = None,
                 timeout_s: float = 30.0) -> None:
    """Create ``name`` (replication factor 1) with topic ``configs`` and wait until every partition has a
    leader and its folder exists in the broker's log dir.

    Mind retention: the harness runs the retention task every 500 ms, so records stamped further back than
    ``retention.ms`` (7 days by default) go within a second on a ``delete`` topic. Give synthetic old
    timestamps ``retention.ms=-1`` (and ``retention.bytes=-1``) unless retention is what the test checks."""
    from kafka.admin import NewTopic
    with admin(broker) as client:
        client.create_topics([NewTopic(name, partitions, 1, topic_configs={k: str(v) for k, v in (configs or {}).items()})],
                             timeout_ms=CLIENT_TIMEOUT_MS)
    broker.wait_until(lambda: all(broker.partition_dir(name, p).is_dir() for p in range(partitions)),
                      timeout=timeout_s, what=f"the folders of topic {name}")
    # A leader that can take a write: ListOffsets answers once the partition is online.
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            list_offsets(broker, name, 0, LATEST)
            return
        except Exception:  # noqa: BLE001 - not yet a leader; retried until the deadline
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def alter_topic_configs(broker, name: str, configs: Mapping[str, object]) -> None:
    """Set topic configs (incremental: keys not named keep their values)."""
    from kafka.admin import ConfigResource, ConfigResourceType
    with admin(broker) as client:
        current = describe_topic_configs(broker, name)
        current.update({k: str(v) for k, v in configs.items()})
        client.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs=current)])


def describe_topic_configs(broker, name: str) -> Dict[str, str]:
    """The topic-level overrides of ``name`` (configs set on the topic itself: source
    DYNAMIC_TOPIC_CONFIG). kafka-python 3 answers with a dict ``{"topic": {name: {key: {"value",
    "config_source", ...}}}}``; older versions with DescribeConfigs response objects (source code 1)."""
    from kafka.admin import ConfigResource, ConfigResourceType
    with admin(broker) as client:
        result = client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
    out: Dict[str, str] = {}
    if isinstance(result, dict):
        for key, entry in result.get("topic", {}).get(name, {}).items():
            if entry.get("config_source") == "DYNAMIC_TOPIC_CONFIG":
                out[key] = entry["value"]
        return out
    for response in result if isinstance(result, list) else [result]:
        for resource in getattr(response, "resources", []):
            for entry in resource[4]:
                key, value, _read_only, source = entry[0], entry[1], entry[2], entry[3]
                if source == 1:  # TOPIC_CONFIG
                    out[key] = value
    return out


def producer(broker, *, codec: str = "none", idempotent: bool = True, transactional_id: Optional[str] = None,
             batch_size: int = 16384, linger_ms: int = 0, **extra):
    """A kafka-python producer (acks=all). ``codec``: one of ``CODECS``."""
    from kafka import KafkaProducer
    config = dict(bootstrap_servers=broker.bootstrap, acks="all", compression_type=None if codec == "none" else codec,
                  enable_idempotence=idempotent or transactional_id is not None, batch_size=batch_size,
                  linger_ms=linger_ms, request_timeout_ms=CLIENT_TIMEOUT_MS, max_in_flight_requests_per_connection=1)
    if transactional_id is not None:
        config["transactional_id"] = transactional_id
    config.update(extra)
    return KafkaProducer(**config)


def send_all(client, topic: str, records: Iterable[Record]) -> List[int]:
    """Send ``records`` in order with ``client`` and return their offsets (flushes)."""
    futures = [client.send(topic, key=r.key, value=r.value, headers=list(r.headers) or None, partition=r.partition,
                           timestamp_ms=r.timestamp_ms) for r in records]
    client.flush()
    return [f.get(timeout=CLIENT_TIMEOUT_MS / 1000).offset for f in futures]


def produce(broker, topic: str, records: Iterable[Record], *, codec: str = "none", idempotent: bool = True,
            batch_size: int = 16384, linger_ms: int = 0, flush_every: Optional[int] = None) -> List[int]:
    """Produce ``records`` (one producer, closed after) and return their offsets. ``flush_every``: flush
    after every N records, so each group lands in batches of its own."""
    client = producer(broker, codec=codec, idempotent=idempotent, batch_size=batch_size, linger_ms=linger_ms)
    try:
        records = list(records)
        if not flush_every:
            return send_all(client, topic, records)
        offsets: List[int] = []
        for i in range(0, len(records), flush_every):
            offsets += send_all(client, topic, records[i:i + flush_every])
        return offsets
    finally:
        client.close(timeout=10)


def produce_transaction(broker, topic: str, records: Iterable[Record], *, transactional_id: str, commit: bool,
                        codec: str = "none", client=None) -> List[int]:
    """Produce ``records`` in one transaction of ``transactional_id`` and commit or abort it. Pass a
    ``client`` made by ``producer(transactional_id=…)`` to run several transactions with one producer id."""
    own = client is None
    if own:
        client = producer(broker, codec=codec, transactional_id=transactional_id)
        client.init_transactions()
    try:
        client.begin_transaction()
        futures = [client.send(topic, key=r.key, value=r.value, headers=list(r.headers) or None,
                               partition=r.partition, timestamp_ms=r.timestamp_ms) for r in records]
        client.flush()
        offsets = [f.get(timeout=CLIENT_TIMEOUT_MS / 1000).offset for f in futures]
        if commit:
            client.commit_transaction()
        else:
            client.abort_transaction()
        return offsets
    finally:
        if own:
            client.close(timeout=10)


def commit_group_offsets(broker, group: str, offsets: Mapping[Tuple[str, int], int]) -> None:
    """Commit ``offsets`` {(topic, partition): offset} for consumer group ``group`` (as a consumer would)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False,
                             request_timeout_ms=CLIENT_TIMEOUT_MS + 5000)
    try:
        consumer.commit({TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()})
    finally:
        consumer.close()


def group_offsets(broker, group: str) -> Dict[Tuple[str, int], int]:
    """The offsets ``group`` has committed, as the broker reports them (OffsetFetch)."""
    with admin(broker) as client:
        result = client.list_group_offsets(group).get(group, {})
    return {(tp.topic, tp.partition): meta.offset for tp, meta in result.items()}


def describe_group(broker, group: str) -> Dict[str, object]:
    """DescribeGroups for one group, as kafka-python decodes it: ``group_state`` ("Empty", "Stable",
    "Dead" …), ``protocol_type``, ``members`` and the rest of the response's fields."""
    with admin(broker) as client:
        return dict(client.describe_groups([group])[group])


def list_offsets(broker, topic: str, partition: int, spec: int, *, read_committed: bool = False) -> Tuple[int, int]:
    """ListOffsets for one partition: ``spec`` is ``LATEST``, ``EARLIEST``, ``MAX_TIMESTAMP``,
    ``EARLIEST_LOCAL`` or a timestamp in ms. Returns (offset, timestamp); (-1, -1) where the broker
    finds none (a timestamp after every record)."""
    from kafka import TopicPartition
    from kafka.protocol.consumer.offsets import IsolationLevel
    level = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    with admin(broker) as client:
        result = client.list_partition_offsets({TopicPartition(topic, partition): spec}, isolation_level=level)
    found = result[TopicPartition(topic, partition)]
    if found is None:
        return (-1, -1)
    return (found.offset, found.timestamp if found.timestamp is not None else -1)


def delete_records(broker, before: Mapping[Tuple[str, int], int]) -> Dict[Tuple[str, int], int]:
    """DeleteRecords: advance each partition's log start offset to ``before[(topic, partition)]`` (-1: the
    high watermark). Returns the low watermarks the broker reports."""
    from kafka import TopicPartition
    with admin(broker) as client:
        result = client.delete_records({TopicPartition(t, p): o for (t, p), o in before.items()})
    out: Dict[Tuple[str, int], int] = {}
    for tp, value in (result or {}).items():
        low = value.get("low_watermark") if isinstance(value, dict) else getattr(value, "low_watermark", value)
        out[(tp.topic, tp.partition)] = low
    return out


def consume_all(broker, topic: str, *, partitions: Optional[Sequence[int]] = None, read_committed: bool = False,
                timeout_s: float = 60.0) -> List[Consumed]:
    """Every record of ``topic`` from the log start to the end (the LSO under ``read_committed``), in
    offset order per partition, as a consumer with no group receives them."""
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, group_id=None,
                             isolation_level="read_committed" if read_committed else "read_uncommitted",
                             auto_offset_reset="earliest", request_timeout_ms=CLIENT_TIMEOUT_MS + 5000,
                             fetch_max_wait_ms=100)
    try:
        if partitions is None:
            partitions = sorted(consumer.partitions_for_topic(topic) or [])
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = {tp: list_offsets(broker, topic, tp.partition, LATEST, read_committed=read_committed)[0] for tp in tps}
        out: List[Consumed] = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise AssertionError(f"consuming {topic} timed out at {[consumer.position(tp) for tp in tps]} "
                                     f"of {list(ends.values())}")
            for tp, messages in consumer.poll(timeout_ms=500).items():
                for m in messages:
                    if m.offset < ends[tp]:
                        out.append(Consumed(m.topic, m.partition, m.offset, m.timestamp, m.timestamp_type, m.key,
                                            m.value, tuple((k, v) for k, v in (m.headers or []))))
        return sorted(out, key=lambda c: (c.partition, c.offset))
    finally:
        consumer.close()
