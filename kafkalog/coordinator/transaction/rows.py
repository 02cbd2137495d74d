"""Typed Arrow rows of ``__transaction_state``: one row per record of a segment table (as
``kafkalog.log.records_io.read_segment`` returns it): transactional id, producer id/epoch (and the previous
and next producer ids of v1), state, timeout, the transaction's partitions, its timestamps; a
tombstone (the transactional id expired) is a row with ``tombstone`` true, a record that does not
decode keeps its raw bytes with ``error`` saying why (:data:`TRANSACTION_ROW_SCHEMA`).
"""
from __future__ import annotations

import json
from typing import Any, Dict, List

import pyarrow as pa

from kafkalog.format.schema import TIMESTAMP_TYPE
from kafkalog.coordinator.group.rows import TOPIC_PARTITION_TYPE
from kafkalog.coordinator.record import decode_record
from kafkalog.coordinator.transaction import records as tr

TRANSACTION_ROW_SCHEMA = pa.schema([
    pa.field("topic", pa.string()), pa.field("partition", pa.int32()),      # the __transaction_state partition
    pa.field("offset", pa.int64()), pa.field("timestamp", TIMESTAMP_TYPE),
    pa.field("is_control", pa.bool_()),
    pa.field("record_type", pa.int16()), pa.field("value_version", pa.int16()), pa.field("tombstone", pa.bool_()),
    pa.field("transactional_id", pa.string()),
    pa.field("producer_id", pa.int64()), pa.field("previous_producer_id", pa.int64()),
    pa.field("next_producer_id", pa.int64()), pa.field("producer_epoch", pa.int16()),
    pa.field("transaction_timeout_ms", pa.int32()),
    pa.field("state_id", pa.int8()), pa.field("state", pa.string()),
    pa.field("partitions", pa.list_(TOPIC_PARTITION_TYPE)),
    pa.field("last_update_timestamp", pa.int64()), pa.field("start_timestamp", pa.int64()),
    pa.field("client_transaction_version", pa.int16()),
    pa.field("value_json", pa.string()),
    pa.field("error", pa.string()),
    pa.field("raw_key", pa.binary()), pa.field("raw_value", pa.binary()),
])


def transaction_rows(table: pa.Table) -> pa.Table:
    """One typed row per record of ``table`` (a read_segment table of a __transaction_state partition)."""
    cols = {name: table.column(name).to_pylist() if name in table.column_names else [None] * table.num_rows
            for name in ("topic", "partition", "offset", "timestamp", "key", "value", "isControl")}
    out: List[Dict[str, Any]] = []
    for i in range(table.num_rows):
        key, value = cols["key"][i], cols["value"][i]
        row: Dict[str, Any] = {"topic": cols["topic"][i], "partition": cols["partition"][i],
                               "offset": cols["offset"][i], "timestamp": cols["timestamp"][i],
                               "is_control": bool(cols["isControl"][i])}
        if row["is_control"]:
            out.append(row)
            continue
        d = decode_record(tr.RECORD_TYPES, key, value)
        row.update(record_type=d.record_type, value_version=d.value_version, tombstone=d.tombstone, error=d.error,
                   transactional_id=(d.key or {}).get("TransactionalId"))
        v = d.value
        if v is not None:
            row.update(producer_id=v["ProducerId"], previous_producer_id=v.get("PreviousProducerId", -1),
                       next_producer_id=v.get("NextProducerId", -1), producer_epoch=v["ProducerEpoch"],
                       transaction_timeout_ms=v["TransactionTimeoutMs"], state_id=v["TransactionStatus"],
                       state=tr.TRANSACTION_STATES.get(v["TransactionStatus"], f"Unknown({v['TransactionStatus']})"),
                       partitions=[{"topic": p["Topic"], "partition": q}
                                   for p in v["TransactionPartitions"] or [] for q in p["PartitionIds"]],
                       last_update_timestamp=v["TransactionLastUpdateTimestampMs"],
                       start_timestamp=v["TransactionStartTimestampMs"],
                       client_transaction_version=v.get("ClientTransactionVersion", 0),
                       value_json=json.dumps(d.value_json, separators=(",", ":")))
        if d.error is not None:
            row["raw_key"], row["raw_value"] = key, value
        out.append(row)
    return pa.Table.from_pylist(out, schema=TRANSACTION_ROW_SCHEMA)
