"""A cleaner that loses its log dir's lock in the middle of a swap-in changes nothing more (issue 36,
D1): not the swap's next step, and not the repair (``recover_partition``) it runs after other failures.
The lock is held by a forked child, as a Spark job's driver holds it for its workers; the cleaner runs
``clean_partition(lock=False)`` under ``durable.fenced`` with that child's fence, and a step hook
SIGKILLs the child after each step of the swap-in in turn. The log dir (names, sizes, bytes) is
snapshotted the moment the lock reads free and must not change after. Then ``recover`` and a rerun
under a held lock reach the uninterrupted round's records."""
from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from kafkalog.cleaner.clean_options import CleanOptions
from kafkalog.cleaner import clean_partition, recover_log_dirs
from kafkalog.fs import durable
from kafkalog.fs.lock import LockFence, is_locked, lock_log_dir, process_start_time, _HOST

from cleaner.test_cleaner_crash import NOW, clean_a_copy, crash_log, grouped_config, state
from cleaner_model import write_partition
from logdirs import snapshot


def hold_lock(log_dir: Path) -> tuple[int, LockFence]:
    """Fork a child that takes ``log_dir``'s lock and waits to be killed: (its pid, its fence)."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:                                  # the child: never returns into pytest
        try:
            os.close(ready_r)
            with lock_log_dir(log_dir):
                os.write(ready_w, b"1")
                signal.pause()
        finally:
            os._exit(0)
    os.close(ready_w)
    assert os.read(ready_r, 1) == b"1"
    os.close(ready_r)
    return pid, LockFence(os.fspath(log_dir), pid, process_start_time(pid), _HOST)


def kill_holder(pid: int, log_dir: Path) -> None:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)                            # reaped: the kernel has dropped its lock
    assert not is_locked(log_dir)


@pytest.fixture(scope="module")
def rounds(tmp_path_factory):
    """The template log dir, its config, the steps of an uninterrupted round and its records."""
    root = tmp_path_factory.mktemp("fence")
    template = write_partition(root / "template", crash_log())
    config = grouped_config(template)
    _res, steps, after = clean_a_copy(template, root / "probe", config)
    assert len(steps) > 8 and steps[-1] == "checkpoint-written"
    return template, config, steps, after


def test_nothing_changes_after_the_lock_is_lost_at_any_step_of_the_swap_in(tmp_path, rounds, monkeypatch):
    """Watchdog off (it would end pytest): only the fence checks stop the cleaner."""
    template, config, steps, after = rounds
    monkeypatch.setattr(durable, "_start_watchdog", lambda: None)
    assert durable._watchdog is None or not durable._watchdog.is_alive(), "a watchdog here would end pytest"
    for k in range(len(steps)):
        log_dir = tmp_path / f"kill-{k}"
        shutil.copytree(template.parent, log_dir)
        d = log_dir / template.name
        holder, fence = hold_lock(log_dir)
        at_loss = {}
        calls = []

        def hook(step, path):
            calls.append(step)
            if len(calls) - 1 == k:
                kill_holder(holder, log_dir)
                at_loss.update(snapshot(log_dir))
        try:
            with durable.fenced([fence]):
                res = clean_partition(d, config=config, now_ms=NOW, options=CleanOptions(lock=False, on_step=hook))
        finally:
            if not at_loss:
                kill_holder(holder, log_dir)
        assert at_loss, f"step {k} was never reached"
        assert snapshot(log_dir) == at_loss, f"files changed after the lock was lost at step {k} ({steps[k]})"
        if k < len(steps) - 1:                    # the last step is the last change: nothing left to stop
            assert not res.cleaned and "no longer holds the log dir's lock" in res.error, (k, res.error)
            assert "kafkalog recover" in res.error
        # what the lost job left is finished by recover, and a rerun reaches the uninterrupted result
        assert all(r.error is None for r in recover_log_dirs([log_dir]))
        clean_partition(d, config=config, now_ms=NOW)
        assert state(d) == after, k
        shutil.rmtree(log_dir)


def test_with_the_watchdog_the_worker_ends_and_changes_nothing(tmp_path, rounds):
    """The watchdog on, in a forked worker (as a Spark Python worker): the hook kills the holder and
    blocks; the watchdog must end the worker (FENCE_LOST_EXIT) while it waits, with the dir as it was
    when the lock was lost."""
    template, config, steps, _after = rounds
    for k in (1, steps.index("old-renamed-to-deleted"), steps.index("swap-installed")):
        log_dir = tmp_path / f"kill-{k}"
        shutil.copytree(template.parent, log_dir)
        d = log_dir / template.name
        lost_r, lost_w = os.pipe()
        go_r, go_w = os.pipe()
        worker = os.fork()
        if worker == 0:                           # the worker: never returns into pytest
            code = 3
            try:
                holder, fence = hold_lock(log_dir)
                calls = []

                def hook(step, path):
                    calls.append(step)
                    if len(calls) - 1 == k:
                        kill_holder(holder, log_dir)
                        os.write(lost_w, b"1")
                        os.read(go_r, 1)          # the watchdog ends this process meanwhile
                with durable.fenced([fence]):
                    res = clean_partition(d, config=config, now_ms=NOW, options=CleanOptions(lock=False, on_step=hook))
                code = 2 if res.error and "no longer holds" in res.error else 4
            finally:
                os._exit(code)
        os.close(lost_w)
        os.close(go_r)
        assert os.read(lost_r, 1) == b"1", f"the worker never reached step {k}"
        at_loss = snapshot(log_dir)
        deadline = time.monotonic() + max(40 * durable.WATCHDOG_INTERVAL_S, 15.0)    # slack for a loaded machine
        done, status = 0, 0
        while not done and time.monotonic() < deadline:
            done, status = os.waitpid(worker, os.WNOHANG)
            time.sleep(durable.WATCHDOG_INTERVAL_S / 5)
        if not done:                              # the watchdog did not end it: let it go on, and fail
            os.write(go_w, b"1")
            _, status = os.waitpid(worker, 0)
        for fd in (lost_r, go_w):
            os.close(fd)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == durable.FENCE_LOST_EXIT, (k, status)
        assert snapshot(log_dir) == at_loss, f"files changed after the lock was lost at step {k} ({steps[k]})"
        shutil.rmtree(log_dir)
