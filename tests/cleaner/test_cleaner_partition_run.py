"""A partition's round as the compact job runs it (``kafkalog.cleaner.partition_run``): a failure is
told truthfully — outcome failed / rolled back, nothing counted that was not swapped in, no
temporary file left — and ``cleaner-offset-checkpoint`` gets each partition's entry right after its
swap, safely when many processes update it at once."""
from __future__ import annotations

import errno
import multiprocessing
import os
import shutil
from pathlib import Path

import pytest

from kafkalog.cleaner.clean_options import CleanOptions
from kafkalog.checkpoint.offset import read_offset_checkpoint, write_offset_checkpoint
from kafkalog.fs.names import CLEANER_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from kafkalog.cleaner import cleaned_segment
from kafkalog.cleaner import cleaner as cleaner_mod
from kafkalog.cleaner import swap
from kafkalog.cleaner.partition_run import CLEANED, ERROR, run_partition
from kafkalog.config import configs_from_mappings

from test_cleaner_crash import NOW, crash_log, grouped_config, state
from cleaner_model import TOPIC, write_partition


def _configs(**topic):
    return configs_from_mappings(topics={TOPIC: {"cleanup.policy": "compact", **topic}})


def _files(d: Path):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def _enospc(*_a, **_k):
    raise OSError(errno.ENOSPC, "No space left on device", "00000000000000000000.index.cleaned")


@pytest.mark.parametrize("where", ["write", "swap-rename"])
def test_a_full_disk_counts_nothing_and_leaves_nothing(tmp_path, monkeypatch, where):
    d = write_partition(tmp_path / "logs", crash_log())
    before, records = _files(d), state(d)
    if where == "write":
        monkeypatch.setattr(swap.durable, "write_file", _enospc)
    else:
        real = os.replace

        def replace(src, dst, *a, **k):
            if str(dst).endswith(".swap"):
                raise OSError(errno.ENOSPC, "No space left on device", str(dst))
            return real(src, dst, *a, **k)
        monkeypatch.setattr(os, "replace", replace)
    row = run_partition(str(d.parent), str(d), configs=_configs(), now_ms=NOW, options=CleanOptions(dry_run=False))
    assert row["status"] == ERROR and row["outcome"] == "rolled back"
    assert "No space left on device" in row["reason"] and "rolled back" in row["reason"]
    assert row["records_read"] == 0 and row["records_superseded"] == 0 and row["bytes_removed"] == 0
    assert row["end_offset"] is None
    monkeypatch.undo()
    assert _files(d) == before and state(d) == records          # no .cleaned/.swap left, data as before
    assert not (d.parent / CLEANER_OFFSET_CHECKPOINT).exists()


def test_a_failure_after_some_groups_counts_only_those(tmp_path, monkeypatch):
    d = write_partition(tmp_path / "logs", crash_log())
    config = grouped_config(d)
    calls = []
    real = cleaner_mod.swap_in

    def swap_twice_then_fail(directory, g, on_step):
        calls.append(g.base_offset)
        if len(calls) == 2:
            raise OSError(errno.EIO, "Input/output error", str(directory / "x"))
        real(directory, g, on_step)
    monkeypatch.setattr(cleaner_mod, "swap_in", swap_twice_then_fail)
    res = cleaner_mod.clean_partition(d, config=config, now_ms=NOW)
    assert len(res.groups) == 2 and res.groups_committed == 1 and res.outcome == "failed"
    assert res.committed_counts() == res.groups[0].counts
    assert not [p for p in d.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]


def test_checkpoint_is_written_after_each_partition(tmp_path):
    logs = tmp_path / "logs"
    d0 = write_partition(logs, crash_log(), partition=0)
    hw = read_offset_checkpoint(logs / REPLICATION_OFFSET_CHECKPOINT)
    d1 = write_partition(logs, crash_log(), partition=1)
    hw.update(read_offset_checkpoint(logs / REPLICATION_OFFSET_CHECKPOINT))
    write_offset_checkpoint(logs / REPLICATION_OFFSET_CHECKPOINT, hw)
    row = run_partition(str(logs), str(d0), configs=_configs(), now_ms=NOW, options=CleanOptions(dry_run=False))
    assert row["status"] == CLEANED and row["outcome"] == "done" and row["passes"] == 1
    assert read_offset_checkpoint(logs / CLEANER_OFFSET_CHECKPOINT) == {(TOPIC, 0): row["end_offset"]}
    row1 = run_partition(str(logs), str(d1), configs=_configs(), now_ms=NOW, options=CleanOptions(dry_run=False))
    assert read_offset_checkpoint(logs / CLEANER_OFFSET_CHECKPOINT) == {(TOPIC, 0): row["end_offset"],
                                                                        (TOPIC, 1): row1["end_offset"]}


