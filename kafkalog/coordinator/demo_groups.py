"""Demo ``__consumer_offsets`` partitions: a few consumer groups' offset commits and group metadata on
a demo topic, written as a group coordinator writes them (OffsetCommitValue v3, GroupMetadataValue v3
with consumer-protocol subscription/assignment, each group in partition abs(hashCode(group)) % 50)."""
from __future__ import annotations

import random
import struct
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pyarrow as pa

from kafkalog.format.schema import HEADERS_TYPE, TIMESTAMP_TYPE
from kafkalog.fs.names import format_partition_dir_name
from kafkalog.log.records_io import write_segment
from kafkalog.coordinator.group import records as gr
from kafkalog.coordinator.message import write_message
from kafkalog.coordinator.record import encode_key, encode_value

OFFSETS_TOPIC_PARTITIONS = 50            # offsets.topic.num.partitions default
OFFSET_COMMIT_VALUE_VERSION = 3          # what brokers write without an explicit expire timestamp
GROUP_METADATA_VALUE_VERSION = 3
CONSUMER_PROTOCOL_VERSION = 1
DEMO_START_MS = 1_767_225_600_000        # 2026-01-01T00:00:00Z, as the demo topic's records
COMMIT_EVERY_MS = 60_000
SESSION_TIMEOUT_MS = 45_000
REBALANCE_TIMEOUT_MS = 300_000
INT32_MASK = 0xFFFFFFFF
OTHER_TOPIC = "demo-payments"


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (UTF-16 code units), as a signed int32."""
    h = 0
    for unit in struct.unpack(f">{len(text.encode('utf-16-be')) // 2}H", text.encode("utf-16-be")):
        h = (31 * h + unit) & INT32_MASK
    return h - (1 << 32) if h & 0x80000000 else h


def coordinator_partition(group: str, partitions: int = OFFSETS_TOPIC_PARTITIONS) -> int:
    """Kafka's partitionFor(groupId): Utils.abs(hashCode) % offsets.topic.num.partitions."""
    return (java_string_hash(group) & 0x7FFFFFFF) % partitions


def _member_bytes(topic: str, assigned: List[int]) -> Tuple[bytes, bytes]:
    sub = write_message(gr.CONSUMER_PROTOCOL_SUBSCRIPTION, {"Topics": [topic], "UserData": None,
                                                           "OwnedPartitions": []}, CONSUMER_PROTOCOL_VERSION)
    asg = write_message(gr.CONSUMER_PROTOCOL_ASSIGNMENT, {"AssignedPartitions": [{"Topic": topic, "Partitions": assigned}],
                                                          "UserData": None}, CONSUMER_PROTOCOL_VERSION)
    return sub, asg


def group_records(group: str, *, topic: str, partitions: int, records: int, rnd: random.Random,
                  index: int, delete_partition0: bool = False) -> List[Tuple[int, bytes, Optional[bytes]]]:
    """(timestamp, key, value) of one demo group's history: a few rounds of commits on every partition,
    then its metadata: the first group has a live member, the others are empty; with
    ``delete_partition0`` its commit of partition 0 is then deleted (a tombstone)."""
    rt_commit = gr.RECORD_TYPES[gr.OFFSET_COMMIT]
    rt_group = gr.RECORD_TYPES[gr.GROUP_METADATA]
    out: List[Tuple[int, bytes, Optional[bytes]]] = []
    clock = DEMO_START_MS + index * 1_000
    for round_ in range(1, 4):
        for p in range(partitions):
            committed = min(records, records * round_ // 3 - rnd.randrange(0, max(1, records // 10)))
            clock += COMMIT_EVERY_MS
            out.append((clock, encode_key(rt_commit, {"group": group, "topic": topic, "partition": p}),
                        encode_value(rt_commit, {"offset": max(0, committed), "leaderEpoch": 0, "metadata": "",
                                                 "commitTimestamp": clock}, OFFSET_COMMIT_VALUE_VERSION)))
    if index == 1:      # a topic the demo log dir does not hold (README's demo-logs-2 does): lag unknown
        for p in range(2):
            clock += COMMIT_EVERY_MS
            out.append((clock, encode_key(rt_commit, {"group": group, "topic": OTHER_TOPIC, "partition": p}),
                        encode_value(rt_commit, {"offset": 10 * (p + 1), "leaderEpoch": 0, "metadata": "",
                                                 "commitTimestamp": clock}, OFFSET_COMMIT_VALUE_VERSION)))
    members = []
    if index == 0:
        sub, asg = _member_bytes(topic, list(range(partitions)))
        members.append({"memberId": f"{group}-consumer-1", "groupInstanceId": None, "clientId": f"{group}-client",
                        "clientHost": "/10.0.0.1", "rebalanceTimeout": REBALANCE_TIMEOUT_MS,
                        "sessionTimeout": SESSION_TIMEOUT_MS, "subscription": sub, "assignment": asg})
    clock += 1
    out.append((clock, encode_key(rt_group, {"group": group}), encode_value(rt_group, {
        "protocolType": gr.CONSUMER_PROTOCOL_TYPE, "generation": 3, "protocol": "range" if members else None,
        "leader": members[0]["memberId"] if members else None, "currentStateTimestamp": clock,
        "members": members}, GROUP_METADATA_VALUE_VERSION)))
    if delete_partition0:
        clock += 1
        out.append((clock, encode_key(rt_commit, {"group": group, "topic": topic, "partition": 0}), None))
    return out


def demo_group_names(n: int) -> List[str]:
    base = ["demo-billing", "demo-analytics", "demo-audit", "demo-search", "demo-mailer"]
    return [base[i] if i < len(base) else f"demo-group-{i}" for i in range(n)]


def write_consumer_offsets(out: Path, *, topic: str, partitions: int, records: int, groups: int,
                           rnd: random.Random) -> Dict[Tuple[str, int], int]:
    """Write the __consumer_offsets partitions of ``groups`` demo groups under log dir ``out``;
    returns {(topic, partition): log end offset} for the checkpoints."""
    by_partition: Dict[int, List[Tuple[int, bytes, Optional[bytes]]]] = {}
    for i, g in enumerate(demo_group_names(groups)):
        by_partition.setdefault(coordinator_partition(g), []).extend(
            group_records(g, topic=topic, partitions=partitions, records=records, rnd=rnd, index=i,
                          delete_partition0=groups > 1 and i == groups - 1))
    ends = {}
    for cp, recs in sorted(by_partition.items()):
        recs.sort(key=lambda r: r[0])
        pdir = out / format_partition_dir_name("__consumer_offsets", cp)
        pdir.mkdir()
        table = pa.table({
            "offset": pa.array(range(len(recs)), pa.int64()),
            "timestamp": pa.array([r[0] for r in recs], TIMESTAMP_TYPE),
            "key": pa.array([r[1] for r in recs], pa.binary()),
            "value": pa.array([r[2] for r in recs], pa.binary()),
            "headers": pa.array([[] for _ in recs], HEADERS_TYPE),
        })
        write_segment(pdir, table, overwrite=True)
        ends[("__consumer_offsets", cp)] = len(recs)
    return ends
