"""Compaction on the same bytes: Apache Kafka 4.4's cleaner against ours (issue 30, group 2).

One broker writes every dirty log. Cleaning is off while it writes (``min.cleanable.dirty.ratio=1.0``:
the ratio is never strictly above 1, and ``max.compaction.lag.ms`` is left at its default), so a
round's input can be copied (copy A, with the high watermark from ListOffsets) before the cleaner is
switched on by altering the topic's configs; once the broker's ``cleaner-offset-checkpoint`` reaches
the round's end, cleaning is switched off again and the broker's result is copied (copy B). Ours
(``clean_partition``) then cleans copy A with the same configs (the broker's server.properties and the
topic's), the same high watermark and the same "now": the broker stamps ``deleteHorizonMs = now +
delete.retention.ms`` into every batch whose tombstone or marker it keeps for the first time, and every
round here stamps one (a fresh tombstone per round), so now = the round's newest horizon − delete.retention.ms.

The whole partition folder is compared: the same file names (segment grouping, producer snapshots),
every .log/.index/.timeindex/.txnindex byte for byte, the cleaner checkpoint; where bytes differ the
batches are compared header field by field and record by record first, so a failure names what
differs. The one difference kept on purpose: a batch the cleaner REBUILDS (some records dropped, or a
horizon stamped) in a compressed topic is recompressed by each side's own encoder (Java's
GZIPOutputStream/snappy-java/lz4-java/zstd-jni against Python's), so for those batches the header
(all but length and CRC) and the records must be equal, the compressed bytes may differ, and the
offset index is compared through batch ordinals instead of byte positions.

Scenarios (one topic each, all on one broker whose dedupe buffer is 1.1 MB at load factor 0.1, i.e.
2,291 keys per broker round):
  tomb     — tombstone lifecycle over two rounds (kept and stamped, then removed), headers, two dirty
             segments grouped into one, null values, superseded records, producers' last batches
  txn      — three rounds of committed and aborted transactions: aborted data dropped, ABORT/COMMIT
             markers kept while their data is seen, stamped, then removed; .txnindex; empty batches
             kept for active producers
  c-<codec> — gzip, snappy, lz4, zstd: batches kept whole, rebuilt, emptied; a tombstone stamped
  minlag   — min.compaction.lag.ms stops the round before a young segment
  maxlag   — max.compaction.lag.ms forces a round while the dirty ratio never qualifies
  dedupe   — 5,000 keys: the broker needs three rounds, ours one round of hash-slice passes (the same
             result, indexes included: Kafka 4.4 indexes a cleaned segment batch by batch)
  dedupe0  — the same with delete.retention.ms=0: the one difference kept on purpose (see its test)
  hwrule   — KAFKA-20452: an emptied batch is kept only where it ends at the high watermark
"""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from kafkalog.cleaner.clean_options import CleanOptions
from kafkalog.cleaner.cleaner import clean_partition
from kafkalog.config import configs_from_mappings
from kafkalog.format import record_batch as rb
from kafkalog.format.records_reference import decode_v2_batch
from kafkalog.index.offset_index import read_offset_index
from kafkalog.testing import broker_client as bc
from kafkalog.testing.broker import KafkaBroker, cleaner_rounds
from broker_harness import start_or_unavailable

MIN = 60_000
HOUR = 60 * MIN
DAY = 24 * HOUR
SEGMENT_MS = MIN                    # a batch stamped > 1 min after its segment's first batch rolls it
OFF = {"min.cleanable.dirty.ratio": "1.0"}
ON = {"min.cleanable.dirty.ratio": "0.0"}
BROKER = {"log.cleaner.dedupe.buffer.size": 1_100_000,      # the minimum is > 1 MiB per cleaner thread
          "log.cleaner.io.buffer.load.factor": 0.05}        # 45,833 slots x 0.05 = 2,291 keys per round
CODECS = ("gzip", "snappy", "lz4", "zstd")
IGNORED = (".deleted", ".cleaned", ".swap")
IGNORED_FILES = {"partition.metadata", "leader-epoch-checkpoint"}
ROUND_TIMEOUT_S = 45.0

