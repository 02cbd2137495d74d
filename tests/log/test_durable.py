"""kafkalog.fs.durable: owner, group and mode kept on every file a job writes into a log dir, symlinks
never followed, and the lock fence: no change once the process holding the lock is gone."""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkalog.checkpoint.leader_epoch import write_leader_epoch_checkpoint
from kafkalog.checkpoint.offset import read_offset_checkpoint, write_offset_checkpoint
from kafkalog.fs import durable
from kafkalog.fs.durable import Ownership, can_give, fenced, ownership_problem
from kafkalog.errors import FenceLostError, OwnershipError, SymlinkRefusedError
from kafkalog.fs.lock import LockFence, held_fences, lock_log_dir

from logdirs import make_partition

OTHER_UID, OTHER_GID = 4321, 4322          # a uid/gid no account here has: what a broker's `kafka` user is

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="giving files another owner needs root")


# --- ownership -----------------------------------------------------------------------------------

@root_only
def test_a_replaced_file_keeps_owner_group_and_mode(tmp_path):
    target = tmp_path / "replication-offset-checkpoint"
    write_offset_checkpoint(target, {("t", 0): 1})
    os.chown(target, OTHER_UID, OTHER_GID)
    os.chmod(target, 0o640)
    write_offset_checkpoint(target, {("t", 0): 2})
    st = target.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (OTHER_UID, OTHER_GID, 0o640)
    assert read_offset_checkpoint(target) == {("t", 0): 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]      # no .tmp left


@root_only
def test_a_new_file_takes_the_folder_owner_and_a_temp_name_its_live_file(tmp_path):
    folder = tmp_path / "t-0"
    folder.mkdir(mode=0o750)
    os.chmod(folder, 0o750)
    os.chown(folder, OTHER_UID, OTHER_GID)
    new = folder / "00000000000000000000.index"
    durable.write_file(new, b"", exclusive=True)
    st = new.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (OTHER_UID, OTHER_GID, 0o640)
    live = folder / "00000000000000000000.log"
    live.write_bytes(b"x")
    os.chown(live, OTHER_UID + 1, OTHER_GID + 1)
    os.chmod(live, 0o604)
    durable.write_file(folder / (live.name + ".cleaned"), b"y")
    st = (folder / (live.name + ".cleaned")).stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (OTHER_UID + 1, OTHER_GID + 1, 0o604)


def test_writes_never_follow_a_symlink(tmp_path):
    outside = tmp_path / "outside"
    outside.write_bytes(b"precious")
    folder = tmp_path / "t-0"
    folder.mkdir()
    (folder / "00000000000000000000.log.cleaned").symlink_to(outside)
    with pytest.raises(SymlinkRefusedError):
        durable.write_file(folder / "00000000000000000000.log.cleaned", b"overwritten")
    (folder / "leader-epoch-checkpoint.tmp").symlink_to(outside)
    write_leader_epoch_checkpoint(folder / "leader-epoch-checkpoint", [])   # stale temp link: replaced
    assert not (folder / "leader-epoch-checkpoint").is_symlink()
    (folder / "00000000000000000005.index").symlink_to(outside)
    with pytest.raises(SymlinkRefusedError):
        durable.replace_file(folder / "00000000000000000005.index", b"x")       # its model is a symlink
    with pytest.raises(SymlinkRefusedError):
        durable.truncate(folder / "00000000000000000005.index", 0)
    durable.set_mtime(folder / "00000000000000000005.index", 1_000_000_000)
    assert outside.read_bytes() == b"precious" and outside.stat().st_mtime_ns != 1_000_000_000


def test_ownership_rules_follow_chown():
    mine = Ownership(1000, 1000, 0o644)
    assert can_give(mine, euid=1000, groups=[1000])
    assert can_give(Ownership(1000, 27, 0o644), euid=1000, groups=[1000, 27])
    assert not can_give(Ownership(1001, 1000, 0o644), euid=1000, groups=[1000])
    assert not can_give(Ownership(1000, 5, 0o644), euid=1000, groups=[1000])
    assert can_give(Ownership(1001, 5, 0o644), euid=0, groups=[])


@root_only
def test_a_log_dir_another_user_owns_is_refused_before_anything_changes(tmp_path, monkeypatch):
    """As an unprivileged user on a log dir owned by another: ownership_problem says why, and a
    modifying job refuses the dir (nothing written, exit 1)."""
    from udfs import retention_job

    log_dir = tmp_path / "logs"
    make_partition(log_dir, "t", 0, [[1, 2], [3]])
    for p in [log_dir, *log_dir.rglob("*")]:
        os.chown(p, OTHER_UID, OTHER_GID)
    assert ownership_problem(log_dir) is None                    # root may
    before = listing(log_dir / "t-0")
    monkeypatch.setattr(os, "geteuid", lambda: OTHER_UID + 10)   # the job as another, unprivileged user
    monkeypatch.setattr(os, "getegid", lambda: OTHER_GID + 10)
    monkeypatch.setattr(os, "getgroups", lambda: [OTHER_GID + 10])
    problem = ownership_problem(log_dir)
    assert f"owned by uid {OTHER_UID} gid {OTHER_GID}" in problem and "run it as that user or as root" in problem
    report = tmp_path / "report.json"
    code = retention_job.main(["--log-dirs", str(log_dir), "--execute", "--topic-config", "t:retention.ms=1",
                               "--report", str(report)], spark=object())    # refused before Spark is needed
    assert code == 1
    refused = __import__("json").loads(report.read_text())["summary"]["log_dirs_refused"]
    assert len(refused) == 1 and "owned by uid 4321" in refused[0]["message"]
    assert listing(log_dir / "t-0") == before and not (log_dir / ".lock").exists()


