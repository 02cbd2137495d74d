"""Kafka's small text files beside the segments (Kafka's ``CheckpointFile.java``,
``OffsetCheckpointFile.java``, ``LeaderEpochCheckpointFile.java``, ``PartitionMetadataFile.java``): the
offset checkpoints, a partition's leader-epoch-checkpoint and partition.metadata, a log dir's
meta.properties and .kafka_cleanshutdown, and the Java ``.properties`` text (``properties``: Kafka's
``PropertiesUtils``) meta.properties and configs are written in. ``parse_*``/``format_*`` are pure (text in, values out, and back);
``read_*``/``write_*`` touch the disk, and every write is atomic as Kafka's ``CheckpointFile`` makes it."""
