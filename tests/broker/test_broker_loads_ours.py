"""Issue 30, group 3: the broker loads what we wrote. One dirty log is written by the broker; we compact,
retain, reindex and restore copies of it offline, and the broker adopts each result
(``kafkalog.testing.broker.adopt``) after a clean shutdown (the marker, ``CleanShutdownFileHandler``'s, is there:
it trusts our indexes and producer snapshots) and after an unclean one (no marker, no recovery point:
every batch's CRC checked, every index, epoch and producer state rebuilt from our batches).

Each time: nothing truncated or deleted, no ``-stray`` folder, no recovery complaint in server.log,
a consumer reads exactly the records our reader reads, and the broker's cleaner, run again on our
compacted output, leaves every file as we wrote it. One broker serves the module: three starts.
"""
from __future__ import annotations

import hashlib
import re
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pytest

from kafkalog.cleaner.cleaner import clean_partition
from kafkalog.config import LogConfig, load_configs
from kafkalog.log.reindex import reindex_partition
from kafkalog.log.local_log import load_partition_path
from kafkalog.log.records_io import read_segment
from kafkalog.log.writer import write_partition
from kafkalog.retention.run import APPLIED, finish_log_dir, retain_partition
from kafkalog.testing import broker_client as bc
from kafkalog.log.roll import RollConfig
from kafkalog.testing.broker import OFFSET_CHECKPOINT_FILES, KafkaBroker, adopt, stray_folders
from broker_harness import start_or_unavailable

SOURCE = "src"
SEGMENT_MS = 60_000
KEYS = 12
# What recovery says when our bytes are not what it expects (LogSegment.recover, LogLoader, UnifiedLog).
COMPLAINTS = re.compile(r"Found invalid|Corruption|corrupt|[Tt]runcat|Deleting segments as part of log recovery|"
                        r"CorruptRecordException|InvalidRecordException|-stray|stray replica|"
                        r"(WARN|ERROR).*(LogLoader|Recover|recover)")
# The broker's own files of our topics after a start: ours plus what a start adds.
OUTPUTS = ("compacted", "retained", "reindexed", "restored")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def segment_files(folder: Path) -> dict:
    """{name: sha256} of a partition folder's segment and index files (what the broker must not change)."""
    return {p.name: _sha(p) for p in sorted(folder.iterdir())
            if re.fullmatch(r"\d{20}\.(log|index|timeindex|txnindex)", p.name)}


def our_records(folder: Path) -> list:
    """What our reader reads from a partition folder: every data record (no control records), as
    (offset, key, value, headers, timestamp ms)."""
    rows = []
    for log in sorted(folder.glob("*.log")):
        t = read_segment(log)
        t = t.filter(pa.compute.invert(t.column("isControl")))
        ts = t.column("timestamp").cast(pa.int64()).to_pylist()
        for r, stamp in zip(t.select(["offset", "key", "value", "headers"]).to_pylist(), ts):
            rows.append((r["offset"], r["key"], r["value"], tuple((h["key"], h["value"]) for h in r["headers"]), stamp))
    return rows


def consumed(broker, topic: str) -> list:
    return [(c.offset, c.key, c.value, tuple(c.headers), c.timestamp_ms) for c in bc.consume_all(broker, topic)]


def complaints(server_log: str, topics) -> list:
    """The lines of ``server_log`` about ``topics`` that say recovery found something wrong."""
    names = tuple(f"{t}-0" for t in topics)
    return [line for line in server_log.splitlines() if COMPLAINTS.search(line) and any(n in line for n in names)]


def _copy_partition(src: Path, log_dir: Path, checkpoints_from: Path) -> Path:
    """A copy of the partition folder ``src`` in the new log dir ``log_dir``, with the data dir's checkpoints."""
    log_dir.mkdir(parents=True)
    dst = log_dir / src.name
    shutil.copytree(src, dst, copy_function=shutil.copy2)
    for name in OFFSET_CHECKPOINT_FILES:
        if (checkpoints_from / name).exists():
            shutil.copy2(checkpoints_from / name, log_dir / name)
    return dst


