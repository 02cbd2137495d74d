"""Log-dir discovery: partition-folder and segment names, scanning real broker log dirs and junk,
and detecting / taking the broker's .lock (with a second process holding it)."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from kafkalog.fs import lock, names
from kafkalog.errors import InvalidFileNameError, LogDirLockedError
from kafkalog.fs.lock import is_locked, lock_log_dir
from kafkalog.log.logdir import scan_log_dir, scan_log_dirs, scan_partition_dir
from kafkalog.fs.names import (SEGMENT_SUFFIXES, TEMP_SUFFIXES, SegmentFileName, format_partition_dir_name,
                                format_segment_file_name, offset_from_file_name, parse_partition_dir_name,
                                parse_segment_file_name)

HEX = "2308294e39dc4a44ab8183f587805af2"


def manifest_rows(root: Path) -> list[dict]:
    with open(root / "MANIFEST.tsv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


# --- names -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name, expected", [
    ("my-topic.v2-3", ("my-topic.v2", 3, "live")),
    ("__consumer_offsets-49", ("__consumer_offsets", 49, "live")),
    ("__cluster_metadata-0", ("__cluster_metadata", 0, "live")),
    ("alter-reassignments-topic-1-1", ("alter-reassignments-topic-1", 1, "live")),
    ("a--1", ("a-", 1, "live")),                     # the text after the LAST '-', as Kafka splits it
    ("t-2147483647", ("t", 2147483647, "live")),
    (f"test-topic-0.{HEX}-delete", ("test-topic", 0, "delete")),
    (f"my-topic.v2-12.{HEX}-future", ("my-topic.v2", 12, "future")),
    (f"t-7.{HEX}-stray", ("t", 7, "stray")),
])
def test_parse_partition_dir_name(name, expected):
    assert parse_partition_dir_name(name) == expected


@pytest.mark.parametrize("name", [
    "topic", "topic-", "-1", "topic-01", "topic-+1", "top ic-1", "topic-1 ", "lost+found", "timeindex_test",
    "t-2147483648", ".-0", "..-0", "x" * 250 + "-0",
    "topic-1.abc-delete", f"topic-1.{HEX.upper()}-delete", f"topic-1.{HEX}-deleted", f"topic-1.{HEX}",
    f"topic-x.{HEX}-delete", "topic-1-delete", f"{'x' * 240}-0.{HEX}-delete",   # 283 chars > 255
    "remote-log-index-cache",
])
def test_parse_partition_dir_name_refuses_what_kafka_would_not_write(name):
    with pytest.raises(InvalidFileNameError):
        parse_partition_dir_name(name)


def test_format_partition_dir_name_cuts_long_topics_like_kafka():
    long_topic = "t" * 249
    name = format_partition_dir_name(long_topic, 3, "delete", HEX)
    assert len(name) == 255 and name.endswith(f"-3.{HEX}-delete")
    topic, partition, kind = parse_partition_dir_name(name)
    assert long_topic.startswith(topic) and (partition, kind) == (3, "delete")
    generated = format_partition_dir_name("t", 0, "future")
    assert parse_partition_dir_name(generated) == ("t", 0, "future")
    for bad in [("bad topic", 0), ("t", -1), ("t", 2**31)]:
        with pytest.raises(InvalidFileNameError):
            format_partition_dir_name(*bad)


topics = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
                 min_size=1, max_size=200).filter(lambda t: t not in (".", ".."))


@given(topics, st.integers(0, 2**31 - 1), st.sampled_from(names.PARTITION_DIR_KINDS),
       st.text(alphabet="0123456789abcdef", min_size=32, max_size=32))
def test_partition_dir_name_round_trip(topic, partition, kind, unique_id):
    name = format_partition_dir_name(topic, partition, kind, unique_id)
    parsed_topic, parsed_partition, parsed_kind = parse_partition_dir_name(name)
    assert (parsed_partition, parsed_kind) == (partition, kind)
    assert parsed_topic == topic if kind in ("live", "future") else topic.startswith(parsed_topic)


@pytest.mark.parametrize("name, expected", [
    ("00000000000000000000.log", SegmentFileName(0, "log", None)),
    ("00000000000000368769.index", SegmentFileName(368769, "index", None)),
    ("00000000000000001613.timeindex", SegmentFileName(1613, "timeindex", None)),
    ("00000000000000000007.txnindex", SegmentFileName(7, "txnindex", None)),
    ("00000000000000009100.snapshot", SegmentFileName(9100, "snapshot", None)),
    ("00000000000000000000.log.cleaned", SegmentFileName(0, "log", "cleaned")),
    ("00000000000000000000.timeindex.swap", SegmentFileName(0, "timeindex", "swap")),
    ("00000000000000001000.index.deleted", SegmentFileName(1000, "index", "deleted")),
    ("00000000000000001000.snapshot.deleted", SegmentFileName(1000, "snapshot", "deleted")),
    ("09223372036854775807.log", SegmentFileName(2**63 - 1, "log", None)),
    ("000000000000000000042.log", SegmentFileName(42, "log", None)),   # at least 20 digits
])
def test_parse_segment_file_name(name, expected):
    assert parse_segment_file_name(name) == expected


@pytest.mark.parametrize("name", [
    "0.log", "0000000000000000000.log", "00000000000000000000", "00000000000000000000.LOG",
    "00000000000000000000.log.tmp", "00000000000000000000.wm", "00000000000000000000.log.cleaned.swap",
    "09223372036854775808.log", "abcdefghijklmnopqrst.log", "00000000000000000000-0000000000.checkpoint",
    " 00000000000000000000.log", "00000000000000000000.log ", "leader-epoch-checkpoint", "",
])
def test_parse_segment_file_name_refuses_garbage(name):
    with pytest.raises(InvalidFileNameError):
        parse_segment_file_name(name)


@pytest.mark.parametrize("name, expected", [
    ("00000000000000368769.log", 368769), ("00000000000000000007.index.swap", 7),
    ("5.log", 5), ("+5.timeindex", 5), ("-1.log", -1),           # Long.parseLong takes a sign
    ("9223372036854775807.log", 2**63 - 1), ("9223372036854775808.log", None),   # out of a long: Kafka throws
    ("-9223372036854775808.x", -2**63), ("00000000000000000000", None),          # no dot: Kafka throws
    ("abc.log", None), (".log", None), ("1 .log", None), ("1e3.log", None),
])
def test_offset_from_file_name_is_kafkas_lenient_parser(name, expected):
    assert offset_from_file_name(name) == expected


def test_format_segment_file_name():
    assert format_segment_file_name(368769, "log") == "00000000000000368769.log"
    assert format_segment_file_name(0, "index", "swap") == "00000000000000000000.index.swap"
    for bad in [(-1, "log"), (2**63, "log"), (0, "wm"), (0, "log", "tmp")]:
        with pytest.raises(InvalidFileNameError):
            format_segment_file_name(*bad)


@given(st.integers(0, 2**63 - 1), st.sampled_from(SEGMENT_SUFFIXES), st.sampled_from((None,) + TEMP_SUFFIXES))
def test_segment_file_name_round_trip(base_offset, suffix, temp):
    name = format_segment_file_name(base_offset, suffix, temp)
    assert len(name.split(".")[0]) == 20
    assert parse_segment_file_name(name) == SegmentFileName(base_offset, suffix, temp)


# --- scanning real broker log dirs -----------------------------------------------------------

def test_scan_every_real_apache_log_dir(real_fixtures):
    data = real_fixtures / "apache__kafka/core/data"
    rows = [r["path"] for r in manifest_rows(real_fixtures) if r["path"].startswith("apache__kafka/core/data/")]
    dirs = sorted(p for p in data.iterdir() if p.is_dir())
    assert len(dirs) == 36
    scanned = {d.name: scan_log_dir(d) for d in dirs}
    for name, log_dir in scanned.items():
        assert log_dir.problems == [], name
        assert log_dir.locked is False, name     # nobody holds these copies
        assert log_dir.unknown == [], name
        for p in log_dir.partitions:
            assert p.log_dir == data / name and p.path.parent == data / name
            assert p.problems == [] and p.unknown == []
            # every .log in the MANIFEST for this folder is a segment
            prefix = f"apache__kafka/core/data/{name}/{p.path.name}/"
            logs = sorted(r for r in rows if r.startswith(prefix) and r.endswith(".log"))
            assert [s.log.name for s in p.segments] == [r.rsplit("/", 1)[1] for r in logs]

    def lock_files(n):
        return sum(r.endswith(f"/{n}") for r in rows)
    assert sum(d.lock_file is not None for d in scanned.values()) == lock_files(".lock") == 26
    assert sum(d.clean_shutdown for d in scanned.values()) == lock_files(".kafka_cleanshutdown") == 3
    assert sum(d.meta_properties is not None for d in scanned.values()) == lock_files("meta.properties") == 17
    assert {d.meta_properties.version for d in scanned.values() if d.meta_properties} == {0, 1}
    for checkpoint in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                       "replication-offset-checkpoint", "cleaner-offset-checkpoint"):
        assert sum(checkpoint in d.checkpoints for d in scanned.values()) == lock_files(checkpoint)

    deleting = scanned["kafka-14696354110866436968"].partitions
    assert [(p.topic, p.partition, p.kind) for p in deleting] == [("test-topic", 0, "delete")]
    assert deleting[0].path.name == f"test-topic-0.{HEX}-delete"
    assert [s.base_offset for s in deleting[0].segments] == [0]

    kraft = scanned["kafka-1168504093769635972"]
    assert [(p.topic, p.partition) for p in kraft.partitions] == [("__cluster_metadata", 0), ("__consumer_offsets", 0)]
    metadata = kraft.partitions[0]
    assert [f.name for f in metadata.kraft_files] == ["quorum-state"]
    assert metadata.has_leader_epoch_checkpoint and metadata.partition_metadata.name == "partition.metadata"
    assert metadata.segments[0].log.name == "00000000000000000000.log" and metadata.segments[0].index is None

    offsets = scanned["kafka-11292028351815590561"]
    assert ("__consumer_offsets", 3, "live") in [(p.topic, p.partition, p.kind) for p in offsets.partitions]
    assert offsets.lock_file.name == ".lock"
    assert offsets.meta_properties.directory_id == "ec5fwQ4kR0it8AN-oSWMzQ"
    assert scanned["kafka-13373252295898138098"].meta_properties.node_id == 1   # v0, broker.id

    assert [f.name for f in scanned["kafka-1418838831197743059"].leftovers] == ["recovery-point-offset-checkpoint.tmp"]
    assert [f.name for f in scanned["kafka-15372165916945441544"].leftovers] == ["replication-offset-checkpoint.tmp"]

    # the alter-log-dirs test left a folder with index files and no .log: Kafka deletes those at load
    moved = scanned["kafka-15043606438991224950"]
    assert moved.clean_shutdown
    orphan = moved.partitions[0]
    assert (orphan.topic, orphan.partition, orphan.segments) == ("alter-reassignments-topic-1", 0, [])
    assert [f.name for f in orphan.leftovers] == ["00000000000000000000.index", "00000000000000000000.timeindex"]

    old = scanned["kafka-573957"].partitions[0]          # a 0.8.2.1 broker: no time index yet
    assert (old.segments[0].index is not None, old.segments[0].timeindex) == (True, None)


def test_scan_log_dirs_over_the_real_apache_dirs(real_fixtures):
    data = real_fixtures / "apache__kafka/core/data"
    dirs = sorted(p for p in data.iterdir() if p.is_dir())
    scanned = scan_log_dirs(dirs)
    assert [d.path for d in scanned] == dirs
    # these are many brokers' dirs: one broker would refuse the same partition twice
    duplicated = [d for d in scanned if any("more than one log dir" in p for p in d.problems)]
    assert duplicated and all(d.partitions for d in duplicated)


def test_scan_real_pinterest_partition_dirs(real_fixtures):
    base = real_fixtures / "pinterest__tiered-storage"
    rows = manifest_rows(real_fixtures)
    consumer = scan_log_dir(base / "ts-consumer/src/test/resources/log-files")
    assert consumer.problems == [] and consumer.locked is False and consumer.lock_file is None
    assert [(p.topic, p.partition) for p in consumer.partitions] == [("test_topic_a", i) for i in range(3)]
    for p in consumer.partitions:
        offsets = [s.base_offset for s in p.segments]
        assert offsets == sorted(offsets) and offsets[0] == 0
        logs = [r["path"] for r in rows if r["path"].startswith(f"pinterest__tiered-storage/ts-consumer/src/test/"
                                                                 f"resources/log-files/{p.path.name}/")
                and r["path"].endswith(".log")]
        assert len(p.segments) == len(logs)
        assert all(s.log and s.index and s.timeindex and s.txnindex is None for s in p.segments)
        assert p.segments[0].snapshot is None and all(s.snapshot for s in p.segments[1:])
        assert p.leftovers == [] and p.stray_snapshots == [] and p.has_leader_epoch_checkpoint

    uploader = scan_log_dir(base / "ts-segment-uploader/src/test/resources/log_segments")
    a, b = uploader.partitions
    assert (a.topic, b.topic) == ("test_topic_a", "test_topic_b")
    assert [f.name for f in a.unknown] == ["00000000000000000000.wm"]          # Pinterest's own file
    assert a.segments[-1].base_offset == 8820
    assert [f.name for f in a.stray_snapshots] == ["00000000000000009100.snapshot"]  # clean-shutdown snapshot
    # CATALOG: two .log files and one segment's indexes were absent from the snapshot we fetched
    assert [s.base_offset for s in b.segments] == [1613280]
    assert (b.segments[0].index, b.segments[0].snapshot.name) == (None, "00000000000001613280.snapshot")
    assert [f.name for f in b.leftovers] == [
        "00000000000000000000.index", "00000000000000000000.timeindex",
        "00000000000000822706.index", "00000000000000822706.timeindex"]
    assert [f.name for f in b.stray_snapshots] == ["00000000000000822706.snapshot"]

    common = scan_log_dir(base / "ts-common/src/test/resources/log-files")
    assert common.partitions == []
    assert len(common.problems) == 1 and "timeindex_test" in common.problems[0]
    renamed = scan_partition_dir(base / "ts-common/src/test/resources/log-files/timeindex_test",
                                 topic_partition=("timeindex_test", 0))
    assert [s.base_offset for s in renamed.segments] == [0, 7729, 15363, 22964]
    assert renamed.partition_metadata is not None and renamed.problems == []
    with pytest.raises(InvalidFileNameError):
        scan_partition_dir(base / "ts-common/src/test/resources/log-files/timeindex_test")


# --- scanning junk ---------------------------------------------------------------------------

def touch(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_scan_reports_garbage_instead_of_raising(tmp_path):
    log = tmp_path / "logs"
    for folder in ["lost+found", "not a partition", "topic-01", "x-1.abc-delete", "remote-log-index-cache"]:
        (log / folder).mkdir(parents=True)
    good = log / "t-0"
    for name in ["00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex",
                 "00000000000000000100.log", "00000000000000000100.snapshot",
                 "00000000000000000000.log.deleted", "00000000000000000005.log.cleaned",
                 "00000000000000000010.index.swap", "00000000000000000050.index",    # orphan index
                 "00000000000000000050.txnindex", "00000000000000000200.snapshot",  # stray snapshot
                 "junk.txt", "0.log", "leader-epoch-checkpoint.tmp"]:
        touch(good / name)
    (good / "subdir").mkdir()
    touch(good / "leader-epoch-checkpoint", "0\n1\n0 0\n")
    touch(good / "partition.metadata", "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA")   # zero Uuid
    touch(log / "u-3" / "leader-epoch-checkpoint", "0\n2\n0 0\n")                          # count mismatch
    touch(log / "recovery-point-offset-checkpoint", "0\n1\nt 0\n")
    touch(log / "replication-offset-checkpoint", "0\n1\nt 0 100\n")
    touch(log / "replication-offset-checkpoint.tmp", "0\n")
    touch(log / "meta.properties", "version=1\ncluster.id=c\n")                           # no node.id
    touch(log / ".kafka_cleanshutdown", "{not json")
    touch(log / "stray.bin")

    result = scan_log_dir(log)
    assert [(p.topic, p.partition) for p in result.partitions] == [("t", 0), ("u", 3)]
    problems = "\n".join(result.problems)
    for folder in ["lost+found", "not a partition", "topic-01", "x-1.abc-delete"]:
        assert str(log / folder) in problems
    assert "remote-log-index-cache" not in problems
    assert f"{log / 'recovery-point-offset-checkpoint'}: byte 4: line 3:" in problems
    assert "zero Uuid" in problems and "expected 2 entries but found 1" in problems
    assert "node.id was not found" in problems and "not valid JSON" in problems
    assert len(result.problems) == 9
    assert result.meta_properties is None and result.clean_shutdown is True and result.locked is False
    assert set(result.checkpoints) == {"recovery-point-offset-checkpoint", "replication-offset-checkpoint"}
    assert [f.name for f in result.leftovers] == ["replication-offset-checkpoint.tmp"]
    assert [f.name for f in result.unknown] == ["stray.bin"]

    t = result.partitions[0]
    assert [(s.base_offset, s.log.name, bool(s.index), bool(s.timeindex), s.snapshot and s.snapshot.name)
            for s in t.segments] == [(0, "00000000000000000000.log", True, True, None),
                                     (100, "00000000000000000100.log", False, False, "00000000000000000100.snapshot")]
    assert [f.name for f in t.leftovers] == [
        "00000000000000000000.log.deleted", "00000000000000000005.log.cleaned", "00000000000000000010.index.swap",
        "00000000000000000050.index", "00000000000000000050.txnindex", "leader-epoch-checkpoint.tmp"]
    assert [f.name for f in t.stray_snapshots] == ["00000000000000000200.snapshot"]
    assert [f.name for f in t.unknown] == ["0.log", "junk.txt", "subdir"]
    assert t.has_leader_epoch_checkpoint and t.partition_metadata == good / "partition.metadata"


def test_scan_requires_an_existing_directory(tmp_path):
    with pytest.raises(FileNotFoundError):
        scan_log_dir(tmp_path / "absent")
    touch(tmp_path / "file")
    with pytest.raises(NotADirectoryError):
        scan_log_dir(tmp_path / "file")
    with pytest.raises(FileNotFoundError):
        scan_log_dirs([tmp_path, tmp_path / "absent"])


def test_scan_log_dirs_flags_a_partition_in_two_dirs(tmp_path):
    for d in ("a", "b"):
        touch(tmp_path / d / "t-0" / "00000000000000000000.log")
    touch(tmp_path / "a" / "t-1" / "00000000000000000000.log")
    touch(tmp_path / "b" / f"t-1.{HEX}-delete" / "00000000000000000000.log")   # a -delete copy is fine
    a, b = scan_log_dirs([tmp_path / "a", tmp_path / "b"])
    assert len(a.problems) == len(b.problems) == 1
    assert "t-0" in a.problems[0] and "more than one log dir" in b.problems[0]
    with pytest.raises(ValueError):
        scan_log_dirs([tmp_path / "a", tmp_path / "b" / ".." / "a"])


# --- the .lock -------------------------------------------------------------------------------

HOLD_LOCK = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # what Java's FileChannel.tryLock() does on Linux
print("locked", flush=True)
sys.stdin.read()                                 # hold until the test closes our stdin
"""