R = bc.Record


@dataclass
class Scenario:
    """One topic: its configs while writing (cleaning off) and while its round runs (on), and per round
    a function that writes that round's records (the sentinel that rolls the segment is added here)."""
    topic: str
    configs: Dict[str, object]
    on: Dict[str, object] = field(default_factory=lambda: dict(ON))
    rounds: List[object] = field(default_factory=list)
    codec: str = "none"
    sentinel: Optional[object] = None   # (round, base, wall-clock start) -> the sentinel's timestamp


@dataclass
class Parity:
    """What the module fixture hands the tests: every (topic, round)'s copies, and the broker's properties."""
    copies: Dict[Tuple[str, int], "RoundCopy"]
    broker_props: Dict[str, str]


@dataclass
class RoundCopy:
    topic: str
    round: int
    before: Path            # partition folder (inside a log dir of its own) before the broker's round
    after: Path             # the broker's partition folder after it
    high_watermark: int
    now_ms: int             # the broker's "now" for the round
    broker_end: int         # the broker's cleaner-offset-checkpoint after the round
    broker_rounds: List[Tuple[int, int]]   # the broker's rounds' dirty sections (it may need several)
    configs: Dict[str, str]


# --- what each scenario writes -----------------------------------------------------------------------

def _sentinel(broker, topic: str, ts: int, codec: str = "none") -> None:
    """One record stamped well past the segment's first: it rolls the segment the round's data is in."""
    bc.produce(broker, topic, [R(b"__sentinel", b"s%d" % ts, timestamp_ms=ts)], codec=codec)


def _tomb(t0):
    def round0(broker, topic, base):
        first = [R(b"k%d" % i, b"v1-%d" % i, headers=[("h", b"%d" % i)] if i % 3 == 0 else (), timestamp_ms=base + i)
                 for i in range(10)]
        bc.produce(broker, topic, first, flush_every=4)
        # a second dirty segment (rolled by the timestamp jump): updates and tombstones
        second = [R(b"k%d" % i, b"v2-%d" % i, timestamp_ms=base + 2 * MIN + i) for i in range(5)]
        second += [R(b"k5", None, timestamp_ms=base + 2 * MIN + 10), R(b"k6", None, timestamp_ms=base + 2 * MIN + 11)]
        bc.produce(broker, topic, second, flush_every=3)

    def round1(broker, topic, base):
        bc.produce(broker, topic, [R(b"k7", b"v3-7", timestamp_ms=base), R(b"k8", None, timestamp_ms=base + 1),
                                   R(b"k9", b"v3-9", headers=[("x", b"y"), ("x", b"z")], timestamp_ms=base + 2)])
    return [round0, round1]


def _txn(t0):
    # Markers carry the coordinator's wall clock, so this topic's data carries the client's (timestamp
    # None): a marker after data stamped hours ago would roll the segment by segment.ms.

    def round0(broker, topic, _base):
        p = bc.producer(broker, transactional_id="tx-a")
        p.init_transactions()
        try:
            bc.produce_transaction(broker, topic, [R(b"a", b"a1"), R(b"b", b"b1")],
                                   transactional_id="tx-a", commit=True, client=p)
            bc.produce_transaction(broker, topic, [R(b"a", b"a2-aborted"),
                                                   R(b"c", b"c1-aborted")],
                                   transactional_id="tx-a", commit=False, client=p)
            bc.produce_transaction(broker, topic, [R(b"g", b"g1")], transactional_id="tx-a",
                                   commit=True, client=p)
        finally:
            p.close(timeout=10)
        bc.produce(broker, topic, [R(b"g", b"g2"), R(b"d", b"d1"),
                                   R(b"t0", None)])
        # a second transactional producer whose last batch is aborted data: kept empty while it is active
        bc.produce_transaction(broker, topic, [R(b"e", b"e-aborted")], transactional_id="tx-b",
                               commit=False)

    def round1(broker, topic, _base):
        bc.produce(broker, topic, [R(b"a", b"a4"), R(b"t1", None)])

    def round2(broker, topic, _base):
        bc.produce(broker, topic, [R(b"b", b"b5"), R(b"t2", None)])
    return [round0, round1, round2]


