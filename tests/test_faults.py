"""Fault injection for the jobs that modify log dirs (retention --execute, reindex, compact): a full
disk (a size-limited tmpfs), a read-only partition folder (a read-only bind mount: root ignores
permission bits), SIGKILL at every step, and SIGKILL of the spark-submit driver (its Python workers
live in their own process group). Each test asserts the data (nothing lost, nothing half-written
left live, reruns converge) and what the job says (report, exit code).

Mounting needs root (CAP_SYS_ADMIN); without it those tests skip with the reason. The spark-submit
kill tests take ~30 s each and are marked ``slow`` (deselect with ``-m "not slow"``).
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from kafkalog.log.local_log import read_log_dir_checkpoints
from kafkalog.config import configs_from_mappings
from kafkalog.fs.durable import WATCHDOG_INTERVAL_S
from kafkalog.fs.lock import is_locked, lock_holder
from kafkalog.log.reindex import reindex_partition
from kafkalog.retention.run import finish_log_dir, retain_partition
from kafkalog.log.records_io import read_segment
from kafkalog.checkpoint.offset import read_offset_checkpoint, write_offset_checkpoint
from kafkalog.fs.names import LEADER_EPOCH_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from kafkalog.checkpoint.leader_epoch import write_leader_epoch_checkpoint

from logdirs import built_once, make_partition, snapshot, write_checkpoints

REPO = Path(__file__).resolve().parents[1]
NOW = 1_700_000_000_000
DAY = 86_400_000


# --- file systems ----------------------------------------------------------------------------------

def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True)


@pytest.fixture(scope="module")
def can_mount(tmp_path_factory) -> None:
    probe = tmp_path_factory.mktemp("mount-probe")
    done = _run("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe))
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or 'not root'}): the full-disk and "
                    "read-only tests need it")
    _run("umount", str(probe))


@contextmanager
def small_fs(path: Path, size: str):
    path.mkdir(parents=True, exist_ok=True)
    done = _run("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
    assert done.returncode == 0, done.stderr
    try:
        yield path
    finally:
        _run("umount", "-l", str(path))


@contextmanager
def read_only(folder: Path):
    """``folder`` read-only (EROFS for every change inside it), by a read-only bind mount on itself."""
    for cmd in (("mount", "--bind", str(folder), str(folder)), ("mount", "-o", "remount,bind,ro", str(folder))):
        done = _run(*cmd)
        assert done.returncode == 0, done.stderr
    try:
        yield folder
    finally:
        _run("umount", "-l", str(folder))


def fill(fs: Path) -> None:
    """Use every free block of ``fs``."""
    fd = os.open(fs / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


def files(root: Path) -> dict:
    """snapshot() without the .lock a modifying job creates (empty, as a broker leaves it)."""
    return {k: v for k, v in snapshot(root).items() if k != ".lock"}


def temp_files(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if p.name.endswith((".tmp", ".cleaned", ".swap")))


# --- retention -----------------------------------------------------------------------------------

def retention_log_dir(root: Path) -> Path:
    """Two partitions, each: three old segments (deleted by retention.ms) and two recent ones; the
    log-start-offset-checkpoint holds an entry the run removes (so it is rewritten)."""
    d = root / "logs"
    for p in range(2):
        make_partition(d, "t", p, [[NOW - 9 * DAY] * 3, [NOW - 8 * DAY] * 3, [NOW - 8 * DAY] * 3, [NOW] * 3, [NOW]])
    write_checkpoints(d, high_watermarks={("t", 0): 13, ("t", 1): 13},
                      log_start_offsets={("t", 0): 2, ("t", 1): 2})
    return d


RETENTION_ARGS = ["--now-ms", str(NOW), "--topic-config", "t:retention.ms=" + str(7 * DAY), "--execute",
                  "--delete-delay-ms", "0"]


def test_retention_on_a_full_disk(spark, tmp_path, can_mount):
    """Renames need no space: the segments go; the log-start-offset-checkpoint cannot be rewritten:
    the old one stays whole, no temp file is left, the report says so and the exit code is 1."""
    from udfs import retention_job

    with small_fs(tmp_path / "fs", "512k") as fs:
        d = retention_log_dir(fs)
        before = (d / LOG_START_OFFSET_CHECKPOINT).read_bytes()
        fill(fs)
        report = tmp_path / "report.json"
        args = RETENTION_ARGS[:-2]          # .deleted files kept (the default delay): removing them would free space
        code = retention_job.main(["--log-dirs", str(d), *args, "--report", str(report)], spark=spark)
        assert code == 1
        r = json.loads(report.read_text())
        assert r["summary"]["statuses"] == {"applied": 2} and r["summary"]["segments_deleted"] == 6
        refused = r["summary"]["log_dirs_refused"]
        assert len(refused) == 1 and "No space left on device" in refused[0]["message"]
        assert (d / LOG_START_OFFSET_CHECKPOINT).read_bytes() == before
        assert temp_files(d) == []
        for p in range(2):
            assert read_segment(d / f"t-{p}" / "00000000000000000009.log").num_rows == 3


def test_retention_with_a_read_only_partition(spark, tmp_path, can_mount):
    """Issue 18 (2): a read-only partition folder is that partition's failure, named with the path
    and the reason; the other partition is applied; exit 1; the counts are what was done."""
    from udfs import retention_job

    d = retention_log_dir(tmp_path)
    frozen = d / "t-1"
    before = files(frozen)
    report = tmp_path / "report.json"
    with read_only(frozen):
        code = retention_job.main(["--log-dirs", str(d), *RETENTION_ARGS, "--report", str(report)], spark=spark)
    assert code == 1
    r = json.loads(report.read_text())
    by_partition = {p["partition"]: p for p in r["partitions"]}
    assert by_partition[0]["status"] == "applied" and by_partition[0]["segments_deleted"] == 3
    failed = by_partition[1]
    assert failed["status"] == "error" and str(frozen) in failed["message"]
    assert "Read-only file system" in failed["message"]
    assert failed["segments_deleted"] == 0 and failed["bytes_freed"] == 0      # nothing was renamed
    assert r["summary"]["segments_deleted"] == 3
    assert files(frozen) == before


def killed_at_step(step: int, work) -> bool:
    """Run ``work()`` in a forked child that SIGKILLs itself just before its ``step``-th change to the
    file system (create, rename, utime, unlink, truncate); True when it was killed, False when it
    finished with fewer changes. A fork costs milliseconds where a fresh interpreter costs a second."""
    pid = os.fork()
    if pid == 0:                                    # the child: never returns into pytest
        try:
            calls = [0]

            def killing(fn, creates_only=False):
                def wrapper(*args, **kwargs):
                    if not creates_only or (len(args) > 1 and args[1] & os.O_CREAT):
                        calls[0] += 1
                        if calls[0] == step:
                            os.kill(os.getpid(), signal.SIGKILL)
                    return fn(*args, **kwargs)
                return wrapper
            os.replace, os.unlink, os.utime = killing(os.replace), killing(os.unlink), killing(os.utime)
            os.ftruncate, os.open = killing(os.ftruncate), killing(os.open, creates_only=True)
            work()
        except BaseException:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        assert os.WTERMSIG(status) == signal.SIGKILL
        return True
    assert os.WEXITSTATUS(status) == 0, "the run failed without being killed"
    return False


def apply_retention(d: Path) -> list[dict]:
    configs = configs_from_mappings(topics={"t": {"retention.ms": str(7 * DAY)}})
    checkpoints = read_log_dir_checkpoints(d)
    outcomes = [retain_partition(p, log_dir=d, configs=configs, now_ms=NOW, execute=True,
                                 delete_delay_ms=0, checkpoints=checkpoints) for p in sorted(d.glob("t-*"))]
    finish_log_dir(d, outcomes)
    return outcomes


def retention_kill_log_dir(root: Path) -> Path:
    """``retention_log_dir`` with every file a retention run changes: each partition's
    ``leader-epoch-checkpoint`` holds entries below the new log start offset (truncated), and t-2 has
    only old segments (rolled: a new empty segment with its two empty indexes, then all deleted)."""
    d = retention_log_dir(root)
    make_partition(d, "t", 2, [[NOW - 9 * DAY] * 3, [NOW - 8 * DAY] * 2])
    write_checkpoints(d, high_watermarks={("t", 0): 13, ("t", 1): 13, ("t", 2): 5},
                      log_start_offsets={("t", 0): 2, ("t", 1): 2, ("t", 2): 1})
    for p, epochs in ((0, [(0, 0), (1, 4), (2, 10)]), (1, [(3, 0)]), (2, [(0, 0), (4, 3)])):
        write_leader_epoch_checkpoint(d / f"t-{p}" / LEADER_EPOCH_CHECKPOINT, epochs)
    return d


def whole_dir(d: Path) -> dict:
    """Every file of ``d`` (names, sizes, bytes) but the ``.deleted`` ones: those are scheduled deletions
    (a broker removes them all when it loads the dir, a run once their delay has passed); a kill before
    a renamed file's mtime is stamped leaves one whose delay counts from the wall clock."""
    return {k: v for k, v in files(d).items() if not k.endswith(".deleted")}


