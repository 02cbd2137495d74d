"""Every modifying path stops at its next change once the log dir's lock is lost (issue 36, D1): the
lock is held by a forked child (a Spark job's driver), the work runs here under ``durable.fenced``
with that child's fence (the watchdog off: it would end pytest), and right after the work's k-th
change to the file system (k = 0: before the first) the child is killed. The log dir is snapshotted then; nothing may change
after — for every k. (The cleaner's swap-in has its own test: tests/cleaner/test_cleaner_fence.py.)"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kafkalog.config import configs_from_mappings
from kafkalog.log.reindex import reindex_partition
from kafkalog.fs import durable
from kafkalog.log.local_log import read_log_dir_checkpoints
from kafkalog.log.recover import recover_partition
from kafkalog.log.roll import RollConfig
from kafkalog.log.writer import write_log_dir_files, write_partition
from kafkalog.retention.run import finish_log_dir, retain_partition

from cleaner.test_cleaner_fence import hold_lock, kill_holder
from logdirs import records, snapshot
from test_faults import damaged_partition, retention_kill_log_dir

NOW = 1_700_000_000_000
DAY = 86_400_000


def retention(d: Path) -> None:
    configs = configs_from_mappings(topics={"t": {"retention.ms": str(7 * DAY)}})
    checkpoints = read_log_dir_checkpoints(d)
    outcomes = [retain_partition(p, log_dir=d, configs=configs, now_ms=NOW, execute=True, delete_delay_ms=0,
                                 checkpoints=checkpoints) for p in sorted(d.glob("t-*"))]
    finish_log_dir(d, [o for o in outcomes if o["status"] == "applied"])


def interrupted_recovery(root: Path) -> Path:
    """A partition with what a killed swap-in leaves: .cleaned files, a .swap, a .deleted, an orphan index."""
    d = damaged_partition(root)                          # t-0: three segments and an active one
    folder = d / "t-0"
    for name in ("00000000000000000600.log.cleaned", "00000000000000000600.index.cleaned",
                 "00000000000000000300.log.deleted"):
        (folder / name).write_bytes(b"x")
    shutil.copy(folder / "00000000000000000000.log", folder / "00000000000000000000.log.swap")
    (folder / "00000000000000000777.index").write_bytes(b"")
    return d


def tree(d: Path) -> dict:
    """Every file (size, bytes) and folder of ``d``."""
    out = dict(snapshot(d))
    out.update({str(p.relative_to(d)): "folder" for p in d.rglob("*") if p.is_dir()})
    return out


class Changes:
    """Counts this process's changes to the file system (create, rename, utime, unlink, truncate, mkdir);
    after the ``lose_after``-th, kills the lock's holder and snapshots the dir."""

    def __init__(self, monkeypatch, log_dir: Path, holder: int, lose_after: int):
        self.count, self.at_loss = 0, None
        self.log_dir, self.holder, self.lose_after = log_dir, holder, lose_after
        for name in ("replace", "unlink", "utime", "ftruncate", "open", "mkdir"):
            monkeypatch.setattr(os, name, self._wrap(getattr(os, name), name == "open"))
        if lose_after == 0:                       # lost before the work's first change
            self._lose()

    def _lose(self) -> None:
        kill_holder(self.holder, self.log_dir)
        self.at_loss = tree(self.log_dir)

    def _wrap(self, fn, creates_only: bool):
        def wrapper(*args, **kwargs):
            result = fn(*args, **kwargs)
            if not creates_only or (len(args) > 1 and args[1] & os.O_CREAT):
                self.count += 1
                if self.count == self.lose_after:
                    self._lose()
            return result
        return wrapper


def restore(d: Path) -> None:
    """What a restore's task and then its driver write: a partition folder, the checkpoints, meta.properties."""
    written = write_partition(d, "t", 0, records(0, [NOW + i for i in range(120)]), roll=RollConfig(segment_bytes=4000))
    write_log_dir_files(d, [written], node_id=1)


def empty_log_dir(root: Path) -> Path:
    d = root / "logs"
    d.mkdir(parents=True)
    return d


@pytest.mark.parametrize("path", ["retention", "reindex", "recover", "restore"])
def test_no_change_after_the_lock_is_lost(tmp_path, monkeypatch, path):
    monkeypatch.setattr(durable, "_start_watchdog", lambda: None)
    assert durable._watchdog is None or not durable._watchdog.is_alive(), "a watchdog here would end pytest"
    template = {"retention": lambda: retention_kill_log_dir(tmp_path / "template"),
                "reindex": lambda: damaged_partition(tmp_path / "template"),
                "recover": lambda: interrupted_recovery(tmp_path / "template"),
                "restore": lambda: empty_log_dir(tmp_path / "template")}[path]()
    work = {"retention": retention,
            "reindex": lambda d: reindex_partition(d / "t-0", verify_only=False),
            "recover": lambda d: recover_partition(d / "t-0"),
            "restore": restore}[path]
    k = -1
    while True:
        k += 1
        d = tmp_path / f"lost-{k}"
        shutil.copytree(template, d)
        holder, fence = hold_lock(d)
        with monkeypatch.context() as m:
            changes = Changes(m, d, holder, k)
            try:
                with durable.fenced([fence]):
                    work(d)
            except durable.FenceLostError:
                pass
        if changes.at_loss is None:               # the work made fewer than k changes: all were tried
            kill_holder(holder, d)
            break
        assert tree(d) == changes.at_loss, f"{path}: files changed after the lock was lost (change {k})"
        shutil.rmtree(d)
    assert k > 3, f"{path} made only {k - 1} changes"