PROBE_LOCK = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError:
    print("held")
else:
    print("free")
"""


class LockHolder:
    """Another process holding <log dir>/.lock, like a running broker."""

    def __init__(self, log_dir: Path):
        self.proc = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(log_dir / ".lock")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "locked"

    def release(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)


@pytest.fixture
def holder_factory():
    holders = []

    def start(log_dir):
        holders.append(LockHolder(log_dir))
        return holders[-1]
    yield start
    for h in holders:
        if h.proc.poll() is None:
            h.proc.kill()
            h.proc.wait(timeout=10)


def probe_from_another_process(lock_path: Path) -> str:
    out = subprocess.run([sys.executable, "-c", PROBE_LOCK, str(lock_path)], capture_output=True, text=True,
                         timeout=30)
    return out.stdout.strip()


def test_is_locked_without_lock_file_does_not_create_it(tmp_path):
    assert is_locked(tmp_path) is False
    assert not (tmp_path / ".lock").exists()
    touch(tmp_path / ".lock")
    assert is_locked(tmp_path) is False


@pytest.mark.parametrize("use_getlk", [True, False], ids=["F_OFD_GETLK", "lockf-probe"])
def test_lock_held_by_another_process_is_detected_and_refused(tmp_path, holder_factory, monkeypatch, use_getlk):
    monkeypatch.setattr(lock, "_USE_GETLK", use_getlk and lock._USE_GETLK)
    holder = holder_factory(tmp_path)
    assert is_locked(tmp_path) is True
    assert is_locked(tmp_path) is True           # checking did not take or disturb the lock
    assert scan_log_dir(tmp_path).locked is True
    with pytest.raises(LogDirLockedError) as info:
        with lock_log_dir(tmp_path):
            pytest.fail("took a lock another process holds")
    if use_getlk:
        assert f"a broker or other process (PID {holder.proc.pid}" in str(info.value)
    assert info.value.path == str(tmp_path / ".lock")
    assert probe_from_another_process(tmp_path / ".lock") == "held"

    holder.release()
    assert is_locked(tmp_path) is False
    assert scan_log_dir(tmp_path).locked is False
    with lock_log_dir(tmp_path) as locked_dir:
        assert locked_dir == tmp_path


HOLD_LOCK_AS = r"""
import fcntl, os, sys
if sys.argv[2] == "kafkalog":
    from kafkalog.fs.lock import lock_log_dir
    held = lock_log_dir(os.path.dirname(sys.argv[1]))
    held.__enter__()
