"""Typed DataFrames of Kafka's coordinator logs: every record of the log dirs' ``__consumer_offsets``
(``kafkalog.coordinator.group.rows.GROUP_ROW_SCHEMA``) or ``__transaction_state``
(``...transaction.rows.TRANSACTION_ROW_SCHEMA``) partitions, decoded in parallel, one partition folder
per task. A folder that cannot be read is a row whose ``error`` says so (and ``record_type`` null)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import pyarrow as pa

from kafkalog.coordinator.group.rows import GROUP_ROW_SCHEMA, group_rows
from kafkalog.coordinator.log_dirs import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, coordinator_rows
from kafkalog.coordinator.transaction.rows import TRANSACTION_ROW_SCHEMA, transaction_rows
from kafkalog.errors import KafkalogError
from kafkalog.log.logdir import scan_partition_dir
from kafkalog.fs.names import LIVE, parse_partition_dir_name

from udfs.partitions import folders_frame, list_partition_folders, map_folders


def _folders_of(log_dirs: Sequence, topic: str) -> list:
    out = []
    for log_dir, folder in list_partition_folders(log_dirs):
        try:
            t, _, kind = parse_partition_dir_name(Path(folder).name)
        except KafkalogError:
            continue
        if t == topic and kind == LIVE:
            out.append((log_dir, folder))
    return out


def _per_folder(to_rows: Callable, schema: pa.Schema):
    def run(log_dir: str, folder: str, cache: dict) -> list:
        try:
            return coordinator_rows(scan_partition_dir(folder, log_dir=log_dir), to_rows, schema).to_pylist()
        except (KafkalogError, OSError) as e:
            t, p, _ = parse_partition_dir_name(Path(folder).name)
            return [{"topic": t, "partition": p, "error": f"{folder}: {e}"}]
    return run


def consumer_offsets_frame(spark, log_dirs: Sequence):
    """Every __consumer_offsets record of ``log_dirs`` as typed rows (lazy)."""
    folders = _folders_of(log_dirs, CONSUMER_OFFSETS_TOPIC)
    return map_folders(folders_frame(spark, folders) if folders else
                       spark.createDataFrame([], "log_dir string, partition_dir string"),
                       _per_folder(group_rows, GROUP_ROW_SCHEMA), GROUP_ROW_SCHEMA)


def transaction_state_frame(spark, log_dirs: Sequence):
    """Every __transaction_state record of ``log_dirs`` as typed rows (lazy)."""
    folders = _folders_of(log_dirs, TRANSACTION_STATE_TOPIC)
    return map_folders(folders_frame(spark, folders) if folders else
                       spark.createDataFrame([], "log_dir string, partition_dir string"),
                       _per_folder(transaction_rows, TRANSACTION_ROW_SCHEMA), TRANSACTION_ROW_SCHEMA)
