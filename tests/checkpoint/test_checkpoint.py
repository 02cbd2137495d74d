"""Checkpoint, partition.metadata, meta.properties and .kafka_cleanshutdown files: real broker
files parse and round-trip, malformed text is refused the way Kafka refuses it, writes are atomic."""
from __future__ import annotations

import csv
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from kafkalog.checkpoint.text import format_kafka_uuid, parse_kafka_uuid
from kafkalog.fs.names import (CLEAN_SHUTDOWN_FILE, LEADER_EPOCH_CHECKPOINT, META_PROPERTIES, OFFSET_CHECKPOINTS,
                                PARTITION_METADATA, RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT)
from kafkalog.checkpoint.clean_shutdown import parse_clean_shutdown, read_clean_shutdown
from kafkalog.checkpoint.leader_epoch import (EpochEntry, format_leader_epoch_checkpoint,
                                              parse_leader_epoch_checkpoint, read_leader_epoch_checkpoint,
                                              write_leader_epoch_checkpoint)
from kafkalog.checkpoint.meta_properties import MetaProperties, parse_meta_properties, read_meta_properties
from kafkalog.checkpoint.offset import (format_offset_checkpoint, parse_offset_checkpoint, read_offset_checkpoint,
                                        write_offset_checkpoint)
from kafkalog.checkpoint.partition_metadata import (PartitionMetadata, format_partition_metadata,
                                                    parse_partition_metadata, read_partition_metadata,
                                                    write_partition_metadata)
from kafkalog.checkpoint.properties import parse_properties
from kafkalog.errors import CheckpointError


def manifest_paths(root: Path, prefix: str, keep) -> list[Path]:
    with open(root / "MANIFEST.tsv", newline="", encoding="utf-8") as f:
        rows = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        return [root / row["path"] for row in rows if row["path"].startswith(prefix) and keep(row["path"])]


def offset_checkpoint_name(name: str) -> bool:
    return name in OFFSET_CHECKPOINTS or (name.endswith(".tmp") and name[:-4] in OFFSET_CHECKPOINTS)


# --- real broker files -----------------------------------------------------------------------

def test_every_real_offset_checkpoint_parses_and_round_trips(real_fixtures):
    files = manifest_paths(real_fixtures, "apache__kafka/core/data/",
                           lambda p: offset_checkpoint_name(p.rsplit("/", 1)[-1]))
    names = {f.name for f in files}
    assert names >= set(OFFSET_CHECKPOINTS) | {"recovery-point-offset-checkpoint.tmp",
                                               "replication-offset-checkpoint.tmp"}
    empty = with_entries = 0
    for f in files:
        text = f.read_text("utf-8")
        entries = read_offset_checkpoint(f)
        assert parse_offset_checkpoint(format_offset_checkpoint(entries)) == entries, f
        if text == "":
            empty += 1
            assert entries == {}
            continue
        lines = text.split("\n")
        assert lines[0] == "0" and int(lines[1]) == len(entries), f
        with_entries += bool(entries)
        if len(entries) <= 1:  # order cannot differ: our bytes are Kafka's bytes
            assert format_offset_checkpoint(entries) == text, f
    assert empty > 0 and with_entries > 0


def test_real_tmp_checkpoints_hold_a_complete_checkpoint(real_fixtures):
    data = real_fixtures / "apache__kafka/core/data"
    tmp = read_offset_checkpoint(data / "kafka-1418838831197743059/recovery-point-offset-checkpoint.tmp")
    assert tmp == {("__consumer_offsets", 3): 0}
    tmp = read_offset_checkpoint(data / "kafka-15372165916945441544/replication-offset-checkpoint.tmp")
    assert tmp == {("__consumer_offsets", 3): 0}
    two = read_offset_checkpoint(data / "kafka-11292028351815590561/replication-offset-checkpoint")
    assert two == {("__consumer_offsets", 3): 0, ("alter-reassignments-topic-1", 0): 0}


