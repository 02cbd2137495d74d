"""Ctrl-C (SIGINT to the job's process group, as a terminal sends it) and SIGTERM in spark-submit jobs
(issue 33): exit 130/143, ONE line saying what happened and what to do, no Python or Java traceback,
the report written with every partition finished or marked interrupted, and no process left behind
(the SparkSubmit JVM, pyspark's daemon and its workers: every process of the job's session).

Three spark-submit runs (~30 s each on 2 cores), marked ``slow``: SIGINT while Spark starts, SIGINT
while a compaction's tasks run, SIGTERM while retention's tasks run (the job runner's own report).
The formatting of the one line is tested without Spark in tests/udfs/test_operator_words.py.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from kafkalog.checkpoint.offset import read_offset_checkpoint, write_offset_checkpoint
from kafkalog.fs.names import CLEANER_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT

from logdirs import make_partition
from test_faults import NOW, DAY, RETENTION_ARGS, big_compacted_log_dir, expired_log_dir

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
TRACEBACK = re.compile(r"Traceback|Exception|^\s+at [\w.$]+\(", re.M)


def _session_processes(sid: int) -> list[str]:
    """The live processes of session ``sid`` (the job and everything it started: none calls setsid)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2:].split()
        if int(fields[3]) == sid and fields[0] != b"Z":
            out.append(f"{entry}: {cmd[:150]}")
    return out


def interrupt_when(args: list, ready, tmp_path: Path, sig: int) -> tuple[int, str]:
    """Run ``./spark-submit.sh ARGS`` in a session of its own; once ``ready(stderr so far)`` is true,
    send ``sig`` to its process group, as a terminal does. Returns (exit code, stderr); asserts that
    no process of the session is left a few seconds after the job exited."""
    env = dict(os.environ, SPARK_MASTER="local[2]")
    err_path = tmp_path / "stderr.log"
    with open(err_path, "w") as err, open(tmp_path / "stdout.log", "w") as out:
        job = subprocess.Popen([str(REPO / "spark-submit.sh"), *args], stdout=out, stderr=err, env=env, cwd=str(REPO),
                               start_new_session=True)
        try:
            deadline = time.monotonic() + 240
            while not ready(err_path.read_text()):
                assert job.poll() is None, err_path.read_text()[-3000:]
                assert time.monotonic() < deadline, "the job never reached the point to interrupt it at"
                time.sleep(0.01)
            os.killpg(job.pid, sig)
            code = job.wait(timeout=90)
            deadline = time.monotonic() + 5        # the kernel reaps the last children asynchronously
            while _session_processes(job.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert _session_processes(job.pid) == [], "processes left behind"
        finally:
            try:
                os.killpg(job.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return code, err_path.read_text()


def last_line(stderr: str) -> str:
    assert not TRACEBACK.search(stderr), stderr[-4000:]
    return stderr.strip().splitlines()[-1]


def test_sigint_while_spark_starts(tmp_path):
    """Today's bug: a Python and a Java traceback, and an orphaned SparkSubmit JVM."""
    d = tmp_path / "logs"
    make_partition(d, "t", 0, [[NOW] * 3, [NOW]])
    report = tmp_path / "report.json"
    code, stderr = interrupt_when(["catalog", "--log-dirs", str(d), "--report", str(report)],
                                  lambda err: "starting Spark" in err, tmp_path, signal.SIGINT)
    assert code == 130, stderr
    line = last_line(stderr)
    assert line.startswith("spark-submit.sh catalog: interrupted (SIGINT): ") and f"report: {report}" in line, line
    assert "finished" not in stderr.split("starting Spark", 1)[1].replace(line, "")   # no summary printed
    r = json.loads(report.read_text())
    assert r["interrupted"]["signal"] == "SIGINT" and r["partitions"] == []


def compacted_dir(tmp_path: Path) -> Path:
    """big-0 (a compaction of several seconds) and three small compacted partitions."""
    from cleaner.test_cleaner_crash import crash_log
    from cleaner_model import write_partition

    d = big_compacted_log_dir(tmp_path)
    high_watermarks = read_offset_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT)
    for p in range(3):
        write_partition(d, crash_log(), partition=p)
        high_watermarks.update(read_offset_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT))
    write_offset_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT, high_watermarks)
    return d


