"""Applying retention on disk as a broker does: .deleted renames, the roll, checkpoints, the delay
(``UnifiedLog.deletableSegments``), through the same per-partition function the Spark job runs."""
from __future__ import annotations

import os

import pytest

from kafkalog.log.local_log import load_partition_path
from kafkalog.config import configs_from_mappings
from kafkalog.retention.deletion import (MAX_TAG, MIN_TAG, PlanOutdatedError, apply_plan, deletion_stamp_ns, renamed_by_run,
                                         run_tag, truncate_epochs_from_start, updated_log_start_offsets)
from kafkalog.checkpoint.leader_epoch import EpochEntry
from kafkalog.retention.policy import LogState, plan_retention
from kafkalog.retention.run import EARLIER_ATTEMPT, finish_log_dir, retain_partition, retention_summary
from kafkalog.log.records_io import read_segment
from kafkalog.checkpoint.leader_epoch import read_leader_epoch_checkpoint, write_leader_epoch_checkpoint
from kafkalog.checkpoint.offset import read_offset_checkpoint
from kafkalog.fs.names import LEADER_EPOCH_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT

from logdirs import make_partition, snapshot, write_checkpoints

DAY = 86_400_000
NOW = 100 * DAY


def old_and_new(tmp_path, *, hw=None):
    """t-0: three old segments (day 1..3) and an active one from today."""
    folder = make_partition(tmp_path, "t", 0, [[1 * DAY, 1 * DAY + 5], [2 * DAY], [3 * DAY], [NOW - 10, NOW - 5]])
    write_checkpoints(tmp_path, high_watermarks={("t", 0): 6 if hw is None else hw}, log_start_offsets={})
    write_leader_epoch_checkpoint(folder / LEADER_EPOCH_CHECKPOINT, [(0, 0), (3, 2), (5, 4)])
    (folder / "00000000000000000002.snapshot").write_bytes(b"")
    return folder


def run(tmp_path, folder, *, execute, retention="retention.ms=604800000", delay=None, now=NOW, **kw):
    configs = configs_from_mappings({}, {"t": dict([retention.split("=")])})
    return retain_partition(folder, log_dir=tmp_path, configs=configs, now_ms=now, execute=execute,
                            delete_delay_ms=delay, **kw)


def test_dry_run_changes_nothing(tmp_path):
    folder = old_and_new(tmp_path)
    before = snapshot(tmp_path)
    out = run(tmp_path, folder, execute=False)
    assert out["status"] == "planned" and out["segments_deleted"] == 3
    assert [d["decision"] for d in out["decisions"]] == ["delete", "delete", "delete", "keep"]
    assert snapshot(tmp_path) == before


