"""Java ``.properties`` text as ``java.util.Properties.load`` reads it: what ``meta.properties`` and the
broker and topic configs are written in."""
from __future__ import annotations

import os
import re
from typing import Optional, Union

from kafkalog.checkpoint.text import JAVA_LINE_END
from kafkalog.errors import CheckpointError

_PROPERTY_WHITESPACE = " \t\f"
_PROPERTY_ESCAPES = {"t": "\t", "r": "\r", "n": "\n", "f": "\f"}

PathLike = Union[str, os.PathLike]


def _property_logical_lines(text: str) -> list[tuple[int, str]]:
    """Properties.LineReader: (first line number, logical line). Skips blank and comment lines,
    drops leading whitespace, joins lines ending in an odd number of backslashes."""
    physical = JAVA_LINE_END.split(text)
    if physical and physical[-1] == "":
        physical.pop()
    result: list[tuple[int, str]] = []
    current: Optional[str] = None
    start_number = 0
    for number, line in enumerate(physical, start=1):
        stripped = line.lstrip(_PROPERTY_WHITESPACE)
        if current is None:
            if stripped == "" or stripped[0] in "#!":
                continue
            current, start_number = "", number
        elif stripped == "":
            # an empty continuation line ends the logical line
            result.append((start_number, current))
            current = None
            continue
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2 == 1:
            current += stripped[:-1]
            continue
        result.append((start_number, current + stripped))
        current = None
    if current is not None and (current or not JAVA_LINE_END.search(text[-1:])):
        result.append((start_number, current))  # continuation at end of file: backslash dropped
    return result


def _property_unescape(text: str, number: int, path: Optional[PathLike]) -> str:
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        i += 1
        if c != "\\" or i >= len(text):
            out.append(c)
            continue
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i:i + 4]
            if len(digits) != 4 or not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise CheckpointError(f"line {number}: malformed \\uxxxx escape", path=path)
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_PROPERTY_ESCAPES.get(c, c))
    return "".join(out)


def parse_properties(text: str, *, path: Optional[PathLike] = None) -> dict[str, str]:
    """Parse Java ``.properties`` text as ``Properties.load`` does. The key ends at the first
    unescaped ``=``, ``:`` or whitespace; whitespace around the separator is dropped; trailing
    whitespace of a value is kept (Java keeps it). A repeated key keeps its last value."""
    props: dict[str, str] = {}
    for number, line in _property_logical_lines(text):
        key_end = len(line)
        value_start = len(line)
        has_separator = False
        escaped = False
        for i, c in enumerate(line):
            if not escaped and c in "=:":
                key_end, value_start, has_separator = i, i + 1, True
                break
            if not escaped and c in _PROPERTY_WHITESPACE:
                key_end, value_start = i, i + 1
                break
            escaped = (c == "\\") and not escaped
        while value_start < len(line):
            c = line[value_start]
            if c not in _PROPERTY_WHITESPACE:
                if not has_separator and c in "=:":
                    has_separator = True
                else:
                    break
            value_start += 1
        key = _property_unescape(line[:key_end], number, path)
        props[key] = _property_unescape(line[value_start:], number, path)
    return props
