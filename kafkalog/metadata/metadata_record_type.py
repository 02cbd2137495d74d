"""The KRaft metadata record types (apache/kafka ``metadata/src/main/resources/common/metadata/*.json``,
Kafka's generated ``MetadataRecordType``), as our own field tables for :mod:`kafkalog.coordinator.message`.

Every type is flexible in all its versions; fields are listed in schema order with the versions they
exist in; ``tag`` marks a tagged field (present on the wire only when not its default). Each type's
``type_name`` is how ``MetadataRecordType.toString()`` prints it (the enum constant's name).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

from kafkalog.coordinator.message import Field, Message


@dataclass(frozen=True)
class MetadataRecordType:
    """One metadata record type: its api key, Kafka's enum name and its message definition."""
    id: int
    type_name: str
    message: Message


def _m(name: str, versions: str, *fields: Field) -> Message:
    return Message(name, versions, "0+", tuple(fields))


_ENDPOINT = (Field("Name", "string"), Field("Host", "string"), Field("Port", "uint16"),
             Field("SecurityProtocol", "int16"))
_FEATURE = (Field("Name", "string"), Field("MinSupportedVersion", "int16"), Field("MaxSupportedVersion", "int16"))

_MESSAGES = {
    0: ("REGISTER_BROKER_RECORD", _m(
        "RegisterBrokerRecord", "0-4",
        Field("BrokerId", "int32"),
        Field("IsMigratingZkBroker", "bool", "2+"),
        Field("IncarnationId", "uuid"),
        Field("BrokerEpoch", "int64"),
        Field("EndPoints", "[]struct", fields=_ENDPOINT),
        Field("Features", "[]struct", fields=_FEATURE),
        Field("Rack", "string", nullable="0+"),
        Field("Fenced", "bool", default=True),
        Field("InControlledShutdown", "bool", "1+"),
        Field("LogDirs", "[]uuid", "3+", tag=0),
        Field("CordonedLogDirs", "[]uuid", "4+", nullable="4+", tag=1))),
    1: ("UNREGISTER_BROKER_RECORD", _m(
        "UnregisterBrokerRecord", "0", Field("BrokerId", "int32"), Field("BrokerEpoch", "int64"))),
    2: ("TOPIC_RECORD", _m("TopicRecord", "0", Field("Name", "string"), Field("TopicId", "uuid"))),
    3: ("PARTITION_RECORD", _m(
        "PartitionRecord", "0-2",
        Field("PartitionId", "int32", default=-1),
        Field("TopicId", "uuid"),
        Field("Replicas", "[]int32"),
        Field("Isr", "[]int32"),
        Field("RemovingReplicas", "[]int32"),
        Field("AddingReplicas", "[]int32"),
        Field("Leader", "int32", default=-1),
        Field("LeaderRecoveryState", "int8", tag=0, default=0),
        Field("LeaderEpoch", "int32", default=-1),
        Field("PartitionEpoch", "int32", default=-1),
        Field("Directories", "[]uuid", "1+"),
        Field("EligibleLeaderReplicas", "[]int32", "2+", nullable="2+", tag=1),
        Field("LastKnownElr", "[]int32", "2+", nullable="2+", tag=2))),
    4: ("CONFIG_RECORD", _m(
        "ConfigRecord", "0", Field("ResourceType", "int8"), Field("ResourceName", "string"),
        Field("Name", "string"), Field("Value", "string", nullable="0+"))),
    5: ("PARTITION_CHANGE_RECORD", _m(
        "PartitionChangeRecord", "0-2",
        Field("PartitionId", "int32", default=-1),
        Field("TopicId", "uuid"),
        Field("Isr", "[]int32", nullable="0+", tag=0),
        Field("Leader", "int32", tag=1, default=-2),
        Field("Replicas", "[]int32", nullable="0+", tag=2),
        Field("RemovingReplicas", "[]int32", nullable="0+", tag=3),
        Field("AddingReplicas", "[]int32", nullable="0+", tag=4),
        Field("LeaderRecoveryState", "int8", tag=5, default=-1),
        Field("Directories", "[]uuid", "1+", nullable="1+", tag=8),
        Field("EligibleLeaderReplicas", "[]int32", "2+", nullable="2+", tag=6),
        Field("LastKnownElr", "[]int32", "2+", nullable="2+", tag=7))),
    7: ("FENCE_BROKER_RECORD", _m("FenceBrokerRecord", "0", Field("Id", "int32"), Field("Epoch", "int64"))),
    8: ("UNFENCE_BROKER_RECORD", _m("UnfenceBrokerRecord", "0", Field("Id", "int32"), Field("Epoch", "int64"))),
    9: ("REMOVE_TOPIC_RECORD", _m("RemoveTopicRecord", "0", Field("TopicId", "uuid"))),
    10: ("DELEGATION_TOKEN_RECORD", _m(
        "DelegationTokenRecord", "0", Field("Owner", "string"), Field("Requester", "string"),
        Field("Renewers", "[]string"), Field("IssueTimestamp", "int64"), Field("MaxTimestamp", "int64"),
        Field("ExpirationTimestamp", "int64"), Field("TokenId", "string"))),
    11: ("USER_SCRAM_CREDENTIAL_RECORD", _m(
        "UserScramCredentialRecord", "0", Field("Name", "string"), Field("Mechanism", "int8"),
        Field("Salt", "bytes"), Field("StoredKey", "bytes"), Field("ServerKey", "bytes"),
        Field("Iterations", "int32"))),
    12: ("FEATURE_LEVEL_RECORD", _m(
        "FeatureLevelRecord", "0", Field("Name", "string"), Field("FeatureLevel", "int16"))),
    14: ("CLIENT_QUOTA_RECORD", _m(
        "ClientQuotaRecord", "0",
        Field("Entity", "[]struct", fields=(Field("EntityType", "string"),
                                            Field("EntityName", "string", nullable="0+"))),
        Field("Key", "string"), Field("Value", "float64"), Field("Remove", "bool"))),
    15: ("PRODUCER_IDS_RECORD", _m(
        "ProducerIdsRecord", "0", Field("BrokerId", "int32"), Field("BrokerEpoch", "int64", default=-1),
        Field("NextProducerId", "int64"))),
    17: ("BROKER_REGISTRATION_CHANGE_RECORD", _m(
        "BrokerRegistrationChangeRecord", "0-3",
        Field("BrokerId", "int32"),
        Field("BrokerEpoch", "int64"),
        Field("Fenced", "int8", tag=0),
        Field("InControlledShutdown", "int8", "1+", tag=1),
        Field("LogDirs", "[]uuid", "2+", tag=2),
        Field("CordonedLogDirs", "[]uuid", "3+", nullable="3+", tag=3))),
    18: ("ACCESS_CONTROL_ENTRY_RECORD", _m(
        "AccessControlEntryRecord", "0", Field("Id", "uuid"), Field("ResourceType", "int8"),
        Field("ResourceName", "string"), Field("PatternType", "int8"), Field("Principal", "string"),
        Field("Host", "string"), Field("Operation", "int8"), Field("PermissionType", "int8"))),
    19: ("REMOVE_ACCESS_CONTROL_ENTRY_RECORD", _m("RemoveAccessControlEntryRecord", "0", Field("Id", "uuid"))),
    20: ("NO_OP_RECORD", _m("NoOpRecord", "0")),
    21: ("ZK_MIGRATION_STATE_RECORD", _m("ZkMigrationStateRecord", "0", Field("ZkMigrationState", "int8"))),
    22: ("REMOVE_USER_SCRAM_CREDENTIAL_RECORD", _m(
        "RemoveUserScramCredentialRecord", "0", Field("Name", "string"), Field("Mechanism", "int8"))),
    23: ("BEGIN_TRANSACTION_RECORD", _m(
        "BeginTransactionRecord", "0", Field("Name", "string", nullable="0+", tag=0))),
    24: ("END_TRANSACTION_RECORD", _m("EndTransactionRecord", "0")),
    25: ("ABORT_TRANSACTION_RECORD", _m(
        "AbortTransactionRecord", "0", Field("Reason", "string", nullable="0+", tag=0))),
    26: ("REMOVE_DELEGATION_TOKEN_RECORD", _m("RemoveDelegationTokenRecord", "0", Field("TokenId", "string"))),
    27: ("REGISTER_CONTROLLER_RECORD", _m(
        "RegisterControllerRecord", "0",
        Field("ControllerId", "int32"),
        Field("IncarnationId", "uuid"),
        Field("ZkMigrationReady", "bool"),
        Field("EndPoints", "[]struct", fields=_ENDPOINT),
        Field("Features", "[]struct", fields=_FEATURE))),
    28: ("CLEAR_ELR_RECORD", _m("ClearElrRecord", "0", Field("TopicName", "string"))),
    29: ("UNREGISTER_CONTROLLER_RECORD", _m("UnregisterControllerRecord", "0", Field("ControllerId", "int32"))),
}

METADATA_RECORD_TYPES: Dict[int, MetadataRecordType] = {
    key: MetadataRecordType(key, type_name, message) for key, (type_name, message) in _MESSAGES.items()}
