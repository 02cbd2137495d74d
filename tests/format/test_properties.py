"""Property tests (hypothesis): varints, batch round trips for every codec, and the two engines
agreeing on any bytes, valid or mutated."""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.log import records_io as segment
from kafkalog.errors import KafkalogError
from kafkalog.format import record_batch as rb
from kafkalog.format import records_accel as acc
from kafkalog.format.record_columns import REPEATS
from kafkalog.format.varint import read_varint, read_varlong, write_varint, write_varlong

import numpy as np

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


@pytest.mark.parametrize("value,encoded", [(0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "8001"),
                                           (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f")])
def test_varint_vectors_from_kafka(value, encoded):
    out = bytearray()
    write_varint(value, out)
    assert out.hex() == encoded
    assert read_varint(out, 0) == (value, len(out))


@SETTINGS
@given(INT32)
def test_varint_round_trip(v):
    out = bytearray()
    write_varint(v, out)
    assert read_varint(bytes(out), 0) == (v, len(out))
    assert tuple(int(x) for x in acc.read_varint(np.frombuffer(bytes(out), np.uint8), 0, len(out))) == (v, len(out))


@SETTINGS
@given(INT64)
def test_varlong_round_trip(v):
    out = bytearray()
    write_varlong(v, out)
    assert read_varlong(bytes(out), 0) == (v, len(out))
    assert tuple(int(x) for x in acc.read_varlong(np.frombuffer(bytes(out), np.uint8), 0, len(out))) == (v, len(out))


@SETTINGS
@given(st.binary(min_size=0, max_size=12))
def test_varint_engines_agree_on_any_bytes(data):
    arr = np.frombuffer(data, np.uint8) if data else np.zeros(0, np.uint8)
    for ref_fn, acc_fn in ((read_varint, acc.read_varint), (read_varlong, acc.read_varlong)):
        try:
            expected = ref_fn(data, 0)
        except KafkalogError:
            expected = None
        got = tuple(int(x) for x in acc_fn(arr, 0, len(data)))
        assert (got[1] == -1) if expected is None else (got == expected)


header_st = st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=8)))
record_st = st.tuples(
    st.integers(1, 5),                                   # offset gap
    st.integers(0, 2**41),                               # timestamp
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=300)),
    st.lists(header_st, max_size=3),
)
batch_st = st.lists(record_st, min_size=1, max_size=12)


def _records(spec, start):
    out, offset = [], start
    for gap, ts, k, v, h in spec:
        offset += gap
        out.append(rb.V2Record(offset, ts, k, v, tuple(h)))
    return out


@SETTINGS
@given(batches=st.lists(batch_st, min_size=1, max_size=4), codec=st.sampled_from([0, 1, 2, 3, 4]),
       log_append=st.booleans())
def test_batches_round_trip_and_engines_agree(tmp_path_factory, batches, codec, log_append):
    d = tmp_path_factory.mktemp("rt") / "prop-topic-2"
    d.mkdir()
    records, blobs, offset = [], [], 0
    for spec in batches:
        recs = _records(spec, offset)
        offset = recs[-1].offset + 1
        blob = rb.encode_batch(recs, codec=codec, partition_leader_epoch=3,
                               timestamp_type=rb.LOG_APPEND_TIME if log_append else rb.CREATE_TIME)
        blobs.append(blob)
        ts_max = max(r.timestamp for r in recs)
        records += [(r, ts_max if log_append else r.timestamp) for r in recs]
    log = d / "00000000000000000000.log"
    log.write_bytes(b"".join(blobs))
    a = segment.read_segment(log, engine="reference")
    b = segment.read_segment(log, engine="compiled", window_bytes=512)   # small windows: many RecordBatches
    assert a.equals(b)
    assert a.column("offset").to_pylist() == [r.offset for r, _ in records]
    assert a.column("timestamp").cast(pa.int64()).to_pylist() == [t for _, t in records]
    assert a.column("key").to_pylist() == [r.key for r, _ in records]
    assert a.column("value").to_pylist() == [r.value for r, _ in records]
    assert [[(h["key"], h["value"]) for h in hs] for hs in a.column("headers").to_pylist()] == \
        [list(r.headers) for r, _ in records]
    assert set(a.column("topic").to_pylist()) == {"prop-topic"} and set(a.column("partition").to_pylist()) == {2}
    if not log_append:   # our own codecs are deterministic, so every batch re-encodes to the same bytes
        assert segment.encode_records(b) == log.read_bytes()


