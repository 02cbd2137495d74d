"""The group coordinator's ``__consumer_offsets`` records: key/value layouts of every version Kafka
has written (apache/kafka ``group-coordinator/src/main/resources/common/message``) and the
consumer protocol's subscription/assignment (``clients/.../ConsumerProtocol*.json``).

Record types (the key's int16 "version"), keys non-flexible, values as listed::

    0  OffsetCommit (legacy key v0)   group, topic, partition    OffsetCommitValue 0-4 (flexible 4+)
    1  OffsetCommit                   group, topic, partition    OffsetCommitValue 0-4
    2  GroupMetadata (classic group)  group                      GroupMetadataValue 0-4 (flexible 4+)
    3  ConsumerGroupMetadata          GroupId                    v0 flexible: Epoch, tagged MetadataHash, CreationTimeMs
    4  ConsumerGroupPartitionMetadata GroupId                    v0 flexible: Topics[id, name, partitions, racks]
                                                                 (3.7 early access: Epoch first; both are read)
    5  ConsumerGroupMemberMetadata    GroupId, MemberId          v0 flexible: instance, rack, client, subscription, ...
    6  ConsumerGroupTargetAssignmentMetadata GroupId             v0 flexible: AssignmentEpoch, tagged AssignmentTimestamp
    7  ConsumerGroupTargetAssignmentMember   GroupId, MemberId   v0 flexible: TopicPartitions[id, partitions]
    8  ConsumerGroupCurrentMemberAssignment  GroupId, MemberId   v0 flexible: epochs, state, assigned/pending partitions
    16 ConsumerGroupRegularExpression GroupId, RegularExpression v0 flexible: Topics, Version, Timestamp

OffsetCommitValue: offset int64; leaderEpoch int32 (v3+, default -1); metadata string;
commitTimestamp int64; expireTimestamp int64 (v1 only, default -1); topicId uuid (v4+, tagged 0,
default the zero uuid: Kafka 4.x brokers write it).
GroupMetadataValue: protocolType string; generation int32; protocol, leader nullable strings;
currentStateTimestamp int64 (v2+); members[]: memberId; groupInstanceId (v3+, nullable); clientId;
clientHost; rebalanceTimeout int32 (v1+); sessionTimeout int32; subscription bytes; assignment bytes.
For protocol type ``consumer`` the member bytes are ConsumerProtocolSubscription (v0-2: Topics[],
nullable UserData, OwnedPartitions[] v1+, GenerationId v2+) and ConsumerProtocolAssignment (v0-2:
AssignedPartitions[topic, partitions[]], nullable UserData), each after its own int16 version; a
newer version is read with the newest layout, as the consumer does.

Other record types (share and streams groups) are reported as unknown with their raw bytes.
"""
from __future__ import annotations

import base64
from typing import Any, Dict, Optional, Tuple

from kafkalog.coordinator.message import Field, Message, MessageFormatError, read_message, to_kafka_json
from kafkalog.coordinator.record import RecordType

CONSUMER_PROTOCOL_TYPE = "consumer"
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"     # Uuid.ZERO_UUID.toString(): a tagged uuid's default

OFFSET_COMMIT_KEY = Message("OffsetCommitKey", "0", None, (
    Field("group", "string"), Field("topic", "string"), Field("partition", "int32")))
OFFSET_COMMIT_VALUE = Message("OffsetCommitValue", "0-4", "4+", (
    Field("offset", "int64"),
    Field("leaderEpoch", "int32", "3+", default=-1),
    Field("metadata", "string"),
    Field("commitTimestamp", "int64"),
    Field("expireTimestamp", "int64", "1", default=-1),
    Field("topicId", "uuid", "4+", tag=0, default=ZERO_UUID)))

GROUP_METADATA_KEY = Message("GroupMetadataKey", "0", None, (Field("group", "string"),))
MEMBER_METADATA = (
    Field("memberId", "string"),
    Field("groupInstanceId", "string", "3+", nullable="3+"),
    Field("clientId", "string"),
    Field("clientHost", "string"),
    Field("rebalanceTimeout", "int32", "1+"),
    Field("sessionTimeout", "int32"),
    Field("subscription", "bytes"),
    Field("assignment", "bytes"))
GROUP_METADATA_VALUE = Message("GroupMetadataValue", "0-4", "4+", (
    Field("protocolType", "string"),
    Field("generation", "int32"),
    Field("protocol", "string", nullable="0+"),
    Field("leader", "string", nullable="0+"),
    Field("currentStateTimestamp", "int64", "2+", default=-1),
    Field("members", "[]struct", fields=MEMBER_METADATA)))

