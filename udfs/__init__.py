"""Spark/Arrow glue for kafkalog: the SparkSession, Delta tables, and the per-partition functions the
jobs map over log dirs. Everything that decides lives in ``kafkalog`` (no Spark there); this package
only spreads it over executors."""
