"""Producer-state snapshots: every real broker-written snapshot parses with a valid CRC-32C and
the entry counts of the MANIFEST, round-trips byte for byte, and corruption is refused by position."""
from __future__ import annotations

import csv
import json
import re
import struct
from pathlib import Path

import crc32c
import pytest
from hypothesis import given, strategies as st

from kafkalog.errors import CheckpointError, InvalidFileNameError
from kafkalog.log.producer_snapshot import (
                                            ENTRY_SIZE,
                                            HEADER_SIZE,
                                            ProducerSnapshot,
                                            ProducerSnapshotEntry,
                                            format_producer_snapshot,
                                            parse_producer_snapshot,
                                            read_producer_snapshot,
                                            snapshot_file_name,
                                            write_producer_snapshot,
                                            )

ENTRY = ProducerSnapshotEntry(producer_id=0, producer_epoch=0, last_sequence=7728, last_offset=7728,
                              offset_delta=0, timestamp=1753819153914, coordinator_epoch=-1,
                              current_txn_first_offset=-1)


def snapshot_rows(root: Path) -> list[dict]:
    with open(root / "MANIFEST.tsv", newline="", encoding="utf-8") as f:
        rows = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        return [row for row in rows if row["kind"] == "producer-state snapshot"]


def test_every_real_snapshot_parses_with_the_manifest_counts(real_fixtures):
    rows = snapshot_rows(real_fixtures)
    assert len(rows) == 118
    with_entries = 0
    for row in rows:
        path = real_fixtures / row["path"]
        summary = re.fullmatch(r"version=1 crc32c_ok=True entries=(\d+) ?(.*)", row["summary"])
        assert summary, row["summary"]
        snapshot = read_producer_snapshot(path)
        assert snapshot.offset == int(path.name.split(".")[0])
        assert len(snapshot.entries) == int(summary[1]), path
        assert path.stat().st_size == HEADER_SIZE + ENTRY_SIZE * len(snapshot.entries) == int(row["size"])
        assert format_producer_snapshot(snapshot.entries) == path.read_bytes()     # byte-identical
        if snapshot.entries:
            with_entries += 1
            expected = json.loads(summary[2])
            (entry,) = snapshot.entries
            assert (entry.producer_id, entry.producer_epoch, entry.last_sequence, entry.last_offset,
                    entry.offset_delta, entry.timestamp, entry.coordinator_epoch,
                    entry.current_txn_first_offset) == (
                expected["pid"], expected["epoch"], expected["lastSeq"], expected["lastOffset"],
                expected["offsetDelta"], expected["ts"], expected["coordEpoch"], expected["txnFirstOffset"])
            # an idempotent producer's last batch ends just before the snapshot offset
            assert entry.last_offset == snapshot.offset - 1
    assert with_entries == 3


def test_real_snapshot_entry(real_fixtures):
    path = real_fixtures / "pinterest__tiered-storage/ts-common/src/test/resources/log-files/timeindex_test/" \
                           "00000000000000007729.snapshot"
    assert read_producer_snapshot(path) == ProducerSnapshot(7729, [ENTRY])


def with_crc(body: bytes, version: int = 1) -> bytes:
    return struct.pack(">hI", version, crc32c.crc32c(body)) + body


@pytest.mark.parametrize("data, position, message", [
    (b"", 0, "shorter than its 10-byte header"),
    (b"\x00\x01\x00\x00\x00", 5, "shorter"),
    (with_crc(struct.pack(">i", 0), version=2), 0, "unknown producer snapshot version 2"),
    (with_crc(struct.pack(">i", 0), version=0), 0, "version 0"),
    (struct.pack(">hIi", 1, 0, 0), 2, "CRC-32C mismatch"),
    (with_crc(struct.pack(">i", -1)), 6, "negative entry count"),
    (with_crc(struct.pack(">i", 1) + bytes(45)), 55, "truncated"),
    (with_crc(struct.pack(">i", 0) + b"\x00"), 10, "trailing bytes"),
    (with_crc(struct.pack(">i", 2) + bytes(46)), 56, "2 entries need 102 bytes"),
])
def test_malformed_snapshots_are_refused_at_a_byte_position(data, position, message):
    with pytest.raises(CheckpointError, match=message) as info:
        parse_producer_snapshot(data, 0, path="/p/00000000000000000000.snapshot")
    assert info.value.position == position
    assert info.value.path == "/p/00000000000000000000.snapshot"


def test_a_flipped_bit_fails_the_crc():
    good = format_producer_snapshot([ENTRY])
    assert parse_producer_snapshot(good, 7729).entries == [ENTRY]
    for index in range(6, len(good)):            # everything from the count on is covered
        bad = bytearray(good)
        bad[index] ^= 0x01
        with pytest.raises(CheckpointError, match="CRC-32C mismatch"):
            parse_producer_snapshot(bytes(bad), 7729)


def test_write_and_read_back(tmp_path):
    snapshot = ProducerSnapshot(9100, [ENTRY, ProducerSnapshotEntry(5, 1, -1, -1, 0, -1, 3, 42)])
    path = write_producer_snapshot(tmp_path, snapshot)
    assert path == tmp_path / "00000000000000009100.snapshot" == tmp_path / snapshot_file_name(9100)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]          # no temp file left
    assert read_producer_snapshot(path) == snapshot
    assert path.stat().st_size == HEADER_SIZE + 2 * ENTRY_SIZE
    write_producer_snapshot(tmp_path, ProducerSnapshot(9100, []))            # replaces the old file
    assert read_producer_snapshot(path) == ProducerSnapshot(9100, [])

    deleted = tmp_path / "00000000000000009100.snapshot.deleted"
    deleted.write_bytes(path.read_bytes())
    assert read_producer_snapshot(deleted).offset == 9100
    other = tmp_path / "copy.bin"
    other.write_bytes(path.read_bytes())
    with pytest.raises(InvalidFileNameError):
        read_producer_snapshot(other)
    assert read_producer_snapshot(other, offset=5).offset == 5
    log = tmp_path / "00000000000000009100.log"
    log.write_bytes(b"")
    with pytest.raises(InvalidFileNameError):
        read_producer_snapshot(log)


def test_format_refuses_values_outside_the_layout():
    with pytest.raises(CheckpointError, match="entry 1"):
        format_producer_snapshot([ENTRY, ProducerSnapshotEntry(0, 2**15, 0, 0, 0, 0, 0, 0)])


entries = st.builds(
    ProducerSnapshotEntry,
    st.integers(-(2**63), 2**63 - 1), st.integers(-(2**15), 2**15 - 1), st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1), st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1),
)


@given(st.integers(0, 2**63 - 1), st.lists(entries, max_size=10))
def test_snapshot_round_trip(offset, items):
    data = format_producer_snapshot(items)
    assert parse_producer_snapshot(data, offset) == ProducerSnapshot(offset, items)
    assert format_producer_snapshot(parse_producer_snapshot(data, offset).entries) == data