_TOPIC_PARTITIONS_BY_NAME = (Field("Topic", "string"), Field("Partitions", "[]int32"))
CONSUMER_PROTOCOL_SUBSCRIPTION = Message("ConsumerProtocolSubscription", "0-2", None, (
    Field("Topics", "[]string"),
    Field("UserData", "bytes", nullable="0+"),
    Field("OwnedPartitions", "[]struct", "1+", fields=_TOPIC_PARTITIONS_BY_NAME),
    Field("GenerationId", "int32", "2+", default=-1)))
CONSUMER_PROTOCOL_ASSIGNMENT = Message("ConsumerProtocolAssignment", "0-2", None, (
    Field("AssignedPartitions", "[]struct", fields=_TOPIC_PARTITIONS_BY_NAME),
    Field("UserData", "bytes", nullable="0+")))
CONSUMER_PROTOCOL_MAX_VERSION = 2

_GROUP_ID = Field("GroupId", "string")
_MEMBER_ID = Field("MemberId", "string")
CONSUMER_GROUP_KEY = Message("ConsumerGroupKey", "0", None, (_GROUP_ID,))
CONSUMER_GROUP_MEMBER_KEY = Message("ConsumerGroupMemberKey", "0", None, (_GROUP_ID, _MEMBER_ID))
CONSUMER_GROUP_METADATA_VALUE = Message("ConsumerGroupMetadataValue", "0", "0+", (
    Field("Epoch", "int32"),
    Field("MetadataHash", "int64", tag=0, default=0),
    Field("CreationTimeMs", "int64", tag=1, default=-1)))
CONSUMER_GROUP_PARTITION_METADATA_VALUE = Message("ConsumerGroupPartitionMetadataValue", "0", "0+", (
    Field("Topics", "[]struct", fields=(
        Field("TopicId", "uuid"), Field("TopicName", "string"), Field("NumPartitions", "int32"),
        Field("PartitionMetadata", "[]struct", fields=(Field("Partition", "int32"), Field("Racks", "[]string"))))),
))
# KIP-848 early access (3.7) wrote the group epoch first and named the racks list PartitionRacks.
EARLY_CONSUMER_GROUP_PARTITION_METADATA_VALUE = Message("ConsumerGroupPartitionMetadataValue", "0", "0+", (
    Field("Epoch", "int32"),
    Field("Topics", "[]struct", fields=(
        Field("TopicId", "uuid"), Field("TopicName", "string"), Field("NumPartitions", "int32"),
        Field("PartitionRacks", "[]struct", fields=(Field("Partition", "int32"), Field("Racks", "[]string"))))),
))
CONSUMER_GROUP_MEMBER_METADATA_VALUE = Message("ConsumerGroupMemberMetadataValue", "0", "0+", (
    Field("InstanceId", "string", nullable="0+"),
    Field("RackId", "string", nullable="0+"),
    Field("ClientId", "string"),
    Field("ClientHost", "string"),
    Field("SubscribedTopicNames", "[]string"),
    Field("SubscribedTopicRegex", "string", nullable="0+"),
    Field("RebalanceTimeoutMs", "int32", default=-1),
    Field("ServerAssignor", "string", nullable="0+"),
    Field("ClassicMemberMetadata", "struct", nullable="0+", tag=0, fields=(
        Field("SessionTimeoutMs", "int32"),
        Field("SupportedProtocols", "[]struct", fields=(Field("Name", "string"), Field("Metadata", "bytes"))))),))
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = Message("ConsumerGroupTargetAssignmentMetadataValue", "0", "0+", (
    Field("AssignmentEpoch", "int32"),
    Field("AssignmentTimestamp", "int64", tag=0, default=0)))
_TOPIC_PARTITIONS_BY_ID = (Field("TopicId", "uuid"), Field("Partitions", "[]int32"))
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = Message("ConsumerGroupTargetAssignmentMemberValue", "0", "0+", (
    Field("TopicPartitions", "[]struct", fields=_TOPIC_PARTITIONS_BY_ID),))
