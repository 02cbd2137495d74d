"""What a dump writes: output lines tagged by stream, one summary per file, and how values are spelled."""
from __future__ import annotations

import base64
import codecs
import json
from dataclasses import dataclass, field
from typing import List, NamedTuple, Optional, Union

from kafkalog.errors import CorruptRecordError, KafkalogError

STDOUT = "stdout"
STDERR = "stderr"
STDOUT_BYTES = "stdout-bytes"    # a block of whole stdout lines as UTF-8 bytes, each ending in '\n' (bulk path)
NO_HINT = ""     # an error whose location says enough


class Line(NamedTuple):
    """One output line (without its newline) and the stream it belongs on; for STDOUT_BYTES, many
    lines as bytes, each with its newline."""
    stream: str
    text: Union[str, bytes]      # bytes exactly when stream is STDOUT_BYTES


@dataclass
class FileSummary:
    """What one file held; the JSON ``summary`` object."""
    file: str
    kind: str
    batches: int = 0
    records: Optional[int] = None
    entries: int = 0
    valid_bytes: int = 0
    invalid_bytes: int = 0
    start_offset: Optional[int] = None
    base_offset: Optional[int] = None
    errors: List[KafkalogError] = field(default_factory=list)

    def to_json(self) -> dict:
        out = {"type": "summary", "file": self.file, "kind": self.kind, "batches": self.batches,
               "records": self.records, "entries": self.entries, "valid_bytes": self.valid_bytes,
               "invalid_bytes": self.invalid_bytes}
        if self.start_offset is not None:
            out["startOffset"] = self.start_offset
        if self.base_offset is not None:
            out["baseOffset"] = self.base_offset
        out["errors"] = [{"error": type(e).__name__, "message": str(e), "position": e.position} for e in self.errors]
        return out


@dataclass
class DumpResult:
    stdout: List[str]
    stderr: List[str]
    exit_code: int
    summaries: List[FileSummary]


def java_bool(value: bool) -> str:
    return "true" if value else "false"


def optional_long(value: Optional[int]) -> str:
    """Java's OptionalLong.toString."""
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def json_line(obj: dict) -> str:
    return json.dumps(obj, separators=(",", ":"))


def b64(data: Optional[bytes]) -> Optional[str]:
    return None if data is None else base64.b64encode(data).decode("ascii")


def utf8_or_none(data: Optional[bytes]) -> Optional[str]:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _java_replace(e: UnicodeDecodeError):
    """Java's UTF-8 decoder replaces what Python's does (one U+FFFD per maximal subpart), except that it
    reads ED A0..BF as the start of a character and only then finds a surrogate: ``ED A0 80`` is one
    U+FFFD (Python: three), ``ED A0`` followed by a non-continuation byte or the end one (Python: two).
    Checked against Java 17's ``new String(bytes, UTF_8)`` (tests/tools/test_dump.py)."""
    data, at = e.object, e.start
    if data[at] == 0xED and at + 1 < len(data) and 0xA0 <= data[at + 1] <= 0xBF:
        return "\ufffd", at + 3 if at + 2 < len(data) and 0x80 <= data[at + 2] <= 0xBF else at + 2
    return "\ufffd", e.end


codecs.register_error("kafkalog-java-replace", _java_replace)  # type: ignore[arg-type]  # a decode handler


def string_decoder(data: bytes) -> str:
    """Kafka's StringDecoder: new String(bytes, UTF_8), malformed input replaced by U+FFFD as Java does."""
    return data.decode("utf-8", errors="kafkalog-java-replace")


def drop_generic_hint(e: KafkalogError) -> KafkalogError:
    """Errors raised by the decoders carry hints written for API callers ("run kafkalog dump");
    inside the dump the location says enough."""
    if e.hint == type(e).default_hint and isinstance(e, CorruptRecordError):
        e.hint = NO_HINT
        e.args = (str(e),)
    return e