def test_sigint_during_a_compaction(tmp_path):
    """Today's bug: the tasks ran on, ~100 lines of Py4J traceback, exit 3, no report."""
    d = compacted_dir(tmp_path)
    report = tmp_path / "report.json"
    # a small key map: big-0's 50,000 keys take many hash-slice passes, so it runs long after the small ones end
    (tmp_path / "server.properties").write_text("log.cleaner.dedupe.buffer.size=131072\n")
    args = ["compact", "--log-dirs", str(d), "--now-ms", str(NOW + 10 * DAY), "--report", str(report),
            "--broker-config", str(tmp_path / "server.properties"),
            "--topic-config", "big:cleanup.policy=compact", "--topic-config", "big:segment.bytes=104857600",
            "--topic-config", "compacted:cleanup.policy=compact", "--topic-config",
            "compacted:min.cleanable.dirty.ratio=0.01", "--topic-config", "compacted:segment.bytes=700"]

    def a_small_one_done_big_one_running(err: str) -> bool:
        """The driver has a finished partition's row (its progress line counts it) and big-0 is not done."""
        if not re.search(r"compacting: [123]/4 partitions", err):
            return False
        try:
            return ("big", 0) not in read_offset_checkpoint(d / CLEANER_OFFSET_CHECKPOINT)
        except (OSError, ValueError):
            return False

    code, stderr = interrupt_when(args, a_small_one_done_big_one_running, tmp_path, signal.SIGINT)
    assert code == 130, stderr
    r = json.loads(report.read_text())
    assert r["interrupted"]["signal"] == "SIGINT" and len(r["partitions"]) == 4
    statuses = {(p["topic"], p["partition"]): p["status"] for p in r["partitions"]}
    assert set(statuses.values()) <= {"cleaned", "interrupted"}, statuses
    cleaned = [tp for tp, s in statuses.items() if s == "cleaned"]
    assert cleaned and set(cleaned) <= {("compacted", p) for p in range(3)}, statuses
    assert set(cleaned) <= set(read_offset_checkpoint(d / CLEANER_OFFSET_CHECKPOINT))   # reported = swapped in
    assert statuses[("big", 0)] == "interrupted", statuses     # ~30 s of work, cut short
    line = last_line(stderr)
    assert line == (f"spark-submit.sh compact: interrupted (SIGINT): {len(cleaned)} of 4 partitions compacted; the "
                    "rest untouched or recoverable with `kafkalog recover --log-dirs …`; run the job again to finish "
                    f"(it plans from what is on disk); report: {report}"), line
    from kafkalog.cleaner import recover_log_dirs
    from kafkalog.log.records_io import read_segment
    recover_log_dirs([d])                    # what was cut short is recoverable, every record of big-0 readable
    assert sum(read_segment(p).num_rows for p in (d / "big-0").glob("*.log")) >= 50_000


def test_sigterm_during_retention(tmp_path):
    """SIGTERM: the same clean stop, exit 143; the job runner writes the per-partition report."""
    d = expired_log_dir(tmp_path)
    report = tmp_path / "report.json"
    args = ["retention", "--log-dirs", str(d), *RETENTION_ARGS[:4], "--execute", "--high-watermark-missing", "log-end",
            "--report", str(report)]

    def renaming(_err: str) -> bool:
        return any(n.endswith(".deleted") for f in d.iterdir() if f.is_dir() for n in os.listdir(f))

    code, stderr = interrupt_when(args, renaming, tmp_path, signal.SIGTERM)
    assert code == 143, stderr
    line = last_line(stderr)
    assert re.match(r"spark-submit.sh retention: interrupted \(SIGTERM\): (\d+) of 40 partitions finished; ", line), line
    r = json.loads(report.read_text())
    assert r["interrupted"]["signal"] == "SIGTERM" and len(r["partitions"]) == 40
    finished = sum(p["status"] == "finished" for p in r["partitions"])
    assert f": {finished} of 40 partitions finished" in line and finished < 40
    assert {p["status"] for p in r["partitions"]} <= {"finished", "interrupted"}
