"""The command line: the ``kafkalog`` command, its demo data, ``dump`` (DumpLogSegments) and ``lag``."""
