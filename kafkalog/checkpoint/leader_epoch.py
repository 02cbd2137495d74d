"""The ``leader-epoch-checkpoint`` of a partition folder: when each leader epoch began.

Layout: the ``CheckpointFile`` header (version 0, entry count), then entries ``<epoch> <startOffset>``
(int32, int64; exactly 2 tokens), ascending by epoch.
"""
from __future__ import annotations

import os
from typing import Iterable, NamedTuple, Optional, Union

from kafkalog.checkpoint.offset import format_checkpoint_file, parse_checkpoint_file
from kafkalog.checkpoint.text import check_range, parse_java_int, read_utf8
from kafkalog.java_types import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from kafkalog.fs.durable import replace_file

LEADER_EPOCH_TOKENS = 2        # <epoch> <startOffset>

PathLike = Union[str, os.PathLike]


# --- data structures ---------------------------------------------------------------------------

class EpochEntry(NamedTuple):
    """One leader-epoch-checkpoint line: the leader ``epoch`` began at ``start_offset``."""

    epoch: int
    start_offset: int


# --- parsing, formatting, files -------------------------------------------------------------

def _epoch_entry(tokens: list[str]) -> Optional[EpochEntry]:
    epoch = parse_java_int(tokens[0], INT32_MIN, INT32_MAX)
    start_offset = parse_java_int(tokens[1], INT64_MIN, INT64_MAX)
    if epoch is None or start_offset is None:
        return None
    return EpochEntry(epoch, start_offset)


def parse_leader_epoch_checkpoint(text: str, *, path: Optional[PathLike] = None) -> list[EpochEntry]:
    """Parse a leader-epoch-checkpoint into its (epoch, start_offset) entries, in file order."""
    return parse_checkpoint_file(text, path, LEADER_EPOCH_TOKENS, _epoch_entry, "'<epoch> <startOffset>'")


def format_leader_epoch_checkpoint(entries: Iterable[tuple[int, int]]) -> str:
    """The file text for (epoch, start_offset) entries, in the order given (Kafka's is ascending epoch)."""
    lines = []
    for epoch, start_offset in entries:
        check_range("epoch", epoch, INT32_MIN, INT32_MAX)
        check_range("start offset", start_offset, INT64_MIN, INT64_MAX)
        lines.append(f"{epoch} {start_offset}")
    return format_checkpoint_file(lines)


def read_leader_epoch_checkpoint(path: PathLike) -> list[EpochEntry]:
    """Read a leader-epoch-checkpoint; a missing file has no entries."""
    text = read_utf8(path)
    return [] if text is None else parse_leader_epoch_checkpoint(text, path=path)


def write_leader_epoch_checkpoint(path: PathLike, entries: Iterable[tuple[int, int]], *, sync: bool = True) -> None:
    """Atomically write a leader-epoch-checkpoint."""
    replace_file(path, format_leader_epoch_checkpoint(entries).encode("utf-8"), sync=sync)