def test_every_real_leader_epoch_checkpoint_and_partition_metadata(real_fixtures):
    epochs = manifest_paths(real_fixtures, "", lambda p: p.endswith("/" + LEADER_EPOCH_CHECKPOINT))
    metadata = manifest_paths(real_fixtures, "", lambda p: p.endswith("/" + PARTITION_METADATA))
    assert len(epochs) > 40 and len(metadata) > 40
    for f in epochs:
        entries = read_leader_epoch_checkpoint(f)
        text = f.read_text("utf-8")
        assert format_leader_epoch_checkpoint(entries) == text or (text == "" and entries == [])
    for f in metadata:
        parsed = read_partition_metadata(f)
        assert parsed.version == 0 and len(parsed.topic_id) == 22
        assert format_partition_metadata(parsed) == f.read_text("utf-8")  # byte-exact, no newline at end
    cluster = real_fixtures / "apache__kafka/core/data/kafka-2167572160391180112/__cluster_metadata-0"
    assert read_leader_epoch_checkpoint(cluster / LEADER_EPOCH_CHECKPOINT) == [(1, 0), (2, 25)]
    assert read_partition_metadata(cluster / PARTITION_METADATA).topic_id == "AAAAAAAAAAAAAAAAAAAAAQ"


def test_real_meta_properties_v0_and_v1(real_fixtures):
    files = manifest_paths(real_fixtures, "apache__kafka/core/data/", lambda p: p.endswith("/" + META_PROPERTIES))
    parsed = {f.parent.name: read_meta_properties(f) for f in files}
    assert {m.version for m in parsed.values()} == {0, 1}
    v0 = parsed["kafka-13373252295898138098"]
    assert v0 == MetaProperties(0, "ekxdrQN1SouJkTQwrhPqOA", 1, None,
                                {"broker.id": "1", "version": "0", "cluster.id": "ekxdrQN1SouJkTQwrhPqOA"})
    v1 = parsed["kafka-11292028351815590561"]
    assert (v1.version, v1.node_id, v1.cluster_id, v1.directory_id) == (
        1, 0, "yCTClizsRPeNs5PF-ZWXEA", "ec5fwQ4kR0it8AN-oSWMzQ")
    for m in parsed.values():
        assert m.node_id is not None and m.cluster_id


def test_real_clean_shutdown_files(real_fixtures):
    files = manifest_paths(real_fixtures, "apache__kafka/", lambda p: p.endswith("/" + CLEAN_SHUTDOWN_FILE))
    assert len(files) == 3
    for f in files:
        assert read_clean_shutdown(f) == {"version": 0, "brokerEpoch": -1}


# --- offset checkpoints: text ----------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("", {}),
    ("0", {}),
    ("0\n", {}),
    ("0\n0\n", {}),
    ("0\n1\nfoo 0 5\n", {("foo", 0): 5}),
    ("0\n1\nfoo 0 5", {("foo", 0): 5}),                       # no final newline
    ("0\r\n1\r\nfoo 0 5\r\n", {("foo", 0): 5}),               # readLine also ends lines at \r\n
    ("0\n1\nfoo\t0   5 \n", {("foo", 0): 5}),                 # \s+ split drops trailing empty tokens
    ("0\n2\nfoo 0 5\nfoo 0 7\n", {("foo", 0): 7}),            # a map: the last one wins
    ("0\n1\nmy-topic.v2 2147483647 -1\n", {("my-topic.v2", 2147483647): -1}),
    ("0\n1\nt 0 9223372036854775807\n", {("t", 0): 2**63 - 1}),
])
def test_offset_checkpoint_accepts_what_kafka_accepts(text, expected):
    assert parse_offset_checkpoint(text) == expected


