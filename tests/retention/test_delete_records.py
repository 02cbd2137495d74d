"""``kafkalog delete-records`` (kafkalog.retention.delete_records): kafka-delete-records.sh's JSON, the
broker's DeleteRecords rules offline, and the safety rules (nothing touched on any error, a locked log
dir refused). The broker itself judges the same files in tests/broker/test_retention_parity.py."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kafkalog.checkpoint.leader_epoch import read_leader_epoch_checkpoint, write_leader_epoch_checkpoint
from kafkalog.checkpoint.offset import read_offset_checkpoint
from kafkalog.errors import UsageError
from kafkalog.fs.names import LOG_START_OFFSET_CHECKPOINT
from kafkalog.retention.delete_records import (DeleteRecordsRequest, decide_delete_records, parse_offset_json)
from kafkalog.tools import cli

from log.test_logdir import HOLD_LOCK
from logdirs import make_partition, write_checkpoints
from logdirs import snapshot as _snapshot

DAY = 86_400_000


def snapshot(d):
    """Every file but the .lock (taken, and so created, as a broker takes it)."""
    return {k: v for k, v in _snapshot(d).items() if k != ".lock"}


def _log_dir(tmp_path):
    """t-0: segments at 0, 3, 6 (7 records), HW 7; t-1: segments at 0, 3 (4 records), no HW entry."""
    d = tmp_path / "d"
    make_partition(d, "t", 0, [[DAY] * 3, [DAY] * 3, [DAY]])
    make_partition(d, "t", 1, [[DAY] * 3, [DAY]])
    write_checkpoints(d, high_watermarks={("t", 0): 7}, log_start_offsets={})
    write_leader_epoch_checkpoint(d / "t-0" / "leader-epoch-checkpoint", [(0, 0), (3, 5)])
    return d


def _json(tmp_path, *entries, version=1):
    path = tmp_path / "offsets.json"
    path.write_text(json.dumps({"version": version, "partitions": [
        {"topic": t, "partition": p, "offset": o} for t, p, o in entries]}))
    return str(path)


def test_the_offset_json_is_checked_as_kafka_delete_records_checks_it():
    assert parse_offset_json('{"partitions":[{"topic":"t","partition":0,"offset":5}],"version":1}') == [
        DeleteRecordsRequest("t", 0, 5)]
    for text, words in [('{"partitions":[{"topic":"t","partition":0,"offset":1},{"topic":"t","partition":0,'
                         '"offset":2}],"version":1}', "duplicate topic partitions: t-0"),
                        ('{"partitions":[{"topic":"t","partition":0,"offset":1}],"version":2}', "version"),
                        ('{"partitions":[{"topic":"t","offset":1}]}', "no partition"),
                        ('{"partitions":[{"topic":"t","partition":0,"offset":"1"}]}', "integer"),
                        ('{"partitions":[]}', "names no partition"), ("[1]", "expected"), ("{", "not JSON")]:
        with pytest.raises(UsageError, match=words):
            parse_offset_json(text)


@pytest.mark.parametrize("offset, low, error", [
    (5, 5, None), (-1, 7, None), (1, 2, None),       # -1 is the HW; below the log start nothing moves
    (8, None, "larger than the high watermark 7"), (-2, None, "not valid")])
def test_decide_as_partition_delete_records_on_leader(offset, low, error):
    r = decide_delete_records(DeleteRecordsRequest("t", 0, offset), delete_policy=True, log_start_offset=2,
                              high_watermark=7, first_segment_base=0)
    assert (r.low_watermark, r.error if r.error is None else error in r.error) == (low, None if error is None else True)


def test_compact_only_topic_is_a_policy_violation():
    r = decide_delete_records(DeleteRecordsRequest("t", 0, 1), delete_policy=False, log_start_offset=0,
                              high_watermark=7, first_segment_base=0)
    assert r.error.startswith("PolicyViolation")


def test_cli_advances_the_log_start_offset_and_truncates_epochs(tmp_path, capsys):
    d = _log_dir(tmp_path)
    spec = _json(tmp_path, ("t", 0, 4))
    before = snapshot(d)
    assert cli.main(["delete-records", "--log-dirs", str(d), "--offset-json-file", spec, "--dry-run"]) == 0
    assert snapshot(d) == before
    assert "partition: t-0\tlow_watermark: 4" in capsys.readouterr().out
    assert cli.main(["delete-records", "--log-dirs", str(d), "--offset-json-file", spec]) == 0
    assert read_offset_checkpoint(d / LOG_START_OFFSET_CHECKPOINT) == {("t", 0): 4}
    assert read_leader_epoch_checkpoint(d / "t-0" / "leader-epoch-checkpoint") == [(0, 4), (3, 5)]
    assert sorted(p.name for p in (d / "t-0").glob("*.log")) == [f"{b:020d}.log" for b in (0, 3, 6)]  # retention's job


def test_cli_touches_nothing_when_any_partition_fails(tmp_path, capsys):
    d = _log_dir(tmp_path)
    before = snapshot(d)
    # t-1 has no high watermark entry: 0, so offset 2 is above it (as for a broker); t-0 alone would pass
    assert cli.main(["delete-records", "--log-dirs", str(d), "--offset-json-file",
                     _json(tmp_path, ("t", 0, 4), ("t", 1, 2))]) == 1
    out = capsys.readouterr().out
    assert "partition: t-1\terror: OffsetOutOfRange" in out and "refused, nothing changed" in out
    assert snapshot(d) == before
    # a topic-partition not in the log dir is a usage error (exit 2), named
    assert cli.main(["delete-records", "--log-dirs", str(d), "--offset-json-file",
                     _json(tmp_path, ("t", 0, 4), ("u", 0, 1), ("t", 9, 1))]) == 2
    assert "t-9, u-0" in capsys.readouterr().err
    assert cli.main(["delete-records", "--log-dirs", str(d), "--offset-json-file", _json(tmp_path, ("t", 0, 4)),
                     "--topic-config", "t:cleanup.policy=compact"]) == 1
    assert "PolicyViolation" in capsys.readouterr().out
    assert snapshot(d) == before
    # with --high-watermark-missing=log-end a backup without the HW entry is trimmed to its end
    assert cli.main(["delete-records", "--log-dirs", str(d), "--offset-json-file", _json(tmp_path, ("t", 1, -1)),
                     "--high-watermark-missing", "log-end"]) == 0
    assert read_offset_checkpoint(d / LOG_START_OFFSET_CHECKPOINT) == {("t", 1): 4}


def test_a_log_dir_a_broker_holds_is_refused(tmp_path, capsys):
    d = _log_dir(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(d / ".lock")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = snapshot(d)
        assert cli.main(["delete-records", "--log-dirs", str(d), "--offset-json-file", _json(tmp_path, ("t", 0, 4))]) == 1
        assert "locked" in capsys.readouterr().err
        assert snapshot(d) == before
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
