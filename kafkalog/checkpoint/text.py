"""The text rules Kafka's checkpoint and metadata files are read by: ``BufferedReader`` lines, Java's
``\\s+`` split, ``Integer.parseInt``/``Long.parseLong``, Kafka's ``Uuid`` text, and errors that name the
line and its byte position."""
from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass
from typing import Optional, Union

from kafkalog.errors import CheckpointError
from kafkalog.fs import filesystem

UUID_BYTES = 16
UUID_TEXT_LENGTH = 22

# Java's \s (ASCII only): what Pattern.compile("\\s+") splits on.
JAVA_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")
# BufferedReader.readLine line terminators.
JAVA_LINE_END = re.compile(r"\r\n|\r|\n")
# Integer.parseInt / Long.parseLong accept an optional sign and decimal digits, nothing else.
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_UUID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}(==)?")

PathLike = Union[str, os.PathLike]


# --- data structures ---------------------------------------------------------------------------

@dataclass(frozen=True)
class JavaLine:
    number: int     # 1-based line number
    position: int   # byte offset of the line's first character (UTF-8)
    text: str


# --- Java text ---------------------------------------------------------------------------------

def java_lines(text: str) -> list[JavaLine]:
    """Split like BufferedReader.readLine: \\n, \\r or \\r\\n end a line; no empty line after a final terminator."""
    lines: list[JavaLine] = []
    start = 0
    byte_pos = 0
    number = 0
    for match in JAVA_LINE_END.finditer(text):
        number += 1
        piece = text[start:match.start()]
        lines.append(JavaLine(number, byte_pos, piece))
        byte_pos += len(text[start:match.end()].encode("utf-8"))
        start = match.end()
    if start < len(text):
        lines.append(JavaLine(number + 1, byte_pos, text[start:]))
    return lines


def java_split_whitespace(line: str) -> list[str]:
    """``Pattern.compile("\\\\s+").split(line)``: a leading empty token is kept, trailing ones dropped."""
    tokens = JAVA_WHITESPACE.split(line)
    while len(tokens) > 1 and tokens[-1] == "":
        tokens.pop()
    if tokens == [""] and line != "":
        return []  # the line is only whitespace: every token was an empty trailing one
    return tokens


def parse_java_int(token: str, lo: int, hi: int) -> Optional[int]:
    if not _JAVA_INTEGER.fullmatch(token):
        return None
    value = int(token)
    return value if lo <= value <= hi else None


def check_range(what: str, value: int, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise CheckpointError(f"{what} {value!r} is not an integer in [{lo}, {hi}]")


def line_error(message: str, path: Optional[PathLike], line: Optional[JavaLine]) -> CheckpointError:
    if line is None:
        return CheckpointError(message, path=path)
    return CheckpointError(f"line {line.number}: {message}", path=path, position=line.position)


def read_utf8(path: PathLike) -> Optional[str]:
    """The file's text, or None when it does not exist. Invalid UTF-8 is a CheckpointError (Kafka's
    reader throws MalformedInputException)."""
    try:
        data = filesystem.read_bytes(path)
    except FileNotFoundError:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"not valid UTF-8 ({exc.reason})", path=path, position=exc.start) from None


# --- Kafka Uuid text ---------------------------------------------------------------------------

def parse_kafka_uuid(text: str) -> bytes:
    """The 16 bytes of a Kafka ``Uuid.toString()`` (URL-safe base64, padding optional as in
    ``Uuid.fromString``). Raises ValueError for anything else."""
    if not _UUID_TEXT.fullmatch(text):
        raise ValueError(f"{text!r} is not a 22-character URL-safe base64 Kafka Uuid")
    return base64.urlsafe_b64decode(text[:UUID_TEXT_LENGTH] + "==")


def format_kafka_uuid(raw: bytes) -> str:
    """Kafka's ``Uuid.toString()`` of 16 bytes."""
    if len(raw) != UUID_BYTES:
        raise ValueError(f"a Kafka Uuid is {UUID_BYTES} bytes, not {len(raw)}")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
