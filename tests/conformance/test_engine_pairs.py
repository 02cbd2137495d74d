"""The one engine switch (``kafkalog.engine``) and the conformance of its two engines: the same
cases through the reference and the compiled engine of each pair — decoder, encoder (the rewrite
of a retained batch), key map (the map pass's answer per record), recopy (``filterTo``) and the
cleaner's whole round — with equal results. Hypothesis draws the batch shapes: codecs, null keys
and values, headers, control records, transactions, hostile encodings (``hostile_records``)."""
from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkalog import engine as engines
from kafkalog.cleaner import cleaner as cleaner_mod, plan_partition
from kafkalog.cleaner import filter_to
from kafkalog.cleaner.key_map import NOT_FOUND
from kafkalog.cleaner.key_walk import segment_ordinals
from kafkalog.cleaner.plan import max_batch_bytes
from kafkalog.cleaner.source_segments import read_batches
from kafkalog.checkpoint.offset import write_offset_checkpoint
from kafkalog.format import record_batch as rb
from kafkalog.format.compression import decompress
from kafkalog.format.native import native_functions
from kafkalog.format.records_encode_accel import rewrite_batch
from kafkalog.format.records_reference import v2_records
from kafkalog.fs.names import REPLICATION_OFFSET_CHECKPOINT, format_segment_file_name
from kafkalog.log.records_io import read_segment

from cleaner_model import DAY, clean, log_config, write_partition
from hostile_records import Rec, batch, record
from cleaner.test_cleaner_properties import build, op

SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
ROUNDS = settings(SETTINGS, max_examples=15)          # whole rounds on disk: fewer (test_cleaner_fast has more)
NOW = 1_700_000_000_000 + 10 * DAY


# --- the switch ----------------------------------------------------------------------------------

def test_the_switch_takes_the_keyword_then_the_environment_then_compiled(monkeypatch):
    monkeypatch.delenv(engines.ENV, raising=False)
    assert engines.resolve() == "compiled" and engines.resolve("reference") == "reference"
    monkeypatch.setenv(engines.ENV, "reference")
    assert engines.resolve() == "reference" and engines.resolve("compiled") == "compiled"
    monkeypatch.setenv(engines.ENV, "")
    assert engines.resolve() == "compiled"


@pytest.mark.parametrize("name,hint", [("python", "did you mean 'reference'"), ("accel", "did you mean 'compiled'"),
                                       ("fast", "did you mean 'compiled'"), ("auto", None), ("Compiled", None)])
def test_an_unknown_engine_is_an_error_naming_the_two(monkeypatch, name, hint):
    for call in (lambda: engines.resolve(name), lambda: (monkeypatch.setenv(engines.ENV, name), engines.resolve())):
        with pytest.raises(engines.UnknownEngineError) as e:
            call()
        assert "'reference' and 'compiled'" in str(e.value)
        assert (hint in str(e.value)) if hint else "did you mean" not in str(e.value)
        assert isinstance(e.value, ValueError)


def test_an_unknown_engine_touches_nothing(tmp_path, monkeypatch):
    """The cleaner and the decoder refuse it before reading or writing anything."""
    d = _partition(tmp_path / "src", build([("put", [(b"a", b"1")]), ("roll",), ("put", [(b"a", b"2")]), ("roll",),
                                           ("put", [(b"z", b"x")])])[0])
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    with pytest.raises(engines.UnknownEngineError):
        clean(d, NOW, engine="accel")
    monkeypatch.setenv(engines.ENV, "python")
    with pytest.raises(engines.UnknownEngineError, match="KAFKALOG_ENGINE"):
        clean(d, NOW)
    with pytest.raises(engines.UnknownEngineError):
        read_segment(sorted(d.glob("*.log"))[0])
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before


def test_a_job_refuses_a_bad_engine_before_it_starts(tmp_path, monkeypatch):
    """A Spark job checks KAFKALOG_ENGINE in the driver (exit 2), not once per partition in its tasks."""
    from udfs.job import add_config_arguments, base_parser, start_job
    parser = base_parser("compact", "test")
    add_config_arguments(parser)
    (tmp_path / "meta.properties").write_text("version=1\n")
    monkeypatch.setenv(engines.ENV, "accel")
    with pytest.raises(engines.UnknownEngineError, match="did you mean 'compiled'"):
        start_job(parser, ["--log-dirs", str(tmp_path)])
    monkeypatch.setenv(engines.ENV, "compiled")
    assert start_job(parser, ["--log-dirs", str(tmp_path)]).log_dirs == [tmp_path]