def _update_many(log_dir: str, worker: int, n: int) -> None:
    for i in range(n):
        swap.update_cleaner_checkpoint(log_dir, f"t{worker}", i, 1000 * worker + i)


def test_concurrent_checkpoint_updates_keep_every_entry(tmp_path):
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_update_many, args=(str(tmp_path), w, 25)) for w in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    got = read_offset_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT)
    assert got == {(f"t{w}", i): 1000 * w + i for w in range(6) for i in range(25)}
    assert sorted(p.name for p in tmp_path.iterdir()) == [CLEANER_OFFSET_CHECKPOINT]


def test_dry_run_counts_what_would_be_removed(tmp_path):
    d = write_partition(tmp_path / "logs", crash_log())
    before = _files(d)
    row = run_partition(str(d.parent), str(d), configs=_configs(), now_ms=NOW, options=CleanOptions(dry_run=True))
    assert row["status"] == "would-clean" and row["outcome"] == "dry run" and row["records_superseded"] > 0
    assert _files(d) == before and not (d.parent / CLEANER_OFFSET_CHECKPOINT).exists()


def test_a_partition_left_mid_swap_is_refused_not_repaired(tmp_path):
    d = write_partition(tmp_path / "logs", crash_log())
    shutil.copy(d / "00000000000000000000.log", d / "00000000000000000000.log.cleaned")
    row = run_partition(str(d.parent), str(d), configs=_configs(), now_ms=NOW, options=CleanOptions(dry_run=False))
    assert row["status"] == ERROR and row["outcome"] == "failed" and "kafkalog recover" in row["reason"]
    assert (d / "00000000000000000000.log.cleaned").exists()


def test_the_sink_starts_the_disk_write_as_it_goes_and_writes_the_same_bytes(tmp_path, monkeypatch):
    """Every WRITEBACK_BYTES written, the cleaned .log's disk write is started for the range written
    since the last start (contiguous, increasing); the files are those of a round without it."""
    logs_a, logs_b = tmp_path / "a", tmp_path / "b"
    d = write_partition(logs_a, crash_log())
    shutil.copytree(logs_a, logs_b)
    plain = cleaner_mod.clean_partition(logs_b / d.name, config=grouped_config(d), now_ms=NOW)
    calls = []
    real = cleaned_segment.durable.start_writeback

    def record(fd, offset, length):
        calls.append((offset, length))
        return real(fd, offset, length)
    monkeypatch.setattr(cleaned_segment, "WRITEBACK_BYTES", 64)
    monkeypatch.setattr(cleaned_segment.durable, "start_writeback", record)
    res = cleaner_mod.clean_partition(d, config=grouped_config(d), now_ms=NOW)
    assert res.cleaned and plain.cleaned
    assert calls and all(length >= 64 for _, length in calls)
    for prev, cur in zip(calls, calls[1:]):
        assert cur[0] == prev[0] + prev[1] or cur[0] < prev[0]      # contiguous within a sink; a new sink restarts
    assert _files(d) == _files(logs_b / d.name)


def test_a_cleaned_log_that_reads_back_different_is_not_swapped_in(tmp_path, monkeypatch):
    """The swap re-reads the written .log.cleaned (digest of the whole file, every batch's CRC) before
    anything is renamed: a mismatch rolls the round back and the partition is as before."""
    d = write_partition(tmp_path / "logs", crash_log())
    before = _files(d)
    real = cleaned_segment.CleanedSink.digest
    monkeypatch.setattr(cleaned_segment.CleanedSink, "digest", lambda self: real(self) ^ 1)
    res = cleaner_mod.clean_partition(d, config=grouped_config(d), now_ms=NOW)
    assert not res.cleaned and "read back differs from what was written" in res.error
    assert res.groups_committed == 0 and res.rolled_back
    assert _files(d) == before


def test_the_read_back_check_names_the_batch_whose_offsets_go_back(tmp_path):
    from kafkalog.errors import KafkalogError
    from kafkalog.format import record_batch as rb
    from kafkalog.format.record_batch import crc32c_update

    def batch(first):
        return rb.encode_batch([rb.V2Record(first + i, 1000 + i, b"k%d" % i, b"v") for i in range(3)])
    path = tmp_path / "00000000000000000000.log.cleaned"
    good = batch(0) + batch(3) + batch(6)
    path.write_bytes(good)
    swap._verify_cleaned_log(path, len(good), crc32c_update(good, 0))
    bad = batch(0) + batch(3) + batch(5)           # the third batch starts at 5, inside the second's 3..5
    path.write_bytes(bad)
    with pytest.raises(KafkalogError, match="offsets do not increase at batch 2"):
        swap._verify_cleaned_log(path, len(bad), crc32c_update(bad, 0))
    with pytest.raises(KafkalogError, match="read back differs"):
        swap._verify_cleaned_log(path, len(bad) + 1, crc32c_update(bad, 0))
