"""A partition folder's ``partition.metadata``: the file version and the topic id.

Layout: ``version: 0\\ntopic_id: <uuid>`` with no trailing newline; the uuid is Kafka's
``Uuid.toString()``: 16 bytes, URL-safe base64 without padding (22 chars). The reader splits each
line on ``:\\s+`` into key and value.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional, Union

from kafkalog.checkpoint.text import (UUID_BYTES, JavaLine, java_lines, line_error, parse_java_int, parse_kafka_uuid,
                                      read_utf8)
from kafkalog.java_types import INT32_MAX, INT32_MIN
from kafkalog.fs.durable import replace_file

PARTITION_METADATA_VERSION = 0
_PARTITION_METADATA_SEPARATOR = re.compile(r":[ \t\n\x0b\f\r]+")

PathLike = Union[str, os.PathLike]


# --- data structures ---------------------------------------------------------------------------

@dataclass(frozen=True)
class PartitionMetadata:
    """``partition.metadata``: the file version and the topic id (Kafka's 22-char base64 text)."""

    version: int
    topic_id: str


# --- parsing, formatting, files -------------------------------------------------------------

def parse_partition_metadata(text: str, *, path: Optional[PathLike] = None) -> PartitionMetadata:
    """Parse ``partition.metadata`` as PartitionMetadataReadBuffer does: line 1 ``version: <int>``
    (at least 0: newer versions are accepted for downgrade compatibility), line 2
    ``topic_id: <uuid>`` (non-zero). Further lines are not read."""
    lines = java_lines(text)

    def key_value(index: int, key: str) -> tuple[JavaLine, str]:
        if index >= len(lines):
            raise line_error(f"missing line {index + 1} ('{key}: ...')", path, None)
        line = lines[index]
        parts = _PARTITION_METADATA_SEPARATOR.split(line.text, maxsplit=1)
        if len(parts) != 2 or parts[0] != key:
            raise line_error(f"malformed line {line.text!r} (expected '{key}: <value>')", path, line)
        return line, parts[1]

    version_line, version_text = key_value(0, "version")
    version = parse_java_int(version_text, INT32_MIN, INT32_MAX)
    if version is None:
        raise line_error(f"malformed version {version_text!r}", path, version_line)
    if version < PARTITION_METADATA_VERSION:
        raise line_error(f"unrecognized partition metadata version {version}", path, version_line)
    id_line, topic_id = key_value(1, "topic_id")
    try:
        raw = parse_kafka_uuid(topic_id)
    except ValueError as exc:
        raise line_error(str(exc), path, id_line) from None
    if raw == bytes(UUID_BYTES):
        raise line_error("topic id is the zero Uuid", path, id_line)
    return PartitionMetadata(version, topic_id)


def format_partition_metadata(metadata: PartitionMetadata) -> str:
    """``version: <v>\\ntopic_id: <uuid>`` with no trailing newline, exactly as Kafka writes it."""
    parse_kafka_uuid(metadata.topic_id)  # refuse to write what Kafka could not read
    return f"version: {metadata.version}\ntopic_id: {metadata.topic_id}"


def read_partition_metadata(path: PathLike) -> Optional[PartitionMetadata]:
    """Read ``partition.metadata``; None when the file does not exist."""
    text = read_utf8(path)
    return None if text is None else parse_partition_metadata(text, path=path)


def write_partition_metadata(path: PathLike, metadata: PartitionMetadata, *, sync: bool = True) -> None:
    """Atomically write ``partition.metadata``."""
    replace_file(path, format_partition_metadata(metadata).encode("utf-8"), sync=sync)