def live_state(d: Path) -> dict:
    """What a broker loads from ``d``: the live segments (.log and their indexes) and the checkpoints;
    not the leftovers it deletes when it loads the dir (``.deleted`` files, an index whose .log is gone)."""
    out = {}
    for name, value in files(d).items():
        path = d / name
        if name.endswith(".deleted") or name == ".lock":
            continue
        if path.suffix in (".index", ".timeindex", ".txnindex") and not path.with_suffix(".log").exists():
            continue
        out[name] = value
    return out


def test_retention_killed_at_every_step_loses_nothing_and_converges(tmp_path):
    """SIGKILL before each create/rename/utime/unlink of an --execute run — the roll's three files,
    every rename and stamp, every purge, each checkpoint's temp file and rename: every live record at
    or above the new log start offset stays readable, and a rerun reaches the uninterrupted run's log
    dir byte for byte — live segments, their indexes, the rolled segment's indexes, every checkpoint
    (leader-epoch-checkpoint included), no temp file — all but the .deleted files (``whole_dir``)."""
    template = retention_kill_log_dir(tmp_path / "template")
    reference = tmp_path / "reference"
    shutil.copytree(template, reference)
    outcomes = apply_retention(reference)
    assert sum(o["segments_deleted"] for o in outcomes) == 8 and outcomes[2]["roll_at"] == 5
    expected = whole_dir(reference)
    assert expected != whole_dir(template) and all(n not in expected for n in temp_files(reference))
    assert expected["t-2/leader-epoch-checkpoint"][1] == b"0\n1\n4 5\n"
    step = 0
    while True:
        step += 1
        d = tmp_path / f"kill-{step}"
        shutil.copytree(template, d)
        if not killed_at_step(step, lambda: apply_retention(d)):
            assert whole_dir(d) == expected
            break
        for p in range(2):          # the recent segments, untouched by any step
            for base in (9, 12):
                assert read_segment(d / f"t-{p}" / f"{base:020d}.log").num_rows == (3 if base == 9 else 1)
        outcomes = apply_retention(d)
        assert all(o["status"] == "applied" for o in outcomes), outcomes
        got = whole_dir(d)
        assert got == expected, (f"killed at step {step}: differs in "
                                 f"{sorted(k for k in set(got) | set(expected) if got.get(k) != expected.get(k))}")
        shutil.rmtree(d)
    assert step > 30                # every create, rename, stamp, purge and checkpoint write was a kill point