def _codec_rounds(codec):
    def round0(broker, topic, base):
        # 8 batches of 10 records: keys k0..k29 then k0..k19 again (their first copies superseded), one
        # tombstone; batches 0-1 lose all or some records, batch 2 half, the last ones are kept whole
        records = [R(b"k%d" % (i % 30) if i < 30 else b"k%d" % (i - 30), b"value-%d-" % i + b"x" * (i % 7),
                     headers=[("n", b"%d" % i)] if i % 4 == 0 else (), timestamp_ms=base + i) for i in range(50)]
        records += [R(b"k%d" % (100 + i), b"tail-%d" % i, timestamp_ms=base + 50 + i) for i in range(29)]
        records.append(R(b"k25", None, timestamp_ms=base + 79))
        bc.produce(broker, topic, records, codec=codec, flush_every=10)
    return [round0]


def _minlag(t0):
    def round0(broker, topic, base):
        now = int(time.time() * 1000)
        bc.produce(broker, topic, [R(b"k%d" % i, b"old-%d" % i, timestamp_ms=now - 3 * HOUR + i) for i in range(10)])
        bc.produce(broker, topic, [R(b"k%d" % i, b"mid-%d" % i, timestamp_ms=now - 2 * HOUR + i) for i in range(5)])
        # young (20 minutes < min.compaction.lag.ms): the round stops before this segment
        bc.produce(broker, topic, [R(b"k%d" % i, b"young-%d" % i, timestamp_ms=now - 20 * MIN + i) for i in range(5, 10)]
                   + [R(b"k3", None, timestamp_ms=now - 20 * MIN + 10)])
    return [round0]


def _maxlag(t0):
    def round0(broker, topic, base):
        now = int(time.time() * 1000)
        bc.produce(broker, topic, [R(b"k%d" % i, b"old-%d" % i, timestamp_ms=now - 3 * HOUR + i) for i in range(10)])
        bc.produce(broker, topic, [R(b"k%d" % i, b"new-%d" % i, timestamp_ms=now - 2 * HOUR + i) for i in range(6)]
                   + [R(b"k9", None, timestamp_ms=now - 2 * HOUR + 9)])
    return [round0]


def _hw_rule(t0):
    """KAFKA-20452: the batch right before the round's upper bound, emptied, and not an active producer's
    last: aborted data stamped hours ago whose marker (the broker's clock) opens a young segment that
    min.compaction.lag.ms keeps out of the round; the producer's later transaction makes it not its last."""
    def round0(broker, topic, base):
        bc.produce(broker, topic, [R(b"k0", b"plain", timestamp_ms=base)])
        p = bc.producer(broker, transactional_id="tx-hw")
        p.init_transactions()
        try:
            bc.produce_transaction(broker, topic, [R(b"k1", b"aborted", timestamp_ms=base + 1)],
                                   transactional_id="tx-hw", commit=False, client=p)
            bc.produce_transaction(broker, topic, [R(b"k2", b"committed", timestamp_ms=base + 2)],
                                   transactional_id="tx-hw", commit=True, client=p)
        finally:
            p.close(timeout=10)
    return [round0]