def test_every_engine_honours_the_environment(tmp_path, monkeypatch):
    """KAFKALOG_ENGINE=reference reaches the decoder and the cleaner's map pass and recopy."""
    from kafkalog.format import decoder
    called = []
    monkeypatch.setattr(decoder, "decode_accel", lambda *a, **k: called.append("decoder") or pytest.fail("compiled"))
    monkeypatch.setattr(cleaner_mod, "build_key_map", lambda *a, **k: pytest.fail("compiled map pass"))
    monkeypatch.setattr(cleaner_mod, "_clean_segment_fast", lambda *a, **k: pytest.fail("compiled recopy"))
    monkeypatch.setenv(engines.ENV, "reference")
    d = _partition(tmp_path / "src", build([("put", [(b"a", b"1")]), ("roll",), ("put", [(b"a", b"2")]), ("roll",),
                                           ("put", [(b"z", b"x")])])[0])
    assert read_segment(sorted(d.glob("*.log"))[0]).num_rows == 1
    res = clean(d, NOW)
    assert res.error is None and res.cleaned and res.map_stats is None and called == []


# --- decoder -------------------------------------------------------------------------------------

@SETTINGS
@given(batches=st.lists(st.tuples(st.lists(record, min_size=1, max_size=6), st.sampled_from([0, 1, 2, 3, 4])),
                        min_size=1, max_size=4))
def test_decoder_pair(tmp_path, batches):
    raw, base = b"", 0
    for records, codec in batches:
        raw += batch(records, base_offset=base, codec=codec)
        base += len(records)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(raw)
    assert read_segment(path, engine="compiled").equals(read_segment(path, engine="reference"))


# --- encoder: a retained batch rewritten --------------------------------------------------------

def _canonical(recs, codec, log_append):
    return rb.encode_batch([rb.V2Record(i, 1_000 + r.ts_delta % 5000, r.key, r.value,
                                        [(k.decode(), v) for k, v in r.headers]) for i, r in enumerate(recs)],
                           codec=codec, timestamp_type=rb.LOG_APPEND_TIME if log_append else rb.CREATE_TIME,
                           max_timestamp=9_999 if log_append else None)


@SETTINGS
@given(recs=st.lists(record, min_size=1, max_size=10), codec=st.sampled_from([0, 1, 2, 3, 4]),
       log_append=st.booleans(), keep_seed=st.integers(0, 1 << 30), horizon=st.sampled_from([None, 5_000_000]),
       hostile=st.booleans())
def test_encoder_pair(recs, codec, log_append, keep_seed, horizon, hostile):
    """``rewrite_batch`` (compiled) writes the reference's bytes (``encode_batch`` of the kept
    rows) or declines (None: the caller takes the reference writer); it declines only batches whose
    records the reference writer would not write as they are (hostile encodings)."""
    raw = batch(recs, codec=codec) if hostile else _canonical(recs, codec, log_append)
    h = rb.parse_header(raw, 0)
    payload = decompress(h.codec, raw[rb.RECORDS_OFFSET:], magic=2) if h.codec else raw[rb.RECORDS_OFFSET:]
    rows = v2_records(payload, h)
    keep = np.random.default_rng(keep_seed).random(len(rows)) < 0.6
    la = h.timestamp_type == rb.LOG_APPEND_TIME
    kept = [rb.V2Record(r.offset, h.max_timestamp if la else r.timestamp, r.key, r.value, r.headers)
            for r, k in zip(rows, keep) if k]
    args = dict(base_offset=h.base_offset, last_offset_delta=h.last_offset_delta, codec=h.codec,
                timestamp_type=h.timestamp_type, transactional=h.is_transactional, control=h.is_control,
                delete_horizon_ms=horizon, producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                base_sequence=h.base_sequence, partition_leader_epoch=h.partition_leader_epoch,
                max_timestamp=h.max_timestamp if la else None)
    expected = rb.encode_batch(kept, **args)
    ts = np.array([k.timestamp for k in kept], np.int64)
    got = rewrite_batch(np.frombuffer(payload, np.uint8), 0, len(payload), len(rows), keep, ts, **args)
    if got is None:
        assert hostile or not kept, "the compiled writer declined a batch in the reference writer's own form"
    else:
        assert got == expected


# --- key map: the map pass's answer for each record ---------------------------------------------

def _partition(root: Path, segments) -> Path:
    write_partition(root, segments)
    return next(p for p in sorted(root.iterdir()) if p.is_dir())