# --- reindex -------------------------------------------------------------------------------------

def damaged_partition(root: Path) -> Path:
    d = root / "logs"
    folder = make_partition(d, "t", 0, [[NOW + i for i in range(300)]] * 3 + [[NOW]])
    for base in (0, 300, 600):
        (folder / f"{base:020d}.index").write_bytes(b"\xff" * 16)        # corrupt
        (folder / f"{base:020d}.timeindex").unlink()                     # missing
    return d


def test_reindex_on_a_full_disk(spark, tmp_path, can_mount):
    from udfs import reindex_job

    with small_fs(tmp_path / "fs", "256k") as fs:
        d = damaged_partition(fs)
        before = files(d)
        fill(fs)
        report = tmp_path / "report.json"
        assert reindex_job.main(["--log-dirs", str(d), "--report", str(report)], spark=spark) == 1
        r = json.loads(report.read_text())
        assert r["summary"]["errors"] and all("No space left on device" in e["message"]
                                              for e in r["summary"]["errors"])
        assert not any(f["action"] in ("rebuilt", "created") for f in r["files"])
        assert files(d) == before and temp_files(d) == []


def test_reindex_with_a_read_only_partition(spark, tmp_path, can_mount):
    from udfs import reindex_job

    d = damaged_partition(tmp_path)
    make_partition(d, "u", 0, [[NOW] * 5, [NOW]])
    (d / "u-0" / "00000000000000000000.index").unlink()
    frozen = d / "t-0"
    before = files(frozen)
    report = tmp_path / "report.json"
    with read_only(frozen):
        assert reindex_job.main(["--log-dirs", str(d), "--report", str(report)], spark=spark) == 1
    r = json.loads(report.read_text())
    errors = r["summary"]["errors"]
    assert errors and all(e["partition_dir"] == str(frozen) and "Read-only file system" in e["message"]
                          and str(frozen) in e["message"] for e in errors)
    assert [f["action"] for f in r["files"] if f["partition_dir"] == str(d / "u-0") and f["kind"] == "index"] == \
        ["created"]
    assert files(frozen) == before


