"""Offset and timestamp lookups with Kafka's ListOffsets semantics, one partition at a time or in bulk."""
