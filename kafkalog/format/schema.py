"""Arrow schemas of what kafkalog reads: one row per record (named and typed as Spark's Kafka source
names them, plus batch-level columns) and one row per batch (the segment walk).
"""
from __future__ import annotations

import pyarrow as pa

HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(HEADER_TYPE)
TIMESTAMP_TYPE = pa.timestamp("ms", tz="UTC")

# Spark's Kafka source columns, in its order.
KAFKA_SOURCE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("timestamp", TIMESTAMP_TYPE),          # null when the record has none (magic 0, -1)
    pa.field("timestampType", pa.int32(), nullable=False),   # -1 none, 0 CreateTime, 1 LogAppendTime
    pa.field("headers", HEADERS_TYPE, nullable=False),
]

# Batch-level columns, repeated on each record of the batch.
BATCH_FIELDS_ON_RECORDS = [
    pa.field("baseOffset", pa.int64(), nullable=False),
    pa.field("lastOffset", pa.int64(), nullable=False),
    pa.field("batchPosition", pa.int64(), nullable=False),   # byte position of the batch in the file
    pa.field("magic", pa.int8(), nullable=False),
    pa.field("codec", pa.int8(), nullable=False),            # 0 none 1 gzip 2 snappy 3 lz4 4 zstd
    pa.field("producerId", pa.int64(), nullable=False),
    pa.field("producerEpoch", pa.int16(), nullable=False),
    pa.field("baseSequence", pa.int32(), nullable=False),
    pa.field("isTransactional", pa.bool_(), nullable=False),
    pa.field("isControl", pa.bool_(), nullable=False),
    pa.field("partitionLeaderEpoch", pa.int32(), nullable=False),
    pa.field("deleteHorizonMs", pa.int64()),                 # null unless attribute bit 6 is set
]

RECORD_SCHEMA = pa.schema(KAFKA_SOURCE_FIELDS + BATCH_FIELDS_ON_RECORDS)

# One row per batch (v2) or shallow legacy message, in file order: the segment walk.
BATCH_SCHEMA = pa.schema([
    pa.field("position", pa.int64(), nullable=False),
    pa.field("size", pa.int32(), nullable=False),            # whole batch incl. the 12-byte log overhead
    pa.field("baseOffset", pa.int64(), nullable=False),      # legacy wrapper: = lastOffset (needs decompression)
    pa.field("lastOffset", pa.int64(), nullable=False),
    pa.field("magic", pa.int8(), nullable=False),
    pa.field("attributes", pa.int16(), nullable=False),
    pa.field("codec", pa.int8(), nullable=False),
    pa.field("timestampType", pa.int8(), nullable=False),
    pa.field("baseTimestamp", pa.int64(), nullable=False),
    pa.field("maxTimestamp", pa.int64(), nullable=False),
    pa.field("producerId", pa.int64(), nullable=False),
    pa.field("producerEpoch", pa.int16(), nullable=False),
    pa.field("baseSequence", pa.int32(), nullable=False),
    pa.field("recordsCount", pa.int32(), nullable=False),    # legacy wrapper: -1 (needs decompression)
    pa.field("partitionLeaderEpoch", pa.int32(), nullable=False),
    pa.field("isTransactional", pa.bool_(), nullable=False),
    pa.field("isControl", pa.bool_(), nullable=False),
    pa.field("deleteHorizonMs", pa.int64()),
    pa.field("crc", pa.uint32(), nullable=False),
    pa.field("crcValid", pa.bool_()),                        # null when CRCs were not checked
])
