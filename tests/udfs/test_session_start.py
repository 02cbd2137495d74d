"""Spark's start is never silent: while the JVM starts (minutes on a loaded machine, where the demo's
users saw 100 s without a line), ``build_session`` says so every few seconds (issue 33: no silence
over 10 s)."""
from __future__ import annotations

import time

import pytest

pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")

from udfs import session  # noqa: E402


def test_a_slow_start_prints_a_line_every_few_seconds(monkeypatch, capsys):
    from pyspark.sql import SparkSession
    monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: None))
    with session._still_starting(every_s=0.05):
        time.sleep(0.33)                                   # a JVM that takes its time
    lines = [line for line in capsys.readouterr().err.splitlines() if "still starting Spark" in line]
    assert 4 <= len(lines) <= 7, lines
    time.sleep(0.15)                                       # and nothing once it is up
    assert "still starting" not in capsys.readouterr().err


def test_nothing_is_printed_when_the_session_exists(monkeypatch, capsys):
    from pyspark.sql import SparkSession
    monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: object()))
    with session._still_starting(every_s=0.01):
        time.sleep(0.05)
    assert "still starting" not in capsys.readouterr().err


def test_the_default_interval_keeps_silences_under_ten_seconds():
    assert session.STILL_STARTING_EVERY_S < 10
