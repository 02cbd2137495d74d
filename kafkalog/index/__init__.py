"""Kafka's segment indexes: the offset index (``.index``), the time index (``.timeindex``), the
aborted-transaction index (``.txnindex``), and building them from a segment's batches."""
from kafkalog.index.builder import (
                                    DEFAULT_INDEX_INTERVAL_BYTES,
                                    IndexAppender,
                                    build_indexes,
                                    build_transaction_index,
                                    replay_transactions,
                                    )
from kafkalog.index.offset_index import (
                                         OFFSET_ENTRY_SIZE,
                                         OffsetIndex,
                                         empty_offset_index,
                                         parse_offset_index,
                                         read_offset_index,
                                         write_offset_index,
                                         )
from kafkalog.index.time_index import (
                                       TIME_ENTRY_SIZE,
                                       TimeIndex,
                                       empty_time_index,
                                       parse_time_index,
                                       read_time_index,
                                       write_time_index,
                                       )
from kafkalog.index.transaction_index import (
                                              TXN_ENTRY_SIZE,
                                              AbortedTxn,
                                              TransactionIndex,
                                              TxnIndexSearchResult,
                                              parse_transaction_index,
                                              read_transaction_index,
                                              write_transaction_index,
                                              )

__all__ = [
    "DEFAULT_INDEX_INTERVAL_BYTES",
    "OFFSET_ENTRY_SIZE",
    "TIME_ENTRY_SIZE",
    "TXN_ENTRY_SIZE",
    "AbortedTxn",
    "IndexAppender",
    "OffsetIndex",
    "TimeIndex",
    "TransactionIndex",
    "TxnIndexSearchResult",
    "build_indexes",
    "build_transaction_index",
    "empty_offset_index",
    "empty_time_index",
    "parse_offset_index",
    "parse_time_index",
    "parse_transaction_index",
    "read_offset_index",
    "read_time_index",
    "read_transaction_index",
    "replay_transactions",
    "write_offset_index",
    "write_time_index",
    "write_transaction_index",
]
