"""How a spark-submit job stops on Ctrl-C (SIGINT, sent by a terminal to the whole process group) or
SIGTERM: cleanly, saying what it finished, leaving no process behind.

The processes: ``spark-submit.sh`` execs the Python driver (this process); PySpark starts the JVM
(SparkSubmit) as its child with SIGINT ignored and a pipe on its stdin, and the JVM starts pyspark's
Python daemon, whose forked workers live in their own process group (a terminal's Ctrl-C never
reaches them). So only the driver hears a SIGINT, and it must stop everything itself (a SIGTERM to
the group also stops the JVM, by its shutdown hooks; the driver's logging is then silenced, as Py4J
logs the broken connection with a traceback):

- Spark started: the first signal is recorded and a thread cancels every Spark job (``cancelAllJobs``,
  again every half second until the job runner takes over, so no later stage starts). The call the
  main thread is blocked in (a ``collect``/``toArrow``) then fails as a cancelled job, an ordinary
  exception the job may catch to report what finished (per-partition results come back through
  accumulators as each task ends: ``udfs.progress.FolderCounter``). Nothing is raised inside a Py4J
  call: that would break the gateway's connection (PySpark's own SIGINT handler does that, with a
  traceback; ``while_spark_starts`` puts ours back after a session starts).
- Spark starting (``while_spark_starts``): the signal is recorded and stops the job as soon as the
  session is up — raised at once, it could land in the fork of the JVM's launcher (where Python
  ignores it, printing a traceback) or leave a JVM half started.
- Spark not started (arguments, listing folders): ``JobInterrupted`` is raised at once.
- A second signal raises ``JobInterrupted`` at once (the operator insists).

Then ``finish`` stops the SparkContext (bounded in time), ends any child process still alive — the
JVM, or the launcher of a JVM still starting (SIGTERM, then SIGKILL) — and prints ONE line: what
happened, what finished, what to do, where the report is. The cancelled tasks' Python workers are
killed by Spark (``spark.python.task.killTimeout``) or by their daemon when the JVM goes; a worker
cut short leaves only what a crash leaves (``.cleaned``/``.swap`` files ``kafkalog recover`` or a
broker's startup finishes), and changes nothing once the driver's log-dir lock is gone
(``kafkalog.fs.durable`` fences).

Exit codes: 128 + the signal number, as a shell reports a process a signal ended — 130 for SIGINT,
143 for SIGTERM — so ``$?`` and CI tools see an interrupted run, not a failed one.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Optional, Sequence

SIGNALS = (signal.SIGINT, signal.SIGTERM)
CANCEL_EVERY_S = 0.5
STOP_SPARK_TIMEOUT_S = 20.0
CHILD_TERM_TIMEOUT_S = 5.0


class JobInterrupted(BaseException):
    """Raised in the main thread when a signal must stop the job at once. A BaseException, like
    KeyboardInterrupt, so no ``except Exception`` in a job swallows it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _State:
    def __init__(self):
        self.signum: Optional[int] = None
        self.done = threading.Event()
        self.canceller: Optional[threading.Thread] = None
        self.finished: Optional[tuple] = None     # (done, total, verb) a job noted
        self.report: Optional[str] = None
        self.starting = False                       # a SparkSession is being built (while_spark_starts)


_state = _State()


def exit_code(signum: int) -> int:
    """The conventional exit code of a process a signal stopped: 128 + its number."""
    return 128 + signum


def received() -> Optional[int]:
    """The number of the first SIGINT/SIGTERM this job received, or None."""
    return _state.signum


def note_finished(done: int, total: int, verb: str, *, report: Optional[str] = None) -> None:
    """What the job finished before it stopped, for the one line ``finish`` prints: ``done`` of
    ``total`` partitions ``verb`` (e.g. "compacted"); ``report``: the report it wrote, if any."""
    _state.finished = (done, total, verb)
    if report:
        note_report(report)


def note_report(path: str) -> None:
    """The job wrote its report (its own, interruption included) at ``path``."""
    _state.report = path


def noted_report() -> Optional[str]:
    return _state.report


