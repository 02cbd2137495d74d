"""Kafka's log layer (storage/internals/log): log dirs and their partitions, segments, the loaded
partition, reading and writing segment files, producer snapshots, startup recovery and reindexing a
partition. File names, paths and URIs, durable writes and the ``.lock`` are the floor below
(``kafkalog.fs``); the index files this layer keeps are ``kafkalog.index``, also below it."""
