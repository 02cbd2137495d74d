"""kafkalog.tools.dump: kafka-dump-log.sh output, line for line, on real broker files and hand-built bytes."""
from __future__ import annotations

import base64
import csv
import json
import os
import re
import struct
from pathlib import Path

import pytest

from kafkalog.tools.dump.batch_walk import read_batch
from kafkalog.tools.dump.dumper import Dumper, dump
from kafkalog.tools.dump.log_segment import batch_line
from kafkalog.tools.dump.options import CLUSTER_METADATA_DECODER
from kafkalog.tools.dump.options import DumpOptions
from kafkalog.format import control_record as cr
from kafkalog.format import legacy_record as legacy
from kafkalog.format import record_batch as rb

from conftest import REAL_FIXTURES

# --- vectors (MemoryRecordsTest) --------------------------------------------------------------------

from vectors import COMMIT_MARKER, EMPTY_BATCH  # noqa: E402
from vectors import V0_FIRST as V0_MESSAGE  # noqa: E402
from vectors import V0_LZ4 as V0_LZ4_WRAPPER  # noqa: E402
from vectors import V1_FIRST as V1_MESSAGE  # noqa: E402
from vectors import V1_LZ4 as V1_LZ4_WRAPPER  # noqa: E402
from vectors import V2_UNCOMPRESSED as V2_TWO_RECORDS  # noqa: E402

COMMIT_LINE = ("baseOffset: 42 lastOffset: 42 count: 1 baseSequence: -1 lastSequence: -1 producerId: 1000 "
               "producerEpoch: 0 partitionLeaderEpoch: 3 isTransactional: true isControl: true "
               "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000000 size: 78 magic: 2 "
               "compresscodec: none crc: 4236554292 isvalid: true")
EMPTY_BATCH_LINE = ("baseOffset: 100 lastOffset: 104 count: 0 baseSequence: 10 lastSequence: 14 producerId: 7 "
                    "producerEpoch: 1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
                    "deleteHorizonMs: OptionalLong.empty position: 78 CreateTime: 1700000000123 size: 61 magic: 2 "
                    "compresscodec: none crc: 3148458943 isvalid: true")


def run(paths, **options):
    return dump([os.fspath(p) for p in paths], DumpOptions(**options))


def write(directory: Path, name: str, data: bytes) -> Path:
    path = directory / name
    path.write_bytes(data)
    return path


def batch(offsets, *, base_ts=1_000, **kwargs) -> bytes:
    """A v2 batch of records at the given offsets, key k<offset>, value v<offset>."""
    records = [rb.V2Record(o, base_ts + o, f"k{o}".encode(), f"v{o}".encode()) for o in offsets]
    return rb.encode_batch(records, **kwargs)


def set_crc(data: bytearray, position: int) -> None:
    size = struct.unpack_from(">i", data, position + 8)[0] + 12
    struct.pack_into(">I", data, position + rb.CRC_OFFSET,
                     rb.crc32c(bytes(data[position + rb.ATTRIBUTES_OFFSET:position + size])))


def offset_index_bytes(pairs, base=0) -> bytes:
    return b"".join(struct.pack(">ii", o - base, p) for o, p in pairs)


def time_index_bytes(pairs, base=0) -> bytes:
    return b"".join(struct.pack(">qi", t, o - base) for t, o in pairs)


def batch_lines(lines):
    return [line for line in lines if line.startswith(("baseOffset: ", "offset: "))]


# --- real broker files ---------------------------------------------------------------------