_ASSIGNED_PARTITIONS = _TOPIC_PARTITIONS_BY_ID + (
    Field("AssignmentEpochs", "[]int32", nullable="0+", tag=0, default=None),)
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = Message("ConsumerGroupCurrentMemberAssignmentValue", "0", "0+", (
    Field("MemberEpoch", "int32"),
    Field("PreviousMemberEpoch", "int32"),
    Field("State", "int8"),
    Field("AssignedPartitions", "[]struct", fields=_ASSIGNED_PARTITIONS),
    Field("PartitionsPendingRevocation", "[]struct", fields=_ASSIGNED_PARTITIONS)))
CONSUMER_GROUP_REGULAR_EXPRESSION_KEY = Message("ConsumerGroupRegularExpressionKey", "0", None, (
    _GROUP_ID, Field("RegularExpression", "string")))
CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE = Message("ConsumerGroupRegularExpressionValue", "0", "0+", (
    Field("Topics", "[]string"), Field("Version", "int64"), Field("Timestamp", "int64")))

LEGACY_OFFSET_COMMIT = 0
OFFSET_COMMIT = 1
GROUP_METADATA = 2
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16
OFFSET_COMMIT_TYPES = (LEGACY_OFFSET_COMMIT, OFFSET_COMMIT)


def read_consumer_protocol(message: Message, data: Optional[bytes]) -> Tuple[Optional[int], Optional[Dict[str, Any]]]:
    """(version, fields) of a consumer-protocol subscription or assignment; (None, None) when the
    bytes are empty, null or not that message (they are kept as bytes then, as Kafka does)."""
    if not data or len(data) < 2:
        return None, None
    version = int.from_bytes(data[:2], "big", signed=True)
    if version < 0:
        return None, None
    try:
        fields, _ = read_message(message, data, min(version, CONSUMER_PROTOCOL_MAX_VERSION), pos=2)
    except (MessageFormatError, ValueError):
        return None, None
    return version, fields


def _expand_member_bytes(value_json: Dict[str, Any]) -> Dict[str, Any]:
    """Kafka's offsets decoder replaces a consumer group member's subscription/assignment bytes by
    the decoded consumer-protocol JSON (and keeps the bytes when they do not decode)."""
    if value_json.get("protocolType") != CONSUMER_PROTOCOL_TYPE:
        return value_json
    for member in value_json.get("members") or []:
        for name, message in (("subscription", CONSUMER_PROTOCOL_SUBSCRIPTION), ("assignment", CONSUMER_PROTOCOL_ASSIGNMENT)):
            encoded = member.get(name)
            if encoded is None:
                continue
            version, fields = read_consumer_protocol(message, base64.b64decode(encoded))
            if fields is not None and version is not None:
                member[name] = to_kafka_json(message, fields, min(version, CONSUMER_PROTOCOL_MAX_VERSION))
    return value_json


RECORD_TYPES: Dict[int, RecordType] = {rt.id: rt for rt in (
    RecordType(LEGACY_OFFSET_COMMIT, "LegacyOffsetCommit", OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    RecordType(OFFSET_COMMIT, "OffsetCommit", OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    RecordType(GROUP_METADATA, "GroupMetadata", GROUP_METADATA_KEY, GROUP_METADATA_VALUE, _expand_member_bytes),
    RecordType(CONSUMER_GROUP_METADATA, "ConsumerGroupMetadata", CONSUMER_GROUP_KEY, CONSUMER_GROUP_METADATA_VALUE),
    RecordType(CONSUMER_GROUP_PARTITION_METADATA, "ConsumerGroupPartitionMetadata", CONSUMER_GROUP_KEY,
               CONSUMER_GROUP_PARTITION_METADATA_VALUE,
               earlier_layouts=(EARLY_CONSUMER_GROUP_PARTITION_METADATA_VALUE,)),
    RecordType(CONSUMER_GROUP_MEMBER_METADATA, "ConsumerGroupMemberMetadata", CONSUMER_GROUP_MEMBER_KEY,
               CONSUMER_GROUP_MEMBER_METADATA_VALUE),
    RecordType(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, "ConsumerGroupTargetAssignmentMetadata", CONSUMER_GROUP_KEY,
               CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    RecordType(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, "ConsumerGroupTargetAssignmentMember", CONSUMER_GROUP_MEMBER_KEY,
               CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    RecordType(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, "ConsumerGroupCurrentMemberAssignment",
               CONSUMER_GROUP_MEMBER_KEY, CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    RecordType(CONSUMER_GROUP_REGULAR_EXPRESSION, "ConsumerGroupRegularExpression",
               CONSUMER_GROUP_REGULAR_EXPRESSION_KEY, CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE),
)}
