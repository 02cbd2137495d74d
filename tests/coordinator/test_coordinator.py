"""kafkalog.coordinator: __consumer_offsets and __transaction_state records of every version, built
byte by byte from Kafka's published message layouts; segments as a coordinator writes them
(one batch per append, transactional offset commits with their markers, tombstones); lag."""
from __future__ import annotations

import base64
import json
import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.tools.cli import main as cli_main
from kafkalog.coordinator import lag
from kafkalog.coordinator.demo_groups import coordinator_partition, java_string_hash
from kafkalog.coordinator.group import records as gr
from kafkalog.coordinator.group.rows import group_rows
from kafkalog.coordinator.log_dirs import consumer_lag
from kafkalog.coordinator.record import decode_record, encode_key, encode_value, kafka_dump_text
from kafkalog.coordinator.transaction import records as tr
from kafkalog.coordinator.transaction.rows import transaction_rows
from kafkalog.tools.dump.dumper import dump
from kafkalog.tools.dump.options import OFFSETS_DECODER, TRANSACTION_LOG_DECODER, DumpOptions
from kafkalog.format import control_record as cr
from kafkalog.format import record_batch as rb
from kafkalog.log.records_io import read_segment


# --- Kafka's primitives, written here by hand -------------------------------------------------

def i8(v): return struct.pack(">b", v)
def i16(v): return struct.pack(">h", v)
def i32(v): return struct.pack(">i", v)
def i64(v): return struct.pack(">q", v)
def s(v): return i16(-1) if v is None else i16(len(v.encode())) + v.encode()                 # STRING
def b(v): return i32(-1) if v is None else i32(len(v)) + v                                  # BYTES


def uv(n):
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append((n & 0x7F) | 0x80)
        n >>= 7


def cs(v): return uv(0) if v is None else uv(len(v.encode()) + 1) + v.encode()              # COMPACT_STRING
def cb(v): return uv(0) if v is None else uv(len(v) + 1) + v                                # COMPACT_BYTES
def carr(items): return uv(len(items) + 1) + b"".join(items)                               # COMPACT_ARRAY
def arr(items): return i32(len(items)) + b"".join(items)                                   # ARRAY
NO_TAGS = uv(0)


def tags(*fields):  # (tag, body)
    return uv(len(fields)) + b"".join(uv(t) + uv(len(body)) + body for t, body in fields)


def offset_key(group="g1", topic="orders", partition=3, record_type=1):
    return i16(record_type) + s(group) + s(topic) + i32(partition)


def offset_value(version, offset=42, leader_epoch=7, metadata="meta", commit=1_700_000_000_000, expire=1_700_000_100_000):
    if version == 0:
        return i16(0) + i64(offset) + s(metadata) + i64(commit)
    if version == 1:
        return i16(1) + i64(offset) + s(metadata) + i64(commit) + i64(expire)
    if version == 2:
        return i16(2) + i64(offset) + s(metadata) + i64(commit)
    if version == 3:
        return i16(3) + i64(offset) + i32(leader_epoch) + s(metadata) + i64(commit)
    return i16(4) + i64(offset) + i32(leader_epoch) + cs(metadata) + i64(commit) + NO_TAGS


def subscription(version, topics=("orders", "payments"), owned=(("orders", (0, 1)),), generation=5):
    out = i16(version) + arr([s(t) for t in topics]) + b(None)
    if version >= 1:
        out += arr([s(t) + arr([i32(p) for p in ps]) for t, ps in owned])
    if version >= 2:
        out += i32(generation)
    return out


def assignment(version, assigned=(("orders", (0, 1)), ("payments", (2,)))):
    return i16(version) + arr([s(t) + arr([i32(p) for p in ps]) for t, ps in assigned]) + b(b"ud")


def group_value(version, members=1, sub_version=1):
    flexible = version >= 4
    S, B = (cs, cb) if flexible else (s, b)
    out = i16(version) + S("consumer") + i32(9) + S("range") + S("m-1")
    if version >= 2:
        out += i64(1_700_000_000_500)
    items = []
    for m in range(members):
        item = S(f"m-{m + 1}")
        if version >= 3:
            item += S("static-1")
        item += S("client-a") + S("/10.0.0.1")
        if version >= 1:
            item += i32(300_000)
        item += i32(45_000) + B(subscription(sub_version)) + B(assignment(sub_version))
        if flexible:
            item += NO_TAGS
        items.append(item)
    out += (carr(items) if flexible else arr(items))
    return out + (NO_TAGS if flexible else b"")


