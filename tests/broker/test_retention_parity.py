"""Issue 30, group 5: retention against the broker on the same bytes. The broker writes rolled
segments with explicit timestamps and stops; we copy its log dir (mtimes kept); it starts again and
deletes under retention.ms, retention.bytes (at the exact boundary), DeleteRecords (an offset inside a
segment, and -1 for the high watermark) and a segment whose .timeindex is gone (its .log mtime decides).
Our dry-run plan on the copy must name the same segments and log start offset; applied (for DeleteRecords:
``kafkalog delete-records`` with kafka-delete-records.sh's JSON, then retention) it must leave the same
segment files, log-start-offset-checkpoint entries and leader-epoch-checkpoint files.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from kafkalog.config import load_configs
from kafkalog.retention.run import APPLIED, PLANNED, finish_log_dir, retain_partition
from kafkalog.testing import broker_client as bc
from kafkalog.testing.broker import (OFFSET_CHECKPOINT_FILES, KafkaBroker,
                                     stray_folders)
from kafkalog.tools import cli
from broker_harness import start_or_unavailable

DAY = 86_400_000
SEGMENT_MS = 60_000
TOPICS = {"r-ms": 1, "r-bytes": 1, "r-dr": 2, "r-noti": 1}


def _records(stamps, per_segment: int = 24, partition: int = 0):
    return [bc.Record(b"k%d" % (i % 7), b"value-%04d-" % i + b"x" * (40 + i % 30), headers=[("n", b"%d" % i)],
                      timestamp_ms=ts + i, partition=partition)
            for ts in stamps for i in range(per_segment)]


def _files(folder: Path) -> list:
    """The segment files and producer snapshots of a partition folder."""
    return sorted(p.name for p in folder.iterdir() if re.fullmatch(r"\d{20}\.(log|index|timeindex|txnindex|snapshot)",
                                                                   p.name))


def _bases(folder: Path) -> list:
    return sorted(int(p.name[:20]) for p in folder.glob("*.log"))


def _epochs(folder: Path) -> str:
    path = folder / "leader-epoch-checkpoint"
    return path.read_text() if path.exists() else ""


@pytest.fixture(scope="module")
def judged(kafka_jars, tmp_path_factory):
    """The broker's retention, done: {"broker", "copy" (our log dir, as the broker's was before),
    "before" {tp: bases}, "now" (ms, when the broker applied the configs), "low" {tp: DeleteRecords' answer},
    "ranges" {tp: (log start, high watermark)}, "configs" (ours, equal to the topics')}."""
    root = tmp_path_factory.mktemp("retention-parity")
    broker = KafkaBroker(root / "broker")
    start_or_unavailable(broker)
    now = int(time.time() * 1000)
    keep = {"cleanup.policy": "delete", "retention.ms": -1, "retention.bytes": -1, "segment.ms": SEGMENT_MS}
    for topic, partitions in TOPICS.items():
        bc.create_topic(broker, topic, partitions=partitions, configs=keep)
    # four segments each (the last, the active one, holds only the sentinel batch that rolled the third)
    bc.produce(broker, "r-ms", _records([now - 10 * DAY, now - 9 * DAY, now - DAY]) + _records([now], 1), flush_every=8)
    t0 = now - 3_600_000
    bc.produce(broker, "r-bytes", _records([t0 + k * 2 * SEGMENT_MS for k in range(4)]) +
               _records([t0 + 9 * SEGMENT_MS], 1), flush_every=8)
    for p in (0, 1):
        bc.produce(broker, "r-dr", _records([t0 + k * 2 * SEGMENT_MS for k in range(3)], partition=p) +
                   _records([t0 + 9 * SEGMENT_MS], 1, partition=p), flush_every=8)
    bc.produce(broker, "r-noti", _records([now - 3 * DAY, now - 2 * DAY, now - DAY]) + _records([now], 1), flush_every=8)
    broker.stop()

    # r-noti: the first two segments lose their .timeindex; the first is old by its mtime (records 3 days
    # old), the second new by its mtime (records 2 days old): with retention.ms 12 h only the first goes.
    noti = broker.partition_dir("r-noti")
    bases = _bases(noti)
    for b in bases[:2]:
        (noti / f"{b:020d}.timeindex").unlink()
    os.utime(noti / f"{bases[0]:020d}.log", ns=((now - 10 * DAY) * 10**6,) * 2)
    os.utime(noti / f"{bases[1]:020d}.log", ns=(now * 10**6,) * 2)

    copy = root / "ours"
    copy.mkdir()
    before = {}
    for topic, partitions in TOPICS.items():
        for p in range(partitions):
            shutil.copytree(broker.partition_dir(topic, p), copy / f"{topic}-{p}", copy_function=shutil.copy2)
            before[(topic, p)] = _bases(broker.partition_dir(topic, p))
            assert len(before[(topic, p)]) == (5 if topic == "r-bytes" else 4), (topic, before[(topic, p)])
    for name in OFFSET_CHECKPOINT_FILES + ("meta.properties",):
        if (broker.data_dir / name).exists():
            shutil.copy2(broker.data_dir / name, copy / name)

    broker.start()
    # The restart made the broker leader under a new epoch, written at the log end into each
    # leader-epoch-checkpoint: the copy takes those files, so both start from the same epochs.
    for topic, partitions in TOPICS.items():
        for p in range(partitions):
            folder = broker.partition_dir(topic, p)
            broker.wait_until(lambda: _epochs(folder) != _epochs(copy / folder.name), timeout=30,
                              what=f"the new leader epoch of {folder.name}")
            shutil.copy2(folder / "leader-epoch-checkpoint", copy / folder.name / "leader-epoch-checkpoint")

    sizes = [p.stat().st_size for p in sorted((copy / "r-bytes-0").glob("*.log"))]
    boundary = sum(sizes[2:])          # deleting the 2nd segment leaves exactly retention.bytes: it goes
    topic_configs = {"r-ms": {"retention.ms": 5 * DAY}, "r-bytes": {"retention.bytes": boundary},
                     "r-noti": {"retention.ms": DAY // 2}}
    applied_at = int(time.time() * 1000)
    for topic, configs in topic_configs.items():
        bc.alter_topic_configs(broker, topic, configs)
    offset_json = {"version": 1, "partitions": [{"topic": "r-dr", "partition": 0, "offset": before[("r-dr", 0)][1] + 3},
                                                {"topic": "r-dr", "partition": 1, "offset": -1}]}
    low = bc.delete_records(broker, {("r-dr", e["partition"]): e["offset"] for e in offset_json["partitions"]})
    # each partition loses at least one segment; then give the retention task (every 500 ms) time to settle
    for (topic, p), bases in before.items():
        broker.wait_until(lambda: _bases(broker.partition_dir(topic, p))[0] != bases[0], timeout=30,
                          what=f"the broker's retention of {topic}-{p}")
    time.sleep(2)
    ranges = {tp: (bc.list_offsets(broker, tp[0], tp[1], bc.EARLIEST)[0], bc.list_offsets(broker, tp[0], tp[1], bc.LATEST)[0])
              for tp in before}
    # our delete-records refuses the log dir while this broker holds it, and names the broker
    locked_json = root / "locked.json"
    locked_json.write_text(json.dumps(offset_json))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        locked = (cli.main(["delete-records", "--log-dirs", str(broker.data_dir), "--offset-json-file",
                            str(locked_json)]), err.getvalue())
    refused = None
    try:
        bc.delete_records(broker, {("r-dr", 0): ranges[("r-dr", 0)][1] + 1})
    except Exception as e:  # noqa: BLE001 - the broker's OffsetOutOfRange, as kafka-python raises it
        refused = e
    broker.stop()
    assert stray_folders(broker) == []
    all_configs = [f"{t}:{k}={v}" for t, c in topic_configs.items() for k, v in c.items()]
    all_configs += [f"{t}:{k}={v}" for t in TOPICS for k, v in keep.items()
                    if k not in topic_configs.get(t, {})]
    yield dict(broker=broker, copy=copy, locked=locked, before=before, now=applied_at, low=low, ranges=ranges, refused=refused,
               offset_json=offset_json, configs=load_configs(topic_configs=all_configs), root=root)
    broker.kill()


def _plan(judged, topic: str, p: int = 0) -> dict:
    return retain_partition(judged["copy"] / f"{topic}-{p}", log_dir=judged["copy"], configs=judged["configs"],
                            now_ms=judged["now"])


def _deleted_by_broker(judged, topic: str, p: int = 0) -> list:
    after = set(_bases(judged["broker"].partition_dir(topic, p)))
    return [b for b in judged["before"][(topic, p)] if b not in after]


def _apply_and_compare(judged, topics) -> None:
    """Apply our retention on the copy and compare the files the broker left."""
    copy, broker = judged["copy"], judged["broker"]
    outcomes = []
    for topic, p in topics:
        out = retain_partition(copy / f"{topic}-{p}", log_dir=copy, configs=judged["configs"], now_ms=judged["now"],
                               execute=True, delete_delay_ms=0)
        assert out["status"] == APPLIED, out
        outcomes.append(out)
    finish_log_dir(copy, outcomes)
    ours_lso = _checkpoint(copy / "log-start-offset-checkpoint")
    theirs_lso = broker.checkpoint("log-start-offset-checkpoint")
    for topic, p in topics:
        name = f"{topic}-{p}"
        theirs = broker.partition_dir(topic, p)
        # the broker's load (not its retention) re-created a missing .timeindex, empty (LogSegment.sanityCheck)
        recreated = [n for n in set(_files(theirs)) - set(_files(copy / name))
                     if n.endswith(".timeindex") and (theirs / n).stat().st_size == 0
                     and (copy / name / n.replace(".timeindex", ".log")).exists()]
        assert _files(copy / name) == sorted(set(_files(theirs)) - set(recreated)), name
        assert ours_lso.get((topic, p)) == theirs_lso.get((topic, p)), name
        assert _epochs(copy / name) == _epochs(broker.partition_dir(topic, p)), name


def _checkpoint(path: Path) -> dict:
    lines = path.read_text().splitlines() if path.exists() else []
    return {(t, int(p)): int(o) for t, p, o in (line.split() for line in lines[2:])}


@pytest.mark.parametrize("topic", ["r-ms", "r-bytes", "r-noti"])
def test_dry_run_plan_deletes_what_the_broker_deleted(judged, topic):
    out = _plan(judged, topic)
    assert out["status"] == PLANNED, out
    ours = [d["base_offset"] for d in out["decisions"] if d["decision"] == "delete"]
    theirs = _deleted_by_broker(judged, topic)
    assert ours == theirs
    assert out["new_log_start_offset"] == judged["ranges"][(topic, 0)][0]
    assert _bases(judged["copy"] / f"{topic}-0") == judged["before"][(topic, 0)]      # a dry run changes nothing
    if topic == "r-noti":
        assert [d["largest_timestamp_source"] for d in out["decisions"][:2]] == ["mtime", "mtime"], out["decisions"]
        said = [line for line in judged["broker"].server_log().splitlines()
                if "partition=r-noti-0" in line and "Deleting segment LogSegment" in line]
        assert len(said) == 1 and "based on the last modified time" in said[0], said


def test_applied_retention_leaves_the_brokers_files(judged):
    _apply_and_compare(judged, [("r-ms", 0), ("r-bytes", 0), ("r-noti", 0)])


def test_delete_records_refuses_the_running_brokers_log_dir(judged):
    code, err = judged["locked"]
    assert code == 1 and "locked by a Kafka broker" in err, err


def test_delete_records_then_retention_as_the_broker(judged, capsys):
    copy, root = judged["copy"], judged["root"]
    spec = root / "offsets.json"
    spec.write_text(json.dumps(judged["offset_json"]))
    args = ["delete-records", "--log-dirs", str(copy), "--offset-json-file", str(spec)]
    policy = []
    # an offset above the high watermark is refused as the broker refused it, before anything is written
    high = root / "high.json"
    hw0 = judged["ranges"][("r-dr", 0)][1]
    high.write_text(json.dumps({"version": 1, "partitions": [{"topic": "r-dr", "partition": 0, "offset": hw0 + 1}]}))
    assert judged["refused"] is not None and "OffsetOutOfRange" in type(judged["refused"]).__name__ + str(judged["refused"])
    lso_before = (copy / "log-start-offset-checkpoint").read_bytes()
    assert cli.main(["delete-records", "--log-dirs", str(copy), "--offset-json-file", str(high)] + policy) == 1
    assert "OffsetOutOfRange" in capsys.readouterr().out
    assert (copy / "log-start-offset-checkpoint").read_bytes() == lso_before

    assert cli.main(args + policy + ["--dry-run"]) == 0
    assert (copy / "log-start-offset-checkpoint").read_bytes() == lso_before
    assert cli.main(args + policy) == 0
    printed = capsys.readouterr().out
    for p in (0, 1):
        assert f"partition: r-dr-{p}\tlow_watermark: {judged['low'][('r-dr', p)]}" in printed, printed
        assert judged["low"][("r-dr", p)] == judged["ranges"][("r-dr", p)][0]
    # the next retention run: the same segments go as the broker's retention task deleted
    for p in (0, 1):
        out = _plan(judged, "r-dr", p)
        ours = [d["base_offset"] for d in out["decisions"] if d["decision"] == "delete"]
        assert ours == _deleted_by_broker(judged, "r-dr", p), p
        assert out["new_log_start_offset"] == judged["ranges"][("r-dr", p)][0]
    _apply_and_compare(judged, [("r-dr", 0), ("r-dr", 1)])