def test_execute_renames_then_purges_after_the_delay(tmp_path):
    folder = old_and_new(tmp_path)
    kept_rows = read_segment(folder / "00000000000000000004.log").num_rows
    out = run(tmp_path, folder, execute=True)
    assert out["status"] == "applied" and out["new_log_start_offset"] == 4
    names = sorted(os.listdir(folder))
    assert "00000000000000000000.log.deleted" in names and "00000000000000000002.snapshot.deleted" in names
    assert not any(n.endswith((".log", ".index", ".timeindex")) and not n.startswith("00000000000000000004")
                   for n in names)
    assert all(os.stat(folder / n).st_mtime_ns // 1_000_000 == NOW for n in names if n.endswith(".deleted"))
    assert read_segment(folder / "00000000000000000004.log").num_rows == kept_rows
    # leader epochs truncated from the start at the new log start offset
    # leader epochs truncated from the start at the new log start offset 4: (5, 4) is the last removed
    assert read_leader_epoch_checkpoint(folder / LEADER_EPOCH_CHECKPOINT) == [EpochEntry(5, 4)]
    assert finish_log_dir(tmp_path, [out])["changed"] == []   # log start == first base: no entry needed
    # a second run at the same time changes nothing, and claims nothing the first one did
    before = snapshot(tmp_path)
    again = run(tmp_path, folder, execute=True, tag=run_tag("another run"))
    assert again["segments_deleted"] == 0 and again["purged"] == [] and snapshot(tmp_path) == before
    assert again["segments_deleted_earlier"] == 0
    # one minute later (file.delete.delay.ms) the .deleted files go
    later = run(tmp_path, folder, execute=True, now=NOW + 60_000)
    assert len(later["purged"]) == 10 and later["bytes_purged"] > 0     # 3 segments x 3 files + the snapshot
    assert not any(n.endswith(".deleted") for n in os.listdir(folder))


def test_leader_epoch_truncation_rule():
    entries = [EpochEntry(0, 0), EpochEntry(3, 2), EpochEntry(5, 6)]
    assert truncate_epochs_from_start(entries, 4) == [EpochEntry(3, 4), EpochEntry(5, 6)]
    assert truncate_epochs_from_start(entries, 0) == [EpochEntry(0, 0), EpochEntry(3, 2), EpochEntry(5, 6)]
    assert truncate_epochs_from_start(entries, 9) == [EpochEntry(5, 9)]


def test_delay_zero_removes_at_once_and_epochs_are_truncated(tmp_path):
    folder = old_and_new(tmp_path)
    out = run(tmp_path, folder, execute=True, delay=0)
    assert len(out["purged"]) == len(out["renamed"]) == 10
    assert not any(n.endswith(".deleted") for n in os.listdir(folder))
    assert sorted(os.listdir(folder)) == ["00000000000000000004.index", "00000000000000000004.log",
                                          "00000000000000000004.timeindex", "leader-epoch-checkpoint"]


def test_roll_then_delete_everything(tmp_path):
    folder = make_partition(tmp_path, "t", 0, [[DAY], [2 * DAY, 2 * DAY]])
    write_checkpoints(tmp_path, high_watermarks={("t", 0): 3})
    out = run(tmp_path, folder, execute=True, delay=0)
    assert out["roll_at"] == 3 and out["new_log_start_offset"] == 3 and out["segments_deleted"] == 2
    assert sorted(os.listdir(folder)) == ["00000000000000000003.index", "00000000000000000003.log",
                                          "00000000000000000003.timeindex"]
    assert all(os.path.getsize(folder / n) == 0 for n in os.listdir(folder))
    state = load_partition_path(folder)
    assert (state.log_start_offset, state.log_end_offset) == (3, 3)
    assert run(tmp_path, folder, execute=True, delay=0)["segments_deleted"] == 0   # the empty active stays


def test_log_start_offset_checkpoint_keeps_only_what_kafka_writes(tmp_path):
    current = {("a", 0): 10, ("b", 1): 7}
    assert updated_log_start_offsets(current, {("a", 0): (12, 12), ("c", 2): (15, 10)}) == {("b", 1): 7, ("c", 2): 15}


def test_log_start_inside_a_segment_is_kept_in_the_checkpoint(tmp_path):
    folder = make_partition(tmp_path, "t", 0, [[NOW, NOW], [NOW, NOW], [NOW]])
    write_checkpoints(tmp_path, high_watermarks={("t", 0): 5}, log_start_offsets={("t", 0): 3, ("u", 1): 9})
    out = run(tmp_path, folder, execute=True)
    assert out["segments_deleted"] == 1 and out["new_log_start_offset"] == 3
    assert finish_log_dir(tmp_path, [out])["changed"] == []
    assert read_offset_checkpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT) == {
        ("t", 0): 3, ("u", 1): 9}


def test_a_partition_that_changed_since_planning_is_refused(tmp_path):
    folder = old_and_new(tmp_path)
    state = load_partition_path(folder)
    log = LogState(tuple(state.segments),
                   state.log_start_offset, state.log_end_offset, 6)
    plan = plan_retention(log, configs_from_mappings().for_topic("t"), NOW)
    with open(folder / "00000000000000000000.log", "ab") as f:
        f.write(b"\0")
    before = snapshot(tmp_path)
    with pytest.raises(PlanOutdatedError, match="the plan saw"):
        apply_plan(state, plan, now_ms=NOW)
    assert snapshot(tmp_path) == before