def txn_value(version, partitions=(("orders", (0, 2)), ("payments", (1,))), state=1):
    if version == 0:
        return (i16(0) + i64(1000) + i16(3) + i32(60_000) + i8(state)
                + arr([s(t) + arr([i32(p) for p in ps]) for t, ps in partitions])
                + i64(1_700_000_000_900) + i64(1_700_000_000_100))
    return (i16(1) + i64(1000) + i16(3) + i32(60_000) + i8(state)
            + carr([cs(t) + carr([i32(p) for p in ps]) + NO_TAGS for t, ps in partitions])
            + i64(1_700_000_000_900) + i64(1_700_000_000_100)
            + tags((0, i64(999)), (1, i64(1001)), (2, i16(2))))


# --- offset commits ---------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(5))
@pytest.mark.parametrize("record_type", [0, 1])
def test_offset_commit_every_version(version, record_type):
    d = decode_record(gr.RECORD_TYPES, offset_key(record_type=record_type), offset_value(version))
    assert d.error is None and d.record_type == record_type and d.value_version == version
    assert d.key == {"group": "g1", "topic": "orders", "partition": 3}
    v = d.value
    assert (v["offset"], v["metadata"], v["commitTimestamp"]) == (42, "meta", 1_700_000_000_000)
    assert v.get("leaderEpoch", -1) == (7 if version >= 3 else -1)
    assert v.get("expireTimestamp", -1) == (1_700_000_100_000 if version == 1 else -1)
    # and our writer writes exactly Kafka's bytes
    assert encode_value(gr.RECORD_TYPES[1], v, version) == offset_value(version)
    assert encode_key(gr.RECORD_TYPES[record_type], d.key) == offset_key(record_type=record_type)


def test_offset_commit_dump_text_as_kafka_prints_it():
    key, payload = kafka_dump_text(decode_record(gr.RECORD_TYPES, offset_key(), offset_value(3)), 5)
    assert key == '{"type":"1","data":{"group":"g1","topic":"orders","partition":3}}'
    assert payload == ('{"version":"3","data":{"offset":42,"leaderEpoch":7,"metadata":"meta",'
                       '"commitTimestamp":1700000000000}}')
    key, payload = kafka_dump_text(decode_record(gr.RECORD_TYPES, offset_key(), offset_value(1)), 5)
    assert payload == ('{"version":"1","data":{"offset":42,"metadata":"meta","commitTimestamp":1700000000000,'
                       '"expireTimestamp":1700000100000}}')
    assert kafka_dump_text(decode_record(gr.RECORD_TYPES, offset_key(), None), 5)[1] == "<DELETE>"


# --- classic group metadata and the consumer protocol ---------------------------------------

@pytest.mark.parametrize("version", range(5))
@pytest.mark.parametrize("sub_version", range(3))
def test_group_metadata_every_version(version, sub_version):
    d = decode_record(gr.RECORD_TYPES, i16(2) + s("g1"), group_value(version, members=2, sub_version=sub_version))
    assert d.error is None and d.type_name == "GroupMetadata" and d.key == {"group": "g1"}
    v = d.value
    assert (v["protocolType"], v["generation"], v["protocol"], v["leader"]) == ("consumer", 9, "range", "m-1")
    assert v.get("currentStateTimestamp", -1) == (1_700_000_000_500 if version >= 2 else -1)
    assert [m["memberId"] for m in v["members"]] == ["m-1", "m-2"]
    m = v["members"][0]
    assert (m["clientId"], m["clientHost"], m["sessionTimeout"]) == ("client-a", "/10.0.0.1", 45_000)
    assert m.get("rebalanceTimeout") == (300_000 if version >= 1 else None)
    assert m.get("groupInstanceId") == ("static-1" if version >= 3 else None)
    assert m["subscription"] == subscription(sub_version) and m["assignment"] == assignment(sub_version)
    assert encode_value(gr.RECORD_TYPES[2], v, version) == group_value(version, members=2, sub_version=sub_version)
    # Kafka's offsets decoder expands the consumer protocol bytes
    js = d.value_json["members"][0]
    assert js["subscription"]["topics"] == ["orders", "payments"]
    assert js["subscription"].get("ownedPartitions") == ([{"topic": "orders", "partitions": [0, 1]}]
                                                         if sub_version >= 1 else None)
    assert js["subscription"].get("generationId") == (5 if sub_version == 2 else None)
    assert js["assignment"] == {"assignedPartitions": [{"topic": "orders", "partitions": [0, 1]},
                                                       {"topic": "payments", "partitions": [2]}],
                                "userData": base64.b64encode(b"ud").decode()}
    # typed row
    row = group_rows(pa.table({"offset": [0], "key": [i16(2) + s("g1")],
                               "value": [group_value(version, 2, sub_version)]})).to_pylist()[0]
    assert row["group_state"] == "Stable" and row["generation"] == 9 and len(row["members"]) == 2
    assert row["members"][0]["subscribed_topics"] == ["orders", "payments"]
    assert row["members"][0]["assigned_partitions"] == [{"topic": "orders", "partition": 0},
                                                        {"topic": "orders", "partition": 1},
                                                        {"topic": "payments", "partition": 2}]


