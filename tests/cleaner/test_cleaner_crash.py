"""The write-back is crash safe: a failure injected after every step of the swap-in (``LocalLog.replaceSegments``), then
``recover`` (a broker's startup, ``LogLoader.load``), leaves every partition readable with no record lost; a log
dir held by a live broker is refused; the ``recover`` subcommand."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog.cleaner.clean_options import CleanOptions
from kafkalog.checkpoint.offset import read_offset_checkpoint
from kafkalog.fs.names import CLEANER_OFFSET_CHECKPOINT
from kafkalog.cleaner import clean_log_dir, clean_partition, recover_log_dirs
from kafkalog.cleaner.swap import STEP_CHECKPOINT, STEP_INSTALL
from kafkalog.tools.cli import main
from kafkalog.config import configs_from_mappings
from kafkalog.errors import LogDirLockedError
from kafkalog.format import control_record as cr
from kafkalog.log.records_io import read_segment

from cleaner_model import (DAY, T0, TOPIC, data, flatten, log_config, marker, read_partition, records_of,
                           write_partition)

NOW = T0 + 10 * DAY


class Crash(RuntimeError):
    pass


def crash_log():
    k = lambda i: b"k%d" % i  # noqa: E731
    return [
        [data(0, [(k(1), b"a" * 40), (k(2), b"b" * 40)]), data(2, [(k(3), b"c" * 40)], pid=4, txn=True),
         marker(3, 4, cr.ABORT)],
        [data(4, [(k(1), b"d" * 40), (k(5), None)]), data(6, [(k(2), b"e" * 40)])],
        [data(7, [(k(1), b"f" * 40)]), data(8, [(k(6), b"g" * 40), (None, b"x")])],
        [data(10, [(k(2), b"h" * 40)])],
        [data(11, [(k(7), b"active")])],
    ]


def grouped_config(d: Path):
    sizes = sorted((p.stat().st_size for p in d.glob("*.log")), reverse=True)
    return log_config(segment_bytes=sizes[0] + sizes[1])     # several groups


def state(d: Path):
    return records_of(flatten(read_partition(d)))


def clean_a_copy(template: Path, log_dir: Path, config):
    """Clean a copy of the template's log dir, uninterrupted: (result, steps taken, records after)."""
    shutil.copytree(template.parent, log_dir)
    steps = []
    res = clean_partition(log_dir / template.name, config=config, now_ms=NOW,
                          options=CleanOptions(on_step=lambda step, path: steps.append(step)))
    return res, steps, state(log_dir / template.name)


def test_crash_after_every_step_then_recover(tmp_path):
    template = write_partition(tmp_path / "template", crash_log())
    config = grouped_config(template)
    before = state(template)

    res, steps, after = clean_a_copy(template, tmp_path / "after", config)
    assert res.cleaned and len(res.groups) >= 2, res
    assert after != before and len(steps) > 10
    seen = set()
    for i, step in enumerate(steps):
        run = tmp_path / f"crash{i}"
        shutil.copytree(template.parent, run)
        calls = []

        def hook(s, path, i=i):
            calls.append(s)
            if len(calls) - 1 == i:
                raise Crash(f"killed after {s} ({path.name})")
        with pytest.raises(Crash):
            clean_partition(run / template.name, config=config, now_ms=NOW, options=CleanOptions(on_step=hook))
        reports = recover_log_dirs([run])
        assert all(r.error is None for r in reports)
        d = run / template.name
        assert not [p for p in d.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]
        for log in d.glob("*.log"):
            read_segment(log)                                   # our reader agrees it is whole
        got = state(d)                                          # kafka-python: CRC ok, readable
        offsets = [o for o, _k, _v in got]
        assert offsets == sorted(set(offsets))
        # Each group is swapped in on its own (as Kafka does), and a crash inside a swap's
        # "rename old segments to .deleted" step keeps old segments whose base lies past the new
        # segment's next offset (Kafka's recovery does the same). So a crashed round leaves a mix of
        # cleaned and original records: never fewer than the round keeps, never anything new.
        assert set(after) <= set(got) <= set(before), (i, step)
        if i == 0:
            assert got == before, "a crash before the first swap changes nothing"
        if i > max(j for j, name in enumerate(steps) if name == STEP_INSTALL):
            assert got == after, "once the last swap is installed the round is done"
        seen.add("before" if got == before else "after" if got == after else "mixed")
        checkpoint = read_offset_checkpoint(run / CLEANER_OFFSET_CHECKPOINT).get((TOPIC, 0))
        assert checkpoint is None or step == STEP_CHECKPOINT
        # the next round finishes the job
        if got != after:
            again = clean_partition(d, config=config, now_ms=NOW)
            assert again.cleaned and state(d) == after, (i, step)
    assert seen == {"before", "after", "mixed"}


LOCK_HOLDER = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("locked", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def broker_lock():
    procs = []

    def hold(log_dir: Path):
        proc = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(log_dir / ".lock")], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "locked"
        procs.append(proc)
        return proc
    yield hold
    for proc in procs:
        if proc.poll() is None:
            proc.stdin.close()
            proc.wait(timeout=10)