def test_missing_high_watermark_is_explicit(tmp_path):
    folder = make_partition(tmp_path, "t", 0, [[DAY], [2 * DAY], [NOW]])
    assert run(tmp_path, folder, execute=False)["segments_deleted"] == 0
    out = run(tmp_path, folder, execute=False, hw_missing="log-end")
    assert out["segments_deleted"] == 2 and out["high_watermark_source"] == "missing:log-end"


def test_errors_are_reported_not_raised(tmp_path):
    (tmp_path / "garbage").mkdir()
    out = run(tmp_path, tmp_path / "garbage", execute=False)
    assert out["status"] == "error" and "garbage" in out["message"]
    folder = make_partition(tmp_path, "t", 0, [[DAY], [2 * DAY]])
    (folder / "00000000000000000000.log").write_bytes(b"\0" * 30)      # not Kafka batches
    # a broker never reads a rolled segment's bytes to expire it (time index, then mtime): neither do we
    out = run(tmp_path, folder, execute=True, hw_missing="log-end")
    assert (out["status"], out["segments_deleted"], out["roll_at"]) == ("applied", 2, 2)
    (folder / "00000000000000000002.log").write_bytes(b"\xff" * 30)    # the active segment is read: reported
    out = run(tmp_path, folder, execute=False)
    assert out["status"] == "planned" and any("00000000000000000002.log" in p for p in out["problems"])


# --- found in review: what a broker never does, or would undo -------------------------------------

def test_the_kraft_metadata_log_is_never_retained(tmp_path):
    folder = make_partition(tmp_path, "__cluster_metadata", 0, [[DAY], [2 * DAY], [3 * DAY]])
    (folder / "quorum-state").write_text("{}")
    before = snapshot(tmp_path)
    configs = configs_from_mappings()
    out = retain_partition(folder, log_dir=tmp_path, configs=configs, now_ms=NOW, execute=True,
                           hw_missing="log-end")
    assert out["status"] == "skipped" and "KRaft metadata log" in out["message"]
    assert snapshot(tmp_path) == before
    from kafkalog.catalog import catalog_table
    from kafkalog.retention.catalog_plan import plan_catalog_table
    assert plan_catalog_table(catalog_table([load_partition_path(folder)]), configs, NOW).num_rows == 0


def test_a_pending_compaction_swap_is_refused(tmp_path):
    folder = old_and_new(tmp_path)
    (folder / "00000000000000000000.log.swap").write_bytes((folder / "00000000000000000000.log").read_bytes())
    before = snapshot(tmp_path)
    out = run(tmp_path, folder, execute=True)
    assert out["status"] == "error" and "kafkalog recover" in out["message"]
    assert snapshot(tmp_path) == before


def test_a_malformed_leader_epoch_file_stops_before_any_rename(tmp_path):
    folder = old_and_new(tmp_path)
    (folder / LEADER_EPOCH_CHECKPOINT).write_text("0\n1\n3 x\n")
    before = snapshot(tmp_path)
    out = run(tmp_path, folder, execute=True)
    assert out["status"] == "error" and "leader-epoch-checkpoint" in out["message"]
    assert out["renamed"] == [] and snapshot(tmp_path) == before