def test_consumer_protocol_newer_version_read_with_newest_layout():
    newer = subscription(2)[:0] + i16(3) + subscription(2)[2:] + b"future-field"
    version, fields = gr.read_consumer_protocol(gr.CONSUMER_PROTOCOL_SUBSCRIPTION, newer)
    assert version == 3 and fields["GenerationId"] == 5


def test_empty_group_is_empty_state():
    row = group_rows(pa.table({"offset": [0], "key": [i16(2) + s("g1")],
                               "value": [group_value(3, members=0)]})).to_pylist()[0]
    assert row["group_state"] == "Empty" and row["members"] == []


# --- KIP-848 consumer group records ---------------------------------------------------------

TOPIC_ID = base64.urlsafe_b64encode(bytes(range(16))).decode().rstrip("=")


def test_consumer_group_metadata_with_tagged_fields():
    key = i16(3) + s("cg")
    value = i16(0) + i32(12) + tags((0, i64(777)), (1, i64(1_700_000_000_000)))
    d = decode_record(gr.RECORD_TYPES, key, value)
    assert d.error is None and d.key == {"GroupId": "cg"}
    assert d.value == {"Epoch": 12, "MetadataHash": 777, "CreationTimeMs": 1_700_000_000_000}
    assert kafka_dump_text(d, 0) == ('{"type":"3","data":{"groupId":"cg"}}',
                                     '{"version":"0","data":{"epoch":12,"metadataHash":777,"creationTimeMs":1700000000000}}')
    plain = decode_record(gr.RECORD_TYPES, key, i16(0) + i32(12) + NO_TAGS)
    assert plain.value == {"Epoch": 12, "MetadataHash": 0, "CreationTimeMs": -1}
    assert plain.value_json == {"epoch": 12}           # tagged fields at their default are not printed
    unknown_tag = decode_record(gr.RECORD_TYPES, key, i16(0) + i32(12) + tags((9, b"xyz")))
    assert unknown_tag.error is None and unknown_tag.value["Epoch"] == 12


def test_consumer_group_member_and_assignment_records():
    mkey = i16(5) + s("cg") + s("member-1")
    mval = (i16(0) + cs(None) + cs("rack-a") + cs("client") + cs("/h") + carr([cs("orders")]) + cs(None)
            + i32(30_000) + cs("uniform") + NO_TAGS)
    d = decode_record(gr.RECORD_TYPES, mkey, mval)
    assert d.error is None and d.key == {"GroupId": "cg", "MemberId": "member-1"}
    assert d.value["RackId"] == "rack-a" and d.value["SubscribedTopicNames"] == ["orders"]
    assert d.value["ServerAssignor"] == "uniform" and d.value["ClassicMemberMetadata"] is None

    tp = lambda parts: uuid_bytes() + carr([i32(p) for p in parts]) + NO_TAGS
    cur = (i16(0) + i32(4) + i32(3) + i8(0) + carr([tp([0, 2])]) + carr([]) + NO_TAGS)
    d = decode_record(gr.RECORD_TYPES, i16(8) + s("cg") + s("member-1"), cur)
    assert d.error is None
    assert (d.value["MemberEpoch"], d.value["PreviousMemberEpoch"], d.value["State"]) == (4, 3, 0)
    assert d.value["AssignedPartitions"] == [{"TopicId": TOPIC_ID, "Partitions": [0, 2], "AssignmentEpochs": None}]
    row = group_rows(pa.table({"offset": [0], "key": [i16(8) + s("cg") + s("member-1")], "value": [cur]})).to_pylist()[0]
    assert row["member_epoch"] == 4 and row["assigned_topic_partitions"] == [{"topic_id": TOPIC_ID, "partitions": [0, 2]}]

    target = i16(0) + carr([tp([1])]) + NO_TAGS
    d = decode_record(gr.RECORD_TYPES, i16(7) + s("cg") + s("member-1"), target)
    assert d.value == {"TopicPartitions": [{"TopicId": TOPIC_ID, "Partitions": [1]}]}
    d = decode_record(gr.RECORD_TYPES, i16(6) + s("cg"), i16(0) + i32(4) + NO_TAGS)
    assert d.value == {"AssignmentEpoch": 4, "AssignmentTimestamp": 0}
    pm = (i16(0) + carr([uuid_bytes() + cs("orders") + i32(3)
                         + carr([i32(0) + carr([cs("r1"), cs("r2")]) + NO_TAGS]) + NO_TAGS]) + NO_TAGS)
    d = decode_record(gr.RECORD_TYPES, i16(4) + s("cg"), pm)
    assert d.value["Topics"][0]["TopicName"] == "orders"
    assert d.value["Topics"][0]["PartitionMetadata"][0]["Racks"] == ["r1", "r2"]
    rx = i16(0) + carr([cs("orders-1"), cs("orders-2")]) + i64(5) + i64(1_700_000_000_000) + NO_TAGS
    d = decode_record(gr.RECORD_TYPES, i16(16) + s("cg") + s("orders-.*"), rx)
    assert d.key == {"GroupId": "cg", "RegularExpression": "orders-.*"}
    assert d.value == {"Topics": ["orders-1", "orders-2"], "Version": 5, "Timestamp": 1_700_000_000_000}


