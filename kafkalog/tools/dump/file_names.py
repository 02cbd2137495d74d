"""The file names a dump reads: which reader a suffix selects, and the base offset a name carries."""
from __future__ import annotations

import os
import re

from kafkalog.errors import InvalidFileNameError
from kafkalog.fs.names import offset_from_file_name
from kafkalog.fs import filesystem

RECORD_SUFFIXES = (".log", ".bin", ".checkpoint")
OTHER_SUFFIXES = (".index", ".timeindex", ".txnindex", ".snapshot")    # dumped by their own readers
BOOTSTRAP_SNAPSHOT = "bootstrap.checkpoint"
KRAFT_SNAPSHOT = re.compile(r"(\d{20})-(\d{10})\.checkpoint")


def dumps_file_kind(path) -> bool:
    """Whether the dump reads this file (by the text after the last dot, as Kafka dispatches)."""
    return file_suffix(os.path.basename(os.fspath(path))) in RECORD_SUFFIXES + OTHER_SUFFIXES


def file_suffix(name: str) -> str:
    """The text from the LAST dot of a file name (Kafka dispatches on it), or "" without a dot."""
    return name[name.rfind("."):] if "." in name else ""


def beside(path: str, suffix: str) -> str:
    """The file of the same segment with another suffix (Kafka: <abs dir>/<name before first dot><suffix>)."""
    return os.path.join(os.path.dirname(absolute_path(path)), os.path.basename(path).split(".", 1)[0] + suffix)


def absolute_path(path: str) -> str:
    """java.io.File.getAbsolutePath: joined to the working directory, not normalised."""
    return path if os.path.isabs(path) or filesystem.is_uri(path) else os.path.join(os.getcwd(), path)


def base_offset_or_raise(path: str, suffix: str) -> int:
    name = os.path.basename(path)
    value = offset_from_file_name(name)
    if value is None:
        raise InvalidFileNameError(
            f"file name {name!r} does not start with a base offset, so the {suffix} entries cannot be placed",
            path=path, hint="Kafka names these files <20-digit base offset>" + suffix)
    return value