@pytest.mark.parametrize("text, line, position", [
    ("1\n0\n", 1, 0),                             # unknown version
    ("x\n", 1, 0),
    (" 0\n0\n", 1, 0),                            # Integer.parseInt refuses spaces
    ("0\nabc\n", 2, 2),
    ("0\n2\nfoo 0 1\n", 2, 2),                    # count says 2, one entry
    ("0\n0\nfoo 0 1\n", 2, 2),
    ("0\n1\nfoo 0\n", 3, 4),                      # 2 tokens
    ("0\n1\nfoo 0 1 2\n", 3, 4),                  # 4 tokens
    ("0\n1\n foo 0 1\n", 3, 4),                   # a leading space makes an empty first token
    ("0\n1\nfoo zero 1\n", 3, 4),                 # non-integer partition
    ("0\n1\nfoo 0 1x\n", 3, 4),                   # non-integer offset
    ("0\n1\nfoo 2147483648 1\n", 3, 4),           # partition beyond int32
    ("0\n1\nfoo 0 9223372036854775808\n", 3, 4),  # offset beyond int64
    ("0\n2\nfoo 0 1\n\nbar 0 1\n", 4, 12),        # an empty line is a malformed entry
    ("0\n1\nfoé 0 1\nx\n", 4, 13),                # positions count UTF-8 bytes
])
def test_offset_checkpoint_refuses_malformed_text_naming_the_line(text, line, position):
    with pytest.raises(CheckpointError) as info:
        parse_offset_checkpoint(text, path="/logs/recovery-point-offset-checkpoint")
    err = info.value
    assert f"line {line}:" in str(err)
    assert err.position == position
    assert err.path == "/logs/recovery-point-offset-checkpoint"
    assert "/logs/recovery-point-offset-checkpoint" in str(err)


def test_format_offset_checkpoint_is_sorted_kafka_text():
    text = format_offset_checkpoint({("b", 1): 10, ("a", 2): 3, ("a", 10): 0, ("a", 1): 7})
    assert text == "0\n4\na 1 7\na 2 3\na 10 0\nb 1 10\n"
    assert format_offset_checkpoint({}) == "0\n0\n"


@pytest.mark.parametrize("entries", [
    {("has space", 0): 1}, {("", 0): 1}, {("t", 2**31): 1}, {("t", -(2**31) - 1): 1},
    {("t", 0): 2**63}, {("t", 0): "5"}, {("t", "0"): 5},
])
def test_format_offset_checkpoint_refuses_what_kafka_could_not_read(entries):
    with pytest.raises(CheckpointError):
        format_offset_checkpoint(entries)


topics = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
                 min_size=1, max_size=249)


@given(st.dictionaries(st.tuples(topics, st.integers(0, 2**31 - 1)), st.integers(-(2**63), 2**63 - 1), max_size=20))
def test_offset_checkpoint_round_trip(entries):
    text = format_offset_checkpoint(entries)
    assert parse_offset_checkpoint(text) == entries
    assert format_offset_checkpoint(parse_offset_checkpoint(text)) == text


@given(st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1)), max_size=20))
def test_leader_epoch_checkpoint_round_trip(entries):
    parsed = parse_leader_epoch_checkpoint(format_leader_epoch_checkpoint(entries))
    assert parsed == entries and all(isinstance(e, EpochEntry) for e in parsed)


# --- leader-epoch-checkpoint -----------------------------------------------------------------

def test_leader_epoch_checkpoint_text():
    assert parse_leader_epoch_checkpoint("0\n2\n1 0\n2 25\n") == [EpochEntry(1, 0), EpochEntry(2, 25)]
    assert parse_leader_epoch_checkpoint("") == []
    assert format_leader_epoch_checkpoint([(1, 0), (2, 25)]) == "0\n2\n1 0\n2 25\n"


@pytest.mark.parametrize("text, line", [
    ("0\n1\n1 0 5\n", 3), ("0\n1\n1\n", 3), ("0\n1\n2147483648 0\n", 3), ("0\n1\nx 0\n", 3),
    ("3\n0\n", 1), ("0\n2\n1 0\n", 2),
])
def test_leader_epoch_checkpoint_malformed(text, line):
    with pytest.raises(CheckpointError, match=f"line {line}:"):
        parse_leader_epoch_checkpoint(text)


# --- partition.metadata ----------------------------------------------------------------------