@root_only
def test_a_chown_that_is_not_permitted_is_an_ownership_error(tmp_path, monkeypatch):
    def refuse(*_args):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(os, "fchown", refuse)
    target = tmp_path / "x"
    with pytest.raises(OwnershipError, match="not permitted"):
        durable.replace_file(target, b"data", owner=Ownership(OTHER_UID, OTHER_GID, 0o644))
    assert list(tmp_path.iterdir()) == []                        # temp file removed, nothing replaced


# --- fences --------------------------------------------------------------------------------------

def test_a_fence_of_this_process_holds_while_the_lock_is_held(tmp_path):
    with lock_log_dir(tmp_path):
        fence = held_fences()[str(tmp_path)]
        assert fence.local and fence.holds()
        with fenced([fence]):
            durable.write_file(tmp_path / "a", b"1")
    assert not fence.holds()
    with fenced([fence]):
        with pytest.raises(FenceLostError, match="no longer holds the log dir's lock"):
            durable.write_file(tmp_path / "b", b"2")
        with pytest.raises(FenceLostError):
            durable.rename(tmp_path / "a", tmp_path / "c")
        with pytest.raises(FenceLostError):
            durable.remove(tmp_path / "a")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "a"]


DRIVER = r"""
import json, sys, time
from kafkalog.fs.lock import held_fences, lock_log_dir
with lock_log_dir(sys.argv[1]):
    fence = held_fences()[sys.argv[1]]
    print(json.dumps(fence.__dict__), flush=True)
    time.sleep(600)
"""

WORKER = r"""
import json, os, sys, time
from kafkalog.fs import durable
from kafkalog.fs.lock import LockFence
fence = LockFence(**json.loads(sys.argv[2]))
folder = sys.argv[1]
with durable.fenced([fence]):
    print("fenced", flush=True)
    i = 0
    while True:                          # a worker busy changing the dir: create, rename, remove
        path = os.path.join(folder, "f%d" % (i % 5))
        durable.write_file(path, b"x" * 100)
        durable.rename(path, path + ".swap")
        durable.remove(path + ".swap")
        i += 1
"""


def listing(folder: Path) -> dict:
    out = {}
    for p in folder.iterdir():
        try:
            st = p.lstat()
        except FileNotFoundError:
            continue
        out[p.name] = (st.st_size, st.st_mtime_ns)
    return out


def test_a_worker_stops_changing_the_dir_the_instant_its_driver_dies(tmp_path):
    """Issue 18 (4): the driver holds the lock, a worker in another process group changes files in
    the dir under the fence; SIGKILL the driver: once the lock is gone nothing changes, and the
    worker exits on its own (the watchdog) or stops at its next change (FenceLostError)."""
    log_dir = tmp_path
    cwd = str(Path(__file__).parents[2])
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(log_dir)], stdout=subprocess.PIPE, text=True,
                              cwd=cwd, start_new_session=True)
    fence = driver.stdout.readline().strip()
    assert LockFence(**__import__("json").loads(fence)).holds()
    work = tmp_path / "t-0"
    work.mkdir()
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(work), fence], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=cwd, start_new_session=True)
    try:
        assert worker.stdout.readline().strip() == "fenced"
        time.sleep(0.3)
        assert worker.poll() is None
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=10)                # reaped: its lock is released
        before = listing(work)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            assert listing(work) == before
            time.sleep(0.01)
        code = worker.wait(timeout=5)
        assert code in (durable.FENCE_LOST_EXIT, 1), worker.stderr.read()
        if code == 1:
            assert "FenceLostError" in worker.stderr.read()
    finally:
        for proc in (driver, worker):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


# --- early writeback -------------------------------------------------------------------------------

@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sync_file_range is Linux's")
def test_start_writeback_starts_the_write_and_changes_nothing(tmp_path):
    path = tmp_path / "00000000000000000000.log.cleaned"
    data = os.urandom(3 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        assert durable.start_writeback(fd, 0, len(data)) is True
        assert durable.start_writeback(fd, 1 << 20, 0) is False          # an empty range: nothing to do
        os.fsync(fd)
    finally:
        os.close(fd)
    assert path.read_bytes() == data


def test_start_writeback_of_a_closed_file_reports_false_instead_of_raising(tmp_path):
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o644)
    os.close(fd)
    assert durable.start_writeback(fd, 0, 4096) is False
