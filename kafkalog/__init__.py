"""kafkalog: read, write, index and reason about Apache Kafka log directories.

The core (this package) turns Kafka's on-disk bytes into Arrow and back and never imports Spark;
``udfs`` and ``jobs`` apply the same functions across many partitions with Spark.
"""
__version__ = "0.1.0"
