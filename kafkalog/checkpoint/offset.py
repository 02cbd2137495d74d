"""Kafka's offset checkpoints (``CheckpointFile``): the four log-dir files that map each partition to
an offset (recovery point, log start offset, high watermark, cleaner's first dirty offset), and the
``CheckpointFile`` text format the leader-epoch checkpoint shares.

Layout (UTF-8, lines end in ``\\n`` as Kafka writes them on Linux)::

    0                          <- CHECKPOINT_VERSION; any other version is refused
    <n>                        <- number of entry lines
    <topic> <partition> <offset>   (n lines; split on \\s+, exactly 3 tokens)

An empty file, or one holding only the version line, is an empty checkpoint. Entry order is Kafka's
hash-map order and means nothing; ``format_offset_checkpoint`` sorts by (topic, partition). Writes
are atomic as ``CheckpointFile`` makes them (``durable.replace_file``: ``<name>.tmp``, fsync, rename,
fsync the directory).
"""
from __future__ import annotations

import os
from typing import Callable, Mapping, Optional, Sequence, TypeVar, Union

from kafkalog.checkpoint.text import (JAVA_WHITESPACE, check_range, java_lines, java_split_whitespace, line_error,
                                      parse_java_int, read_utf8)
from kafkalog.errors import CheckpointError
from kafkalog.java_types import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from kafkalog.fs.durable import replace_file

CHECKPOINT_VERSION = 0
OFFSET_CHECKPOINT_TOKENS = 3   # <topic> <partition> <offset>

PathLike = Union[str, os.PathLike]
T = TypeVar("T")


# --- CheckpointFile ----------------------------------------------------------------------------

def parse_checkpoint_file(
    text: str,
    path: Optional[PathLike],
    tokens_per_entry: int,
    convert: Callable[[list[str]], Optional[T]],
    entry_description: str,
) -> list[T]:
    """CheckpointFile.read: version line, count line, entry lines; count must match."""
    lines = java_lines(text)
    if not lines:
        return []
    version_line = lines[0]
    version = parse_java_int(version_line.text, INT32_MIN, INT32_MAX)
    if version is None:
        raise line_error(f"malformed version line {version_line.text!r}", path, version_line)
    if version != CHECKPOINT_VERSION:
        raise line_error(f"unrecognised checkpoint version {version} (expected {CHECKPOINT_VERSION})",
                     path, version_line)
    if len(lines) == 1:
        return []
    count_line = lines[1]
    expected = parse_java_int(count_line.text, INT32_MIN, INT32_MAX)
    if expected is None:
        raise line_error(f"malformed entry-count line {count_line.text!r}", path, count_line)
    entries: list[T] = []
    for line in lines[2:]:
        tokens = java_split_whitespace(line.text)
        value = convert(tokens) if len(tokens) == tokens_per_entry else None
        if value is None:
            raise line_error(f"malformed line {line.text!r} (expected {entry_description})", path, line)
        entries.append(value)
    if len(entries) != expected:
        raise line_error(f"expected {expected} entries but found {len(entries)}", path, count_line)
    return entries


def format_checkpoint_file(lines: Sequence[str]) -> str:
    return "".join(f"{line}\n" for line in [str(CHECKPOINT_VERSION), str(len(lines)), *lines])


# --- offset checkpoints ------------------------------------------------------------------------

def _offset_entry(tokens: list[str]) -> Optional[tuple[tuple[str, int], int]]:
    topic, partition_text, offset_text = tokens
    partition = parse_java_int(partition_text, INT32_MIN, INT32_MAX)
    offset = parse_java_int(offset_text, INT64_MIN, INT64_MAX)
    if partition is None or offset is None:
        return None
    return (topic, partition), offset


def parse_offset_checkpoint(text: str, *, path: Optional[PathLike] = None) -> dict[tuple[str, int], int]:
    """Parse an offset checkpoint into {(topic, partition): offset}. A repeated key keeps its last
    value, as Kafka's map does. Malformed text raises CheckpointError naming the line."""
    entries = parse_checkpoint_file(text, path, OFFSET_CHECKPOINT_TOKENS, _offset_entry,
                                "'<topic> <partition> <offset>'")
    return dict(entries)


def format_offset_checkpoint(entries: Mapping[tuple[str, int], int]) -> str:
    """The file text for {(topic, partition): offset}, entries sorted by (topic, partition)."""
    for (topic, partition), offset in entries.items():
        if not isinstance(topic, str) or not topic or JAVA_WHITESPACE.search(topic):
            raise CheckpointError(f"topic {topic!r} is empty or contains whitespace; Kafka could not read it back")
        check_range("partition", partition, INT32_MIN, INT32_MAX)
        check_range("offset", offset, INT64_MIN, INT64_MAX)
    return format_checkpoint_file([f"{topic} {partition} {offset}"
                               for (topic, partition), offset in sorted(entries.items())])


def read_offset_checkpoint(path: PathLike) -> dict[tuple[str, int], int]:
    """Read an offset checkpoint; a missing file is an empty checkpoint (as for Kafka)."""
    text = read_utf8(path)
    return {} if text is None else parse_offset_checkpoint(text, path=path)


def write_offset_checkpoint(path: PathLike, entries: Mapping[tuple[str, int], int], *, sync: bool = True) -> None:
    """Atomically write an offset checkpoint (see ``replace_file``)."""
    replace_file(path, format_offset_checkpoint(entries).encode("utf-8"), sync=sync)