else:                                            # FileChannel.tryLock(): [0, Long.MAX_VALUE)
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, (1 << 63) - 1)
print("locked", flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(not lock._USE_GETLK, reason="needs F_OFD_GETLK/F_GETLK to see the holder")
@pytest.mark.parametrize("kind, expected", [("kafkalog", "another kafkalog job (PID {pid}"),
                                            ("java", "a broker or other Java process (PID {pid}")])
def test_lock_message_says_what_holds_it(tmp_path, kind, expected):
    """Issue 18 (3): the message used to blame a broker when another kafkalog job held the lock."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD_LOCK_AS, str(tmp_path / ".lock"), kind],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(LogDirLockedError) as info:
            with lock_log_dir(tmp_path):
                pytest.fail("took a held lock")
        assert expected.format(pid=proc.pid) in str(info.value)
        assert lock.describe_lock_holder(tmp_path).startswith(expected.format(pid=proc.pid))
        assert probe_from_another_process(tmp_path / ".lock") == "held"   # a broker's tryLock is refused
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


@pytest.mark.skipif(not lock._USE_GETLK, reason="needs F_OFD_GETLK/F_GETLK to see the holder")
@pytest.mark.parametrize("extra, expected", [(["kafka.Kafka", "server.properties"], "a Kafka broker (PID {pid}"),
                                             ([], "a broker or other Java process (PID {pid}")])
def test_a_real_brokers_lock_is_named(tmp_path, extra, expected):
    """A real broker's tryLock() reads back as a whole-file lock of length 0 (the JDK passes
    Long.MAX_VALUE on as l_len 0), and its main class comes after a classpath longer than the line
    messages show: a java process (argv[0] "java") holding such a lock, with kafka.Kafka among its
    arguments, is named a Kafka broker (tests/broker/test_retention_parity.py has the real one)."""
    java = tmp_path / "bin" / "java"                     # a python named java: only the name matters
    java.parent.mkdir()
    java.symlink_to(os.path.realpath(sys.executable))
    proc = subprocess.Popen([str(java), "-c", HOLD_LOCK, str(tmp_path / ".lock"), "-cp", "x" * 200, *extra],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        assert lock.describe_lock_holder(tmp_path).startswith(expected.format(pid=proc.pid))
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


def test_lock_log_dir_holds_like_a_broker_and_releases(tmp_path):
    lock = tmp_path / ".lock"
    with lock_log_dir(tmp_path):
        assert lock.exists()
        assert probe_from_another_process(lock) == "held"
        assert is_locked(tmp_path) is True
        assert scan_log_dir(tmp_path).locked is True
        # asking (and scanning) from this process must not have dropped our own POSIX lock
        assert probe_from_another_process(lock) == "held"
        with pytest.raises(LogDirLockedError, match="this process already holds"):
            with lock_log_dir(tmp_path):
                pass
        assert probe_from_another_process(lock) == "held"
    assert lock.exists()                      # Kafka leaves the file; only the lock goes
    assert probe_from_another_process(lock) == "free"
    assert is_locked(tmp_path) is False


def test_lock_log_dir_is_released_when_the_job_fails(tmp_path):
    with pytest.raises(RuntimeError):
        with lock_log_dir(tmp_path):
            raise RuntimeError("job failed")
    assert probe_from_another_process(tmp_path / ".lock") == "free"
    with pytest.raises(FileNotFoundError):
        with lock_log_dir(tmp_path / "absent"):
            pass


def test_is_locked_on_read_only_real_log_dirs(real_fixtures):
    """The fixture copies are read-only: the query needs no write access and changes nothing."""
    log_dir = real_fixtures / "apache__kafka/core/data/kafka-11292028351815590561"
    before = os.stat(log_dir / ".lock")
    assert is_locked(log_dir) is False
    after = os.stat(log_dir / ".lock")
    assert (before.st_mtime_ns, before.st_size) == (after.st_mtime_ns, after.st_size)
    assert Counter(scan_log_dir(d).locked for d in log_dir.parent.iterdir()) == Counter({False: 36})
