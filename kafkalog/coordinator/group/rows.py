"""Typed Arrow rows of ``__consumer_offsets``: one row per record of a segment table (as
``kafkalog.log.records_io.read_segment`` returns it), with the columns of every record type
(:data:`GROUP_ROW_SCHEMA`; the ones a record type does not have are null).

Offset commits: group, topic, partition, committed offset, leader epoch, metadata, commit and
expire timestamps. Classic group metadata: protocol type, generation, protocol, leader, state
timestamp, the members (client, host, timeouts, subscribed topics, assigned partitions decoded from
the consumer protocol) and the state Kafka's loader gives the group (``Empty`` without members,
``Stable`` otherwise). KIP-848 consumer groups: group/member epochs, member state, assigned
partitions by topic id. Every decoded value is also in ``value_json`` (Kafka's JSON). A tombstone is
a row with ``tombstone`` true; a record that does not decode keeps ``raw_key``/``raw_value`` with
``error`` saying why. Control records (transaction markers of transactional offset commits) are
rows with ``control_type`` set, so the lag computation can resolve them.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

import pyarrow as pa

from kafkalog.format.control_record import CONTROL_TYPE_NAMES, control_type_name
from kafkalog.format.schema import TIMESTAMP_TYPE
from kafkalog.coordinator.record import DecodedRecord, decode_record
from kafkalog.coordinator.group import records as gr

GROUP_STATE_EMPTY = "Empty"
GROUP_STATE_STABLE = "Stable"

TOPIC_PARTITION_TYPE = pa.struct([pa.field("topic", pa.string()), pa.field("partition", pa.int32())])
MEMBER_TYPE = pa.struct([
    pa.field("member_id", pa.string()), pa.field("group_instance_id", pa.string()),
    pa.field("client_id", pa.string()), pa.field("client_host", pa.string()),
    pa.field("rebalance_timeout_ms", pa.int32()), pa.field("session_timeout_ms", pa.int32()),
    pa.field("subscribed_topics", pa.list_(pa.string())),
    pa.field("assigned_partitions", pa.list_(TOPIC_PARTITION_TYPE)),
])

GROUP_ROW_SCHEMA = pa.schema([
    pa.field("topic", pa.string()), pa.field("partition", pa.int32()),       # the __consumer_offsets partition
    pa.field("offset", pa.int64()), pa.field("timestamp", TIMESTAMP_TYPE),
    pa.field("producer_id", pa.int64()), pa.field("is_transactional", pa.bool_()),
    pa.field("control_type", pa.string()),
    pa.field("record_type", pa.int16()), pa.field("record_type_name", pa.string()),
    pa.field("value_version", pa.int16()), pa.field("tombstone", pa.bool_()),
    pa.field("group", pa.string()),
    pa.field("commit_topic", pa.string()), pa.field("commit_partition", pa.int32()),
    pa.field("committed_offset", pa.int64()), pa.field("leader_epoch", pa.int32()),
    pa.field("metadata", pa.string()), pa.field("commit_timestamp", pa.int64()),
    pa.field("expire_timestamp", pa.int64()),
    pa.field("protocol_type", pa.string()), pa.field("generation", pa.int32()),
    pa.field("protocol", pa.string()), pa.field("leader", pa.string()),
    pa.field("current_state_timestamp", pa.int64()), pa.field("group_state", pa.string()),
    pa.field("members", pa.list_(MEMBER_TYPE)),
    pa.field("member_id", pa.string()), pa.field("group_epoch", pa.int32()),
    pa.field("member_epoch", pa.int32()), pa.field("member_state", pa.int8()),
    pa.field("assigned_topic_partitions", pa.list_(pa.struct([pa.field("topic_id", pa.string()),
                                                               pa.field("partitions", pa.list_(pa.int32()))]))),
    pa.field("value_json", pa.string()),
    pa.field("error", pa.string()),
    pa.field("raw_key", pa.binary()), pa.field("raw_value", pa.binary()),
])


def _partitions_by_name(entries: Optional[List[Dict[str, Any]]]) -> List[Dict[str, Any]]:
    return [{"topic": e["Topic"], "partition": p} for e in entries or [] for p in e["Partitions"] or []]


def _member(m: Dict[str, Any], protocol_type: str) -> Dict[str, Any]:
    topics, assigned = None, None
    if protocol_type == gr.CONSUMER_PROTOCOL_TYPE:
        _, sub = gr.read_consumer_protocol(gr.CONSUMER_PROTOCOL_SUBSCRIPTION, m.get("subscription"))
        _, asg = gr.read_consumer_protocol(gr.CONSUMER_PROTOCOL_ASSIGNMENT, m.get("assignment"))
        topics = sub["Topics"] if sub is not None else None
        assigned = _partitions_by_name(asg["AssignedPartitions"]) if asg is not None else None
    return {"member_id": m["memberId"], "group_instance_id": m.get("groupInstanceId"),
            "client_id": m["clientId"], "client_host": m["clientHost"],
            "rebalance_timeout_ms": m.get("rebalanceTimeout", m["sessionTimeout"]),
            "session_timeout_ms": m["sessionTimeout"], "subscribed_topics": topics,
            "assigned_partitions": assigned}


def decoded_row(d: DecodedRecord) -> Dict[str, Any]:
    """The typed columns of one decoded record (without the record's position columns)."""
    row: Dict[str, Any] = {"record_type": d.record_type, "record_type_name": d.type_name,
                           "value_version": d.value_version, "tombstone": d.tombstone, "error": d.error}
    key, value = d.key or {}, d.value
    row["group"] = key.get("group", key.get("GroupId"))
    row["member_id"] = key.get("MemberId")
    if d.record_type in gr.OFFSET_COMMIT_TYPES:
        row["commit_topic"], row["commit_partition"] = key.get("topic"), key.get("partition")
        if value is not None:
            row.update(committed_offset=value["offset"], leader_epoch=value.get("leaderEpoch", -1),
                       metadata=value["metadata"], commit_timestamp=value["commitTimestamp"],
                       expire_timestamp=value.get("expireTimestamp", -1))
    elif d.record_type == gr.GROUP_METADATA and value is not None:
        members = [_member(m, value["protocolType"]) for m in value["members"]]
        row.update(protocol_type=value["protocolType"], generation=value["generation"],
                   protocol=value["protocol"], leader=value["leader"],
                   current_state_timestamp=value.get("currentStateTimestamp", -1),
                   group_state=GROUP_STATE_STABLE if members else GROUP_STATE_EMPTY, members=members)
    elif d.record_type == gr.CONSUMER_GROUP_METADATA and value is not None:
        row["group_epoch"] = value["Epoch"]
    elif d.record_type == gr.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA and value is not None:
        row["group_epoch"] = value["AssignmentEpoch"]
    elif d.record_type == gr.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT and value is not None:
        row.update(member_epoch=value["MemberEpoch"], member_state=value["State"],
                   assigned_topic_partitions=[{"topic_id": t["TopicId"], "partitions": t["Partitions"]}
                                              for t in value["AssignedPartitions"]])
    elif d.record_type == gr.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER and value is not None:
        row["assigned_topic_partitions"] = [{"topic_id": t["TopicId"], "partitions": t["Partitions"]}
                                            for t in value["TopicPartitions"]]
    if d.value_json is not None:
        row["value_json"] = json.dumps(d.value_json, separators=(",", ":"))
    return row


def _control_name(key: Optional[bytes]) -> str:
    if key is None or len(key) < 4:
        return control_type_name(-1)
    raw = int.from_bytes(key[2:4], "big", signed=True)
    return control_type_name(raw if raw in CONTROL_TYPE_NAMES else -1, raw)


def group_rows(table: pa.Table) -> pa.Table:
    """One typed row per record of ``table`` (a read_segment table of a __consumer_offsets
    partition), in its order; never raises for bad record bytes (see ``error``)."""
    cols = {name: table.column(name).to_pylist() if name in table.column_names else [None] * table.num_rows
            for name in ("topic", "partition", "offset", "timestamp", "key", "value", "producerId",
                         "isTransactional", "isControl")}
    out: List[Dict[str, Any]] = []
    for i in range(table.num_rows):
        key, value = cols["key"][i], cols["value"][i]
        base = {"topic": cols["topic"][i], "partition": cols["partition"][i], "offset": cols["offset"][i],
                "timestamp": cols["timestamp"][i], "producer_id": cols["producerId"][i],
                "is_transactional": cols["isTransactional"][i]}
        if cols["isControl"][i]:
            base["control_type"] = _control_name(key)
        else:
            d = decode_record(gr.RECORD_TYPES, key, value)
            base.update(decoded_row(d))
            if d.error is not None:
                base["raw_key"], base["raw_value"] = key, value
        out.append(base)
    return pa.Table.from_pylist(out, schema=GROUP_ROW_SCHEMA)