def _manifest_record_files():
    manifest = REAL_FIXTURES / "MANIFEST.tsv"
    if not manifest.is_file():
        return [pytest.param(None, id="fixtures-absent")]
    out = []
    with open(manifest, newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            path = row["path"]
            if row["kind"] == "log segment" or ("/_derived_records/" in path and path.endswith(".records.bin")):
                out.append(pytest.param(row, id=path))
    return out


RECORD_FILES = _manifest_record_files()


def _expected_counts(summary: str):
    m = re.search(r"batches=(\d+) records=(\d+)", summary)
    if m:
        return int(m.group(1)), int(m.group(2))
    assert summary.startswith("empty"), summary
    return 0, 0


@pytest.mark.parametrize("row", RECORD_FILES)
def test_every_real_record_file_dumps_its_manifest_batches(real_fixtures, row):
    path = real_fixtures / row["path"]
    batches, _ = _expected_counts(row["summary"])
    result = run([path])
    assert result.stdout[0] == f"Dumping {path}"
    start = result.stdout[1]
    assert re.fullmatch(r"Log starting offset: -?\d+", start), start
    if path.name.endswith(".log"):
        assert start == f"Log starting offset: {int(path.name.split('.')[0])}"
    lines = batch_lines(result.stdout)
    assert len(lines) == batches
    assert "Traceback" not in "\n".join(result.stderr)
    invalid_crc = "invalid_crc" in path.name
    for line in lines:
        assert line.endswith("isvalid: false" if invalid_crc else "isvalid: true"), line
    found = [line for line in result.stdout if line.startswith("Found ")]
    if "truncated-tail(1024B)" in row["summary"]:
        assert found == [f"Found 1024 invalid bytes at the end of {path.name}"]
    if invalid_crc or found:
        assert result.exit_code == 1
        assert all(line.startswith(f"kafkalog dump: error: {path}: byte ") for line in result.stderr)
    else:
        assert result.exit_code == 0 and result.stderr == []


@pytest.mark.parametrize("row", RECORD_FILES)
def test_every_real_record_file_deep_json_round_trips_manifest_counts(real_fixtures, row):
    path = real_fixtures / row["path"]
    batches, records = _expected_counts(row["summary"])
    result = run([path], print_data_log=True, json=True)
    objects = [json.loads(line) for line in result.stdout]
    summary = objects[-1]
    assert summary["type"] == "summary" and summary["kind"] == "log"
    assert summary["batches"] == batches == sum(o["type"] == "batch" for o in objects)
    assert summary["records"] == records == sum(o["type"] == "record" for o in objects)
    assert summary["valid_bytes"] + summary["invalid_bytes"] == path.stat().st_size
    assert len(summary["errors"]) == result.exit_code * len(summary["errors"])
    for o in objects:
        assert o["file"] == str(path)
        if o["type"] == "record":
            for side in ("key", "value"):
                raw = None if o[f"{side}_b64"] is None else base64.b64decode(o[f"{side}_b64"])
                assert o[f"{side}Size"] == (-1 if raw is None else len(raw))
                if o[side] is not None:
                    assert o[side].encode("utf-8") == raw


def test_deep_iteration_of_two_record_test_topic_segments(real_fixtures):
    paths = sorted(p for p in (real_fixtures / "apache__kafka/core/data").glob("*/test-topic-0*/*.log")
                   if p.stat().st_size == 83)
    assert len(paths) >= 2
    result = run(paths, print_data_log=True)
    expected = []
    for p in paths:
        expected += [
            f"Dumping {p}",
            "Log starting offset: 0",
            "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
            "partitionLeaderEpoch: 1 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
            "position: 0 CreateTime: 11 size: 83 magic: 2 compresscodec: none crc: 2895120616 isvalid: true",
            "| offset: 0 CreateTime: 10 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [] key: k1 payload: v1",
            "| offset: 1 CreateTime: 11 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [] key: k2 payload: v2",
        ]
    assert result.stdout == expected
    assert result.stderr == [] and result.exit_code == 0
    plain = run(paths[:1], deep_iteration=True).stdout
    assert plain[3] == "| offset: 0 CreateTime: 10 keySize: 2 valueSize: 2 sequence: -1 headerKeys: []"
    assert run(paths[:1], print_data_log=True, skip_record_metadata=True).stdout[3:] == ["| key: k1 payload: v1",
                                                                                          "| key: k2 payload: v2"]


def test_kraft_leader_change_control_record(real_fixtures):
    path = next(p for p in sorted((real_fixtures / "apache__kafka/core/data").glob("*/__cluster_metadata-0/*.log"))
                if p.stat().st_size > 0)
    out = run([path], deep_iteration=True).stdout
    assert out[2].startswith("baseOffset: 0 lastOffset: 0 count: 1 ") and " isControl: true " in out[2]
    assert out[3].startswith("| offset: 0 CreateTime: ") and out[3].endswith(
        " keySize: 4 valueSize: 19 sequence: -1 headerKeys: [] LeaderChange: "
        '{"version":0,"leaderId":1000,"voters":[{"voterId":1000}],"grantingVoters":[{"voterId":1000}]}')
    # control batches never print key/payload
    assert run([path], print_data_log=True).stdout[3] == out[3]


def test_cluster_metadata_decoder_on_real_metadata_logs(real_fixtures):
    """Lines Kafka 4.4's DumpLogSegments --cluster-metadata-decoder printed for this fixture (Kafka's own test
    data of 2023): a record it decodes, and a PartitionRecord of an older layout it cannot (neither can we)."""
    path = real_fixtures / "apache__kafka/core/data/kafka-1168504093769635972/__cluster_metadata-0/00000000000000000000.log"
    out = run([path], decoder=CLUSTER_METADATA_DECODER).stdout
    assert out[12] == ('| offset: 6 CreateTime: 1700647003087 keySize: -1 valueSize: 85 sequence: -1 headerKeys: [] payload: {"type":"REGISTER_BROKER_RECORD","version":2,"data":{"brokerId":0,"isMigratingZkBroker":false,"incarnationId":"pUz6cDylS0GJ4Z31DMOjdg","brokerEpoch":6,"endPoints":[{"name":"PLAINTEXT","host":"localhost","port":41519,"securityProtocol":0}],"features":[{"name":"metadata.version","minSupportedVersion":1,"maxSupportedVersion":16}],"rack":null,"fenced":true,"inControlledShutdown":false}}')
    assert out[43] == ("| offset: 24 CreateTime: 1700647007183 keySize: -1 valueSize: 54 sequence: -1 headerKeys: [] "
                       "payload: Error at 24, skipping. Failed to deserialize record with type 3")
    assert len(out) == 141


def _pinterest(real_fixtures) -> Path:
    return real_fixtures / "pinterest__tiered-storage"


def test_pinterest_offset_and_time_index_dumps(real_fixtures):
    d = _pinterest(real_fixtures) / "ts-common/src/test/resources/log-files/timeindex_test"
    index, timeindex = d / "00000000000000000000.index", d / "00000000000000000000.timeindex"
    result = run([index, timeindex])
    assert result.exit_code == 0 and result.stderr == []
    out = result.stdout
    assert out[:3] == [f"Dumping {index}", "offset: 32 position: 4204", "offset: 64 position: 8428"]
    i = out.index(f"Dumping {timeindex}")
    assert i == 1 + 249
    assert all(re.fullmatch(r"offset: \d+ position: \d+", line) for line in out[1:i])
    assert out[i + 1] == "timestamp: 1753819117020 offset: 32"
    assert len(out) - i - 1 == 250
    assert all(re.fullmatch(r"timestamp: \d+ offset: \d+", line) for line in out[i + 1:])
    verified = run([index, timeindex], verify_index_only=True)
    assert verified.stdout == [f"Dumping {index}", f"Dumping {timeindex}"]
    assert verified.stderr == [] and verified.exit_code == 0
    sane = run([index, timeindex], index_sanity_check=True)
    assert sane.stdout == [f"Dumping {index}", f"{index} passed sanity check.",
                           f"Dumping {timeindex}", f"{timeindex} passed sanity check."]
    as_json = [json.loads(line) for line in run([index], json=True).stdout]
    assert as_json[0] == {"type": "index_entry", "file": str(index), "offset": 32, "position": 4204}
    assert as_json[-1]["type"] == "summary" and as_json[-1]["entries"] == 249 and as_json[-1]["errors"] == []


def test_every_pinterest_index_dumps_and_passes_sanity_check(real_fixtures):
    files = sorted(_pinterest(real_fixtures).rglob("*.index")) + sorted(_pinterest(real_fixtures).rglob("*.timeindex"))
    assert len(files) > 100
    result = run(files, index_sanity_check=True)
    assert result.exit_code == 0 and result.stderr == []
    assert all(line.startswith("Dumping ") or line.endswith((" passed sanity check.", " is empty."))
               for line in result.stdout)
    plain = run(files)   # the indexes whose .log is absent are printed with a warning
    assert plain.exit_code == 0
    assert all(": warning: " in line or line.startswith(("The following", "Indexed offset: ")) for line in plain.stderr)


def test_empty_index_and_snapshots(real_fixtures):
    d = _pinterest(real_fixtures) / "ts-consumer/src/test/resources/log-files/test_topic_a-0"
    empty_index = d / "00000000000000000362.index"
    empty_snapshot = d / "00000000000000000362.snapshot"
    snapshot = _pinterest(real_fixtures) / "ts-common/src/test/resources/log-files/timeindex_test/00000000000000007729.snapshot"
    result = run([empty_index, empty_snapshot, snapshot])
    assert result.stdout == [
        f"Dumping {empty_index}", f"{empty_index} is empty.",
        f"Dumping {empty_snapshot}",
        f"Dumping {snapshot}",
        "producerId: 0 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1753819153914 firstSequence: 7728 lastSequence: 7728 lastOffset: 7728 offsetDelta: 0 "
        "timestamp: 1753819153914",
    ]
    assert result.exit_code == 0 and result.stderr == []


def test_time_index_entries_inside_batches_are_reported_as_kafka_does(real_fixtures):
    # This broker indexed the offset of the max-timestamp record, inside a batch; DumpLogSegments
    # reports such entries as "not found".
    d = _pinterest(real_fixtures) / "ts-consumer/src/test/resources/log-files/test_topic_a-0"
    timeindex = d / "00000000000000000000.timeindex"
    result = run([timeindex])
    assert result.stdout == [f"Dumping {timeindex}", "timestamp: 1700691401843 offset: 66",
                             "timestamp: 1700691401848 offset: 303"]
    assert result.stderr == ["The following indexed offsets are not found in the log.",
                             "Indexed offset: 66, found log offset: 70",
                             "Indexed offset: 303, found log offset: 361"]
    assert result.exit_code == 0


def test_index_without_its_log(real_fixtures):
    index = _pinterest(real_fixtures) / "ts-consumer/src/test/resources/00000000000000000000.index"
    result = run([index])
    assert result.stdout[:2] == [f"Dumping {index}", "offset: 41 position: 4182"]
    assert len(result.stdout) == 1 + 7
    assert len(result.stderr) == 1 and "warning" in result.stderr[0] and "00000000000000000000.log" in result.stderr[0]
    assert result.exit_code == 0
    verify = run([index], verify_index_only=True)
    assert verify.exit_code == 1 and "cannot verify the index" in verify.stderr[0]


# --- exact lines on hand-built bytes --------------------------------------------------------

def test_commit_marker_and_empty_batch_exact_lines(tmp_path):
    path = write(tmp_path, "00000000000000000042.log", COMMIT_MARKER + EMPTY_BATCH)
    result = run([path], deep_iteration=True)
    assert result.stdout == [
        f"Dumping {path}",
        "Log starting offset: 42",
        COMMIT_LINE,
        "| offset: 42 CreateTime: 1700000000000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: COMMIT coordinatorEpoch: 5",
        EMPTY_BATCH_LINE,
    ]
    # Kafka 4.x counts from -1: a file whose first record is not offset 0 reports that as a gap
    assert result.stderr == [f"Non-consecutive offsets in {path}", "  -1 is followed by 42"]
    assert result.exit_code == 0
    assert run([path]).stdout == [f"Dumping {path}", "Log starting offset: 42", COMMIT_LINE, EMPTY_BATCH_LINE]


def test_commit_marker_json(tmp_path):
    path = write(tmp_path, "00000000000000000042.log", COMMIT_MARKER + EMPTY_BATCH)
    objects = [json.loads(line) for line in run([path], print_data_log=True, json=True).stdout]
    assert [o["type"] for o in objects] == ["batch", "record", "batch", "summary"]
    b = objects[0]
    assert b == {"type": "batch", "file": str(path), "position": 0, "size": 78, "magic": 2, "baseOffset": 42,
                 "lastOffset": 42, "count": 1, "baseSequence": -1, "lastSequence": -1, "producerId": 1000,
                 "producerEpoch": 0, "partitionLeaderEpoch": 3, "isTransactional": True, "isControl": True,
                 "deleteHorizonMs": None, "timestampType": "CreateTime", "baseTimestamp": 1700000000000,
                 "maxTimestamp": 1700000000000, "attributes": 0x30, "compresscodec": "none", "crc": 4236554292,
                 "isvalid": True}
    r = objects[1]
    assert r["offset"] == 42 and r["controlType"] == "COMMIT" and r["coordinatorEpoch"] == 5
    assert base64.b64decode(r["key_b64"]) == cr.control_key(cr.COMMIT)
    assert base64.b64decode(r["value_b64"]) == cr.end_txn_marker_value(5)
    assert objects[2]["count"] == 0 and objects[2]["lastOffset"] == 104
    assert objects[3] == {"type": "summary", "file": str(path), "kind": "log", "batches": 2, "records": 1,
                          "entries": 0, "valid_bytes": 139, "invalid_bytes": 0, "startOffset": 42, "errors": []}


def test_kafka_v2_vector_with_data(tmp_path):
    path = write(tmp_path, "00000000000000000000.log", V2_TWO_RECORDS)
    assert run([path], print_data_log=True).stdout[2:] == [
        "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
        "partitionLeaderEpoch: -1 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        "position: 0 CreateTime: 283843 size: 97 magic: 2 compresscodec: none crc: 3851219455 isvalid: true",
        "| offset: 0 CreateTime: 283843 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] key: key1 payload: value1",
        "| offset: 1 CreateTime: 1234 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] key: key2 payload: value2",
    ]


def test_legacy_messages_and_wrappers(tmp_path):
    plain = write(tmp_path, "00000000000000000000.log", V0_MESSAGE + V1_MESSAGE)
    out = run([plain], print_data_log=True).stdout
    assert out[2:] == [
        "offset: 0 position: 0 NoTimestampType: -1 size: 36 magic: 0 compresscodec: none crc: 1978725405 isvalid: true",
        "| offset: 0 NoTimestampType: -1 keySize: 4 valueSize: 6 isValid: true crc: 1978725405} key: key1 payload: value1",
        "offset: 0 position: 36 CreateTime: 283843 size: 44 magic: 1 compresscodec: none crc: 109425508 isvalid: true",
        "| offset: 0 CreateTime: 283843 keySize: 4 valueSize: 6 isValid: true crc: 109425508} key: key1 payload: value1",
    ]
    wrappers = write(tmp_path, "wrappers.bin", V0_LZ4_WRAPPER + V1_LZ4_WRAPPER)
    result = run([wrappers], deep_iteration=True)
    assert result.stdout[1:] == [
        "Log starting offset: 0",    # no offset in the name: the first inner offset of the first wrapper
        "offset: 1 position: 0 NoTimestampType: -1 size: 98 magic: 0 compresscodec: lz4 crc: 66944826 isvalid: true",
        "| offset: 0 NoTimestampType: -1 keySize: 4 valueSize: 6 isValid: true crc: 1978725405}",
        "| offset: 1 NoTimestampType: -1 keySize: 4 valueSize: 6 isValid: true crc: 1964753830}",
        "offset: 1 position: 98 CreateTime: 283843 size: 120 magic: 1 compresscodec: lz4 crc: 1407303399 isvalid: true",
        "| offset: 0 CreateTime: 283843 keySize: 4 valueSize: 6 isValid: true crc: 109425508}",
        "| offset: 1 CreateTime: 1234 keySize: 4 valueSize: 6 isValid: true crc: 84488197}",
    ]
    # offsets 0,1 then 0,1 again: one backwards step, reported as Kafka does
    assert result.stderr == [f"Non-consecutive offsets in {wrappers}", "  1 is followed by 0"]
    objects = [json.loads(line) for line in run([wrappers], json=True).stdout]
    assert objects[0]["baseOffset"] == 0 and objects[0]["lastOffset"] == 1 and objects[0]["count"] is None
    assert objects[-1]["startOffset"] == 0 and objects[-1]["records"] is None


def test_log_append_time_delete_horizon_sequences_headers_and_data(tmp_path):
    first = rb.encode_batch(
        [rb.V2Record(0, 500, None, b"v0", [("h1", b"x"), ("h2", None)]),
         rb.V2Record(1, 501, b"k1", None),
         rb.V2Record(2, 502, b"\xffk", "p\u00e9".encode())],
        producer_id=9, producer_epoch=2, base_sequence=5, partition_leader_epoch=4)
    second = rb.encode_batch([rb.V2Record(3, 10, b"k3", b"v3")], timestamp_type=rb.LOG_APPEND_TIME,
                             max_timestamp=777)
    third = rb.encode_batch([rb.V2Record(4, 900, b"k4", None)], delete_horizon_ms=123456)
    path = write(tmp_path, "00000000000000000000.log", first + second + third)
    out = run([path], print_data_log=True).stdout
    assert out[2].startswith("baseOffset: 0 lastOffset: 2 count: 3 baseSequence: 5 lastSequence: 7 producerId: 9 "
                             "producerEpoch: 2 partitionLeaderEpoch: 4 ")
    assert out[3:6] == [
        "| offset: 0 CreateTime: 500 keySize: -1 valueSize: 2 sequence: 5 headerKeys: [h1,h2] payload: v0",
        "| offset: 1 CreateTime: 501 keySize: 2 valueSize: -1 sequence: 6 headerKeys: [] key: k1",
        "| offset: 2 CreateTime: 502 keySize: 2 valueSize: 3 sequence: 7 headerKeys: [] key: \ufffdk payload: p\u00e9",
    ]
    assert " LogAppendTime: 777 " in out[6]
    assert out[7] == "| offset: 3 LogAppendTime: 777 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [] key: k3 payload: v3"
    assert " deleteHorizonMs: OptionalLong[123456] " in out[8]
    assert out[9] == "| offset: 4 CreateTime: 900 keySize: 2 valueSize: -1 sequence: -1 headerKeys: [] key: k4"
    skip = run([path], print_data_log=True, skip_record_metadata=True).stdout
    # Kafka 4.x: the "| " prefix goes to whichever of key and payload comes first
    assert skip[3:6] == ["| payload: v0", "| key: k1", "| key: \ufffdk payload: p\u00e9"]
    records = [json.loads(line) for line in run([path], print_data_log=True, json=True).stdout]
    records = [o for o in records if o["type"] == "record"]
    assert records[0]["key"] is None and records[0]["key_b64"] is None and records[0]["value"] == "v0"
    assert records[0]["headers"] == [{"key": "h1", "value_b64": "eA=="}, {"key": "h2", "value_b64": None}]
    assert records[2]["key"] is None and records[2]["key_b64"] == base64.b64encode(b"\xffk").decode()
    assert records[2]["value"] == "p\u00e9" and records[2]["sequence"] == 7
    assert records[3]["timestamp"] == 777 and records[3]["timestampType"] == "LogAppendTime"
    assert "key_b64" not in [json.loads(line) for line in run([path], deep_iteration=True, json=True).stdout][1]


def test_non_consecutive_offsets(tmp_path):
    compacted = rb.encode_batch([rb.V2Record(2, 1, b"a", b"b"), rb.V2Record(4, 1, b"a", b"b")], base_offset=0,
                                last_offset_delta=5)
    path = write(tmp_path, "00000000000000000000.log", batch([0, 1]) + compacted + batch([9]))
    result = run([path], deep_iteration=True)
    # Kafka 4.x: a TreeMap, in ascending order (the Scala tool of 3.x listed them newest first)
    assert result.stderr == [f"Non-consecutive offsets in {path}", "  2 is followed by 4", "  4 is followed by 9"]
    assert result.exit_code == 0
    assert run([path]).stderr == []          # only with deep iteration
    gaps = [json.loads(line) for line in run([path], deep_iteration=True, json=True).stdout]
    assert [(o["from"], o["to"]) for o in gaps if o["type"] == "non_consecutive_offsets"] == [(2, 4), (4, 9)]


def test_kraft_control_records_and_snapshot_names(tmp_path):
    def control(offset, ctype, value):
        return rb.encode_batch([rb.V2Record(offset, 7, cr.control_key(ctype), value)], control=True)

    header = struct.pack(">hq", 0, 1234) + b"\x00"
    footer = struct.pack(">h", 0) + b"\x00"
    version = struct.pack(">hh", 0, 1) + b"\x00"
    directory_id = bytes(range(16))
    voters = (struct.pack(">h", 0) + b"\x02"                       # one voter
              + struct.pack(">i", 3) + directory_id
              + b"\x02" + b"\x0bCONTROLLER" + b"\x0alocalhost" + struct.pack(">H", 9093) + b"\x00"
              + struct.pack(">hh", 0, 1) + b"\x00"                 # kRaftVersionFeature + its tags
              + b"\x00"                                            # voter tags
              + b"\x00")                                           # message tags
    data = (control(0, cr.SNAPSHOT_HEADER, header) + control(1, cr.KRAFT_VERSION, version)
            + control(2, cr.KRAFT_VOTERS, voters) + control(3, 9, b"") + control(4, cr.ABORT, cr.end_txn_marker_value(7))
            + control(5, cr.SNAPSHOT_FOOTER, footer))
    path = write(tmp_path, "00000000000000000006-0000000002.checkpoint", data)
    result = run([path], deep_iteration=True)
    assert result.stdout[1] == "Snapshot end offset: 6, epoch: 2"
    suffixes = [line.split(" headerKeys: []", 1)[1] for line in result.stdout if line.startswith("| ")]
    uuid = base64.urlsafe_b64encode(directory_id).decode().rstrip("=")
    assert suffixes == [
        ' SnapshotHeader {"version":0,"lastContainedLogTimestamp":1234}',
        ' KRaftVersion {"version":0,"kRaftVersion":1}',
        ' KRaftVoters {"version":0,"voters":[{"voterId":3,"voterDirectoryId":"%s","endpoints":[{"name":"CONTROLLER",'
        '"host":"localhost","port":9093}],"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":1}}]}'
        % uuid,
        " controlType: UNKNOWN(9)",
        " endTxnMarker: ABORT coordinatorEpoch: 7",
        ' SnapshotFooter {"version":0}',
    ]
    assert result.exit_code == 0
    bootstrap = write(tmp_path, "bootstrap.checkpoint", data)
    assert run([bootstrap]).stdout[1] == "KRaft bootstrap snapshot"
    odd = write(tmp_path, "other.checkpoint", data)
    bad = run([odd])
    assert bad.exit_code == 1 and "is not a KRaft snapshot name" in bad.stderr[0]


def test_bad_control_record_is_reported_and_the_dump_goes_on(tmp_path):
    broken = rb.encode_batch([rb.V2Record(0, 7, b"\x00", b"")], control=True)       # key shorter than 4 bytes
    path = write(tmp_path, "00000000000000000000.log", broken + batch([1]))
    result = run([path], deep_iteration=True)
    assert result.stdout[3].startswith("| offset: 0 CreateTime: 7 keySize: 1 ")
    assert result.stdout[5].startswith("| offset: 1 ")
    assert result.exit_code == 1
    assert result.stderr[0].startswith(f"kafkalog dump: error: {path}: byte 0: control record key has 1 bytes")


# --- bad input -----------------------------------------------------------------------------

def test_bad_crc_prints_isvalid_false_and_continues(tmp_path):
    data = bytearray(batch([0, 1]) + batch([2]) + batch([3, 4]))
    second = len(batch([0, 1]))
    data[second + 70] ^= 0xFF                 # inside the records of the second batch
    path = write(tmp_path, "00000000000000000000.log", bytes(data))
    result = run([path], deep_iteration=True)
    lines = batch_lines(result.stdout)
    assert [line.rsplit(" ", 1)[1] for line in lines] == ["true", "false", "true"]
    assert result.exit_code == 1
    assert len(result.stderr) >= 1
    assert result.stderr[0].startswith(f"kafkalog dump: error: {path}: byte {second}: batch at offset 2: stored CRC-32C ")
    assert sum(line.startswith("| offset: ") for line in result.stdout) >= 4    # the batches around it iterate


def test_truncated_tail(tmp_path):
    full = batch([0, 1]) + batch([2])
    path = write(tmp_path, "00000000000000000000.log", full[:-5])
    result = run([path])
    first = len(batch([0, 1]))
    assert batch_lines(result.stdout) == [batch_lines(run([write(tmp_path, "00000000000000000001.log", full)]).stdout)[0]]
    assert result.stdout[-1] == f"Found {len(full) - 5 - first} invalid bytes at the end of {path.name}"
    assert result.exit_code == 1
    assert result.stderr == [f"kafkalog dump: error: {path}: byte {first}: batch of {len(full) - first} bytes runs past "
                             f"the end of the file, which has {len(full) - 5 - first} bytes left (an incomplete batch, "
                             "as after a crash or a partial copy; Kafka's recovery drops it)"]
    limited = run([path], max_bytes=first + 10)
    assert not any(line.startswith("Found ") for line in limited.stdout)
    assert len(batch_lines(limited.stdout)) == 1 and limited.exit_code == 0
    short = write(tmp_path, "00000000000000000002.log", full[:first] + b"\x01" * 17)
    assert run([short]).stdout[-1] == f"Found 17 invalid bytes at the end of {short.name}"
    summary = json.loads(run([path], json=True).stdout[-1])
    assert summary["invalid_bytes"] == len(full) - 5 - first and summary["errors"][0]["position"] == first


def test_zero_filled_tail_aborts_the_file_but_not_the_run(tmp_path):
    good = batch([0])
    path = write(tmp_path, "00000000000000000000.log", good + bytes(100))
    other = write(tmp_path, "00000000000000000005.log", batch([5]))
    result = run([path, other])
    assert result.stdout[:3] == [f"Dumping {path}", "Log starting offset: 0", batch_lines(result.stdout)[0]]
    assert f"Dumping {other}" in result.stdout and len(batch_lines(result.stdout)) == 2
    assert not any(line.startswith("Found ") for line in result.stdout)    # Kafka stops with an exception there
    assert result.stderr[0].startswith(
        f"kafkalog dump: error: {path}: byte {len(good)}: record size 0 is smaller than the minimum record overhead (14)")
    assert result.exit_code == 1
    assert json.loads(run([path], json=True).stdout[-1])["invalid_bytes"] == 100


@pytest.mark.parametrize("mutate, message", [
    (lambda d: struct.pack_into(">i", d, 8, 20), "v2 batch of 32 bytes is smaller than its 61-byte header"),
    (lambda d: d.__setitem__(16, 0xFE), "unknown magic -2"),
])
def test_structurally_bad_batches(tmp_path, mutate, message):
    data = bytearray(batch([0, 1, 2]))
    mutate(data)
    path = write(tmp_path, "00000000000000000000.log", bytes(data))
    result = run([path])
    assert result.exit_code == 1
    assert result.stderr[0].startswith(f"kafkalog dump: error: {path}: byte 0: {message}")


def test_undecodable_records_and_unknown_codec(tmp_path):
    bad_records = bytearray(batch([0, 1]))
    bad_records[rb.RECORDS_OFFSET] = 0x7F             # first record length: -64
    set_crc(bad_records, 0)
    codec7 = bytearray(batch([2]))
    struct.pack_into(">h", codec7, rb.ATTRIBUTES_OFFSET, 7)
    set_crc(codec7, 0)
    path = write(tmp_path, "00000000000000000000.log", bytes(bad_records) + bytes(codec7) + batch([3]))
    result = run([path], deep_iteration=True)
    lines = batch_lines(result.stdout)
    assert len(lines) == 3 and all(line.endswith("isvalid: true") for line in lines)
    assert " compresscodec: unknown(7) " in lines[1]
    assert result.stdout[-1].startswith("| offset: 3 ")
    assert result.exit_code == 1 and len(result.stderr) == 4
    assert result.stderr[2:] == [f"Non-consecutive offsets in {path}", "  -1 is followed by 3"]
    # uncompressed records: the position of the bad record itself
    assert result.stderr[0].startswith(f"kafkalog dump: error: {path}: byte {rb.RECORDS_OFFSET}: record length -64")
    assert result.stderr[1].startswith(f"kafkalog dump: error: {path}: byte {len(bad_records)}: ")
    assert "unknown compression codec id 7" in result.stderr[1]


def test_missing_directory_and_unknown_files(tmp_path):
    missing = tmp_path / "00000000000000000000.log"
    folder = tmp_path / "00000000000000000001.log"
    folder.mkdir()
    unknown = write(tmp_path, "00000000000000000000.log.deleted", batch([0]))
    result = run([missing, folder, unknown, tmp_path / "README"])
    assert result.stdout == [f"Dumping {missing}", f"Dumping {folder}", f"Dumping {unknown}",
                             f"Dumping {tmp_path / 'README'}"]
    assert result.stderr[0] == f"kafkalog dump: error: {missing}: No such file or directory"
    assert result.stderr[1].startswith(f"kafkalog dump: error: {folder}: ")
    assert result.stderr[2:] == [f"Ignoring unknown file {unknown}", f"Ignoring unknown file {tmp_path / 'README'}"]
    assert result.exit_code == 1
    assert [s.kind for s in result.summaries] == ["log", "log", "unknown", "unknown"]


def test_record_file_names_without_an_offset(tmp_path):
    named = write(tmp_path, "segment.log", batch([17, 18]))
    empty = write(tmp_path, "empty.records.bin", b"")
    result = run([named, empty])
    assert result.stdout[1] == "Log starting offset: 17"
    assert result.stdout[-1] == "Log starting offset: -1"
    assert result.exit_code == 0


# --- indexes -------------------------------------------------------------------------------

def _segment(tmp_path, base=100):
    batches = [batch([base, base + 1]), batch([base + 2]), batch([base + 3, base + 4, base + 5])]
    positions = [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    write(tmp_path, f"{base:020d}.log", b"".join(batches))
    return batches, positions


def test_offset_index_dump_and_mismatches(tmp_path):
    _, positions = _segment(tmp_path)
    index = write(tmp_path, "00000000000000000100.index",
                  offset_index_bytes([(102, positions[1]), (104, positions[2]), (101, positions[1])], base=100)
                  + bytes(8 * 5))        # preallocated zero slots
    other = write(tmp_path, "00000000000000000100.snapshot", b"")
    result = run([index, other])
    assert result.stdout == [f"Dumping {index}", f"offset: 102 position: {positions[1]}",
                             f"offset: 104 position: {positions[2]}", f"offset: 101 position: {positions[1]}",
                             f"Dumping {other}"]
    # after every file, by index offset in reverse (Kafka's TreeMap(reverseOrder))
    assert result.stderr[-3:] == [f"Mismatches in :{index}", "  Index offset: 104, log offset: 105",
                                  "  Index offset: 101, log offset: 102"]
    assert result.exit_code == 1     # the empty .snapshot is not a snapshot
    verify = run([index], verify_index_only=True)
    assert verify.stdout == [f"Dumping {index}"] and verify.stderr[0] == f"Mismatches in :{index}"
    assert verify.exit_code == 0
    mismatches = [json.loads(line) for line in run([index], json=True).stdout]
    assert [(o["indexOffset"], o["logOffset"]) for o in mismatches if o["type"] == "index_mismatch"] == [
        (104, 105), (101, 102)]


def test_offset_index_corner_cases(tmp_path):
    _, positions = _segment(tmp_path)
    zeros = write(tmp_path, "00000000000000000100.index", bytes(80))   # wholly preallocated: Kafka prints slot 0
    result = run([zeros])
    assert result.stdout == [f"Dumping {zeros}", "offset: 100 position: 0"]
    assert result.stderr == [f"Mismatches in :{zeros}", "  Index offset: 100, log offset: 101"]
    assert run([zeros], index_sanity_check=True).stdout[1] == f"{zeros} passed sanity check."   # OffsetIndex.sanityCheck
    odd = write(tmp_path, "00000000000000000100.index", offset_index_bytes([(102, positions[1])], 100) + b"\x00" * 5)
    result = run([odd])
    assert result.stdout == [f"Dumping {odd}", f"offset: 102 position: {positions[1]}"]
    assert result.exit_code == 1
    assert result.stderr[0].startswith(f"kafkalog dump: error: {odd}: byte 8: offset index file size 13 bytes is not a "
                                       "multiple of the entry size 8")
    assert run([odd], index_sanity_check=True).exit_code == 1
    tiny = write(tmp_path, "00000000000000000100.index", b"\x00" * 5)
    result = run([tiny])
    assert result.stdout[1] == f"{tiny} is empty." and result.exit_code == 1
    negative = write(tmp_path, "00000000000000000100.index", offset_index_bytes([(99, positions[1])], 100))
    sanity = run([negative], index_sanity_check=True)
    assert sanity.exit_code == 1 and "less than the base offset 100" in sanity.stderr[0]
    far = write(tmp_path, "00000000000000000100.index", offset_index_bytes([(102, 10_000)], 100))
    far_result = run([far])
    assert far_result.stdout[1] == "offset: 102 position: 10000"
    assert far_result.exit_code == 1 and f"{far}: byte 0: entry 0 (offset 102, position 10000)" in far_result.stderr[0]
    small = write(tmp_path, "00000000000000000100.index", offset_index_bytes([(102, positions[1])], 100))
    assert run([small], max_message_size=10).exit_code == 1
    garbage = write(tmp_path, "not-an-offset.index", offset_index_bytes([(2, 5)]))
    bad_name = run([garbage])
    assert bad_name.exit_code == 1 and "does not start with a base offset" in bad_name.stderr[0]


def test_time_index_checks(tmp_path):
    batches, positions = _segment(tmp_path)
    write(tmp_path, "00000000000000000100.index", offset_index_bytes([(102, positions[1])], 100))
    timeindex = write(tmp_path, "00000000000000000100.timeindex", time_index_bytes([
        (1101, 101),        # correct: batch [100, 101] has max timestamp 1101
        (1100, 102),        # wrong timestamp (1102) and out of order
        (1105, 104),        # 104 is inside the batch [103, 105]
        (1200, 900),        # beyond the log
    ], 100) + bytes(12 * 3))
    result = run([timeindex])
    assert result.stdout == [f"Dumping {timeindex}", "timestamp: 1101 offset: 101", "timestamp: 1100 offset: 102",
                             "timestamp: 1105 offset: 104", "timestamp: 1200 offset: 900"]
    assert result.stderr == [
        f"Found timestamp mismatch in :{timeindex}", "  Index timestamp: 1100, log timestamp: 1102",
        f"Found out of order timestamp in :{timeindex}", "  Index timestamp: 1100, Previously indexed timestamp: 1101",
        "The following indexed offsets are not found in the log.",
        "Indexed offset: 104, found log offset: 105", "Indexed offset: 900, found log offset: -1",
    ]
    assert result.exit_code == 0
    assert run([timeindex], verify_index_only=True).stdout == [f"Dumping {timeindex}"]
    # a zero-padded time index with real entries fails Kafka's sanity check (TimeIndex.sanityCheck)
    sanity = run([timeindex], index_sanity_check=True)
    assert sanity.exit_code == 1 and "less than the first timestamp" in sanity.stderr[0]
    kinds = [json.loads(line)["type"] for line in run([timeindex], json=True).stdout]
    assert kinds.count("time_index_entry") == 4 and kinds[-1] == "summary"
    assert {"time_index_mismatch", "time_index_out_of_order", "time_index_offset_not_found"} <= set(kinds)
    trimmed = write(tmp_path, "00000000000000000100.timeindex", time_index_bytes([(1101, 101)], 100) + b"\x01")
    bad = run([trimmed])
    assert bad.stdout[1] == "timestamp: 1101 offset: 101" and bad.exit_code == 1
    assert f"{trimmed}: byte 12: time index file size 13 bytes" in bad.stderr[0]


def test_transaction_index(tmp_path):
    entries = struct.pack(">bBqqqq", 0, 0, 7, 100, 110, 111) + struct.pack(">bBqqqq", 0, 0, 8, 90, 120, 95)
    path = write(tmp_path, "00000000000000000100.txnindex", entries)
    result = run([path])
    assert result.stdout == [f"Dumping {path}",
                             "version: 0 producerId: 7 firstOffset: 100 lastOffset: 110 lastStableOffset: 111",
                             "version: 0 producerId: 8 firstOffset: 90 lastOffset: 120 lastStableOffset: 95"]
    assert result.exit_code == 0
    torn = write(tmp_path, "00000000000000000200.txnindex", entries + b"\x00" * 10)
    torn_result = run([torn])
    assert len(torn_result.stdout) == 3 and torn_result.exit_code == 1
    assert f"{torn}: byte 68: 10 trailing bytes" in torn_result.stderr[0]
    future = write(tmp_path, "00000000000000000300.txnindex", b"\x01" + entries[1:])
    assert run([future]).exit_code == 1
    objects = [json.loads(line) for line in run([path], json=True).stdout]
    assert objects[0] == {"type": "txn_index_entry", "file": str(path), "version": 0, "producerId": 7,
                          "firstOffset": 100, "lastOffset": 110, "lastStableOffset": 111}


def test_producer_snapshot_lines(tmp_path):
    from kafkalog.log.producer_snapshot import ProducerSnapshotEntry, format_producer_snapshot

    data = format_producer_snapshot([ProducerSnapshotEntry(5, 1, 2, 40, 3, 999, 4, 38),
                                     ProducerSnapshotEntry(6, 0, -1, -1, 0, 1000, -1, -1)])
    path = write(tmp_path, "00000000000000000041.snapshot", data)
    result = run([path])
    assert result.stdout == [
        f"Dumping {path}",
        "producerId: 5 producerEpoch: 1 coordinatorEpoch: 4 currentTxnFirstOffset: OptionalLong[38] lastTimestamp: 999 "
        "firstSequence: 2147483647 lastSequence: 2 lastOffset: 40 offsetDelta: 3 timestamp: 999",
        # no batch metadata: Kafka leaves the trailing space
        "producerId: 6 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1000 ",
    ]
    corrupt = bytearray(data)
    corrupt[-1] ^= 1
    bad = run([write(tmp_path, "00000000000000000042.snapshot", bytes(corrupt))])
    assert bad.exit_code == 1 and "CRC-32C mismatch" in bad.stderr[0]
    objects = [json.loads(line) for line in run([path], json=True).stdout]
    assert objects[1]["currentTxnFirstOffset"] is None and objects[1]["lastOffset"] is None
    assert objects[0]["firstSequence"] == 2147483647


# --- API -----------------------------------------------------------------------------------

def test_dumper_streams_lines_and_reports_at_the_end(tmp_path):
    path = write(tmp_path, "00000000000000000000.log", batch([0]) + batch([5]))
    dumper = Dumper(DumpOptions(deep_iteration=True), prog="x")
    lines = list(dumper.dump_files([path, path]))
    # one map entry per previous offset: the second pass over the same file repeats, not adds, it
    assert [line.stream for line in lines][-2:] == ["stderr"] * 2
    assert [line.text for line in lines][-2:] == [f"Non-consecutive offsets in {path}", "  0 is followed by 5"]
    assert lines[-3].stream in ("stdout", "stdout-bytes")
    assert dumper.exit_code == 0 and len(dumper.summaries) == 2 and dumper.summaries[0].records == 2


def test_batch_line_matches_kafka_field_order():
    view = read_batch(memoryview(COMMIT_MARKER), 0, len(COMMIT_MARKER), 2, None)
    assert batch_line(view) == COMMIT_LINE
    fields = [token[:-1] for token in COMMIT_LINE.split() if token.endswith(":")]
    assert fields == ["baseOffset", "lastOffset", "count", "baseSequence", "lastSequence", "producerId",
                      "producerEpoch", "partitionLeaderEpoch", "isTransactional", "isControl", "deleteHorizonMs",
                      "position", "CreateTime", "size", "magic", "compresscodec", "crc", "isvalid"]


def test_legacy_helpers_agree_with_the_writer(tmp_path):
    data = legacy.encode_message_set([(10, 5, b"a", b"b"), (11, 6, None, b"c")], magic=1, codec=1)
    path = write(tmp_path, "00000000000000000010.log", data)
    out = run([path], print_data_log=True).stdout
    assert out[2].startswith("offset: 11 position: 0 CreateTime: 6 ") and " compresscodec: gzip " in out[2]
    assert out[3].startswith("| offset: 10 CreateTime: 5 keySize: 1 valueSize: 1 isValid: true crc: ")
    assert out[3].endswith("} key: a payload: b")
    assert out[4].endswith("} payload: c")


def test_timeindex_whose_offset_index_has_a_negative_position_names_it(tmp_path):
    """Issue 18 (8): a negative position in the matching .index used to surface as a struct.error."""
    import pyarrow as pa
    import kafkalog.log.records_io as seg

    folder = tmp_path / "t-0"
    folder.mkdir()
    records = pa.table({"offset": list(range(400)), "key": [b"k%d" % i for i in range(400)], "value": [b"v" * 200] * 400,
                        "timestamp": list(range(1000, 1400))})
    log = seg.write_segment(folder, records, batch_bytes=1024, index_interval_bytes=512)
    index = log.with_suffix(".index")
    raw = bytearray(index.read_bytes())
    assert len(raw) >= 16
    struct.pack_into(">i", raw, 12, -5000)       # the second entry's position
    index.write_bytes(bytes(raw))
    result = dump([str(log.with_suffix(".timeindex"))], DumpOptions())
    text = "\n".join(result.stdout + result.stderr)
    assert "struct" not in text
    assert "negative" in text and str(index) in text


def test_snappy_block_too_large_names_the_block_size():
    from kafkalog.errors import DecompressedSizeError
    from kafkalog.format.compression import SNAPPY, compress, decompress

    payload = compress(SNAPPY, b"x" * 5000)
    with pytest.raises(DecompressedSizeError) as exc:
        decompress(SNAPPY, payload, max_bytes=1000)
    assert "5000" in str(exc.value) and "1000" in str(exc.value)


# --- the bulk path (record_lines) prints what the per-record path prints -------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_UTF8 = st.one_of(st.none(), st.text(max_size=8).map(lambda t: t.encode("utf-8")), st.just(b"a\nb"))
_BYTES = st.one_of(_UTF8, st.binary(max_size=12),      # invalid UTF-8 sends a run to the per-record path
                   st.sampled_from([b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]))
_HEADER_KEYS = st.one_of(st.text(max_size=5), st.sampled_from(["", "trace-id", "é✓"]))


@st.composite
def _segments(draw):
    out, offset = b"", draw(st.integers(0, 3))
    values = draw(st.sampled_from([_UTF8, _BYTES]))
    for _ in range(draw(st.integers(1, 4))):
        n = draw(st.integers(0, 5))
        records = [rb.V2Record(offset + i + draw(st.integers(0, 1)) * 3 * i, draw(st.integers(-1, 2 ** 41)),
                               draw(values), draw(values),
                               [(k, draw(values)) for k in draw(st.lists(_HEADER_KEYS, max_size=3))])
                   for i in range(n)]
        records.sort(key=lambda r: r.offset)
        if records:
            out += rb.encode_batch(
                records, codec=draw(st.sampled_from([0, 1, 2, 3, 4])),
                timestamp_type=draw(st.sampled_from([rb.CREATE_TIME, rb.LOG_APPEND_TIME])),
                base_sequence=draw(st.sampled_from([rb.NO_SEQUENCE, 0, 2 ** 31 - 3])),
                producer_id=draw(st.sampled_from([rb.NO_PRODUCER_ID, 7])), producer_epoch=0,
                delete_horizon_ms=draw(st.sampled_from([None, 5]))) if records[0].offset >= 0 else b""
            offset = records[-1].offset + 1
        if draw(st.booleans()):
            out += struct.pack(">q", offset) + COMMIT_MARKER[8:]      # the CRC does not cover the base offset
            offset += 1
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_segments(), options=st.sampled_from([dict(deep_iteration=True), dict(print_data_log=True),
                                                  dict(print_data_log=True, skip_record_metadata=True),
                                                  dict(deep_iteration=True, skip_record_metadata=True)]))
def test_bulk_lines_equal_per_record_lines(tmp_path, data, options):
    path = write(tmp_path, "00000000000000000002.log", data)
    bulk = dump([str(path)], DumpOptions(**options), bulk=True)
    slow = dump([str(path)], DumpOptions(**options), bulk=False)
    # compared as printed text (a newline inside a key or header key splits a bulk block's line in two)
    assert ("\n".join(bulk.stdout), bulk.stderr, bulk.exit_code) == ("\n".join(slow.stdout), slow.stderr, slow.exit_code)
    assert [s.records for s in bulk.summaries] == [s.records for s in slow.summaries]


def test_reports_come_in_java_hash_map_order():
    """Orders printed by a java.util.HashMap filled with computeIfAbsent (Java 17, as DumpLogSegments fills its
    report maps): same-bucket keys newest first, and the table doubled on the 14th insertion."""
    from kafkalog.tools.dump.dumper import java_hash_map_order
    names = [f"/x/{i}.log" for i in range(1, 16)]
    assert java_hash_map_order(names[:13]) == [f"/x/{i}.log" for i in (6, 10, 7, 11, 9, 13, 8, 12, 5, 4, 1, 3, 2)]
    assert java_hash_map_order(names) == [f"/x/{i}.log" for i in (6, 15, 10, 8, 12, 14, 4, 2, 7, 11, 9, 13, 5, 1, 3)]


def test_huge_batches_print_in_slices_as_record_by_record(tmp_path, monkeypatch):
    """Batches above BULK_MAX_BATCH_RECORDS go in slices (sequences wrapping, LogAppendTime, headers); a slice
    holding invalid UTF-8 sends the rest of its batch record by record, without repeating a line."""
    import kafkalog.tools.dump.log_segment as ls
    monkeypatch.setattr(ls, "BULK_MAX_BATCH_RECORDS", 1000)
    monkeypatch.setattr(ls, "BULK_SLICE_RECORDS", 700)
    recs = [rb.V2Record(5 + i, 1000 + i, b"k%d" % i, b"\xff" if i == 2500 else b"v%d" % i,
                        [("h", b"x")] if i % 3 == 0 else []) for i in range(3000)]
    path = write(tmp_path, "00000000000000000005.log",
                 rb.encode_batch(recs[:1500], codec=4, base_sequence=2 ** 31 - 10, producer_id=3, producer_epoch=0)
                 + rb.encode_batch(recs[1500:], timestamp_type=rb.LOG_APPEND_TIME))
    for options in (dict(print_data_log=True), dict(deep_iteration=True, skip_record_metadata=True)):
        bulk = dump([str(path)], DumpOptions(**options), bulk=True)
        slow = dump([str(path)], DumpOptions(**options), bulk=False)
        assert (bulk.stdout, bulk.stderr) == (slow.stdout, slow.stderr) and len(bulk.stdout) == 3004
        assert bulk.summaries[0].records == 3000


# new String(bytes, UTF_8).getBytes(UTF_8) as Java 17 printed it (R = U+FFFD); Python's errors="replace"
# differs on the ED A0..BF rows (a UTF-16 surrogate: one U+FFFD for its 2-3 bytes in Java, one per byte in Python)
JAVA_UTF8 = [("eda080", "R"), ("edbfbf", "R"), ("eda0", "R"), ("eda041", "R41"), ("f4908080", "RRRR"),
             ("f49080", "RRR"), ("f490", "RR"), ("f5808080", "RRRR"), ("e080af", "RRR"), ("e09fbf", "RRR"),
             ("f08080af", "RRRR"), ("f08fbfbf", "RRRR"), ("c0af", "RR"), ("c1bf", "RR"), ("e282", "R"),
             ("e28241", "R41"), ("f09f98", "R"), ("f09f9841", "R41"), ("f09f", "R"), ("f0", "R"), ("e0a0", "R"),
             ("e080", "RR"), ("f48fbf", "R"), ("f888808080", "RRRRR"), ("e282ac61eda080", "e282ac61R"),
             ("c328ed9fbfe282f48fbfbfeda080f09f98", "R28ed9fbfRf48fbfbfRR")]


@pytest.mark.parametrize("raw,java", JAVA_UTF8)
def test_invalid_utf8_is_replaced_as_java_does(raw, java):
    import numpy as np
    from kafkalog.tools.dump.output import string_decoder
    from kafkalog.tools.dump.record_lines import _put_java_utf8
    data, expected = bytes.fromhex(raw), bytes.fromhex(java.replace("R", "efbfbd"))
    assert string_decoder(data).encode("utf-8") == expected
    out = np.zeros(3 * len(data), np.uint8)
    n = _put_java_utf8(out, 0, np.frombuffer(data, np.uint8), 0, len(data))
    assert out[:n].tobytes() == expected