def uuid_bytes():
    return bytes(range(16))


# --- transactions -----------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1])
def test_transaction_log_every_version(version):
    key = i16(0) + s("txn-1")
    d = decode_record(tr.RECORD_TYPES, key, txn_value(version))
    assert d.error is None and d.key == {"TransactionalId": "txn-1"}
    v = d.value
    assert (v["ProducerId"], v["ProducerEpoch"], v["TransactionTimeoutMs"], v["TransactionStatus"]) == (1000, 3, 60_000, 1)
    assert v["TransactionPartitions"] == [{"Topic": "orders", "PartitionIds": [0, 2]},
                                          {"Topic": "payments", "PartitionIds": [1]}]
    assert (v["TransactionLastUpdateTimestampMs"], v["TransactionStartTimestampMs"]) == (1_700_000_000_900, 1_700_000_000_100)
    if version == 1:
        assert (v["PreviousProducerId"], v["NextProducerId"], v["ClientTransactionVersion"]) == (999, 1001, 2)
    else:
        assert "PreviousProducerId" not in v
    assert encode_value(tr.RECORD_TYPES[0], v, version) == txn_value(version)
    rows = transaction_rows(pa.table({"offset": [4, 5], "key": [key, key], "value": [txn_value(version), None]}))
    r, tomb = rows.to_pylist()
    assert r["transactional_id"] == "txn-1" and r["state"] == "Ongoing" and r["producer_epoch"] == 3
    assert r["partitions"] == [{"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 2},
                               {"topic": "payments", "partition": 1}]
    assert r["previous_producer_id"] == (999 if version == 1 else -1)
    assert tomb["tombstone"] is True and tomb["producer_id"] is None and tomb["error"] is None


def test_transaction_null_partitions_and_every_state():
    for state, name in tr.TRANSACTION_STATES.items():
        value = i16(0) + i64(1) + i16(0) + i32(1) + i8(state) + i32(-1) + i64(2) + i64(3)
        r = transaction_rows(pa.table({"offset": [0], "key": [i16(0) + s("t")], "value": [value]})).to_pylist()[0]
        assert r["state"] == name and r["partitions"] == [] and r["error"] is None


# --- bad bytes: rows with a reason, never an exception ---------------------------------------

def test_unknown_types_versions_and_truncation():
    d = decode_record(gr.RECORD_TYPES, i16(99) + s("x"), b"\x00\x00")
    assert d.unknown_type and "unknown record type 99" in d.error
    assert kafka_dump_text(d, 12) == ("Unknown record type 99 at offset 12, skipping.", None)
    d = decode_record(gr.RECORD_TYPES, offset_key(), i16(5) + b"\x00" * 40)
    assert "unknown OffsetCommitValue version 5" in d.error
    assert kafka_dump_text(d, 3)[0].startswith("Error at offset 3, skipping. unknown OffsetCommitValue version 5")
    full = offset_value(3)
    for cut in range(len(full)):
        d = decode_record(gr.RECORD_TYPES, offset_key(), full[:cut])
        assert d.error is not None and "truncated" in d.error, cut
    key = offset_key()
    for cut in range(len(key)):
        assert decode_record(gr.RECORD_TYPES, key[:cut], full).error is not None
    assert decode_record(gr.RECORD_TYPES, None, full).error.startswith("the record has no key")
    rows = group_rows(pa.table({"offset": [0, 1], "key": [i16(99) + s("x"), key], "value": [b"zz", full[:9]]})).to_pylist()
    assert [r["raw_key"] for r in rows] == [i16(99) + s("x"), key] and [r["raw_value"] for r in rows] == [b"zz", full[:9]]
    assert all(r["error"] for r in rows)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.one_of(st.none(), st.binary(max_size=128)))
