"""Command-line argument checks shared by the ``kafkalog`` command and the spark-submit jobs.

Argument types for argparse (each raises ``argparse.ArgumentTypeError`` with what is accepted) and
:func:`check_log_dir`, the check that a ``--log-dirs`` entry is a broker log dir.
"""
from __future__ import annotations

import argparse
import os
import re
from typing import List

from kafkalog.errors import KafkalogError, UsageError
from kafkalog.fs import filesystem


# --- argument types ---------------------------------------------------------------------------

def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
    return value


def positive_int(text: str) -> int:
    value = non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def topic_name(text: str) -> str:
    """A name Kafka accepts for a topic (Topic.validate: [a-zA-Z0-9._-], 1-249 characters)."""
    if not re.fullmatch(r"[a-zA-Z0-9._-]{1,249}", text) or text in (".", ".."):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Kafka topic name (letters, digits, '.', '_', '-')")
    return text


def file_list(text: str) -> List[str]:
    """A comma-separated list (kafka-dump-log's --files, --log-dirs); empty items are dropped."""
    files = [f for f in text.split(",") if f]
    if not files:
        raise argparse.ArgumentTypeError("no file names given")
    return files


# --- log dirs ---------------------------------------------------------------------------------

_PARTITION_FILE = re.compile(r"[0-9]{20}\.(?:log|index|timeindex)|leader-epoch-checkpoint|partition\.metadata")


def check_log_dir(log_dir: str) -> None:
    """A UsageError unless ``log_dir`` is an existing folder that is not itself a partition folder."""
    from kafkalog.fs.names import parse_partition_dir_name

    hint = "pass the broker's log.dirs, the folders that hold <topic>-<partition> folders"
    if not filesystem.exists(log_dir):
        raise UsageError("log dir does not exist", path=log_dir, hint=hint)
    if not filesystem.isdir(log_dir):
        raise UsageError("log dir is a file, not a folder", path=log_dir, hint=hint)
    try:
        parse_partition_dir_name(os.path.basename(os.path.normpath(log_dir)))
        names = filesystem.listdir(log_dir)
    except (KafkalogError, OSError):
        return
    # a log dir may be named like a partition folder (/data/kafka-1): only one holding segments is one
    if not any(_PARTITION_FILE.fullmatch(name) for name in names):
        return
    raise UsageError("is a partition folder, not a log dir", path=log_dir,
                     hint=f"pass the folder that holds it: {os.path.dirname(os.path.abspath(log_dir))}")
