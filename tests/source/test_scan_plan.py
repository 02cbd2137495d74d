"""The data source's decisions without Spark: Kafka-source options, predicates -> bounds, offset ranges,
pruning and seeks that never lose a wanted record, byte-sized input partitions."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import kafkalog
from kafkalog.checkpoint.offset import write_offset_checkpoint
from kafkalog.fs.names import REPLICATION_OFFSET_CHECKPOINT
from kafkalog.source.options import (KIND_OFFSETS, KIND_TIMESTAMP, READ_COMMITTED, SourceOptionError,
                                     java_regex_to_python, parse_source_options)
from kafkalog.source.scan_plan import (MIN_TARGET_BYTES, Bounds, Piece, Predicate, bounds_from_predicates, cut, pack,
                                       plan_scan, target_bytes)
from kafka_python_logs import make_transactional_partition, standard_log_dir


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("plan-logs")
    return log_dir, standard_log_dir(log_dir)


# --- options ----------------------------------------------------------------------------------------------

def test_options_parse_with_sparks_names_case_insensitively():
    o = parse_source_options({"path": "/a,/b", "SUBSCRIBE": "x,y", "startingOffsets": '{"x":{"0":5,"1":-2}}',
                              "endingTimestamp": "123", "minPartitions": "4", "includeHeaders": "TRUE",
                              "kafka.isolation.level": "read_committed", "kafka.bootstrap.servers": "b:9092",
                              "maxOffsetsPerTrigger": "10"})
    assert o.log_dirs == ("/a", "/b") and o.subscribe == ("x", "y")
    assert o.starting.kind == KIND_OFFSETS and o.starting.offsets == {("x", 0): 5, ("x", 1): -2}
    assert o.ending.kind == KIND_TIMESTAMP and o.ending.timestamp == 123
    assert o.min_partitions == 4 and o.include_headers and o.isolation == READ_COMMITTED


def test_timestamp_options_take_precedence_as_in_spark():
    o = parse_source_options({"path": "/a", "startingOffsets": "earliest", "startingOffsetsByTimestamp":
                              '{"t":{"0":5}}', "startingTimestamp": "7"})
    assert o.starting.kind == KIND_TIMESTAMP and o.starting.timestamp == 7


@pytest.mark.parametrize("options,name", [
    ({}, "no log dir"), ({"path": "/a", "endingOffsets": '{"t":{"0":-2}}'}, "endingOffsets"),
    ({"path": "/a", "minPartitions": "x"}, "minPartitions"), ({"path": "/a", "maxPartitionBytes": "10"}, "maxPartitionBytes"),
    ({"path": "/a", "startingOffsetsByTimestamp": '{"t":{"0":-5}}'}, "startingOffsetsByTimestamp"),
    ({"path": "/a", "startingOffsetsByTimestampStrategy": "closest"}, "startingOffsetsByTimestampStrategy"),
    ({"path": "/a", "assign": "[]"}, "assign"), ({"path": "/a", "subscribe": " , "}, "subscribe"),
])
def test_bad_options_name_the_option(options, name):
    with pytest.raises(SourceOptionError, match=name):
        parse_source_options(options)


def test_java_regex_translation():
    assert java_regex_to_python("p", "(?<name>a)b") == "(?P<name>a)b"
    assert java_regex_to_python("p", "(?<=a)b|(?<!c)d") == "(?<=a)b|(?<!c)d"     # lookbehinds untouched
    with pytest.raises(SourceOptionError, match="p="):
        java_regex_to_python("p", r"\Qa.b\E")


# --- predicates -----------------------------------------------------------------------------------------

def test_bounds_from_predicates():
    b = bounds_from_predicates([Predicate("offset", ">=", 10), Predicate("offset", "<", 20), Predicate("offset", ">", 12),
                                Predicate("partition", "in", (1, 2)), Predicate("partition", "<=", 1),
                                Predicate("topic", "=", "t"), Predicate("timestamp", ">=", 5),
                                Predicate("timestamp", "<", 3), Predicate("value", "=", b"x")])
    assert (b.offset_lo, b.offset_hi, b.timestamp_lo) == (13, 20, 5)
    assert b.partitions == frozenset({1, 2}) and b.partition_hi == 1 and b.topics == frozenset({"t"})
    assert b.allows_partition("t", 1) and not b.allows_partition("t", 2) and not b.allows_partition("u", 1)
    assert bounds_from_predicates([Predicate("offset", "=", 5), Predicate("offset", "=", 6)]).empty
    assert bounds_from_predicates([Predicate("topic", "=", "a"), Predicate("topic", "=", "b")]).empty
    assert bounds_from_predicates([Predicate("offset", "in", ())]).empty


# --- sizing -----------------------------------------------------------------------------------------------

def test_target_bytes_follows_sparks_split_rule():
    assert target_bytes(1 << 30, parallelism=2, max_partition_bytes=64 << 20, min_partitions=None) == 64 << 20
    assert target_bytes(10 << 20, parallelism=8, max_partition_bytes=64 << 20, min_partitions=None) == MIN_TARGET_BYTES
    assert target_bytes(10 << 20, parallelism=8, max_partition_bytes=64 << 20, min_partitions=20) == (10 << 20) // 20


@given(st.integers(0, 1000), st.integers(1, 2000), st.lists(st.integers(0, 3000), max_size=40), st.integers(1, 500))
def test_cut_covers_the_range_at_given_points(a, length, points, target):
    b = a + length
    pieces = cut(a, b, sorted(set(points)), target)
    assert pieces[0][0] == a and pieces[-1][1] == b
    assert all(x[1] == y[0] for x, y in zip(pieces, pieces[1:]))
    assert all(lo < hi for lo, hi in pieces)
    assert all(p[0] in points or p[0] == a for p in pieces)


def test_pack_honours_target_and_min_partitions():
    pieces = [Piece("t", 0, "x", i * 10, i * 10 + 10, 0, 1) for i in range(10)]
    assert [len(t.pieces) for t in pack(pieces, 30)] == [3, 3, 3, 1]
    assert len(pack(pieces, 1000, min_partitions=5)) == 5


# --- plans over kafka-python logs ---------------------------------------------------------------------------

def _offsets_in(tasks, *, with_ts=False):
    """Every record of every piece (offsets, timestamps), decoded by iter_segment from the byte ranges."""
    seen = []
    for t in tasks:
        for p in t.pieces:
            for batch in kafkalog.iter_segment(p.log, start=p.start, end=p.end):
                offs = batch.column("offset").to_numpy()
                ts = batch.column("timestamp").cast("int64").to_numpy(zero_copy_only=False)
                ctrl = batch.column("isControl").to_numpy(zero_copy_only=False)
                for o, s, c in zip(offs, ts, ctrl):
                    if not c:
                        seen.append((p.topic, p.partition, int(o), int(s), p.offset_lo, p.offset_hi))
    return seen


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lo=st.integers(-5, 65), width=st.integers(0, 70), ts_lo=st.one_of(st.none(), st.integers(-100, 700)),
       min_parts=st.one_of(st.none(), st.integers(1, 30)))
def test_plans_never_lose_a_wanted_record(logs, lo, width, ts_lo, min_parts):
    log_dir, parts = logs
    preds = [Predicate("offset", ">=", lo), Predicate("offset", "<", lo + width)]
    if ts_lo is not None:
        preds.append(Predicate("timestamp", ">=", 1_700_000_000_000 + ts_lo))
    bounds = bounds_from_predicates(preds)
    opts = {"path": str(log_dir)}
    if min_parts:
        opts["minPartitions"] = str(min_parts)
    tasks = plan_scan(parse_source_options(opts), bounds, parallelism=2)
    seen = _offsets_in(tasks)
    # a record kept by two pieces would be a duplicate row (two pieces may share bytes when minPartitions
    # splits a range by offsets, each keeping its own offsets)
    keys = [(t, p, o) for t, p, o, s, a, b in seen if a <= o < b]
    assert len(keys) == len(set(keys)), "a record is kept by two pieces"
    got = {(t, p, o) for t, p, o, s, a, b in seen if a <= o < b and (ts_lo is None or s >= 1_700_000_000_000 + ts_lo)}
    want = {(t, p, r["offset"]) for (t, p), pr in parts.items() for r in pr.records
            if lo <= r["offset"] < lo + width and (ts_lo is None or r["timestamp"] >= 1_700_000_000_000 + ts_lo)}
    assert got == want
    if min_parts:
        assert len(tasks) >= min(min_parts, sum(len(t.pieces) for t in tasks)) or not tasks


def test_pruning_reads_little(logs):
    log_dir, parts = logs
    opts = parse_source_options({"path": str(log_dir), "assign": '{"orders":[0]}'})
    whole = sum(t.size for t in plan_scan(opts, Bounds(), parallelism=2))
    narrow = plan_scan(opts, bounds_from_predicates([Predicate("offset", "=", 30)]), parallelism=2)
    assert 0 < sum(t.size for t in narrow) < whole / 4
    newest = max(r["timestamp"] for r in parts[("orders", 0)].records)
    late = plan_scan(opts, bounds_from_predicates([Predicate("timestamp", ">=", newest)]), parallelism=2)
    assert 0 < sum(t.size for t in late) < whole / 4


def test_mtime_only_segments_are_never_pruned_by_time(tmp_path):
    """Without a .timeindex the largest timestamp is the mtime: not a bound of the records."""
    standard_log_dir(tmp_path)
    for f in (tmp_path / "orders-0").glob("*.timeindex"):
        f.unlink()
    opts = parse_source_options({"path": str(tmp_path), "assign": '{"orders":[0]}'})
    full = sum(t.size for t in plan_scan(opts, Bounds(), parallelism=2))
    pruned = plan_scan(opts, bounds_from_predicates([Predicate("timestamp", ">=", 10 ** 15)]), parallelism=2)
    assert sum(t.size for t in pruned) >= sum(
        p.stat().st_size for p in sorted((tmp_path / "orders-0").glob("*.log"))[:-1])
    assert full > 0


def test_read_committed_plan(tmp_path):
    tx = make_transactional_partition(tmp_path, "tx", 0)
    tasks = plan_scan(parse_source_options({"path": str(tmp_path), "kafka.isolation.level": "read_committed"}),
                      Bounds(), parallelism=2)
    pieces = [p for t in tasks for p in t.pieces]
    assert {p.offset_hi for p in pieces} == {17}                      # the open transaction's first offset
    assert {(a.producer_id, a.first_offset, a.last_offset) for p in pieces for a in p.aborted} == {(1, 3, 9)}
    assert tx.aborted_offsets == [3, 4, 7, 8]


def test_latest_without_checkpoint_is_the_log_end(tmp_path):
    parts = standard_log_dir(tmp_path)
    opts = parse_source_options({"path": str(tmp_path), "assign": '{"orders":[0]}'})
    assert {p.offset_hi for t in plan_scan(opts, Bounds(), parallelism=2) for p in t.pieces} == \
        {parts[("orders", 0)].log_end_offset}
    write_offset_checkpoint(tmp_path / REPLICATION_OFFSET_CHECKPOINT, {("orders", 0): 9})
    assert {p.offset_hi for t in plan_scan(opts, Bounds(), parallelism=2) for p in t.pieces} == {9}


def test_json_offsets_must_name_every_partition(logs):
    log_dir, _ = logs
    opts = parse_source_options({"path": str(log_dir), "subscribe": "payments",
                                 "endingOffsets": json.dumps({"payments": {"0": 3}})})
    with pytest.raises(SourceOptionError, match="payments-1"):
        plan_scan(opts, Bounds(), parallelism=2)
    assert np.all([True])


def test_a_batch_subscribe_to_a_topic_the_log_dirs_do_not_hold_is_an_error(logs):
    """Spark's Kafka source reads it as empty (a broker may create it); from log dirs it is a typo."""
    log_dir, _ = logs
    opts = parse_source_options({"path": str(log_dir), "subscribe": "payments,ordrs"})
    with pytest.raises(SourceOptionError, match=r"option subscribe: no partition of ordrs in the log dirs .* "
                                                r"\(did you mean orders\?\); topics there: orders, payments, xorders"):
        plan_scan(opts, Bounds(), parallelism=2)
    stream = parse_source_options({"path": str(log_dir), "subscribe": "payments,ordrs"}, streaming=True)
    plan_scan(stream, Bounds(), parallelism=2)        # no error: a stream reads it when it appears
