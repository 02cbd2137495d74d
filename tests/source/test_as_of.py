"""As-of tables without Spark: the compiled answer (``kafkalog.source.as_of_table``: the cleaner's key map,
then the winners) against a plain replay of the records in offset order (``reference_rows``), over random
logs with transactions, tombstones and timestamps out of order; the named cases of issue 35; the
cut's answerability after a compaction (kafkalog's cleaner, which the broker tests hold to Kafka's)."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkalog.checkpoint.offset import read_offset_checkpoint
from kafkalog.format.control_record import COMMIT, parse_control_type
from kafkalog.fs.names import CLEANER_OFFSET_CHECKPOINT
from kafkalog.source.as_of import AsOfIncompleteError, plan_as_of
from kafkalog.source.as_of_table import as_of_table, reference_rows
from kafkalog.source.options import SourceOptionError, parse_source_options
from kafkalog.testing import build_log_dir, records_of
from logdirs import write_checkpoints

TOPIC = "t"


def _plan(path, **options):
    return plan_as_of(parse_source_options({"path": str(path), **options}))


def _rows(path, **options):
    table = as_of_table(_plan(path, **options))
    return [] if table is None else [(r["offset"], r["key"], r["value"]) for r in
                                     table.select(["offset", "key", "value"]).to_pylist()]


def _reference(path, cut: int):
    records = records_of(path, include_control=True).to_pylist()
    for r in records:
        if r["isControl"]:
            r["control"] = "commit" if parse_control_type(r["key"]) == COMMIT else "abort"
    return [(r["offset"], r["key"], r["value"]) for r in reference_rows(records, cut)]


def _cut_for(rows, ts: int) -> int:
    """ListOffsets(ts) over the rows written: the first offset whose timestamp is >= ts, else the end."""
    return next((i for i, r in enumerate(rows) if r["timestamp"] >= ts), len(rows))


# --- random logs against the replay ----------------------------------------------------------------------

KEYS = [b"a", b"b", b"c", b"a-key-longer-than-sixteen-bytes", b""]
OPS = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(KEYS), st.sampled_from([b"v1", b"v2", None])),
    st.tuples(st.just("null-key"), st.just(None), st.just(b"x")),
    st.tuples(st.sampled_from(["txn-1", "txn-2"]), st.sampled_from(KEYS), st.sampled_from([b"t1", None])),
    st.tuples(st.sampled_from(["commit-1", "commit-2", "abort-1", "abort-2"]), st.just(None), st.just(None)),
)


def _log_rows(ops, stamps):
    rows = []
    for (op, key, value), ts in zip(ops, stamps):
        row = {"topic": TOPIC, "timestamp": ts}
        if op in ("put", "null-key"):
            row.update(key=key, value=value)
        elif op.startswith("txn"):
            row.update(key=key, value=value, producer_id=int(op[-1]), transactional=True)
        else:
            row.update(control=op.split("-")[0], producer_id=int(op[-1]))
        rows.append(row)
    return rows


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), weak=st.booleans())
def test_compiled_table_equals_the_replay(tmp_path_factory, data, weak):
    ops = data.draw(st.lists(OPS, min_size=1, max_size=40))
    stamps = data.draw(st.lists(st.integers(0, 50), min_size=len(ops), max_size=len(ops)))   # out of order
    rows = _log_rows(ops, stamps)
    path = build_log_dir(tmp_path_factory.mktemp("asof"), rows, records_per_batch=data.draw(st.integers(1, 4)))
    if data.draw(st.booleans()):
        ts = data.draw(st.integers(0, 52))
        options = {"asOf": str(ts)}
        cut = _cut_for(rows, ts)
    else:
        cut = data.draw(st.integers(0, len(rows)))
        options = {"asOfOffsets": json.dumps({TOPIC: {"0": cut}})}
    plan = _plan(path, **options)
    assert plan.partitions[0].cut == cut
    table = as_of_table(plan, weak_hash=weak)
    got = [] if table is None else [(r["offset"], r["key"], r["value"]) for r in
                                    table.select(["offset", "key", "value"]).to_pylist()]
    assert got == _reference(path, cut)


# --- named cases ------------------------------------------------------------------------------------------

def test_tombstone_before_the_time_and_a_new_value_after_it(tmp_path):
    path = build_log_dir(tmp_path, [
        {"topic": TOPIC, "key": "a", "value": "1", "timestamp": 100},
        {"topic": TOPIC, "key": "b", "value": "1", "timestamp": 110},
        {"topic": TOPIC, "key": "a", "value": None, "timestamp": 200},     # tombstone
        {"topic": TOPIC, "key": "a", "value": "2", "timestamp": 300},
    ])
    assert _rows(path, asOf="150") == [(0, b"a", b"1"), (1, b"b", b"1")]
    assert _rows(path, asOf="250") == [(1, b"b", b"1")]                    # deleted as of 250
    assert _rows(path, asOf="1970-01-01T00:00:00.301Z") == [(1, b"b", b"1"), (3, b"a", b"2")]


def test_a_late_record_after_the_cut_does_not_count_an_early_one_before_it_does(tmp_path):
    path = build_log_dir(tmp_path, [
        {"topic": TOPIC, "key": "a", "value": "early", "timestamp": 100},
        {"topic": TOPIC, "key": "a", "value": "future", "timestamp": 500},   # the cut for asOf=300
        {"topic": TOPIC, "key": "b", "value": "late", "timestamp": 50},      # late: ts < 300, after the cut
    ])
    assert _plan(path, asOf="300").partitions[0].cut == 1
    assert _rows(path, asOf="300") == [(0, b"a", b"early")]


def test_aborted_data_never_counts(tmp_path):
    path = build_log_dir(tmp_path, [
        {"topic": TOPIC, "key": "a", "value": "1"},
        {"topic": TOPIC, "key": "a", "value": "aborted", "producer_id": 7, "transactional": True},
        {"topic": TOPIC, "key": "b", "value": "aborted", "producer_id": 7, "transactional": True},
        {"topic": TOPIC, "control": "abort", "producer_id": 7},
        {"topic": TOPIC, "key": "c", "value": "1"},
    ])
    assert _rows(path, asOfOffsets='{"t":{"0":-1}}') == [(0, b"a", b"1"), (4, b"c", b"1")]


def test_a_transaction_open_at_the_cut_does_not_count_and_counts_once_committed(tmp_path):
    path = build_log_dir(tmp_path, [
        {"topic": TOPIC, "key": "a", "value": "txn", "producer_id": 7, "transactional": True},
        {"topic": TOPIC, "key": "b", "value": "plain"},
        {"topic": TOPIC, "control": "commit", "producer_id": 7},
        {"topic": TOPIC, "key": "a", "value": "after"},
    ])
    plan = _plan(path, asOfOffsets='{"t":{"0":2}}')
    assert plan.partitions[0].open_transactions == 1
    assert _rows(path, asOfOffsets='{"t":{"0":2}}') == [(1, b"b", b"plain")]
    assert _rows(path, asOfOffsets='{"t":{"0":3}}') == [(0, b"a", b"txn"), (1, b"b", b"plain")]
    assert _rows(path, asOfOffsets='{"t":{"0":4}}') == [(1, b"b", b"plain"), (3, b"a", b"after")]


def test_bad_options_are_named(tmp_path):
    path = build_log_dir(tmp_path, [{"topic": TOPIC, "key": "a", "value": "1"}])
    for options, words in (({"asOf": "yesterday"}, "asOf"),
                           ({"asOf": "1", "asOfOffsets": '{"t":{"0":1}}'}, "give one"),
                           ({"asOf": "1", "startingOffsets": "earliest"}, "startingOffsets"),
                           ({"asOf": "1", "kafka.isolation.level": "read_uncommitted"}, "read_committed"),
                           ({"asOfIncomplete": "warn"}, "only with asOf"),
                           ({"asOf": "1", "asOfIncomplete": "maybe"}, "error or warn")):
        with pytest.raises(SourceOptionError, match=words):
            parse_source_options({"path": str(path), **options})
    with pytest.raises(SourceOptionError, match="past its latest offset 1"):
        _plan(path, asOfOffsets='{"t":{"0":5}}')
    with pytest.raises(SourceOptionError, match="t-3 not found"):
        _plan(path, asOfOffsets='{"t":{"3":0}}')


# --- after a compaction, after a deletion -----------------------------------------------------------------

def test_a_compaction_between_the_records_and_the_query(tmp_path):
    """Cut at or past the cleaner's checkpoint: the same table as before the compaction. Below it: an
    error naming the partition, the cut and the earliest answerable offset and time; with
    asOfIncomplete=warn, the table of what is left, which here really differs."""
    import kafkalog

    rows = [{"topic": TOPIC, "key": "k%d" % (i % 5), "value": "v%d" % i, "timestamp": 1000 + i} for i in range(60)]
    rows += [{"topic": TOPIC, "key": "k0", "value": None, "timestamp": 2000}]
    path = build_log_dir(tmp_path / "logs", rows, segment_bytes=400)
    before = {c: _rows(path, asOfOffsets=json.dumps({TOPIC: {"0": c}})) for c in (10, 61)}
    configs = kafkalog.configs_from_mappings(topics={TOPIC: {"cleanup.policy": "compact",
                                                             "min.cleanable.dirty.ratio": "0.01"}})
    kafkalog.clean_log_dir(path, configs=configs, now_ms=10_000_000)
    cleaned_to = read_offset_checkpoint(path / CLEANER_OFFSET_CHECKPOINT)[(TOPIC, 0)]
    assert 10 < cleaned_to <= 61
    assert _rows(path, asOfOffsets=json.dumps({TOPIC: {"0": 61}})) == before[61]
    with pytest.raises(AsOfIncompleteError, match=rf"t-0: .*compacted offsets below {cleaned_to}.* cut 10(.|\n)*"
                                                  rf"earliest answerable cut is offset {cleaned_to} \(asOf at or after"):
        _plan(path, asOfOffsets=json.dumps({TOPIC: {"0": 10}}))
    with pytest.raises(AsOfIncompleteError, match="t-0"):
        _plan(path, asOf="1005")
    warned = _plan(path, asOfOffsets=json.dumps({TOPIC: {"0": 10}}), asOfIncomplete="warn")
    assert warned.warnings and not warned.partitions[0].to_dict()["exact"]
    assert _rows(path, asOfOffsets=json.dumps({TOPIC: {"0": 10}}), asOfIncomplete="warn") != before[10]


def test_records_deleted_below_the_log_start_make_the_table_incomplete(tmp_path):
    path = build_log_dir(tmp_path, [{"topic": TOPIC, "key": "k%d" % i, "value": "v"} for i in range(6)])
    write_checkpoints(path, log_start_offsets={(TOPIC, 0): 3})
    with pytest.raises(AsOfIncompleteError, match="below the log start offset 3"):
        _plan(path, asOfOffsets='{"t":{"0":-1}}')
    with pytest.raises(AsOfIncompleteError, match="cut 2 is below the log start offset 3"):
        _plan(path, asOfOffsets='{"t":{"0":2}}')
    assert _rows(path, asOfOffsets='{"t":{"0":-1}}', asOfIncomplete="warn") == \
        [(i, b"k%d" % i, b"v") for i in (3, 4, 5)]