def _outcome(log, engine):
    try:
        t = segment.read_segment(log, engine=engine)
        return ("ok", t)
    except KafkalogError as e:
        return (type(e).__name__, e.position)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=batch_st, codec=st.sampled_from([0, 0, 0, 1, 2, 3, 4]), flips=st.lists(
    st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1, max_size=4), verify_crc=st.booleans())
def test_engines_agree_on_mutated_bytes(tmp_path_factory, spec, codec, flips, verify_crc):
    """Whatever the bytes, both engines give the same table or the same error at the same position."""
    data = bytearray(rb.encode_batch(_records(spec, 0), codec=codec) * 2)
    for pos, x in flips:
        data[pos % len(data)] ^= x
    log = tmp_path_factory.mktemp("mut") / "00000000000000000000.log"
    log.write_bytes(bytes(data))
    outcomes = []
    for engine in ("reference", "compiled"):
        try:
            outcomes.append(("ok", segment.read_segment(log, engine=engine, verify_crc=verify_crc)))
        except KafkalogError as e:
            assert e.path == str(log)
            outcomes.append((type(e).__name__, e.position))
    (ka, va), (kb, vb) = outcomes
    assert ka == kb
    assert va.equals(vb) if ka == "ok" else va == vb


# Batch-level fields that are often one value for a whole window (the accelerated engine then
# shares one constant buffer per column) and sometimes differ from batch to batch.
batch_fields_st = st.fixed_dictionaries({
    "codec": st.sampled_from([0, 1, 2, 3, 4]),
    "timestamp_type": st.sampled_from([rb.CREATE_TIME, rb.LOG_APPEND_TIME]),
    "transactional": st.booleans(),
    "delete_horizon_ms": st.one_of(st.none(), st.integers(0, 2**41)),
    "producer_id": st.sampled_from([rb.NO_PRODUCER_ID, 7, 2**40]),
    "producer_epoch": st.sampled_from([rb.NO_PRODUCER_EPOCH, 0, 3]),
    "base_sequence": st.sampled_from([rb.NO_SEQUENCE, 0, 100]),
    "partition_leader_epoch": st.sampled_from([rb.NO_PARTITION_LEADER_EPOCH, 3, 4]),
})


@SETTINGS
@given(batches=st.lists(st.tuples(batch_st, batch_fields_st), min_size=1, max_size=5), same=st.booleans())
def test_batch_columns_constant_or_varying_within_a_window(tmp_path_factory, batches, same):
    d = tmp_path_factory.mktemp("bc") / "fields-0"
    d.mkdir()
    blobs, offset, expected = [], 0, []
    for spec, fields in batches:
        if same:                                     # every batch of the window agrees on every field
            fields = batches[0][1]
        recs = _records(spec, offset)
        offset = recs[-1].offset + 1
        blob = rb.encode_batch(recs, **fields)
        blobs.append(blob)
        expected += [fields] * len(recs)
    log = d / "00000000000000000000.log"
    log.write_bytes(b"".join(blobs))
    a = segment.read_segment(log, engine="reference")
    b = segment.read_segment(log, engine="compiled")                      # one window holds every batch
    assert a.equals(b)
    assert b.column("codec").to_pylist() == [f["codec"] for f in expected]
    assert b.column("timestampType").to_pylist() == [f["timestamp_type"] for f in expected]
    assert b.column("isTransactional").to_pylist() == [f["transactional"] for f in expected]
    assert b.column("deleteHorizonMs").to_pylist() == [f["delete_horizon_ms"] for f in expected]
    assert b.column("producerId").to_pylist() == [f["producer_id"] for f in expected]
    assert b.column("producerEpoch").to_pylist() == [f["producer_epoch"] for f in expected]
    assert b.column("baseSequence").to_pylist() == [f["base_sequence"] for f in expected]
    assert b.column("partitionLeaderEpoch").to_pylist() == [f["partition_leader_epoch"] for f in expected]
    assert set(b.column("magic").to_pylist()) == {2}
    b.validate(full=True)