def mark(signum: int) -> None:
    """Record ``signum`` as received (a KeyboardInterrupt that reached the job runner without our handler)."""
    if _state.signum is None:
        _state.signum = signum


def signal_name() -> Optional[str]:
    return None if _state.signum is None else signal.Signals(_state.signum).name


def _spark_context():
    module = sys.modules.get("pyspark.core.context") or sys.modules.get("pyspark.context")
    sc = getattr(getattr(module, "SparkContext", None), "_active_spark_context", None)
    return sc if sc is not None and getattr(sc, "_jsc", None) is not None else None


def _cancel_until_done(sc) -> None:
    """Cancel every Spark job until the job runner takes over. Spark's log goes quiet first: what it
    logs from here on is the cancellation's own fallout (tasks killed, and a Java stack trace when a
    killed task ends after its stage's broadcast is gone: "Block broadcast_0 does not exist"),
    nothing an operator acts on; the one line ``finish`` prints says what happened."""
    try:
        sc.setLogLevel("FATAL")
    except Exception:
        pass
    while not _state.done.is_set():
        try:
            sc.cancelAllJobs()
        except Exception:        # the gateway going away under us: nothing left to cancel
            return
        _state.done.wait(CANCEL_EVERY_S)


def _say(text: str) -> None:
    """A progress line straight to stderr: a signal handler must not wait for the progress line's
    lock, which the interrupted code may hold."""
    try:
        os.write(2, f"[kafkalog {time.strftime('%H:%M:%S')}] {text}\n".encode())
    except OSError:
        pass


def _handler(signum, frame) -> None:
    if _state.signum is not None:
        raise JobInterrupted(signum)                 # the second signal: stop now
    _state.signum = signum
    # Py4J logs a broken gateway connection with a traceback through the root logger (logging.exception):
    # after a signal that is expected — SIGTERM to the process group also reaches the JVM, which then
    # shuts down on its own — and the one line says what happened.
    logging.disable(logging.CRITICAL)
    if _state.starting:
        _say(f"{signal.Signals(signum).name}: stopping once Spark has started (a few seconds)")
        return                                       # while_spark_starts stops the job once Spark is up
    sc = _spark_context()
    if sc is None:
        raise JobInterrupted(signum)                 # Spark not running: nothing to cancel, pure Python
    _say(f"{signal.Signals(signum).name}: cancelling the running Spark jobs; what finished will be reported")
    _state.canceller = threading.Thread(target=_cancel_until_done, args=(sc,), name="kafkalog-cancel", daemon=True)
    _state.canceller.start()


def install() -> dict:
    """Handle SIGINT and SIGTERM in this (main) thread for the job; forget earlier ones. Returns the
    handlers it replaced, for ``restore`` (a job run inside another program, e.g. a test, gives them back)."""
    global _state
    _state = _State()
    before = {}
    if threading.current_thread() is threading.main_thread():
        for signum in SIGNALS:
            before[signum] = signal.signal(signum, _handler)
    return before


def restore(before: dict) -> None:
    """Put back the handlers ``install`` replaced (and logging); stop cancelling jobs."""
    _state.done.set()
    if _state.signum is not None:
        logging.disable(logging.NOTSET)
    for signum, handler in before.items():
        signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


@contextmanager
def while_spark_starts():
    """Around building a SparkSession: a signal meanwhile is only recorded, and stops the job at the
    end of the block, once the session is up (then stopped cleanly). Raising it at once could land in
    the fork of the JVM's launcher, where Python ignores it with a traceback, or leave the JVM half
    started. Afterwards our SIGINT handler is put back: PySpark's SparkContext replaces it with one
    that raises KeyboardInterrupt inside a Py4J call. A second signal still stops the job at once."""
    ours = signal.getsignal(signal.SIGINT) is _handler
    _state.starting = True
    try:
        yield
    finally:
        _state.starting = False
        if ours and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, _handler)
    if ours and _state.signum is not None:
        raise JobInterrupted(_state.signum)


def report_option(argv: Sequence[str]) -> Optional[str]:
    """The ``--report PATH`` of a job's command line (abbreviations are refused by its parser)."""
    for i, arg in enumerate(argv):
        if arg == "--report" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--report="):
            return arg.split("=", 1)[1]
    return None


