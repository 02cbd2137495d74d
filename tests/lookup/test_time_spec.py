"""kafkalog.lookup.time_spec: the one time parser of ``--time`` (kafkalog) and ``--now-ms`` (jobs)."""
import datetime as dt

import pytest
from hypothesis import given, strategies as st

from kafkalog.lookup.time_spec import parse_epoch_ms, parse_time_spec


@pytest.mark.parametrize("text, value", [
    ("-1", -1), ("latest", -1), ("-2", -2), ("earliest", -2), ("-3", -3), ("max-timestamp", -3),
    ("-4", -4), ("earliest-local", -4), ("-5", -5), ("LATEST-TIERED", -5),
    ("1700000000000", 1700000000000), ("0", 0),
    ("2023-11-14T22:13:20Z", 1700000000000), ("2023-11-14T22:13:20.123+00:00", 1700000000123),
    ("2023-11-14T23:13:20+01:00", 1700000000000), ("2023-11-14T22:13:20", 1700000000000),
    ("2023-11-14", 1699920000000),
])
def test_parse_time_spec(text, value):
    assert parse_time_spec(text) == value


@pytest.mark.parametrize("text", ["yesterday", "-7", "", "2023-13-45", "12:00", "1e3"])
def test_parse_time_spec_refuses(text):
    with pytest.raises(ValueError, match="time"):
        parse_time_spec(text)


def test_parse_time_spec_refuses_a_time_past_64_bits():
    with pytest.raises(ValueError, match="64-bit"):
        parse_time_spec(str(2**63))


@pytest.mark.parametrize("text, value", [
    ("1700000000000", 1700000000000), ("-7", -7), (" 42 ", 42),
    ("2026-11-21T03:00:00Z", 1795230000000), ("2023-11-14T22:13:20.123Z", 1700000000123),
    ("2023-11-14", 1699920000000),
])
def test_parse_epoch_ms(text, value):
    assert parse_epoch_ms(text) == value


@pytest.mark.parametrize("text", ["yesterday", "latest", "", "12:00", "1e3", str(2**63)])
def test_parse_epoch_ms_refuses(text):
    with pytest.raises(ValueError, match="epoch milliseconds|64-bit"):
        parse_epoch_ms(text)


@given(st.datetimes(min_value=dt.datetime(1970, 1, 1), max_value=dt.datetime(9999, 12, 31)))
def test_iso_times_are_exact_milliseconds(moment):
    """Integer arithmetic: a time with milliseconds is never rounded down by float seconds."""
    moment = moment.replace(microsecond=moment.microsecond // 1000 * 1000)
    text = moment.isoformat(timespec="milliseconds") + "Z"
    utc = moment.replace(tzinfo=dt.timezone.utc)
    seconds = int((utc - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)).total_seconds())
    want = seconds * 1000 + moment.microsecond // 1000
    assert parse_epoch_ms(text) == want == parse_time_spec(text)