def test_log_dir_locked_by_a_live_broker_is_refused(tmp_path, broker_lock, capsys):
    d = write_partition(tmp_path, crash_log())
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    holder = broker_lock(tmp_path)
    with pytest.raises(LogDirLockedError):
        clean_partition(d, config=log_config(), now_ms=NOW)
    with pytest.raises(LogDirLockedError):
        clean_log_dir(tmp_path, configs=configs_from_mappings(topics={TOPIC: {"cleanup.policy": "compact"}}),
                      now_ms=NOW)
    with pytest.raises(LogDirLockedError):
        recover_log_dirs([tmp_path])
    assert main(["recover", "--log-dirs", str(tmp_path)]) == 1
    assert "locked" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before
    holder.stdin.close()
    holder.wait(timeout=10)
    assert clean_partition(d, config=log_config(), now_ms=NOW).cleaned


def test_clean_log_dir_cleans_every_compacted_partition(tmp_path):
    write_partition(tmp_path, crash_log(), partition=0)
    (tmp_path / "other-0").mkdir()
    configs = configs_from_mappings(topics={TOPIC: {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"}})
    results = clean_log_dir(tmp_path, configs=configs, now_ms=NOW)
    assert [(r.topic, r.partition, r.cleaned) for r in results] == [(TOPIC, 0, True)]
    assert results[0].audit()["records_superseded"] > 0


def test_recover_subcommand_completes_an_interrupted_swap(tmp_path, capsys):
    d = write_partition(tmp_path, crash_log())
    expected_dir = tmp_path.parent / (tmp_path.name + "-expected")
    shutil.copytree(tmp_path, expected_dir)
    assert clean_partition(expected_dir / d.name, config=log_config(), now_ms=NOW).cleaned

    def hook(step, path):
        if step == "old-renamed-to-deleted":      # every file is .swap, one old file is .deleted
            raise Crash("killed")
    with pytest.raises(Crash):
        clean_partition(d, config=log_config(), now_ms=NOW, options=CleanOptions(on_step=hook))
    assert main(["recover", "--log-dirs", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{d.name}: completed swap of offsets [0," in out
    assert state(d) == state(expected_dir / d.name)
    assert main(["recover", "--log-dirs", str(tmp_path)]) == 0
    assert "nothing to recover" in capsys.readouterr().out
    assert main(["recover"]) == 2


KILL_AT_STEP = r"""
import os, signal, sys
from kafkalog.cleaner import CleanOptions, clean_partition
from kafkalog.config import configs_from_mappings
partition_dir, segment_bytes, now, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
topic = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0", "delete.retention.ms": "86400000",
         "segment.bytes": segment_bytes}
config = configs_from_mappings(topics={"%s": topic}).for_topic("%s")
calls = []
def hook(step, path):
    calls.append(step)
    if len(calls) - 1 == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)          # no finally, no cleanup: a real crash
clean_partition(partition_dir, config=config, now_ms=now, options=CleanOptions(on_step=hook))
""" % (TOPIC, TOPIC)


def test_process_killed_at_every_step_then_recover(tmp_path):
    """The same as above with the process SIGKILLed (no exception handlers, no cleanup), at the steps
    where the on-disk state changes: each step's kind once."""
    template = write_partition(tmp_path / "template", crash_log())
    config = grouped_config(template)
    before = state(template)
    _res, steps, after = clean_a_copy(template, tmp_path / "probe", config)
    first_of_each = sorted({s: i for i, s in reversed(list(enumerate(steps)))}.values())
    assert len(first_of_each) >= 5
    for i in first_of_each:
        run = tmp_path / f"kill{i}"
        shutil.copytree(template.parent, run)
        proc = subprocess.run([sys.executable, "-c", KILL_AT_STEP, str(run / template.name),
                               str(config.segment_bytes), str(NOW), str(i)], capture_output=True, text=True)
        assert proc.returncode == -9, proc.stderr[-2000:]
        assert all(r.error is None for r in recover_log_dirs([run]))
        d = run / template.name
        assert not [p for p in d.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]
        got = state(d)
        assert set(after) <= set(got) <= set(before), (i, steps[i])
        again = clean_partition(d, config=config, now_ms=NOW)
        assert state(d) == after, (i, steps[i], again)


def test_no_round_on_top_of_an_interrupted_swap(tmp_path):
    """Found in review: cleaning again before recover would let a broker's startup delete the new
    round's segments (they lie in the stale .swap's offset range). A pending swap refuses the round."""
    template = write_partition(tmp_path / "template", crash_log())
    config = grouped_config(template)
    steps = []
    probe = tmp_path / "probe"
    shutil.copytree(template.parent, probe)
    clean_partition(probe / template.name, config=config, now_ms=NOW,
                    options=CleanOptions(on_step=lambda s, p: steps.append(s)))
    after = state(probe / template.name)
    crash_at = next(i for i, s in enumerate(steps) if s == STEP_INSTALL)       # mid-swap
    run = tmp_path / "run"
    shutil.copytree(template.parent, run)
    calls = []

    def hook(s, path):
        calls.append(s)
        if len(calls) - 1 == crash_at:
            raise Crash(s)
    with pytest.raises(Crash):
        clean_partition(run / template.name, config=config, now_ms=NOW, options=CleanOptions(on_step=hook))
    listing = sorted(p.name for p in (run / template.name).iterdir())
    again = clean_partition(run / template.name, config=config, now_ms=NOW)
    assert not again.cleaned and "kafkalog recover" in again.error
    assert sorted(p.name for p in (run / template.name).iterdir()) == listing        # untouched
    recover_log_dirs([run])
    assert clean_partition(run / template.name, config=config, now_ms=NOW).error is None
    assert state(run / template.name) == after


def test_the_checkpoint_can_be_left_to_the_caller(tmp_path):
    template = write_partition(tmp_path / "logs", crash_log())
    res = clean_partition(template, config=grouped_config(template), now_ms=NOW,
                          options=CleanOptions(update_checkpoint=False))
    before = read_offset_checkpoint(template.parent / CLEANER_OFFSET_CHECKPOINT)
    assert res.cleaned and (TOPIC, 0) not in before
    assert clean_partition(template, config=grouped_config(template), now_ms=NOW).cleaned    # same range again
    assert read_offset_checkpoint(template.parent / CLEANER_OFFSET_CHECKPOINT)[(TOPIC, 0)] == res.end_offset


def killed_in_child(step: int, work) -> None:
    """Fork; the child runs ``work(hook)`` and SIGKILLs itself at its ``step``-th swap-in step (no
    handler, no clean-up: a real crash); the parent waits for it."""
    pid = os.fork()
    if pid == 0:                                  # the child: never returns into pytest
        try:
            calls = []

            def hook(s, path):
                calls.append(s)
                if len(calls) - 1 == step:
                    os.kill(os.getpid(), signal.SIGKILL)
            work(hook)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status


def test_what_a_rerun_after_a_kill_at_any_step_guarantees(tmp_path):
    """The README's promise for compaction (issue 36, D4), exactly: killed at ANY step of a round of
    several groups, then ``kafkalog recover`` and a rerun, the partition holds the uninterrupted round's
    records at the same offsets (control markers included), the same log end offset and
    cleaner-offset-checkpoint, every batch passes kafka-python's CRC check with offsets increasing,
    every index is valid, no temporary file is left. Not promised: the same bytes — the rerun
    regroups segments (cleaned ones are smaller) and, when the killed round's groups were all swapped
    in, is a second pass that may stamp a delete horizon on a marker (Kafka's cleaner does both)."""
    from kafkalog.log.reindex import reindex_partition

    template = write_partition(tmp_path / "template", crash_log())
    config = grouped_config(template)
    _res, steps, after = clean_a_copy(template, tmp_path / "probe", config)
    reference = tmp_path / "probe" / template.name
    expected_checkpoint = read_offset_checkpoint(reference.parent / CLEANER_OFFSET_CHECKPOINT)
    expected_end = max(b.last for b in flatten(read_partition(reference))) + 1
    assert len(steps) > 30 and "deleted-removed" in steps
    # the first step of each kind in each group, and the last step (seconds, not the 43 steps' half minute)
    kill_points = [k for k in range(len(steps)) if k == 0 or steps[k] != steps[k - 1]] + [len(steps) - 1]
    assert len(kill_points) >= 12
    differ = 0
    for k in kill_points:
        run = tmp_path / f"kill{k}"
        shutil.copytree(template.parent, run)
        d = run / template.name
        killed_in_child(k, lambda hook: clean_partition(d, config=config, now_ms=NOW,
                                                        options=CleanOptions(on_step=hook)))
        assert all(r.error is None for r in recover_log_dirs([run]))
        again = clean_partition(d, config=config, now_ms=NOW)
        assert again.error is None and (again.cleaned or steps[k] == "checkpoint-written"), (k, again.error)
        assert state(d) == after, (k, steps[k])                          # records, offsets (read_partition: CRCs)
        batches = flatten(read_partition(d))
        assert all(a.last < b.base for a, b in zip(batches, batches[1:])), k
        assert max(b.last for b in batches) + 1 == expected_end, k
        assert read_offset_checkpoint(run / CLEANER_OFFSET_CHECKPOINT) == expected_checkpoint, k
        # Kafka's cleaner indexes an aborted transaction whose data it removed in this pass while it
        # keeps the marker (CleanedTransactionMetadata.onControlBatchRead); the verifier judges that
        # entry against a recovery rebuild, which omits it. The uninterrupted round gets that verdict too.
        bad = [(r["file"], r["class"]) for r in reindex_partition(d, verify_only=True).rows
               if r["class"] not in ("identical", "valid", "skipped")
               and not (r["kind"] == "txnindex" and "ends a transaction with no data" in r["reason"])]
        assert bad == [], (k, bad)
        assert not [p for p in d.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted", ".tmp"))], k
        differ += {p.name: p.read_bytes() for p in d.iterdir()} != \
            {p.name: p.read_bytes() for p in reference.iterdir()}
        shutil.rmtree(run)
    assert differ > 0          # why the promise is not "the same bytes": some reruns group differently