def test_reindex_killed_at_every_step_converges(tmp_path):
    template = damaged_partition(tmp_path / "template") / "t-0"
    reference = tmp_path / "reference" / "t-0"
    shutil.copytree(template, reference)
    reindex_partition(reference, verify_only=False)
    expected = files(reference)
    step = 0
    while True:
        step += 1
        d = tmp_path / f"kill-{step}" / "t-0"
        shutil.copytree(template, d)
        if not killed_at_step(step, lambda: reindex_partition(d, verify_only=False)):
            break
        rows = reindex_partition(d, verify_only=False).rows
        assert not any(r["class"] == "error" for r in rows)
        assert {k: v for k, v in files(d).items() if not k.endswith(".tmp")} == expected, f"killed at step {step}"
        assert all(r["class"] == "identical" for r in reindex_partition(d, verify_only=True).rows
                   if r["kind"] != "log")
        shutil.rmtree(d.parent)
    assert step > 6


# --- compaction ----------------------------------------------------------------------------------

def compacted_log_dir(root: Path, partitions: int = 2) -> Path:
    from cleaner.test_cleaner_crash import crash_log
    from cleaner_model import write_partition

    d = root / "logs"
    high_watermarks = {}
    for p in range(partitions):             # each call writes its own replication-offset-checkpoint
        write_partition(d, crash_log(), partition=p)
        high_watermarks.update(read_offset_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT))
    write_offset_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT, high_watermarks)
    return d


COMPACT_ARGS = ["--now-ms", str(NOW + 10 * DAY), "--topic-config", "compacted:cleanup.policy=compact",
                "--topic-config", "compacted:min.cleanable.dirty.ratio=0.01",
                "--topic-config", "compacted:segment.bytes=700"]


def test_compaction_on_a_full_disk(spark, tmp_path, can_mount):
    from udfs import compact_job

    with small_fs(tmp_path / "fs", "256k") as fs:
        d = compacted_log_dir(fs, partitions=1)
        before = files(d)
        fill(fs)
        report = tmp_path / "report.json"
        assert compact_job.main(["--log-dirs", str(d), *COMPACT_ARGS, "--report", str(report)], spark=spark) == 1
        r = json.loads(report.read_text())
        (p,) = r["partitions"]
        assert p["status"] == "error" and "No space left on device" in p["reason"]
        after = {k: v for k, v in files(d).items() if not k.endswith(".cleaned")}
        assert after == before                   # live segments and checkpoints untouched
        # (.cleaned leftovers are never live: a broker and `kafkalog recover` drop them)


def test_compaction_with_a_read_only_partition(spark, tmp_path, can_mount):
    from udfs import compact_job

    d = compacted_log_dir(tmp_path)
    frozen = d / "compacted-1"
    before = files(frozen)
    report = tmp_path / "report.json"
    with read_only(frozen):
        assert compact_job.main(["--log-dirs", str(d), *COMPACT_ARGS, "--report", str(report)], spark=spark) == 1
    r = json.loads(report.read_text())
    by_partition = {p["partition"]: p for p in r["partitions"]}
    assert by_partition[0]["status"] == "cleaned"
    assert by_partition[1]["status"] == "error" and str(frozen) in by_partition[1]["reason"]
    assert "Read-only file system" in by_partition[1]["reason"]
    assert files(frozen) == before


# --- SIGKILL of the spark-submit driver --------------------------------------------------------------

def watch(folder: Path) -> dict:
    out = {}
    for p in folder.rglob("*"):
        try:
            st = p.lstat()
        except FileNotFoundError:
            continue
        out[str(p.relative_to(folder))] = (st.st_size, st.st_mtime_ns)
    return out