def _write_source(broker: KafkaBroker, t0: int) -> None:
    """The dirty log: keyed records with headers and tombstones over four rolled segments, in lz4 and
    zstd batches from an idempotent producer, plus an aborted and a committed transaction."""
    records = []
    for seg in range(4):
        for i in range(60):
            key = b"k%02d" % (i % KEYS)
            value = None if seg == 2 and i % 11 == 3 else b"v%d-%d" % (seg, i) * (1 + i % 5)
            records.append(bc.Record(key, value, headers=[("seg", b"%d" % seg), ("i", b"%d" % i)],
                                     timestamp_ms=t0 + seg * (SEGMENT_MS + 1_000) + i))
    bc.produce(broker, SOURCE, records[:120], codec="lz4", flush_every=9)
    bc.produce_transaction(broker, SOURCE, [bc.Record(b"k01", b"aborted", timestamp_ms=t0 + 2 * SEGMENT_MS + 5_000)],
                           transactional_id="tx-a", commit=False)
    bc.produce(broker, SOURCE, records[120:], codec="zstd", flush_every=13)
    bc.produce_transaction(broker, SOURCE, [bc.Record(b"k02", b"committed", timestamp_ms=t0 + 4 * SEGMENT_MS + 5_000),
                                            bc.Record(b"k03", b"committed", timestamp_ms=t0 + 4 * SEGMENT_MS + 5_001)],
                           transactional_id="tx-c", commit=True)
    # the sentinel rolls the last data segment: it is the active segment's only batch
    bc.produce(broker, SOURCE, [bc.Record(b"sentinel", b"s", timestamp_ms=t0 + 6 * SEGMENT_MS)])


@pytest.fixture(scope="module")
def world(kafka_jars, tmp_path_factory):
    """The broker (stopped), the source folder it wrote and our four outputs, each in a log dir of its own."""
    root = tmp_path_factory.mktemp("loads-ours")
    broker = KafkaBroker(root / "broker")
    start_or_unavailable(broker)
    now = int(time.time() * 1000)
    t0 = now - 3_600_000
    bc.create_topic(broker, SOURCE, configs={"cleanup.policy": "delete", "retention.ms": -1, "retention.bytes": -1,
                                             "segment.ms": SEGMENT_MS})
    # The targets. compact: the broker's cleaner runs on our compacted output (ratio 0: at once); the
    # others keep everything. delete.retention.ms stays Kafka's day, as our clean stamped it.
    bc.create_topic(broker, "compacted", configs={"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.0",
                                                  "segment.ms": SEGMENT_MS})
    for name in OUTPUTS[1:]:
        bc.create_topic(broker, name, configs={"cleanup.policy": "delete", "retention.ms": -1,
                                               "retention.bytes": -1, "segment.ms": SEGMENT_MS})
    _write_source(broker, t0)
    broker.stop()
    source = broker.partition_dir(SOURCE)
    outputs = {}

    # compact (the cleaner's one round, as `spark-submit.sh compact` runs it per partition)
    d = _copy_partition(source, root / "ours-compacted", broker.data_dir)
    result = clean_partition(d, config=LogConfig(cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.0,
                                                 segment_ms=SEGMENT_MS), now_ms=int(time.time() * 1000))
    assert result.cleaned and result.error is None, result.audit()
    assert result.counts.records_superseded > 0 and result.counts.aborted_records_removed == 1
    outputs["compacted"] = d

    # retain: retention.bytes leaves the last two segments (plan + apply + the log dir's checkpoint)
    d = _copy_partition(source, root / "ours-retained", broker.data_dir)
    sizes = [p.stat().st_size for p in sorted(d.glob("*.log"))]
    configs = load_configs(topic_configs=[f"{SOURCE}:retention.bytes={sum(sizes[-2:])}", f"{SOURCE}:retention.ms=-1"])
    out = retain_partition(d, log_dir=d.parent, configs=configs, now_ms=int(time.time() * 1000), execute=True,
                           delete_delay_ms=0)
    assert out["status"] == APPLIED and out["segments_deleted"] == len(sizes) - 2, out
    finish_log_dir(d.parent, [out])
    outputs["retained"] = d

    # reindex: every index gone (and one .timeindex garbled), rebuilt by reindex
    d = _copy_partition(source, root / "ours-reindexed", broker.data_dir)
    for p in list(d.glob("*.index")) + list(d.glob("*.timeindex"))[1:]:
        p.unlink()
    first_ti = sorted(d.glob("*.timeindex"))[0]
    first_ti.write_bytes(b"\xff" * 12)
    report = reindex_partition(d, log_dir=d.parent, verify_only=False, include_active=True)
    assert not [r for r in report.rows if r["class"] == "error"], report.rows
    outputs["reindexed"] = d

    # restore: our reader's records of every segment, written back as a new log dir (restore's writer)
    table = pa.concat_tables([read_segment(p, topic=SOURCE, partition=0) for p in sorted(source.glob("*.log"))])
    (root / "ours-restored").mkdir()
    write_partition(root / "ours-restored", SOURCE, 0, table,
                    roll=RollConfig.from_log_config(LogConfig(segment_ms=SEGMENT_MS)))
    outputs["restored"] = root / "ours-restored" / f"{SOURCE}-0"

    yield broker, source, outputs
    broker.kill()


