"""Progress on stderr — a bar redrawn in place on a terminal, timestamped lines otherwise — and
results alone on stdout."""
from __future__ import annotations

import io

from udfs import progress
from udfs.progress import ProgressLine


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_gets_one_bar_redrawn_in_place():
    stream = Terminal()
    line = ProgressLine(stream)
    for done in range(4):
        line.update("planning retention", done, 3, "partitions")
    text = stream.getvalue()
    assert text.count("\r\x1b[K") == 4 and text.endswith("planning retention: 3/3 partitions\n")
    assert "[########################] planning retention: 3/3" in text
    assert "[........................] planning retention: 0/3" in text


def test_a_message_on_a_terminal_erases_the_bar_and_redraws_it():
    stream = Terminal()
    line = ProgressLine(stream)
    line.update("reindexing", 1, 4, "partitions")
    line.message("report written")
    text = stream.getvalue()
    bar_then_message = text.split("\r\x1b[K")
    assert "report written" in bar_then_message[2] and bar_then_message[-1].startswith("[kafkalog] [######")
    line.end()
    assert stream.getvalue().endswith("\n")


def test_elsewhere_plain_lines_at_most_every_two_seconds_and_always_the_last(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    stream = io.StringIO()
    line = ProgressLine(stream)
    line.update("cataloguing", 0, 10, "partitions")         # nothing done yet: no line
    for done in (1, 2, 3):
        line.update("cataloguing", done, 10, "partitions")
    clock[0] += 2.5
    line.update("cataloguing", 7, 10, "partitions")
    line.update("cataloguing", 10, 10, "partitions")
    lines = stream.getvalue().splitlines()
    assert [ln.split("] ", 1)[1] for ln in lines] == [
        "cataloguing: 1/10 partitions", "cataloguing: 7/10 partitions", "cataloguing: 10/10 partitions"]
    assert "\r" not in stream.getvalue()


def test_the_watcher_reports_folders_counted_on_the_executors(spark, monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr(progress, "LINE", ProgressLine(stream, tty=False))
    counter = progress.count_folders(spark, 6, "testing")
    with progress.watch():
        spark.sparkContext.parallelize(range(6), 3).foreach(lambda i: counter.add(f"t-{i}", {"n": i}))
    assert stream.getvalue().splitlines()[-1].endswith("] testing: 6/6 partitions")
    assert sorted(counter.finished()) == [(f"t-{i}", {"n": i}) for i in range(6)]


def test_the_watcher_keeps_polling_after_a_poll_fails(monkeypatch):
    """While Spark starts, its context exists before its JVM side does: a failing poll is skipped."""
    calls = []

    def poll():
        calls.append(len(calls))
        if len(calls) <= 2:
            raise AttributeError("'SparkContext' object has no attribute '_jsc'")

    monkeypatch.setattr(progress, "POLL_S", 0.05)
    monkeypatch.setattr(progress, "_poll_once", poll)
    with progress.watch():
        deadline = progress.time.monotonic() + 5
        while len(calls) < 5 and progress.time.monotonic() < deadline:
            progress.time.sleep(0.05)
    assert len(calls) >= 5