def test_partition_metadata_text():
    text = "version: 0\ntopic_id: ANSbgANISVKpCYcTMoFmMg"
    parsed = parse_partition_metadata(text)
    assert parsed == PartitionMetadata(0, "ANSbgANISVKpCYcTMoFmMg")
    assert format_partition_metadata(parsed) == text
    assert parse_partition_metadata(text + "\n") == parsed          # a trailing newline is fine
    assert parse_partition_metadata("version:\t0\ntopic_id:  ANSbgANISVKpCYcTMoFmMg") == parsed
    assert parse_partition_metadata("version: 1\ntopic_id: ANSbgANISVKpCYcTMoFmMg").version == 1  # downgrade-safe
    assert format_kafka_uuid(parse_kafka_uuid("ANSbgANISVKpCYcTMoFmMg")) == "ANSbgANISVKpCYcTMoFmMg"


@pytest.mark.parametrize("text, where", [
    ("", "missing line 1"),
    ("version: 0", "missing line 2"),
    ("version:0\ntopic_id: ANSbgANISVKpCYcTMoFmMg", "line 1:"),       # ":\s+" needs whitespace
    ("Version: 0\ntopic_id: ANSbgANISVKpCYcTMoFmMg", "line 1:"),
    ("version: -1\ntopic_id: ANSbgANISVKpCYcTMoFmMg", "line 1:"),
    ("version: zero\ntopic_id: ANSbgANISVKpCYcTMoFmMg", "line 1:"),
    ("version: 0\ntopic: ANSbgANISVKpCYcTMoFmMg", "line 2:"),
    ("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "line 2:"),       # the zero Uuid
    ("version: 0\ntopic_id: ANSbgANISVKpCYcTMoFm", "line 2:"),         # 20 chars
    ("version: 0\ntopic_id: ANSbgANISVKpCYcTMoFmM+", "line 2:"),       # not URL-safe base64
])
def test_partition_metadata_malformed(text, where):
    with pytest.raises(CheckpointError, match=where):
        parse_partition_metadata(text, path="partition.metadata")


# --- meta.properties -------------------------------------------------------------------------

def test_properties_parser_follows_java_properties_load():
    text = (
        "# comment\n"
        "   ! another comment\n"
        "\n"
        "a=1\n"
        "  b : 2\n"
        "c 3\n"
        "d\t=\t 4  \n"               # trailing whitespace is kept, as Java keeps it
        "e=x\\\n"
        "     y\n"                    # continuation: leading whitespace of the next line dropped
        "f\\=g=h\\u0041\\t\\q\n"      # escaped separator in the key; \uXXXX, \t and \q escapes
        "empty\n"
        "colon:=v\n"                  # only the first separator counts
        "#not=prop\n"
        "dup=1\n"
        "dup=2\r\n"
        "last=\\\n"                   # backslash at EOF: the continuation is empty
    )
    assert parse_properties(text) == {
        "a": "1", "b": "2", "c": "3", "d": "4  ", "e": "xy", "f=g": "hA\tq", "empty": "", "colon": "=v",
        "dup": "2", "last": "",
    }


@pytest.mark.parametrize("text, message", [
    ("version=1\ncluster.id=c\n", "node.id was not found"),
    ("version=1\nnode.id=1\n", "cluster.id was not found"),
    ("version=2\nnode.id=1\ncluster.id=c\n", "unknown meta.properties version"),
    ("version=x\n", "unknown meta.properties version"),
    ("version=0\nbroker.id=one\n", "broker.id"),
    ("version=1\nnode.id=1\ncluster.id=c\ndirectory.id=nope\n", "directory.id"),
    ("a=\\u00zz\n", "line 1: malformed"),
])
def test_meta_properties_refused_like_kafka(text, message):
    with pytest.raises(CheckpointError, match=message):
        parse_meta_properties(text)


def test_meta_properties_node_id_by_version():
    # version 0 reads broker.id (optional), version 1 node.id; the other key is ignored, as in Kafka
    assert parse_meta_properties("version=0\ncluster.id=c\n").node_id is None
    assert parse_meta_properties("cluster.id=c\nbroker.id=7\n").node_id == 7      # version defaults to 0
    assert parse_meta_properties("version=0\nnode.id=3\n").node_id is None
    v1 = parse_meta_properties("version=1\nnode.id=3\nbroker.id=9\ncluster.id=c\n")
    assert (v1.node_id, v1.raw["broker.id"]) == (3, "9")


def test_meta_properties_files(tmp_path):
    assert read_meta_properties(tmp_path / META_PROPERTIES) is None
    (tmp_path / META_PROPERTIES).write_bytes(b"version=0\ncluster.id=caf\xe9\n")   # ISO-8859-1, like Java
    assert read_meta_properties(tmp_path / META_PROPERTIES).cluster_id == "café"


# --- .kafka_cleanshutdown --------------------------------------------------------------------

def test_clean_shutdown(tmp_path):
    path = tmp_path / CLEAN_SHUTDOWN_FILE
    assert read_clean_shutdown(path) is None
    path.write_text('{"version":0,"brokerEpoch":42}')
    assert read_clean_shutdown(path) == {"version": 0, "brokerEpoch": 42}
    path.write_text("")                                       # the marker of brokers before 3.7
    assert read_clean_shutdown(path) == {}
    for bad in ('{"version":0,', "[1]"):
        with pytest.raises(CheckpointError):
            parse_clean_shutdown(bad, path=path)


# --- files: atomic writes --------------------------------------------------------------------

def test_atomic_write_replaces_existing_and_leaves_no_temp(tmp_path):
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    path.write_text("0\n1\nold 0 1\n")
    (tmp_path / (path.name + ".tmp")).write_text("stale junk from a crashed write")
    write_offset_checkpoint(path, {("t", 0): 5, ("a", 1): 2})
    assert path.read_text() == "0\n2\na 1 2\nt 0 5\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    assert read_offset_checkpoint(path) == {("t", 0): 5, ("a", 1): 2}
    write_offset_checkpoint(path, {})
    assert read_offset_checkpoint(path) == {} and path.read_text() == "0\n0\n"


def test_atomic_write_fsyncs_file_then_directory(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync

    def recording_fsync(fd):
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    write_leader_epoch_checkpoint(tmp_path / LEADER_EPOCH_CHECKPOINT, [(0, 0)])
    assert synced == ["file", "dir"]
    synced.clear()
    write_offset_checkpoint(tmp_path / "x", {}, sync=False)
    assert synced == []


def test_atomic_write_failure_keeps_old_file_and_removes_temp(tmp_path, monkeypatch):
    path = tmp_path / REPLICATION_OFFSET_CHECKPOINT
    path.write_text("0\n1\nt 0 1\n")

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        write_offset_checkpoint(path, {("t", 0): 2})
    assert path.read_text() == "0\n1\nt 0 1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_file_readers_and_writers(tmp_path):
    assert read_offset_checkpoint(tmp_path / "absent") == {}
    assert read_leader_epoch_checkpoint(tmp_path / "absent") == []
    assert read_partition_metadata(tmp_path / "absent") is None
    metadata = PartitionMetadata(0, "X5HJ16TOTVq6t4OyiVmQOw")
    write_partition_metadata(tmp_path / PARTITION_METADATA, metadata)
    assert (tmp_path / PARTITION_METADATA).read_bytes() == b"version: 0\ntopic_id: X5HJ16TOTVq6t4OyiVmQOw"
    assert read_partition_metadata(tmp_path / PARTITION_METADATA) == metadata
    write_leader_epoch_checkpoint(tmp_path / LEADER_EPOCH_CHECKPOINT, [EpochEntry(0, 0), EpochEntry(3, 100)])
    assert read_leader_epoch_checkpoint(tmp_path / LEADER_EPOCH_CHECKPOINT) == [(0, 0), (3, 100)]
    bad = tmp_path / "bad-utf8"
    bad.write_bytes(b"0\n1\nt\xff 0 1\n")
    with pytest.raises(CheckpointError) as info:
        read_offset_checkpoint(bad)
    assert info.value.position == 5 and info.value.path == str(bad)