def test_random_bytes_never_raise(key, value):
    for types in (gr.RECORD_TYPES, tr.RECORD_TYPES):
        d = decode_record(types, key, value)
        kafka_dump_text(d, 0)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 4), st.integers(-1, 2**62), st.text(max_size=30), st.integers(-1, 2**31 - 1))
def test_offset_commit_roundtrip(version, offset, metadata, epoch):
    v = {"offset": offset, "metadata": metadata, "commitTimestamp": 5, "leaderEpoch": epoch, "expireTimestamp": 9}
    d = decode_record(gr.RECORD_TYPES, offset_key(), encode_value(gr.RECORD_TYPES[1], v, version))
    assert d.value["offset"] == offset and d.value["metadata"] == metadata
    assert d.value.get("leaderEpoch", -1) == (epoch if version >= 3 else -1)


# --- a __consumer_offsets segment as a coordinator writes it ---------------------------------

PID_COMMIT, PID_ABORT, PID_OPEN = 5000, 5001, 5002
T0 = 1_700_000_000_000


def commit_rec(offset, group, topic, partition, committed, ts=None, version=3):
    value = None if committed is None else offset_value(version, offset=committed, metadata="", commit=ts or T0 + offset)
    return rb.V2Record(offset, ts or T0 + offset, offset_key(group, topic, partition), value)


def coordinator_segment() -> bytes:
    """One batch per append, as the coordinator writes: plain commits, a tombstone, a transactional
    commit that is committed, one that is aborted, one left open, classic group metadata."""
    batches = [
        rb.encode_batch([commit_rec(0, "g1", "orders", 0, 10), commit_rec(1, "g1", "orders", 1, 20)]),
        rb.encode_batch([commit_rec(2, "g1", "orders", 0, 15)]),
        rb.encode_batch([commit_rec(3, "g2", "orders", 0, 3)]),
        rb.encode_batch([commit_rec(4, "g2", "orders", 0, None)]),                       # tombstone
        rb.encode_batch([commit_rec(5, "g1", "orders", 1, 25)], transactional=True, producer_id=PID_COMMIT,
                        producer_epoch=0),
        rb.encode_batch([commit_rec(6, "g1", "payments", 0, 99)], transactional=True, producer_id=PID_ABORT,
                        producer_epoch=0),
        rb.encode_batch([rb.V2Record(7, T0 + 7, cr.control_key(cr.COMMIT), cr.end_txn_marker_value(1))],
                        transactional=True, control=True, producer_id=PID_COMMIT, producer_epoch=0),
        rb.encode_batch([rb.V2Record(8, T0 + 8, cr.control_key(cr.ABORT), cr.end_txn_marker_value(1))],
                        transactional=True, control=True, producer_id=PID_ABORT, producer_epoch=0),
        rb.encode_batch([commit_rec(9, "g3", "orders", 2, 7)], transactional=True, producer_id=PID_OPEN,
                        producer_epoch=0),
        rb.encode_batch([rb.V2Record(10, T0 + 10, i16(2) + s("g1"), group_value(3, members=1))]),
        rb.encode_batch([rb.V2Record(11, T0 + 11, i16(2) + s("g2"), group_value(3, members=0))]),
    ]
    return b"".join(batches)


@pytest.fixture
def cluster(tmp_path):
    from logdirs import make_partition, write_checkpoints
    log_dir = tmp_path / "broker-1"
    log_dir.mkdir()
    make_partition(log_dir, "orders", 0, [range(0, 60), range(60, 120)])
    make_partition(log_dir, "orders", 1, [range(0, 80)])
    pdir = log_dir / "__consumer_offsets-7"
    pdir.mkdir()
    (pdir / "00000000000000000000.log").write_bytes(coordinator_segment())
    write_checkpoints(log_dir, high_watermarks={("orders", 0): 100, ("orders", 1): 60, ("__consumer_offsets", 7): 12})
    return log_dir


