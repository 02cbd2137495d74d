"""The switches of ``kafkalog dump``, named as kafka-dump-log.sh names them, and the decoders they select."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from kafkalog.format.compression import DEFAULT_MAX_BATCH_BYTES
from kafkalog.java_types import INT32_MAX

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024       # --max-message-size default (DumpLogSegments)

OFFSETS_DECODER = "offsets"                    # --offsets-decoder: __consumer_offsets records
TRANSACTION_LOG_DECODER = "transaction-log"    # --transaction-log-decoder: __transaction_state records
CLUSTER_METADATA_DECODER = "cluster-metadata"  # --cluster-metadata-decoder: __cluster_metadata records


@dataclass(frozen=True)
class DumpOptions:
    """The switches of ``kafkalog dump`` (named as kafka-dump-log.sh names them)."""
    deep_iteration: bool = False
    print_data_log: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False
    max_bytes: Optional[int] = None             # None = the whole file (Kafka: Integer.MAX_VALUE)
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    skip_record_metadata: bool = False
    json: bool = False
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES   # decompression bound per batch
    decoder: Optional[str] = None    # OFFSETS_DECODER / TRANSACTION_LOG_DECODER / CLUSTER_METADATA_DECODER

    def __post_init__(self):
        if self.decoder is not None:      # Kafka: a decoder option sets --print-data-log
            object.__setattr__(self, "print_data_log", True)

    @property
    def deep(self) -> bool:
        """--print-data-log implies deep iteration, as in Kafka."""
        return self.deep_iteration or self.print_data_log

    @property
    def limited(self) -> bool:
        """True when --max-bytes cut the files (Kafka compares against Integer.MAX_VALUE)."""
        return self.max_bytes is not None and self.max_bytes != INT32_MAX


def coordinator_record_types(decoder: str):
    """The record-type table a decoder option reads records with."""
    if decoder == OFFSETS_DECODER:
        from kafkalog.coordinator.group.records import RECORD_TYPES
    else:
        from kafkalog.coordinator.transaction.records import RECORD_TYPES
    return RECORD_TYPES
