"""Reading a time from the command line: epoch milliseconds or ISO-8601, and ListOffsets' special times.

One parser for every command that takes a time: ``kafkalog offsets/fetch/lag --time``/``--now-ms``
(:func:`parse_time_spec`, which also takes kafka-get-offsets.sh's names and -1..-5) and the Spark
jobs' ``--now-ms`` (:func:`parse_epoch_ms`, a moment only). Both raise ValueError saying what is
accepted; the arithmetic is exact integer milliseconds (no float rounding of fractions of a second).
"""
from __future__ import annotations

import datetime as _dt
import re
from typing import Optional

from kafkalog.lookup.rules import SPECIAL_TIMESTAMPS, TIME_NAMES
from kafkalog.java_types import INT64_MAX, INT64_MIN

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_ONE_MS = _dt.timedelta(milliseconds=1)
_INTEGER = re.compile(r"[+-]?\d+")


def format_epoch_ms(ms: int) -> str:
    """``ms`` as an operator reads it: UTC ISO-8601 beside the epoch milliseconds Kafka stores, e.g.
    ``2023-11-14T22:13:20Z (1700000000000 ms)``; milliseconds shown only when not zero
    (``…20.250Z``). A time outside the calendar (Kafka's -1 "no timestamp", or years past 9999) is
    the number alone.

    :param ms: epoch milliseconds.
    """
    try:
        moment = _EPOCH + _dt.timedelta(milliseconds=ms)
    except OverflowError:
        return f"{ms} ms"
    if ms < 0:
        return f"{ms} ms"
    fraction = f".{ms % 1000:03d}" if ms % 1000 else ""
    return f"{moment.strftime('%Y-%m-%dT%H:%M:%S')}{fraction}Z ({ms} ms)"


def _integer_ms(text: str, s: str) -> int:
    value = int(s)
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{text!r} does not fit a 64-bit timestamp")
    return value


def _iso_ms(s: str) -> Optional[int]:
    """Epoch milliseconds of an ISO-8601 date or date-time (no zone: UTC; ``Z`` allowed), None if it is not one."""
    iso = s[:-1] + "+00:00" if s.endswith(("Z", "z")) else s
    try:
        moment = _dt.datetime.fromisoformat(iso)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    return (moment - _EPOCH) // _ONE_MS


def parse_epoch_ms(text: str) -> int:
    """A moment: epoch milliseconds (any sign) or an ISO-8601 date or date-time (no zone: UTC)."""
    s = text.strip()
    if _INTEGER.fullmatch(s):
        return _integer_ms(text, s)
    value = _iso_ms(s)
    if value is None:
        raise ValueError(f"{text!r} is neither epoch milliseconds nor an ISO-8601 time such as 2026-11-21T03:00:00Z")
    return value


def parse_time_spec(text: str) -> int:
    """A ListOffsets ``--time``: -1/-2/-3/-4/-5, a kafka-get-offsets.sh name (latest, earliest,
    max-timestamp, earliest-local, latest-tiered), epoch milliseconds >= 0, or an ISO-8601 date/time
    (no zone -> UTC). ``text``: what the user typed. Example::

        import kafkalog
        print(kafkalog.parse_time_spec("earliest"), kafkalog.parse_time_spec("2026-01-08T03:00:00Z"))   # -2 1767841200000
    """
    s = text.strip()
    if s.lower() in TIME_NAMES:
        return TIME_NAMES[s.lower()]
    if _INTEGER.fullmatch(s):
        value = _integer_ms(text, s)
        if value < 0 and value not in SPECIAL_TIMESTAMPS:
            raise ValueError(f"{text!r}: negative times other than -1..-5 mean nothing to ListOffsets")
        return value
    value = _iso_ms(s)
    if value is None:
        raise ValueError(f"{text!r} is not a time: use -1 or latest, -2 or earliest, -3 or max-timestamp, "
                         "epoch milliseconds, or an ISO-8601 time such as 2024-05-01T12:00:00Z")
    return value