@ROUNDS
@given(ops=st.lists(op, min_size=3, max_size=30), budget=st.sampled_from([None, 1]))
def test_key_map_pair(tmp_path_factory, ops, budget):
    """For every record of a plain data batch below the map's end: the compiled map (within any
    budget, in hash-slice passes) and the reference dict say alike whether its key is in the map
    and whether a later record supersedes it."""
    d = _partition(tmp_path_factory.mktemp("km"), build(ops)[0])
    plan = plan_partition(d, config=log_config(segment_bytes=1 << 30), now_ms=NOW)
    if plan.upper_bound_offset <= plan.first_dirty_offset:
        return
    ref = cleaner_mod.build_partition_offset_map(plan)
    got = cleaner_mod.build_key_map(plan, budget=budget)
    assert got.end_offset == ref.end_offset and len(got) == len(ref)
    recopied = [s for s in plan.segments if s.base_offset < ref.end_offset]
    firsts, _ = segment_ordinals(recopied)
    for s in recopied:
        ordinal = firsts[s.base_offset]
        for b in read_batches(s, max_batch_bytes=max_batch_bytes(plan.config)):
            h = b.header
            for r in b.records:
                if not (h.is_control or h.is_transactional) and r.key is not None and r.offset < ref.end_offset:
                    answer = int(got.lookup(pa.array([r.key], pa.binary()), np.zeros(1, np.int64),
                                            np.array([ordinal]), np.array([r.offset]))[0])
                    latest = ref.offsets.get(r.key)
                    assert (answer == NOT_FOUND) == (latest is None), r
                    assert latest is None or (r.offset < answer) == (r.offset < latest), r
                ordinal += 1


# --- recopy and the whole round -----------------------------------------------------------------

def _files(d: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def _rounds(src: Path, tmp: Path, **kw):
    out = {}
    for name in engines.ENGINES:
        shutil.copytree(src, tmp / name)
        d = next(p for p in sorted((tmp / name).iterdir()) if p.is_dir())
        res = clean(d, NOW, engine=name, **kw)
        out[name] = (res, _files(d))
    (ref, ref_files), (got, files) = out["reference"], out["compiled"]
    assert got.error == ref.error and got.skipped_reason == ref.skipped_reason
    assert files == ref_files
    assert got.counts == ref.counts
    return ref, got


@ROUNDS
@given(ops=st.lists(op, min_size=3, max_size=30), reasons=st.booleans(), codec=st.sampled_from([0, 1, 2, 3, 4]),
       log_append=st.booleans())
def test_cleaner_pair(tmp_path_factory, ops, reasons, codec, log_append):
    """clean_partition's whole-partition output bytes, counts and audit through both engines."""
    tmp = tmp_path_factory.mktemp("round")
    segments = [[b if b.control else replace(b, codec=codec, log_append_time=log_append) for b in seg]
                for seg in build(ops)[0]]
    write_partition(tmp / "src", segments)
    ref, got = _rounds(tmp / "src", tmp, record_decisions=reasons)
    assert got.audit() == ref.audit() and got.record_reasons == ref.record_reasons


@ROUNDS
@given(first=st.lists(record, min_size=1, max_size=10), codec=st.sampled_from([0, 3, 4]),
       later=st.lists(st.sampled_from([b"", b"a", b"b", b"zz"]), max_size=4),
       tombstones=st.lists(st.sampled_from([b"", b"a", b"b"]), max_size=2))
def test_recopy_pair_on_hostile_batches(tmp_path_factory, monkeypatch, first, codec, later, tombstones):
    """The compiled recopy (``filter_to``: the kernel's own record walk, no reasons asked) and the
    reference ``filter_batch`` on a segment of hostile records, some superseded or tombstoned later."""
    tmp = tmp_path_factory.mktemp("recopy")
    d = tmp / "src" / "compacted-0"
    d.mkdir(parents=True)
    n = len(first)
    second = [Rec(0, k, b"later", []) for k in later] + [Rec(0, k, None, []) for k in tombstones]
    segs = [[batch(first, codec=codec)] + ([batch(second, base_offset=n, codec=codec)] if second else []),
            [batch([Rec(0, b"q", b"last below the upper bound", [])], base_offset=n + len(second))],
            [batch([Rec(0, b"z", b"active", [])], base_offset=n + len(second) + 1)]]
    for seg in segs:
        (d / format_segment_file_name(int.from_bytes(seg[0][:8], "big"), "log")).write_bytes(b"".join(seg))
    write_offset_checkpoint(tmp / "src" / REPLICATION_OFFSET_CHECKPOINT, {("compacted", 0): n + len(second) + 1})
    ran = []
    run = filter_to._run
    monkeypatch.setattr(filter_to, "_run", lambda *a, **k: ran.append(1) or run(*a, **k))
    _rounds(tmp / "src", tmp, record_decisions=False)
    assert ran or not native_functions().crc32c_update      # the kernel walked them (where it can run)
