"""One exception hierarchy for everything kafkalog refuses to read or write.

Every error names the file, the byte position (when there is one) and what to do next, so a job
can report it per partition and go on. Catch ``KafkalogError`` to catch them all.
"""
from __future__ import annotations

import os
from typing import Optional


class KafkalogError(Exception):
    """Base class. ``message`` says what is wrong; ``path`` and ``position`` locate the problem;
    ``hint`` says what to do (default: the class's ``default_hint``).

    Example::

        import kafkalog
        try:
            kafkalog.read_segment("logs/orders-0/00000000000000000000.log")
        except kafkalog.KafkalogError as e:
            print(e.path, e.position, e.message, e.hint)
    """

    default_hint: str = ""

    def __init__(
        self,
        message: str,
        *,
        path: Optional[os.PathLike | str] = None,
        position: Optional[int] = None,
        hint: Optional[str] = None,
    ) -> None:
        self.message = message
        self.path = None if path is None else os.fspath(path)
        self.position = position
        self.hint = self.default_hint if hint is None else hint
        super().__init__(str(self))

    def __str__(self) -> str:
        where = []
        if self.path is not None:
            where.append(self.path)
        if self.position is not None:
            where.append(f"byte {self.position}")
        text = ": ".join(where + [self.message]) if where else self.message
        if self.hint:
            text += f" ({self.hint})"
        return text

    def with_location(self, *, path=None, position=None) -> "KafkalogError":
        """Fill in a location the raiser did not know (e.g. a buffer decoded before its file)."""
        if self.path is None and path is not None:
            self.path = os.fspath(path)
        if self.position is None and position is not None:
            self.position = position
        self.args = (str(self),)
        return self


# --- log data -------------------------------------------------------------------------------

class CorruptRecordError(KafkalogError):
    """The bytes of a .log (or a record set) are not valid Kafka batches.

    Example::

        import kafkalog
        try:
            table = kafkalog.read_segment("damaged.log")
        except kafkalog.CorruptRecordError as e:          # the valid prefix: read again with on_corrupt="stop"
            table = kafkalog.read_segment("damaged.log", on_corrupt="stop")
    """

    default_hint = (
        "the segment is damaged from here on; `kafkalog dump --files FILE` shows the valid "
        "prefix, and Kafka's recovery would truncate the segment at this position"
    )


class BatchSizeError(CorruptRecordError):
    """A batch header declares a size below the minimum, or a size past the end of the file."""


class TruncatedBatchError(CorruptRecordError):
    """The file ends inside a batch (a torn write or a partial copy)."""

    default_hint = (
        "the tail is incomplete, as after a crash or a partial copy; Kafka's recovery drops it. "
        "Read with on_corrupt='stop' to get the valid prefix"
    )


class CrcMismatchError(CorruptRecordError):
    """The stored CRC of a batch (CRC-32C) or legacy message (CRC-32) does not match its bytes.

    Example::

        import kafkalog
        try:
            kafkalog.scan_batches("damaged.log")
        except kafkalog.CrcMismatchError as e:
            print("bad CRC at byte", e.position)
    """


class UnknownMagicError(CorruptRecordError):
    """The magic byte is not 0, 1 or 2."""


class UnknownCodecError(CorruptRecordError):
    """The attributes name a compression codec Kafka does not define (5-7), or zstd below magic 2."""


class DecompressionError(CorruptRecordError):
    """A compressed payload does not decompress with its codec."""


class DecompressedSizeError(CorruptRecordError):
    """A compressed payload expands beyond what one batch may hold (a decompression bomb)."""

    default_hint = (
        "raise max_batch_bytes (--max-batch-bytes) if this batch is genuine, otherwise treat "
        "the segment as corrupt from here"
    )


class InvalidRecordError(CorruptRecordError):
    """A record inside a batch is malformed (lengths, varints, header counts, record count)."""


class OutOfMemoryError(KafkalogError):
    """Decoding ran out of memory (an allocation or a mapping failed): not a problem of the data."""

    default_hint = ("read it with iter_segment (bounded batches) or give the process more memory; "
                    "the file itself may be fine")


# --- indexes --------------------------------------------------------------------------------

class CorruptIndexError(KafkalogError):
    """An .index/.timeindex/.txnindex file is malformed or fails Kafka's sanity check.

    Example::

        import kafkalog
        try:
            kafkalog.lookup_offsets("logs/orders-0", [1767841200000])
        except kafkalog.CorruptIndexError as e:
            print(e)      # names the index file; `kafkalog recover` or a reindex rebuilds it
    """

    default_hint = "rebuild the index from its .log (Kafka's recovery does the same)"


# --- names, checkpoints, directories ---------------------------------------------------------

class InvalidFileNameError(KafkalogError):
    """A file or folder name is not one Kafka writes (segment, index, partition folder)."""

    default_hint = "segment files are named <20-digit base offset>.<log|index|timeindex|txnindex>"


class CheckpointError(KafkalogError):
    """A checkpoint or properties file is malformed."""

    default_hint = "Kafka itself would refuse to load this file; restore it from a backup or remove it"


class LogDirLockedError(KafkalogError):
    """A live process (a broker) holds the log dir's .lock.

    Example::

        import kafkalog
        configs = kafkalog.configs_from_mappings(topics={"orders": {"cleanup.policy": "compact"}})
        try:
            kafkalog.clean_log_dir("logs", configs=configs, now_ms=1767841200000)
        except kafkalog.LogDirLockedError as e:
            print(e)      # names the holder: a broker, another job
    """

    default_hint = "stop the broker that owns this log dir, or work on a copy"


class OffsetOutOfRangeError(KafkalogError):
    """An offset below the log start offset or above the readable end (Kafka's
    OffsetOutOfRangeException).

    Example::

        import kafkalog
        try:
            kafkalog.PartitionLog("logs/orders-0").translate_offset(10**12)
        except kafkalog.OffsetOutOfRangeError as e:
            print(e)
    """

    default_hint = "ask for an offset between the log start offset and the log end offset (kafkalog offsets)"


class OffsetOverflowError(KafkalogError):
    """An offset does not fit a segment's 32-bit relative offset."""

    default_hint = "Kafka splits such segments; write the records into a segment with a higher base offset"


# --- changing log dirs (kafkalog.fs.durable) -----------------------------------------------------

class FenceLostError(KafkalogError):
    """The job that holds a log dir's lock is gone (or released it): this process must not change it."""

    default_hint = "the job was stopped; run `kafkalog recover` and the job again"


class OwnershipError(KafkalogError):
    """A file cannot be given the owner, group or mode of the files it replaces."""

    default_hint = "run the job as the log dir's owner (the broker's user) or as root"


class SymlinkRefusedError(KafkalogError):
    """A symlink sits where a job would write a file inside a partition folder."""

    default_hint = "remove the symlink: a broker's log dir holds plain files only"


# --- configuration ---------------------------------------------------------------------------

class ConfigError(KafkalogError):
    """A Kafka configuration value is invalid (the message names the key and where it came from).

    Example::

        import kafkalog
        try:
            kafkalog.configs_from_mappings(topics={"orders": {"retention.ms": "-5"}})
        except kafkalog.ConfigError as e:
            print(e)      # invalid value '-5' for retention.ms ...
    """

    default_hint = "fix the value; the broker would refuse it too (see the key's range in Kafka's docs)"


# --- the command line ------------------------------------------------------------------------

class UsageError(KafkalogError):
    """A command was given arguments it cannot work with (a path that is missing or of the wrong
    kind, an unknown topic, a bad number): the ``kafkalog`` commands and the Spark jobs exit 2 with
    the message and touch nothing."""