def _adopt_all(broker: KafkaBroker, outputs: dict, *, clean: bool) -> str:
    for name in OUTPUTS:
        adopt(broker, name, 0, outputs[name], clean=clean, start=False)
    log = broker.logs_dir / "server.log"
    seen = log.stat().st_size
    broker.start()
    return log.read_bytes()[seen:].decode("utf-8", "replace")


def _check_loaded(broker: KafkaBroker, outputs: dict, server_log: str) -> None:
    assert stray_folders(broker) == []
    assert complaints(server_log, OUTPUTS) == []
    for name in OUTPUTS:
        ours = our_records(outputs[name])
        assert ours, name
        end = bc.list_offsets(broker, name, 0, bc.LATEST)[0]
        assert end == max(r[0] for r in ours) + 1, (name, end)
        ours_log = load_partition_path(outputs[name])
        assert bc.list_offsets(broker, name, 0, bc.EARLIEST)[0] == ours_log.log_start_offset, name
        assert end == ours_log.log_end_offset, name
        assert consumed(broker, name) == ours, name


def test_broker_loads_ours_after_a_clean_shutdown_and_recleans_nothing(world):
    broker, source, outputs = world
    server_log = _adopt_all(broker, outputs, clean=True)
    assert "Recovering unflushed segment" not in "\n".join(
        line for line in server_log.splitlines() if any(f"{n}-0" in line for n in OUTPUTS))
    _check_loaded(broker, outputs, server_log)
    # The broker's cleaner takes our compacted log as dirty from its start (no cleaner checkpoint):
    # wait for its round to end at the active segment, then stop (indexes trimmed) and compare.
    active = int(sorted(outputs["compacted"].glob("*.log"))[-1].name[:20])
    broker.wait_until(lambda: broker.checkpoint("cleaner-offset-checkpoint").get(("compacted", 0)) == active,
                      timeout=60, what="the broker's cleaner round on our compacted log")
    broker.stop()
    assert segment_files(broker.partition_dir("compacted")) == segment_files(outputs["compacted"])
    for name in OUTPUTS[1:]:
        assert segment_files(broker.partition_dir(name)) == segment_files(outputs[name]), name


def test_broker_recovers_ours_after_an_unclean_shutdown(world):
    broker, source, outputs = world
    # (stopped by the test before, or killed here: either way no marker and no recovery point)
    server_log = _adopt_all(broker, outputs, clean=False)
    for name in OUTPUTS:
        n_segments = len(list(outputs[name].glob("*.log")))
        recovered = re.findall(rf"partition={name}-0,.*Recovering unflushed segment (\d+)", server_log)
        assert len(recovered) == n_segments, (name, recovered)
    _check_loaded(broker, outputs, server_log)
    broker.stop()
    # recovery rebuilt every index from our batches and cut nothing: the same bytes as ours
    for name in OUTPUTS:
        assert segment_files(broker.partition_dir(name)) == segment_files(outputs[name]), name
