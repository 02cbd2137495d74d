"""Replicas that really diverged: a real unclean leader election on a three-node KRaft cluster, then
``kafkalog diverge`` and ``spark-submit.sh diverge``'s function on the stopped brokers' log dirs, judged by
what Kafka itself truncates when the old leader comes back.

Cluster: node 3 is the single KRaft controller (and a broker), nodes 1 and 2 are brokers only, so both
replicas' brokers can be down while the controller keeps its quorum. Topic t-0 has replicas [1, 2],
unclean.leader.election.enable=true. 10 records acks=all reach both; broker 2 stops; 5 records acks=1 reach
broker 1 only; broker 1 is killed; broker 2 comes back and is elected uncleanly (a new epoch from offset 10)
and takes 3 records. Broker 1's stopped copy (15 offsets) and broker 2's (13) differ from offset 10.
"""
from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from broker_harness import start_or_unavailable

from kafkalog.log.logdir import scan_log_dir
from kafkalog.log.replica_divergence import DIVERGED, IDENTICAL, diverge_partition
from kafkalog.testing.broker import free_port

pytestmark = pytest.mark.broker
TOPIC = "t"


def _produce(bootstrap: str, values, *, acks, deadline_s: float = 90.0) -> None:
    from kafka import KafkaProducer

    deadline = time.monotonic() + deadline_s
    while True:
        try:
            p = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, request_timeout_ms=5000, max_block_ms=10000)
            for v in values:
                p.send(TOPIC, v.encode(), partition=0)
            p.flush(timeout=20)
            p.close()
            return
        except Exception:              # noqa: BLE001 - the new leader is not elected yet: ask again
            if time.monotonic() > deadline:
                raise
            time.sleep(2)


def _side_by_side(work, brokers) -> None:
    """``work(b)`` for every broker in threads of their own; the first error (a skip or fail too) is raised."""
    with ThreadPoolExecutor(len(brokers)) as pool:
        for future in [pool.submit(work, b) for b in brokers]:
            future.result()


def _compare(nodes):
    pdirs = [next(p for p in scan_log_dir(n.data_dir).partitions if p.topic == TOPIC) for n in nodes]
    return diverge_partition(pdirs, names=["1", "2"])


def test_an_unclean_election_is_found_and_kafka_truncates_where_we_say(broker_factory):
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    cport = free_port()
    nodes = {}
    for n in (3, 1, 2):
        port = free_port()
        overrides = {"node.id": n, "controller.quorum.voters": f"3@127.0.0.1:{cport}", "replica.lag.time.max.ms": 2000}
        if n == 3:
            overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}"
        else:
            overrides.update({"process.roles": "broker", "listeners": f"PLAINTEXT://127.0.0.1:{port}"})
        b = broker_factory(f"node{n}", start=False, overrides=overrides, heap="384m")
        b.broker_port, b.controller_port = port, cport
        if n != 3:
            b.cluster_id = nodes[3].cluster_id
        nodes[n] = b
    # the three nodes' StorageTool formats, then their JVM starts, side by side: each is a JVM start of its own
    # (CPU-bound, one core each), and the brokers-only nodes wait for the controller's quorum on their own
    _side_by_side(lambda b: b.format(), list(nodes.values()))
    _side_by_side(start_or_unavailable, [nodes[3], nodes[1], nodes[2]])
    boot = nodes[3].bootstrap
    admin = KafkaAdminClient(bootstrap_servers=boot)
    admin.create_topics([NewTopic(TOPIC, -1, -1, replica_assignments={0: [1, 2]},
                                  topic_configs={"unclean.leader.election.enable": "true", "min.insync.replicas": "1"})])
    admin.close()
    _produce(boot, [f"a{i}" for i in range(10)], acks="all")
    nodes[2].stop(clean=True)
    _produce(nodes[1].bootstrap, [f"b{i}" for i in range(5)], acks=1)
    nodes[1].stop(clean=False)                       # the leader dies with 10..14 on it alone
    nodes[2].start()
    _produce(boot, [f"c{i}" for i in range(3)], acks=1)        # broker 2, elected uncleanly
    nodes[2].stop(clean=True)

    res = _compare([nodes[1], nodes[2]])
    old = next(r for r in res.replicas if r.name == "1")
    assert res.leader == "2" and res.verdict == DIVERGED and res.first_differing_offset == 10, res.describe()
    assert (old.log_end_offset, old.kept_offset, old.truncated) == (15, 10, 5), res.describe()

    # the judge: broker 1 comes back as a follower and truncates where we said, then catches up
    nodes[2].start()
    nodes[1].start()
    nodes[1].wait_until(lambda: re.search(r"Truncating to offset (\d+)", nodes[1].server_log()), timeout=60,
                        what="broker 1 truncating t-0")
    truncations = re.findall(r"partition=t-0.*?Truncating to offset (\d+)", nodes[1].server_log())
    assert truncations and int(truncations[0]) == old.kept_offset, truncations
    nodes[1].wait_until(lambda: _end(nodes[1]) == 13, timeout=60, what="broker 1 catching up to 13")
    nodes[1].stop(clean=True)
    nodes[2].stop(clean=True)
    assert _compare([nodes[1], nodes[2]]).verdict == IDENTICAL


def _end(broker) -> int:
    from kafkalog.format.file_records import scan_batches

    segs = sorted((broker.data_dir / f"{TOPIC}-0").glob("*.log"))
    batches = scan_batches(segs[-1]).batches if segs else None
    return int(batches.column("lastOffset").to_pylist()[-1]) + 1 if batches is not None and batches.num_rows else 0