def test_segment_rows_as_the_coordinator_wrote_them(cluster):
    table = read_segment(cluster / "__consumer_offsets-7" / "00000000000000000000.log")
    rows = group_rows(table).to_pylist()
    assert [r["offset"] for r in rows] == list(range(12))
    assert [r["control_type"] for r in rows if r["control_type"]] == ["COMMIT", "ABORT"]
    assert rows[4]["tombstone"] is True and rows[4]["group"] == "g2" and rows[4]["committed_offset"] is None
    assert rows[5]["is_transactional"] and rows[5]["producer_id"] == PID_COMMIT
    assert (rows[2]["group"], rows[2]["commit_topic"], rows[2]["commit_partition"], rows[2]["committed_offset"]) == \
        ("g1", "orders", 0, 15)
    assert rows[10]["group_state"] == "Stable" and rows[11]["group_state"] == "Empty"
    assert all(r["error"] is None for r in rows)


def test_committed_offsets_follow_the_coordinator_load(cluster):
    rows = group_rows(read_segment(cluster / "__consumer_offsets-7" / "00000000000000000000.log",
                                   topic="__consumer_offsets", partition=7)).to_pylist()
    loaded = lag.load_committed_offsets(rows)
    got = {k: v.committed_offset for k, v in loaded.offsets.items()}
    # g1/orders/0: the later commit; g1/orders/1: the committed transaction; g2: tombstoned;
    # g1/payments/0: aborted; g3: transaction still open (pending, not applied)
    assert got == {("g1", "orders", 0): 15, ("g1", "orders", 1): 25}
    assert loaded.pending_transactional == 1
    assert loaded.groups["g1"].state == "Stable" and loaded.groups["g2"].state == "Empty"