def test_no_roll_that_would_lose_producer_state(tmp_path):
    from kafkalog.format import record_batch as rb
    from kafkalog.fs.names import format_segment_file_name
    folder = tmp_path / "t-0"
    folder.mkdir()
    for base, ts in ((0, DAY), (2, 2 * DAY)):          # idempotent batches, no snapshot at the log end
        batch = rb.encode_batch([rb.V2Record(base + i, ts, b"k", b"v", []) for i in range(2)], base_offset=base,
                                producer_id=7, producer_epoch=0, base_sequence=base)
        log = folder / format_segment_file_name(base, "log")
        log.write_bytes(batch)
        os.utime(log, (ts / 1000, ts / 1000))           # no .timeindex: largestTimestamp is the mtime
    write_checkpoints(tmp_path, high_watermarks={("t", 0): 4})
    out = run(tmp_path, folder, execute=True, delay=0)
    assert [d["decision"] for d in out["decisions"]] == ["delete", "keep"]
    # Kafka rolls at 4 and deletes both (log start 4); we keep the active segment, and say why
    assert out["roll_at"] is None and out["new_log_start_offset"] == 2
    assert out["decisions"][1]["rule"] == "no-producer-snapshot"
    assert "kept where Kafka would roll and delete it" in out["decisions"][1]["reason"]
    assert "producer state" in out["decisions"][1]["reason"]
    (folder / "00000000000000000004.snapshot").write_bytes(b"")      # a clean shutdown wrote it
    out = run(tmp_path, folder, execute=True, delay=0)
    assert out["roll_at"] == 4 and out["segments_deleted"] == 1


@pytest.mark.parametrize("lost_at", ["00000000000000000002.log", "00000000000000000002.index",
                                     "00000000000000000002.snapshot"])
def test_a_retried_task_reports_what_its_lost_attempt_deleted(tmp_path, monkeypatch, lost_at):
    """Spark reruns a task whose executor was lost after it had renamed part of its plan. The retry
    finishes the plan and reports the segments the first attempt renamed, so the run's report and the
    log-start-offset checkpoint come out as from one uninterrupted attempt — also when it was lost
    between a segment's files (those it left live are renamed too)."""
    now = NOW + 123            # a stamp that float seconds would not keep to the millisecond
    tag = run_tag("the run")
    whole = old_and_new(tmp_path / "whole")
    folder = old_and_new(tmp_path / "retried")
    for log_dir in (tmp_path / "whole", tmp_path / "retried"):     # a log start inside the first segment
        write_checkpoints(log_dir, log_start_offsets={("t", 0): 1, ("u", 0): 7})
    undisturbed = run(tmp_path / "whole", whole, execute=True, now=now, tag=tag)
    finish_log_dir(tmp_path / "whole", [undisturbed])
    real_replace = os.replace

    def lost_at_second_segment(src, dst):
        if os.path.basename(src) == lost_at:
            raise OSError(5, "Input/output error", src)          # the executor goes away here
        real_replace(src, dst)

    monkeypatch.setattr("kafkalog.retention.deletion.os.replace", lost_at_second_segment)
    first = run(tmp_path / "retried", folder, execute=True, now=now, tag=tag)
    assert first["status"] == "error" and "00000000000000000000.log.deleted" in first["renamed"]   # a lost report
    lost_inside = lost_at != "00000000000000000002.log"
    monkeypatch.setattr("kafkalog.retention.deletion.os.replace", real_replace)
    assert run(tmp_path / "retried", folder, execute=False, now=now, tag=tag)["segments_deleted_earlier"] == 0
    retry = run(tmp_path / "retried", folder, execute=True, now=now, tag=tag)
    assert retry["status"] == "applied"
    assert (retry["segments_deleted"], retry["segments_deleted_earlier"]) == ((1, 2) if lost_inside else (2, 1))
    assert retry["bytes_freed"] + retry["bytes_freed_earlier"] == undisturbed["bytes_freed"]
    rules = [(d["base_offset"], d["decision"], d["rule"]) for d in retry["decisions"]]
    assert rules[0] == (0, "delete", EARLIER_ATTEMPT)
    assert (rules[1][2] == EARLIER_ATTEMPT) == lost_inside
    assert sorted(b for b, decision, _ in rules if decision == "delete") == [0, 2, 3]
    assert sorted(b for b, decision, _ in rules if decision == "delete") == [
        d["base_offset"] for d in undisturbed["decisions"] if d["decision"] == "delete"]
    assert retry["new_log_start_offset"] == undisturbed["new_log_start_offset"] == 4
    assert sorted(os.listdir(folder)) == sorted(os.listdir(whole))
    assert finish_log_dir(tmp_path / "retried", [retry])["changed"] == ["t-0"]
    ckpt = LOG_START_OFFSET_CHECKPOINT
    assert read_offset_checkpoint(tmp_path / "retried" / ckpt) == {("u", 0): 7}
    assert (tmp_path / "retried" / ckpt).read_bytes() == (tmp_path / "whole" / ckpt).read_bytes()
    totals = retention_summary([retry])
    assert totals["segments_deleted"] + totals["segments_deleted_earlier"] == 3
    assert totals["topics"]["t"]["bytes_freed_earlier"] == retry["bytes_freed_earlier"]


