"""kafkalog: read, write, index and reason about Apache Kafka log directories.

The core (this package) turns Kafka's on-disk bytes into Arrow and back and never imports Spark;
``udfs`` and ``jobs`` apply the same functions across many partitions with Spark.

    kafkalog.read_segment(path)            -> pyarrow.Table, one row per record
    kafkalog.iter_segment(path)            -> bounded pyarrow.RecordBatches
    kafkalog.write_segment(dir, table)     -> the .log path (with .index and .timeindex)
    kafkalog.scan_batches(path)            -> the batch walk (headers, CRCs, valid bytes)
"""
from kafkalog.errors import KafkalogError
from kafkalog.format.file_records import scan_batches
from kafkalog.log.records_io import ReadOptions, SegmentReader, encode_records, iter_segment, read_segment, write_segment

__version__ = "0.1.0"
__all__ = ["KafkalogError", "ReadOptions", "SegmentReader", "encode_records", "iter_segment", "read_segment",
           "scan_batches", "write_segment", "__version__"]
