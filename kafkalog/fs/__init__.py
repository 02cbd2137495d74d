"""The I/O floor under every other layer: what Kafka calls each file and folder of a log dir
(``names``, Kafka's ``LogFileUtils``), local paths or ``pyarrow.fs`` URIs and the read-only views of a
file's bytes (``filesystem``, ``counting_filesystem``), durable writes (``durable``) and the log dir's
``.lock`` (``lock``). Nothing here knows Kafka's bytes: it imports only ``kafkalog.errors`` and
``kafkalog.java_types``."""