def kill_driver_when(log_dir: Path, args: list, ready, tmp_path: Path, *, whole_group: bool) -> tuple[dict, float]:
    """Run ``./spark-submit.sh ARGS`` in its own process group; once ``ready()`` is true, SIGKILL the
    whole group (bash, JVM, Python driver — not the Python workers, which pyspark's daemon puts in
    their own group), or only the Python driver that holds the lock (as the OOM killer would: the
    JVM and its workers run on), wait until the log dir's lock is gone, and return the listing at
    that instant."""
    env = dict(os.environ, SPARK_MASTER="local[2]")
    log = open(tmp_path / "driver.log", "w")
    job = subprocess.Popen([str(REPO / "spark-submit.sh"), *args], stdout=log, stderr=subprocess.STDOUT, env=env,
                           cwd=str(REPO), start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not ready():
            assert job.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the job never reached the point to kill it at"
            time.sleep(0.005)
        if whole_group:
            os.killpg(job.pid, signal.SIGKILL)
        else:
            holder = lock_holder(log_dir)
            assert holder is not None and holder.is_kafkalog and holder.pid
            os.kill(holder.pid, signal.SIGKILL)
        killed = time.monotonic()
        if whole_group:
            job.wait(timeout=30)
        while is_locked(log_dir):           # the Python driver dies with its group; the kernel drops its lock
            assert time.monotonic() - killed < 30
            time.sleep(0.001)
        # A change whose fence check passed just before the lock went (check, then the system call) may
        # still land: the watchdog ends such a worker within WATCHDOG_INTERVAL_S of CPU time, longer on a
        # loaded machine (CI saw one utime land late at load 10). From then on, nothing may change.
        time.sleep(10 * WATCHDOG_INTERVAL_S)
        return watch(log_dir), killed
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        log.close()


def assert_nothing_changes(log_dir: Path, at_unlock: dict, seconds: float = 4.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert watch(log_dir) == at_unlock, "a file in the log dir changed after the job lost its lock"
        time.sleep(0.02)


def big_compacted_log_dir(root: Path) -> Path:
    """One compacted partition whose rewrite takes a few seconds: 40 segments of 20,000 records over
    50,000 keys, so most records are superseded. ``root/logs``, a copy of one written once per run
    (test_interrupts starts from it too)."""
    return built_once("big-compacted", root / "logs", _write_big_compacted)


def _write_big_compacted(d: Path) -> None:
    import pyarrow as pa
    from kafkalog.log.records_io import write_segment

    folder = d / "big-0"
    folder.mkdir(parents=True)
    per, segments = 20_000, 40
    for s in range(segments):
        first = s * per
        write_segment(folder, pa.table({
            "offset": pa.array(range(first, first + per), pa.int64()),
            "timestamp": pa.array([NOW] * per, pa.timestamp("ms", tz="UTC")),
            "key": pa.array([b"key-%d" % ((first + i) % 50_000) for i in range(per)], pa.binary()),
            "value": pa.array([b"v" * 100] * per, pa.binary())}), batch_bytes=16384)
    write_offset_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT, {("big", 0): segments * per})


def expired_log_dir(root: Path) -> Path:
    """40 partitions of 60 expired one-record segments and a recent one: a retention run long enough to
    interrupt. ``root/logs``, a copy of one written once per run (test_interrupts starts from it too)."""
    def write(d: Path) -> None:
        for p in range(40):
            make_partition(d, "t", p, [[NOW - 9 * DAY]] * 60 + [[NOW]])
    return built_once("expired-40x61", root / "logs", write)


@pytest.mark.slow
@pytest.mark.parametrize("whole_group", [True, False], ids=["job-group", "driver-only"])
def test_sigkill_of_the_driver_mid_compaction_stops_every_change(tmp_path, whole_group):
    """Issue 18 (4): a worker wrote a .cleaned file 0.5 s after its driver (and the lock) were gone."""
    d = big_compacted_log_dir(tmp_path)
    folder = d / "big-0"
    args = ["compact", "--log-dirs", str(d), "--now-ms", str(NOW + DAY), "--topic-config",
            "big:cleanup.policy=compact", "--topic-config", "big:segment.bytes=104857600"]
    at_unlock, _ = kill_driver_when(d, args, lambda: any(p.name.endswith(".cleaned") for p in folder.iterdir()),
                                    tmp_path, whole_group=whole_group)
    assert_nothing_changes(d, at_unlock)
    from kafkalog.cleaner import recover_log_dirs
    recover_log_dirs([d])                    # a crash at any step leaves it recoverable, every record readable
    assert sum(read_segment(p).num_rows for p in folder.glob("*.log")) >= 50_000


@pytest.mark.slow
@pytest.mark.parametrize("whole_group", [True, False], ids=["job-group", "driver-only"])
def test_sigkill_of_the_driver_mid_retention_stops_every_change(tmp_path, whole_group):
    d = expired_log_dir(tmp_path)
    args = ["retention", "--log-dirs", str(d), *RETENTION_ARGS[:4], "--execute", "--high-watermark-missing", "log-end"]

    def renaming() -> bool:
        return any(n.endswith(".deleted") for f in d.iterdir() if f.is_dir() for n in os.listdir(f))
    at_unlock, _ = kill_driver_when(d, args, renaming, tmp_path, whole_group=whole_group)
    assert_nothing_changes(d, at_unlock)
    for p in range(40):                      # the recent segment of every partition is untouched
        assert read_segment(d / f"t-{p}" / f"{60:020d}.log").num_rows == 1