def _dedupe(keys: int):
    """``keys`` distinct keys, the first 500 written twice, then a tombstone: with 2,291 keys per
    broker round, several rounds (the broker) or hash-slice passes (ours)."""
    def round0(broker, topic, base):
        records = [R(b"key-%05d" % (i % keys), b"v%d" % i, timestamp_ms=base + i // 100) for i in range(keys + 500)]
        records.append(R(b"key-00007", None, timestamp_ms=base + 200))
        bc.produce(broker, topic, records, batch_size=32_768, linger_ms=5)
    return [round0]


def scenarios(t0: int) -> List[Scenario]:
    compact = {"cleanup.policy": "compact", "segment.ms": SEGMENT_MS, "delete.retention.ms": 0, **OFF}
    out = [Scenario("tomb", dict(compact), rounds=_tomb(t0)),
           Scenario("txn", dict(compact), rounds=_txn(t0), sentinel=lambda r, base, wall: wall + (r + 1) * 3 * MIN),
           Scenario("minlag", dict(compact, **{"min.compaction.lag.ms": HOUR}), rounds=_minlag(t0),
                    sentinel=lambda r, base, wall: int(time.time() * 1000) - MIN),
           Scenario("maxlag", dict(compact), on={"max.compaction.lag.ms": HOUR}, rounds=_maxlag(t0)),
           Scenario("dedupe", dict(compact, **{"delete.retention.ms": DAY}), rounds=_dedupe(5_000)),
           Scenario("dedupe0", dict(compact), rounds=_dedupe(3_000)),
           Scenario("hwrule", dict(compact, **{"min.compaction.lag.ms": HOUR}), rounds=_hw_rule(t0),
                    sentinel=lambda r, base, wall: wall + 3 * MIN)]
    out += [Scenario(f"c-{codec}", dict(compact), rounds=_codec_rounds(codec), codec=codec) for codec in CODECS]
    return out


# --- the broker's side: write, copy, clean, copy ---------------------------------------------------------

def _copy_partition(src: Path, dest_log_dir: Path) -> Path:
    dest_log_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_log_dir / src.name
    shutil.copytree(src, dest, ignore=lambda d, names: [n for n in names if n.endswith(IGNORED)])
    return dest


def _batches(path: Path) -> List[Tuple[int, rb.BatchHeader, list]]:
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        header, rows = decode_v2_batch(data, pos, max_batch_bytes=1 << 30)
        out.append((pos, header, [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in rows]))
        pos += header.size_in_bytes
    return out


def _horizons(partition: Path) -> List[int]:
    return [h.delete_horizon_ms for log in sorted(partition.glob("*.log")) for _, h, _ in _batches(log)
            if h.delete_horizon_ms is not None]


def _sections(broker: KafkaBroker, topic: str) -> List[Tuple[int, int]]:
    """The dirty sections of the broker's rounds on ``topic`` so far ("cleaned log T-0 (dirty section = [a, b])")."""
    return [(a, b) for tp, a, b in cleaner_rounds(broker.cleaner_log()) if tp == f"{topic}-0"]


def _cleaned_lines(broker: KafkaBroker, topic: str) -> int:
    return len(_sections(broker, topic))



@pytest.fixture(scope="module")
def parity(kafka_jars, tmp_path_factory) -> Parity:
    """Run every scenario's rounds on one broker; return each round's copies (before/after)."""
    root = tmp_path_factory.mktemp("parity")
    broker = KafkaBroker(root / "broker", overrides=BROKER)
    start_or_unavailable(broker)
    wall = int(time.time() * 1000)
    t0 = (wall - 2 * HOUR) // 1000 * 1000
    scens = scenarios(t0)
    out: Dict[Tuple[str, int], RoundCopy] = {}
    try:
        for s in scens:
            bc.create_topic(broker, s.topic, configs=s.configs)
        for r in range(max(len(s.rounds) for s in scens)):
            base = t0 + r * 10 * MIN
            active = [s for s in scens if r < len(s.rounds)]
            hws, befores, seen = {}, {}, {}
            for s in active:
                s.rounds[r](broker, s.topic, base)
                _sentinel(broker, s.topic, s.sentinel(r, base, wall) if s.sentinel else base + 5 * MIN, s.codec)
                hws[s.topic] = bc.list_offsets(broker, s.topic, 0, bc.LATEST)[0]
                befores[s.topic] = _copy_partition(broker.partition_dir(s.topic), root / f"r{r}" / s.topic / "A")
                seen[s.topic] = _cleaned_lines(broker, s.topic)
            started = int(time.time() * 1000)
            for s in active:
                bc.alter_topic_configs(broker, s.topic, s.on)
            for s in active:
                # the round ends at the active segment's base (or, with a lag, earlier): wait until the
                # broker has checkpointed as far as the sentinel's segment or a lagging one, then until
                # it stays there for a second (no further round: e.g. the dedupe topic's next rounds)
                lagging = "min.compaction.lag.ms" in s.configs
                target = None if lagging else _active_base(broker.partition_dir(s.topic))
                _wait_round(broker, s.topic, target, seen[s.topic])
            done = int(time.time() * 1000)
            for s in active:
                bc.alter_topic_configs(broker, s.topic, {**OFF, **{k: v for k, v in s.configs.items() if k in s.on}})
            for s in active:
                after = _copy_partition(broker.partition_dir(s.topic), root / f"r{r}" / s.topic / "B")
                horizons = [h for h in _horizons(after) if started - 5_000 <= h - int(s.configs["delete.retention.ms"])]
                now = max(horizons) - int(s.configs["delete.retention.ms"]) if horizons else done
                assert started - 5_000 <= now <= done + 1_000, (s.topic, r, started, now, done)
                configs = {k: str(v) for k, v in {**s.configs, **s.on}.items()}
                out[(s.topic, r)] = RoundCopy(s.topic, r, befores[s.topic], after, hws[s.topic], now,
                                              broker.checkpoint("cleaner-offset-checkpoint")[(s.topic, 0)],
                                              _sections(broker, s.topic)[seen[s.topic]:], configs)
        yield Parity(out, broker.server_properties())
    finally:
        broker.kill()


def _active_base(partition: Path) -> int:
    return max(int(p.stem) for p in partition.glob("*.log"))


def _wait_round(broker: KafkaBroker, topic: str, target: Optional[int], seen: int) -> None:
    state = {"value": None, "since": 0.0}

    def settled():
        if _cleaned_lines(broker, topic) <= seen:
            return False
        value = broker.checkpoint("cleaner-offset-checkpoint").get((topic, 0))
        if target is not None and value != target:
            return False
        if value != state["value"]:
            state.update(value=value, since=time.monotonic())
            return False
        return time.monotonic() - state["since"] >= (0.0 if target is not None else 1.0)
    broker.wait_until(settled, timeout=ROUND_TIMEOUT_S, what=f"the cleaner's round on {topic}")


# --- our side on copy A, and the comparison ------------------------------------------------------------------

def clean_ours(copy: RoundCopy, broker_props: Dict[str, str], tmp: Path):
    """Our cleaner on a fresh copy of A, as the broker was configured, twice: without per-record
    reasons (the jobs' path: compiled windows of many batches per write) and with them (batch by
    batch); both must write the same files. Returns (partition folder, result) of the first."""
    cfg = configs_from_mappings(broker_props, {copy.topic: copy.configs})
    out = []
    for decisions in (False, True):
        part = _copy_partition(copy.before, tmp / f"ours-{copy.topic}-{copy.round}-{decisions}")
        result = clean_partition(part, config=cfg.for_topic(copy.topic), now_ms=copy.now_ms, broker=cfg.broker,
                                 options=CleanOptions(high_watermark=copy.high_watermark, record_decisions=decisions))
        assert result.error is None and result.skipped_reason is None, (result.error, result.skipped_reason)
        out.append((part, result))
    (a, result), (b, _) = out
    assert {n: (a / n).read_bytes() for n in _files(a)} == {n: (b / n).read_bytes() for n in _files(b)}
    return a, result


def _files(partition: Path) -> List[str]:
    return sorted(p.name for p in partition.iterdir() if p.name not in IGNORED_FILES and not p.name.endswith(IGNORED))


def _header_fields(h: rb.BatchHeader, *, with_crc: bool = True) -> dict:
    d = dict(base=h.base_offset, last=h.last_offset, epoch=h.partition_leader_epoch, magic=h.magic,
             attributes=h.attributes, base_ts=h.base_timestamp, max_ts=h.max_timestamp, pid=h.producer_id,
             pepoch=h.producer_epoch, seq=h.base_sequence, count=h.records_count)
    if with_crc:
        d.update(crc=h.crc, length=h.batch_length)
    return d


def compare_partitions(ours: Path, broker: Path) -> List[str]:
    """Assert the two partition folders are the same; return the names of the batches that were
    recompressed (equal headers but length/CRC, equal records, different compressed bytes)."""
    assert _files(ours) == _files(broker), "segment files differ (grouping, snapshots or indexes)"
    recompressed: List[str] = []
    for name in _files(ours):
        a, b = (ours / name).read_bytes(), (broker / name).read_bytes()
        if not name.endswith(".log"):
            continue
        if a == b:
            continue
        ba, bb = _batches(ours / name), _batches(broker / name)
        assert [(_header_fields(h, with_crc=False), rows) for _, h, rows in ba] == \
               [(_header_fields(h, with_crc=False), rows) for _, h, rows in bb], f"{name}: batches differ"
        for (pa_, ha, _), (pb, hb, _) in zip(ba, bb):
            if (ours / name).read_bytes()[pa_:pa_ + ha.size_in_bytes] != b[pb:pb + hb.size_in_bytes]:
                assert ha.codec != 0, f"{name}: uncompressed batch {ha.base_offset} differs byte-wise"
                recompressed.append(f"{name}@{ha.base_offset}")
    for name in _files(ours):
        a, b = (ours / name).read_bytes(), (broker / name).read_bytes()
        if name.endswith(".index") and a != b:
            # positions differ only through recompressed batch sizes: compare entries by batch ordinal
            log = name[:-len(".index")] + ".log"
            def ordinals(folder):
                starts = [pos for pos, _, _ in _batches(folder / log)]
                idx = read_offset_index(folder / name)
                return [(e.offset, starts.index(e.position)) for e in idx.entries()]
            assert recompressed and ordinals(ours) == ordinals(broker), f"{name} differs"
        elif not name.endswith((".log", ".index")):
            assert a == b, f"{name} differs byte-wise"
    return recompressed


def _rows(partition: Path) -> list:
    return [(h.base_offset, h.last_offset, h.attributes, h.delete_horizon_ms, rows)
            for log in sorted(partition.glob("*.log")) for _, h, rows in _batches(log)]


def _check(parity, tmp_path, topic: str, r: int):
    copy = parity.copies[(topic, r)]
    ours, result = clean_ours(copy, parity.broker_props, tmp_path)
    assert result.end_offset == copy.broker_end, "cleaner-offset-checkpoint differs"
    assert _rows(ours) == _rows(copy.after), "kept batches/records differ"
    return copy, ours, result, compare_partitions(ours, copy.after)


# --- the tests ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("r", [0, 1])
def test_tombstone_lifecycle(parity, tmp_path, r):
    copy, ours, result, recompressed = _check(parity, tmp_path, "tomb", r)
    assert recompressed == []
    rows = {rec[2]: rec[3] for *_, recs in _rows(ours) for rec in recs}
    if r == 0:     # kept, and their batches stamped with the round's horizon
        assert rows[b"k5"] is None and rows[b"k6"] is None
        assert copy.now_ms in _horizons(ours)
    else:          # the first round's tombstones are gone; this round's is kept and stamped
        assert b"k5" not in rows and b"k6" not in rows and rows[b"k8"] is None


ABORT_KEY = b"\x00\x00\x00\x00"       # control record key: version 0, type 0 (ABORT); type 1 is COMMIT


@pytest.mark.parametrize("r", [0, 1, 2])
def test_transactions(parity, tmp_path, r):
    """Round 0: aborted data dropped (kept as an empty batch where it is an active producer's last),
    both ABORT markers kept with a .txnindex entry (their data seen). Round 1: tx-a's ABORT, whose data
    is gone, is stamped with the round's horizon. Round 2: it is removed; tx-b's stays (its emptied
    batch is still seen)."""
    copy, ours, result, recompressed = _check(parity, tmp_path, "txn", r)
    assert recompressed == []
    rows = _rows(ours)
    values = [rec[3] for *_, recs in rows for rec in recs]
    assert b"a2-aborted" not in values and b"c1-aborted" not in values and b"e-aborted" not in values
    aborts = [b for b in rows if b[2] & rb.CONTROL_FLAG_MASK and b[4] and b[4][0][2] == ABORT_KEY]
    if r == 0:
        assert len(aborts) == 2 and all(b[3] is None for b in aborts)
        assert list(ours.glob("*.txnindex")) and any(not b[4] and b[2] & rb.TRANSACTIONAL_FLAG_MASK for b in rows)
    elif r == 1:
        assert [b[3] for b in aborts] == [copy.now_ms, None]
    else:
        assert len(aborts) == 1 and aborts[0][3] is None


def _batch_bytes(partition: Path) -> Dict[int, bytes]:
    out = {}
    for log in sorted(partition.glob("*.log")):
        data = log.read_bytes()
        for pos, h, _ in _batches(log):
            out[h.base_offset] = data[pos:pos + h.size_in_bytes]
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_codecs(parity, tmp_path, codec):
    """Batches kept whole are the source bytes on both sides; a rebuilt batch (records dropped, or a
    tombstone's horizon stamped) has the broker's header and records; its compressed bytes are the
    broker's for gzip (Java's Deflater and Python's zlib agree here) and may differ for snappy, lz4 and
    zstd (each side's own encoder: snappy-java, lz4-java, zstd-jni against the C libraries here)."""
    copy, ours, result, recompressed = _check(parity, tmp_path, f"c-{codec}", 0)
    source, cleaned = _batch_bytes(copy.before), _batch_bytes(ours)
    rebuilt = {base for base, raw in cleaned.items() if source[base] != raw}
    whole = set(cleaned) - rebuilt
    assert rebuilt and whole, "the scenario rebuilds some batches and keeps others whole"
    assert {int(name.rsplit("@", 1)[1]) for name in recompressed} <= rebuilt
    if codec == "gzip":
        assert recompressed == []
    assert result.counts.horizons_stamped >= 1


def test_min_compaction_lag(parity, tmp_path):
    copy, ours, result, recompressed = _check(parity, tmp_path, "minlag", 0)
    assert copy.broker_end < _active_base(copy.after)       # stopped before the young segment


def test_empty_last_batch_rule(parity, tmp_path):
    """Kafka 4.4 (KAFKA-20452) keeps an emptied batch only where it ends at the high watermark."""
    copy, ours, result, recompressed = _check(parity, tmp_path, "hwrule", 0)
    assert b"aborted" not in [rec[3] for *_, recs in _rows(ours) for rec in recs]


def test_max_compaction_lag(parity, tmp_path):
    copy, ours, result, recompressed = _check(parity, tmp_path, "maxlag", 0)
    assert result.offsets.cleanable_ratio <= 1.0 and len(copy.broker_rounds) == 1


def test_small_dedupe_buffer(parity, tmp_path):
    """Several broker rounds (its map holds 2,291 keys) against our one round of hash-slice passes, with
    the default delete.retention.ms: the same result."""
    copy, ours, result, recompressed = _check(parity, tmp_path, "dedupe", 0)
    assert len(copy.broker_rounds) >= 3, copy.broker_rounds
    assert result.map_stats is not None and result.map_stats.passes >= 2


def _records(partition: Path) -> set:
    return {rec for *_, recs in _rows(partition) for rec in recs}


def test_small_dedupe_buffer_short_delete_retention(parity, tmp_path):
    """The difference kept on purpose: a broker round whose map ends before a tombstone keeps it (past
    the map) and stamps its batch's horizon; with delete.retention.ms shorter than the backlog takes, a
    later round of the same backlog drops it. Ours maps the whole dirty section in one round (as the
    broker does with a buffer large enough), so the tombstone is seen for the first time: kept, stamped.
    Exactly those tombstones differ; every other batch is the broker's."""
    copy = parity.copies[("dedupe0", 0)]
    ours, result = clean_ours(copy, parity.broker_props, tmp_path)
    assert len(copy.broker_rounds) >= 2 and result.map_stats.passes >= 2
    assert result.end_offset == copy.broker_end
    first_end = copy.broker_rounds[0][1]
    extra = _records(ours) - _records(copy.after)
    assert _records(copy.after) <= _records(ours)
    assert extra and all(value is None and offset >= first_end for offset, _ts, _k, value, _h in extra), extra
    same = lambda rows: [b for b in rows if not any(rec in extra for rec in b[4])]
    touched = lambda rows: [b[:2] for b in rows if any(rec in extra for rec in b[4])]
    assert same(_rows(ours)) == [b for b in _rows(copy.after) if b[:2] not in touched(_rows(ours))]
