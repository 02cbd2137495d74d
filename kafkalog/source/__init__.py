"""The data source's decisions without Spark: Spark's Kafka-source options and the scan plan they give."""