def test_repeated_columns_made_by_racing_threads_are_one_array():
    """Decode threads that ask for the same constant column at once share the one array that was
    stored, not each its own (the column cache made each, then kept the last)."""
    import threading
    REPEATS.clear()
    start, addresses = threading.Barrier(8), []

    def ask():
        start.wait()
        column = REPEATS.column(("int32", 4242), 100, lambda m: pa.array(np.full(m, 4242, np.int32)))
        addresses.append(column.buffers()[1].address)
    threads = [threading.Thread(target=ask) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(addresses) == 8 and len(set(addresses)) == 1


def test_constant_batch_columns_share_one_buffer_across_windows(tmp_path):
    d = tmp_path / "shared-1"
    d.mkdir()
    recs = [rb.V2Record(i, 1000 + i, b"k%d" % i, b"v" * 50) for i in range(400)]
    log = d / "00000000000000000000.log"
    log.write_bytes(b"".join(rb.encode_batch(recs[i:i + 20], partition_leader_epoch=5, codec=3)
                             for i in range(0, 400, 20)))
    REPEATS.clear()      # from empty, so that the decode threads race to make each array
    t = segment.read_segment(log, engine="compiled", window_bytes=2048)
    assert t.column("magic").num_chunks > 2
    for name in ("magic", "codec", "producerId", "partitionLeaderEpoch", "timestampType", "deleteHorizonMs"):
        addresses = {chunk.buffers()[1].address for chunk in t.column(name).chunks}
        assert len(addresses) == 1, name                        # one shared buffer, not one per window
    assert t.column("partitionLeaderEpoch").to_pylist() == [5] * 400
    assert t.column("deleteHorizonMs").null_count == 400
    varying = t.column("baseOffset")                            # differs per batch: written per window
    assert len({chunk.buffers()[1].address for chunk in varying.chunks}) == varying.num_chunks
    assert varying.to_pylist() == [i - i % 20 for i in range(400)]


@pytest.mark.parametrize("codec", [0, 3])
def test_keys_and_values_of_a_window_share_one_allocation(tmp_path, codec):
    """Keys are walked into the workspace and appended after the values, so a window makes one
    allocation for its key and value bytes, and a decode allocates little more than it returns."""
    d = tmp_path / "alloc-0"
    d.mkdir()
    recs = [rb.V2Record(i, 1000 + i, b"key-%06d" % i, b"value-%d-" % i + b"x" * (i % 90)) for i in range(20000)]
    log = d / "00000000000000000000.log"
    log.write_bytes(b"".join(rb.encode_batch(recs[i:i + 100], codec=codec) for i in range(0, 20000, 100)))
    segment.read_segment(log, engine="compiled", window_bytes=256 << 10)       # workspaces and caches warm
    pool = pa.default_memory_pool()
    before = pool.total_bytes_allocated()
    t = segment.read_segment(log, engine="compiled", window_bytes=256 << 10)
    allocated = pool.total_bytes_allocated() - before
    assert t.column("key").num_chunks > 2
    for k, v in zip(t.column("key").chunks, t.column("value").chunks):
        v_data, k_data = v.buffers()[2], k.buffers()[2]
        assert k_data.address == v_data.address + v_data.size          # keys follow the values
    assert t.column("key").to_pylist() == [r.key for r in recs]
    assert t.column("value").to_pylist() == [r.value for r in recs]
    distinct = {b.address: b.size for col in t.columns for chunk in col.chunks for b in chunk.buffers() if b is not None}
    assert allocated < 1.25 * sum(distinct.values()) + (1 << 20)
