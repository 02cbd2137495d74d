"""The transaction coordinator's ``__transaction_state`` records (apache/kafka
``transaction-coordinator/src/main/resources/common/message/TransactionLog*.json``).

Record type 0 (the key's int16 "version") is the only one::

    key   TransactionLogKey v0:   TransactionalId string
    value TransactionLogValue v0 (non-flexible) / v1 (flexible):
          ProducerId int64; [v1 tagged 0] PreviousProducerId int64 = -1; [v1 tagged 1] NextProducerId int64 = -1;
          ProducerEpoch int16; TransactionTimeoutMs int32; TransactionStatus int8;
          TransactionPartitions nullable [] of (Topic string, PartitionIds []int32);
          TransactionLastUpdateTimestampMs int64; TransactionStartTimestampMs int64;
          [v1 tagged 2] ClientTransactionVersion int16 = 0

TransactionStatus is Kafka's TransactionState id (:data:`TRANSACTION_STATES`). Kafka's JSON of the
value (DumpLogSegments' TransactionLogMessageParser, Kafka 4.x) spells it by the state's name, and an
id with no state as the number in a string: :func:`status_by_name`.
"""
from __future__ import annotations

from typing import Any, Dict

from kafkalog.coordinator.message import Field, Message
from kafkalog.coordinator.record import RecordType

TRANSACTION_LOG = 0

TRANSACTION_STATES: Dict[int, str] = {
    0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
    5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence",
}

TRANSACTION_LOG_KEY = Message("TransactionLogKey", "0", None, (Field("TransactionalId", "string"),))
TRANSACTION_LOG_VALUE = Message("TransactionLogValue", "0-1", "1+", (
    Field("ProducerId", "int64"),
    Field("PreviousProducerId", "int64", "1+", tag=0, default=-1),
    Field("NextProducerId", "int64", "1+", tag=1, default=-1),
    Field("ProducerEpoch", "int16"),
    Field("TransactionTimeoutMs", "int32"),
    Field("TransactionStatus", "int8"),
    Field("TransactionPartitions", "[]struct", nullable="0+", fields=(
        Field("Topic", "string"), Field("PartitionIds", "[]int32"))),
    Field("TransactionLastUpdateTimestampMs", "int64"),
    Field("TransactionStartTimestampMs", "int64"),
    Field("ClientTransactionVersion", "int16", "1+", tag=2, default=0)))



def status_by_name(value_json: Dict[str, Any]) -> Dict[str, Any]:
    """TransactionState.fromId(status).stateName(), or String.valueOf(status) for an unknown id."""
    status = value_json.get("transactionStatus")
    if isinstance(status, int):
        value_json["transactionStatus"] = TRANSACTION_STATES.get(status, str(status))
    return value_json


RECORD_TYPES: Dict[int, RecordType] = {
    TRANSACTION_LOG: RecordType(TRANSACTION_LOG, "TransactionLog", TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE,
                                json_hook=status_by_name),
}
