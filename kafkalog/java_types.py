"""The ranges of Java's ``int`` and ``long`` (``Integer.MIN_VALUE``..``MAX_VALUE``,
``Long.MIN_VALUE``..``MAX_VALUE``): every integer field Kafka writes (offsets, partitions, epochs,
positions, timestamps) is one of the two, so the checks on them, from file names to checkpoints and
configs, share these bounds."""
from __future__ import annotations

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

__all__ = ["INT32_MAX", "INT32_MIN", "INT64_MAX", "INT64_MIN"]