def _children(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from /proc), children first."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2:].split()
        parents.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], list(parents.get(pid, []))
    while todo:
        child = todo.pop(0)
        out.append(child)
        todo.extend(parents.get(child, []))
    return out


def _alive(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)        # reap it if it is our zombie child
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().split(b") ", 1)[1][:1] != b"Z"
    except (OSError, IndexError):
        return False


def _end_children() -> None:
    """SIGTERM every descendant still alive (the JVM, its launcher, the Python daemon), then SIGKILL
    whatever is left after CHILD_TERM_TIMEOUT_S."""
    for sig, wait_s in ((signal.SIGTERM, CHILD_TERM_TIMEOUT_S), (signal.SIGKILL, CHILD_TERM_TIMEOUT_S)):
        pids = _children(os.getpid())
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)


def _tasks_running(sc) -> int:
    """Tasks the executors still run, as the scheduler counts them: a killed task counts until its
    executor reports it ended (its completion listeners have run)."""
    infos = sc._jsc.sc().statusTracker().getExecutorInfos()      # noqa: SLF001 - no Python API for it
    return sum(info.numRunningTasks() for info in infos)


def _stop_spark() -> None:
    """Stop the SparkContext once the cancelled tasks have ended (Spark kills their Python workers
    after ``spark.python.task.killTimeout``; stopping under a task still ending logs an ERROR with a
    Java stack trace, "Block broadcast_0 does not exist"), all within STOP_SPARK_TIMEOUT_S."""
    sc = _spark_context()
    if sc is None:
        return

    def stop():
        try:
            deadline = time.monotonic() + STOP_SPARK_TIMEOUT_S / 2
            while _tasks_running(sc) and time.monotonic() < deadline:
                time.sleep(0.1)
        except Exception:
            pass
        try:
            sc.stop()
        except Exception:
            pass
    thread = threading.Thread(target=stop, name="kafkalog-stop-spark", daemon=True)
    thread.start()
    thread.join(STOP_SPARK_TIMEOUT_S)


def summary_line(job: str, signum: int, finished: Optional[tuple], report: Optional[str]) -> str:
    """The one line an interrupted job prints: what happened, what finished, what to do, the report."""
    name = signal.Signals(signum).name
    rest = ("untouched or recoverable with `kafkalog recover --log-dirs …`; run the job again to finish (it plans "
            "from what is on disk)")
    if finished is None:
        what = f"stopped before any result came back; what it started is {rest}"
    else:
        done, total, verb = finished
        what = f"{done} of {total} partitions {verb}; the rest {rest}"
    where = f"report: {report}" if report else "no report written"
    return f"spark-submit.sh {job}: interrupted ({name}): {what}; {where}"


def finish(job: str, code: Optional[int] = None, *, report: Optional[str] = None) -> int:
    """After a signal: stop Spark and every child process, print the one line, return 128 + signal.
    ``code``: the job's own exit code when its ``main`` returned (it finished, or reported the
    interruption itself: ``note_finished``); a job that finished keeps its code. Further signals are
    ignored meanwhile: the clean-up itself must not be cut short."""
    signum = _state.signum if _state.signum is not None else signal.SIGINT
    for s in SIGNALS:
        try:
            signal.signal(s, signal.SIG_IGN)
        except ValueError:          # not the main thread (a test calling run from a thread)
            break
    _state.done.set()
    if _state.canceller is not None:
        _state.canceller.join(CANCEL_EVERY_S * 4)
    _stop_spark()
    _end_children()
    written = _state.report or report
    written = written if written and os.path.exists(written) else None
    if code is not None and _state.finished is None:            # the signal came as the job ended
        print(f"spark-submit.sh {job}: {signal.Signals(signum).name} received as the job ended: it had finished, "
              f"its results above are complete; {f'report: {written}' if written else 'no report written'}",
              file=sys.stderr, flush=True)
        return code
    print(summary_line(job, signum, _state.finished, written), file=sys.stderr, flush=True)
    return exit_code(signum)
