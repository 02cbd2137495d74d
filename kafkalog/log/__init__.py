"""Kafka's log layer (storage/internals/log): file names, log dirs and their lock, segments, the
loaded partition, reading and writing segment files, durable writes, producer snapshots, startup recovery."""