def test_a_retry_after_a_whole_attempt_still_rewrites_the_checkpoint(tmp_path):
    folder = old_and_new(tmp_path)
    write_checkpoints(tmp_path, log_start_offsets={("t", 0): 1})
    tag = run_tag("the run")
    run(tmp_path, folder, execute=True, tag=tag)         # applied in full; its result never reached the driver
    retry = run(tmp_path, folder, execute=True, tag=tag)
    assert (retry["segments_deleted"], retry["segments_deleted_earlier"]) == (0, 3)
    assert finish_log_dir(tmp_path, [retry])["changed"] == ["t-0"]
    assert read_offset_checkpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT) == {}


def test_only_a_retry_of_the_same_run_claims_its_renames(tmp_path):
    folder = old_and_new(tmp_path)
    run(tmp_path, folder, execute=True, tag=run_tag("run 1"))
    for other in (dict(tag=run_tag("run 2")), dict(tag=None), dict(tag=run_tag("run 1"), now=NOW + 1)):
        out = run(tmp_path, folder, execute=True, **{"now": NOW, **other})
        assert out["segments_deleted_earlier"] == 0, other
        assert all(d["rule"] != EARLIER_ATTEMPT for d in out["decisions"])
    assert run(tmp_path, folder, execute=True, tag=run_tag("run 1"))["segments_deleted_earlier"] == 3


def test_no_run_claims_a_whole_millisecond_stamp(tmp_path):
    """Kafka and untagged calls stamp whole milliseconds; no tag, cut to 100 ns or 1 µs, looks like one."""
    tags = {run_tag(f"run {i}") for i in range(20_000)}
    assert min(tags) >= MIN_TAG and max(tags) <= MAX_TAG
    now = NOW + 7
    assert not any(renamed_by_run(now * 1_000_000, now, tag) for tag in tags)
    with pytest.raises(ValueError):
        deletion_stamp_ns(now, 7)
    folder = old_and_new(tmp_path)          # a broker's earlier deletion, at exactly the run's now
    deleted = folder / "00000000000000000000.log"
    deleted.rename(folder / "00000000000000000000.log.deleted")
    os.utime(folder / "00000000000000000000.log.deleted", ns=(now * 1_000_000,) * 2)
    out = run(tmp_path, folder, execute=True, now=now, tag=run_tag("run 1"))
    assert out["segments_deleted_earlier"] == 0


def test_the_stamp_a_retry_recognises(tmp_path):
    now, tag = 1_700_000_000_123, run_tag("run 1")
    stamp = now * 1_000_000 + tag
    assert 0 < tag < 1_000_000 and tag != run_tag("run 2")
    assert renamed_by_run(stamp, now, tag)
    assert not renamed_by_run(stamp, now, run_tag("run 2"))
    assert not renamed_by_run(stamp + 1_000_000, now, tag) and not renamed_by_run(stamp - 1_000_000, now, tag)
    # file systems that keep 100 ns or 1 µs keep most of the tag; one that keeps seconds loses it
    assert renamed_by_run(stamp - stamp % 100, now, tag) and renamed_by_run(stamp - stamp % 1_000, now, tag)
    assert not renamed_by_run(stamp - stamp % 1_000_000_000, now, tag)
    # what this file system keeps: a stamp round-trips, and purge_due still reads the millisecond
    f = tmp_path / "x.deleted"
    f.write_bytes(b"")
    os.utime(f, ns=(stamp, stamp))
    assert renamed_by_run(f.stat().st_mtime_ns, now, tag) and f.stat().st_mtime_ns // 1_000_000 == now
