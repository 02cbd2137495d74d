"""A job's progress on stderr — a redrawn bar on a terminal, plain timestamped lines otherwise — so
stdout carries only the job's results.

What is counted, honestly: jobs that run one function per partition folder (``map_folders``) count
folders done through a Spark accumulator, which reaches the driver as each task finishes (a task
handles a few folders, so the count moves in steps of a task's folders); other Spark work is shown
as the running stage's tasks done, from Spark's status tracker. ``watch`` runs a daemon thread that
polls both twice a second for the duration of a job (an error there, e.g. while Spark is still
starting, only skips that poll); ``message`` prints a one-off line.
"""
from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional, TextIO

from pyspark.accumulators import AccumulatorParam

POLL_S = 0.5
LINE_EVERY_S = 2.0          # plain-line mode: at most one progress line this often (and the last one)
BAR_WIDTH = 24
PREFIX = "kafkalog"


@dataclass
class _Count:
    what: str
    done: int
    total: int
    unit: str


class ProgressLine:
    """The one stderr progress line of this process. On a TTY it is redrawn in place and erased
    before any other line is printed; otherwise each update is a new line, at most every
    ``LINE_EVERY_S`` seconds, plus the final count."""

    def __init__(self, stream: Optional[TextIO] = None, *, tty: Optional[bool] = None):
        self._stream = stream
        self._tty = tty
        self._lock = threading.Lock()
        self._drawn = False
        self._last: Optional[_Count] = None
        self._last_line_at = 0.0

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stderr

    @property
    def tty(self) -> bool:
        if self._tty is not None:
            return self._tty
        try:
            return self.stream.isatty()
        except (AttributeError, ValueError):
            return False

    def message(self, text: str) -> None:
        """One line of its own (the bar, if drawn, is erased first and redrawn after)."""
        with self._lock:
            self._erase()
            print(f"[{PREFIX} {time.strftime('%H:%M:%S')}] {text}", file=self.stream, flush=True)
            if self._last is not None and self.tty and self._last.done < self._last.total:
                self._draw(self._last)

    def update(self, what: str, done: int, total: int, unit: str) -> None:
        count = _Count(what, min(done, total) if total else done, total, unit)
        with self._lock:
            if count == self._last:
                return
            final = bool(total) and count.done >= total
            if self.tty:
                self._draw(count)
                if final:
                    self.stream.write("\n")
                    self._drawn = False
            else:
                now = time.monotonic()
                if final or (count.done and now - self._last_line_at >= LINE_EVERY_S):
                    print(f"[{PREFIX} {time.strftime('%H:%M:%S')}] {_text(count)}", file=self.stream, flush=True)
                    self._last_line_at = now
            self.stream.flush()
            self._last = count

    def end(self) -> None:
        """Leave the terminal on a fresh line; forget the last count."""
        with self._lock:
            if self._drawn:
                self.stream.write("\n")
                self.stream.flush()
                self._drawn = False
            self._last = None

    def _draw(self, count: _Count) -> None:
        filled = BAR_WIDTH * count.done // count.total if count.total else 0
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        self.stream.write(f"\r\x1b[K[{PREFIX}] [{bar}] {_text(count)}")
        self.stream.flush()
        self._drawn = True

    def _erase(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self._drawn = False


def _text(count: _Count) -> str:
    total = f"/{count.total}" if count.total else ""
    return f"{count.what}: {count.done}{total} {count.unit}"


LINE = ProgressLine()


def message(text: str) -> None:
    """A progress message on stderr."""
    LINE.message(text)


class _Appended(AccumulatorParam):
    """An accumulator of a list: tasks append, the driver sees every finished task's items."""

    def zero(self, value):
        return []

    def addInPlace(self, value1, value2):
        value1.extend(value2)
        return value1


class FolderCounter:
    """Counts partition folders done on the executors (``add`` runs in the task) for the watcher, and
    keeps what each finished folder reported (``finished``): an interrupted job reports those. A task's
    additions reach the driver when the task ends, even when the job is cancelled afterwards."""

    def __init__(self, spark, total: int, what: str, folders=None):
        self.accumulator = spark.sparkContext.accumulator([], _Appended())
        self.total = total
        self.what = what
        self.folders = list(folders or [])

    def add(self, folder: str, row: Optional[dict] = None) -> None:
        """In a task: ``folder`` is done; ``row``, when given, is what it reported."""
        self.accumulator.add([(folder, row)])

    @property
    def done(self) -> int:
        return len(self.accumulator.value)

    def finished(self) -> list:
        """(folder, row) of every folder done so far, in the order they reached the driver."""
        return list(self.accumulator.value)


_current: Optional[FolderCounter] = None
_latest: Optional[FolderCounter] = None


def count_folders(spark, total: int, what: str, folders=None) -> FolderCounter:
    """A counter for ``total`` folders, shown by the running ``watch`` until the job ends or the next
    counter replaces it. ``folders``: the (log dir, folder) pairs, for an interrupted job's report."""
    global _current, _latest
    _current = _latest = FolderCounter(spark, total, what, folders)
    return _current


def latest_counter() -> Optional[FolderCounter]:
    """The last counter this process made (kept after ``watch`` ends), or None."""
    return _latest


def _poll_once() -> None:
    counter = _current
    if counter is not None:
        LINE.update(counter.what, counter.done, counter.total, "partitions")
        return
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context          # noqa: SLF001 - None until a job starts Spark
    if sc is None or getattr(sc, "_jsc", None) is None:          # not started, or still starting
        return
    tracker = sc.statusTracker()
    stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
    stages = [s for s in stages if s is not None]
    if stages:
        stage = min(stages, key=lambda s: s.stageId)
        LINE.update(f"Spark stage {stage.stageId}", stage.numCompletedTasks, stage.numTasks, "tasks")


@contextmanager
def watch():
    """Show the job's progress until the block ends (a daemon thread; an error in a poll skips it)."""
    global _current
    stop = threading.Event()

    def loop():
        while not stop.wait(POLL_S):
            try:
                _poll_once()
            except Exception:        # Spark starting or stopping under us: progress is best effort
                continue

    thread = threading.Thread(target=loop, name="kafkalog-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=2)
        try:
            if _current is not None:
                _poll_once()                 # the last count, so the final figure is always printed
        except Exception:
            pass
        _current = None
        LINE.end()