def test_lag_by_hand_equals_cli(cluster, capsys):
    # by hand: HW of orders-0 = 100 (checkpoint), of orders-1 = 60; commits 15 and 25
    expected = {("g1", "orders", 0): 100 - 15, ("g1", "orders", 1): 60 - 25}
    assert cli_main(["lag", "--log-dirs", str(cluster), "--json", "--now-ms", str(T0)]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    rows, summary = lines[:-1], lines[-1]
    assert {(r["group"], r["topic"], r["partition"]): r["lag"] for r in rows} == expected
    assert all(r["high_watermark_source"] == "checkpoint" and r["log_end_offset"] in (120, 80) for r in rows)
    assert summary["pending_transactional_commits"] == 1 and summary["total_lag"] == sum(expected.values())
    assert summary["coordinator_partitions"] == 1
    # text, as kafka-consumer-groups --describe lays it out
    assert cli_main(["lag", "--log-dirs", str(cluster), "--group", "g1", "--now-ms", str(T0)]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "STATUS", "NOTE"]
    assert text[1].split()[:7] == ["g1", "orders", "0", "15", "100", "85", "ok"]


def test_unknown_partition_is_unknown_not_zero(tmp_path):
    from logdirs import write_checkpoints
    log_dir = tmp_path / "b"
    pdir = log_dir / "__consumer_offsets-0"
    pdir.mkdir(parents=True)
    (pdir / "00000000000000000000.log").write_bytes(rb.encode_batch([commit_rec(0, "g", "gone", 4, 10)]))
    write_checkpoints(log_dir, high_watermarks={})
    report = consumer_lag([log_dir], now_ms=T0)
    (row,) = report.rows
    assert row["status"] == "unknown" and row["lag"] is None and "not in the given log dirs" in row["note"]


def test_expiry_is_noted():
    c = lag.CommittedOffset("g", "t", 0, 5, -1, "", 1000, -1, 0, 0)
    assert lag.expires_at(c, None, 100) == 1100
    assert lag.expires_at(c, lag.GroupInfo(state="Empty", current_state_timestamp=5000), 100) == 5100
    assert lag.expires_at(c, lag.GroupInfo(state="Stable", classic_members=1), 100) is None
    explicit = lag.CommittedOffset("g", "t", 0, 5, -1, "", 1000, 3000, 0, 0)
    assert lag.expires_at(explicit, lag.GroupInfo(classic_members=1), 100) == 3000
    loaded = lag.LoadedOffsets(offsets={("g", "t", 0): c})
    ends = {("t", 0): lag.PartitionEnd(0, 10, 8, lag.HW_CHECKPOINT)}
    (row,) = lag.lag_rows(loaded, ends, now_ms=1100, retention_ms=100)
    assert row["expired"] is True and row["lag"] == 3 and "expired" in row["note"]
    (row,) = lag.lag_rows(loaded, ends, now_ms=1099, retention_ms=100)
    assert row["expired"] is False and row["note"] is None


def test_group_filter():
    m = lag.group_matcher(["exact"], ["app-.*"])
    assert m("exact") and m("app-1") and not m("xapp-1") and not m("other")
    assert lag.group_matcher()("anything")


def test_coordinator_partition_is_kafkas():
    assert java_string_hash("hello") == 99162322          # "hello".hashCode()
    assert coordinator_partition("hello") == 99162322 % 50


# --- kafkalog dump with the decoders ----------------------------------------------------------

def test_dump_offsets_decoder_text_and_json(cluster):
    path = str(cluster / "__consumer_offsets-7" / "00000000000000000000.log")
    out = dump([path], DumpOptions(decoder=OFFSETS_DECODER))
    assert out.exit_code == 0
    records = [line for line in out.stdout if line.startswith("| offset:")]
    assert records[0].endswith(' key: {"type":"1","data":{"group":"g1","topic":"orders","partition":0}} '
                               'payload: {"version":"3","data":{"offset":10,"leaderEpoch":7,"metadata":"",'
                               '"commitTimestamp":1700000000000}}')
    assert records[4].endswith("payload: <DELETE>")
    assert " endTxnMarker: COMMIT coordinatorEpoch: 1" in records[7] and "key:" not in records[7]
    js = [json.loads(x) for x in dump([path], DumpOptions(decoder=OFFSETS_DECODER, json=True)).stdout]
    recs = [o for o in js if o["type"] == "record" and not o["isControl"]]
    assert recs[0]["decodedKey"] == {"group": "g1", "topic": "orders", "partition": 0}
    assert recs[0]["decodedValue"]["offset"] == 10 and recs[4]["tombstone"] is True
    # the transaction-log decoder on offset commits: Kafka's "Unknown record type" line
    txt = dump([path], DumpOptions(decoder=TRANSACTION_LOG_DECODER)).stdout
    assert any(line.endswith("key: Unknown record type 1 at offset 0, skipping.") for line in txt)


def test_dump_transaction_log_decoder(tmp_path):
    seg = tmp_path / "__transaction_state-3"
    seg.mkdir()
    key = i16(0) + s("txn-1")
    (seg / "00000000000000000000.log").write_bytes(
        rb.encode_batch([rb.V2Record(0, T0, key, txn_value(0))]) + rb.encode_batch([rb.V2Record(1, T0, key, txn_value(1, state=4))])
        + rb.encode_batch([rb.V2Record(2, T0, key, None)]))
    out = dump([str(seg / "00000000000000000000.log")], DumpOptions(decoder=TRANSACTION_LOG_DECODER)).stdout
    recs = [line for line in out if line.startswith("| offset:")]
    assert recs[0].endswith('key: {"type":"0","data":{"transactionalId":"txn-1"}} payload: {"version":"0","data":'
                            '{"producerId":1000,"producerEpoch":3,"transactionTimeoutMs":60000,"transactionStatus":"Ongoing",'
                            '"transactionPartitions":[{"topic":"orders","partitionIds":[0,2]},{"topic":"payments",'
                            '"partitionIds":[1]}],"transactionLastUpdateTimestampMs":1700000000900,'
                            '"transactionStartTimestampMs":1700000000100}}')
    assert '"previousProducerId":999,"nextProducerId":1001' in recs[1] and '"clientTransactionVersion":2' in recs[1]
    assert recs[2].endswith("payload: <DELETE>")
    rows = transaction_rows(read_segment(seg / "00000000000000000000.log")).to_pylist()
    assert [r["state"] for r in rows] == ["Ongoing", "CompleteCommit", None]
    assert rows[0]["topic"] == "__transaction_state" and rows[0]["partition"] == 3


def test_dump_cli_flags(cluster, capsys):
    path = str(cluster / "__consumer_offsets-7" / "00000000000000000000.log")
    assert cli_main(["dump", "--offsets-decoder", "--files", path]) == 0
    assert '"type":"2","data":{"group":"g1"}' in capsys.readouterr().out
    assert cli_main(["dump", "--offsets-decoder", "--transaction-log-decoder", "--files", path]) == 2


def test_dump_decoder_record_without_key_is_an_error_not_a_crash(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(rb.encode_batch([rb.V2Record(0, T0, None, b"x")]) + rb.encode_batch([commit_rec(1, "g", "t", 0, 1)]))
    out = dump([str(path)], DumpOptions(decoder=OFFSETS_DECODER))
    assert out.exit_code == 1 and any("has no key" in e for e in out.stderr)
    assert any('"group":"g"' in line for line in out.stdout)


# --- the demo and real brokers' partitions ---------------------------------------------------

def test_demo_consumer_groups(tmp_path, capsys):
    out = tmp_path / "demo"
    assert cli_main(["demo", str(out), "--records", "1000", "--consumer-groups", "3"]) == 0
    capsys.readouterr()
    report = consumer_lag([out], now_ms=T0)
    by_status = {}
    for r in report.rows:
        by_status.setdefault(r["status"], []).append(r)
    assert {r["group"] for r in report.rows} == {"demo-billing", "demo-analytics", "demo-audit"}
    assert all(0 <= r["lag"] <= 1000 and r["high_watermark"] == 1000 for r in by_status["ok"])
    assert {(r["topic"], r["partition"]) for r in by_status["unknown"]} == {("demo-payments", 0), ("demo-payments", 1)}
    assert ("demo-audit", "demo-orders", 0) not in {(r["group"], r["topic"], r["partition"]) for r in report.rows}
    assert not report.errors and report.loaded.undecodable == 0


def test_real_brokers_consumer_offsets_partitions(real_fixtures):
    parts = sorted((real_fixtures / "apache__kafka").glob("*/data/*/__consumer_offsets-*"))
    if not parts:
        pytest.skip("no __consumer_offsets partition among the real fixtures")
    for pdir in parts:
        for log in pdir.glob("*.log"):
            rows = group_rows(read_segment(log))
            assert all(r["error"] is None for r in rows.to_pylist())
    for log_dir in sorted({p.parent for p in parts}):     # each a broker's log dir as its test left it
        report = consumer_lag([log_dir], now_ms=T0)
        assert report.errors == [] and report.rows == []
        assert len(report.coordinator_partitions) == len(list(log_dir.glob("__consumer_offsets-*")))


def test_member_metadata_classic_tagged_struct_and_early_partition_metadata():
    classic = i32(45_000) + carr([cs("range") + cb(b"\x00\x01") + NO_TAGS]) + NO_TAGS
    mval = (i16(0) + cs(None) + cs(None) + cs("c") + cs("/h") + carr([]) + cs(None) + i32(1) + cs(None)
            + tags((0, classic)))
    d = decode_record(gr.RECORD_TYPES, i16(5) + s("cg") + s("m"), mval)
    assert d.error is None
    assert d.value["ClassicMemberMetadata"] == {"SessionTimeoutMs": 45_000,
                                                "SupportedProtocols": [{"Name": "range", "Metadata": b"\x00\x01"}]}
    topic = uuid_bytes() + cs("orders") + i32(3) + carr([i32(0) + carr([cs("r1")]) + NO_TAGS]) + NO_TAGS
    current = i16(0) + carr([topic]) + NO_TAGS
    early = i16(0) + i32(4) + carr([topic]) + NO_TAGS           # 3.7 early access: the group epoch first
    d = decode_record(gr.RECORD_TYPES, i16(4) + s("cg"), current)
    assert d.error is None and d.value["Topics"][0]["PartitionMetadata"] == [{"Partition": 0, "Racks": ["r1"]}]
    d = decode_record(gr.RECORD_TYPES, i16(4) + s("cg"), early)
    assert d.error is None and d.value["Epoch"] == 4 and d.value["Topics"][0]["PartitionRacks"][0]["Racks"] == ["r1"]


def test_replicas_of_a_coordinator_partition_count_once(cluster, tmp_path):
    import shutil
    from logdirs import write_checkpoints
    follower = tmp_path / "broker-2"
    follower.mkdir()
    pdir = follower / "__consumer_offsets-7"
    pdir.mkdir()
    full = (cluster / "__consumer_offsets-7" / "00000000000000000000.log").read_bytes()
    (pdir / "00000000000000000000.log").write_bytes(full[:len(full) // 3])   # a lagging follower's copy
    write_checkpoints(follower, high_watermarks={})
    shutil.copytree(cluster / "orders-0", follower / "orders-0")
    report = consumer_lag([follower, cluster], now_ms=T0)
    assert report.coordinator_partitions == [str(cluster / "__consumer_offsets-7")]
    assert report.loaded.pending_transactional == 1
    assert {(r["group"], r["partition"]): r["committed_offset"] for r in report.rows} == {("g1", 0): 15, ("g1", 1): 25}
