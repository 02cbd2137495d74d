"""Issue 30, group 9 — a real KRaft log dir: a broker whose ``metadata.log.dir`` is unset keeps
``__cluster_metadata-0`` (its segment, snapshots, quorum-state) inside its data log dir beside
``meta.properties`` version 1 with a ``directory.id``.

Every kafkalog job, through the per-folder code its Spark job runs (catalog, retention dry run and
--execute with configs that would delete, compaction with configs that would compact even the metadata
log, reindex with the active segment included, lookups, recover), runs over it and leaves every byte of
the metadata log as it was; the broker then starts on the dir; while it runs, the modifying jobs refuse
the dir and name the broker. ``kafkalog dump --cluster-metadata-decoder`` prints what Kafka's
DumpLogSegments --cluster-metadata-decoder prints for the metadata segment and snapshots, line by line.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from kafkalog.cleaner.clean_options import CleanOptions
from kafkalog.cleaner.cleaner import clean_log_dir
from kafkalog.cleaner.partition_run import run_partition
from kafkalog.config import configs_from_mappings
from kafkalog.errors import LogDirLockedError
from kafkalog.log.reindex import reindex_partition
from kafkalog.fs.lock import lock_log_dir
from kafkalog.fs.names import KRAFT_METADATA_TOPIC, parse_partition_dir_name
from kafkalog.lookup.partition_log import PartitionLog
from kafkalog.lookup.rules import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from kafkalog.retention.run import retain_partition
from kafkalog.testing import broker_client as bc
from kafkalog.testing.broker import DUMP_LOG_SEGMENTS, KafkaBroker, run_tool
from kafkalog.tools import cli
from udfs.partitions import catalog_folder, list_partition_folders
from broker_harness import start_or_unavailable

T0 = 1_600_000_000_000          # older than any retention.ms below: retention would delete it
METADATA = f"{KRAFT_METADATA_TOPIC}-0"
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"


@pytest.fixture(scope="module")
def kraft(kafka_jars, tmp_path_factory):
    # metadata.log.segment.ms: the metadata log rolls (KRaft appends a NoOpRecord every 500 ms), so a job that
    # compacted or retained it would find rolled segments to work on
    broker = KafkaBroker(tmp_path_factory.mktemp("kraft"), metadata_in_data=True,
                         overrides={"metadata.log.segment.ms": 1500})
    start_or_unavailable(broker)
    bc.create_topic(broker, "kr-delete", partitions=2, configs={"retention.ms": -1, "segment.ms": 1000})
    bc.create_topic(broker, "kr-compact", configs={"cleanup.policy": "compact", "segment.ms": 1000})
    for p in range(2):
        bc.produce(broker, "kr-delete", [bc.Record(b"k%d" % i, b"v%d" % i, timestamp_ms=T0 + 600 * i, partition=p)
                                         for i in range(8)], flush_every=1)
    bc.produce(broker, "kr-compact", [bc.Record(b"k%d" % (i % 3), b"v%d" % i, timestamp_ms=T0 + 600 * i)
                                      for i in range(10)], flush_every=1)
    bc.produce_transaction(broker, "kr-compact", [bc.Record(b"t", b"x")], transactional_id="kr-tx", commit=True)
    broker.wait_until(lambda: len(list((broker.data_dir / METADATA).glob("*.log"))) >= 3, timeout=30,
                      what="the metadata log to roll")
    broker.stop()
    yield broker
    broker.kill()


def _metadata_files(broker):
    """sha256 of every file of the metadata log (and bootstrap.checkpoint where the release writes one)."""
    root = broker.data_dir
    out = {}
    for path in sorted((root / METADATA).rglob("*")) + [root / BOOTSTRAP_CHECKPOINT, root / "meta.properties"]:
        if path.is_file():
            out[os.fspath(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _configs():
    """Configs that would delete and compact everything they are allowed to, the metadata log included."""
    wild = {"retention.ms": "1", "retention.bytes": "1", "cleanup.policy": "compact,delete",
            "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0", "delete.retention.ms": "0"}
    return configs_from_mappings({"log.retention.ms": "1"},
                                 {KRAFT_METADATA_TOPIC: wild, "kr-compact": wild,
                                  "kr-delete": {"retention.ms": "1"}})


def test_every_job_leaves_the_metadata_log_alone_and_the_broker_restarts(kraft, capsys):
    data = kraft.data_dir
    meta = dict(line.split("=", 1) for line in (data / "meta.properties").read_text().splitlines()
                if "=" in line and not line.startswith("#"))
    assert meta["version"] == "1" and meta.get("directory.id")
    assert any((data / METADATA).glob("*.checkpoint")) and (data / METADATA / "quorum-state").is_file()
    assert len(list((data / METADATA).glob("*.log"))) >= 3
    before = _metadata_files(kraft)
    configs = _configs()
    folders = list_partition_folders([data])
    assert (os.fspath(data), os.fspath(data / METADATA)) in folders
    now = T0 + 10 * 24 * 3600 * 1000

    # catalog (the catalog job's per-folder function)
    rows = [r for _, folder in folders for r in catalog_folder(os.fspath(data), folder, {})]
    assert {r["topic"] for r in rows} >= {"kr-delete", "kr-compact"}
    assert not [r for r in rows if r.get("kind") == "error" or r.get("problem")], rows

    # retention: dry run, then --execute (holding the lock as the job does)
    dry = [retain_partition(folder, log_dir=data, configs=configs, now_ms=now) for _, folder in folders]
    assert {o["topic"]: o["status"] for o in dry}[KRAFT_METADATA_TOPIC] == "skipped"
    with lock_log_dir(data):
        done = [retain_partition(folder, log_dir=data, configs=configs, now_ms=now, execute=True, delete_delay_ms=0)
                for _, folder in folders]
    assert sum(o.get("segments_deleted") or 0 for o in done if o["topic"] == "kr-delete") > 0, done

    # compaction of every compacted partition (the metadata log is configured compact here: it must be left),
    # through the library and through the compact job's per-folder function
    clean_log_dir(data, configs=configs, now_ms=now)
    with lock_log_dir(data):
        compacted = {Path(folder).name: run_partition(os.fspath(data), folder, configs=configs, now_ms=now,
                                                      options=CleanOptions(dry_run=False)) for _, folder in folders}
    assert compacted[METADATA]["status"] == "skipped", compacted[METADATA]
    assert compacted["kr-compact-0"]["status"] != "error", compacted["kr-compact-0"]

    # reindex, the active segment included (a metadata segment's index is preallocated: a rebuild would trim it)
    for _, folder in folders:
        topic = parse_partition_dir_name(Path(folder).name)[0]
        reindex_partition(folder, log_dir=data, index_interval_bytes=configs.for_topic(topic).index_interval_bytes,
                          include_active=True, verify_only=False)

    # lookups and recover (read-only and startup clean-up)
    for topic, partitions in (("kr-delete", 2), ("kr-compact", 1)):
        for p in range(partitions):
            with PartitionLog.open(data / f"{topic}-{p}", log_dir=data) as log:
                assert log.lookup(LATEST_TIMESTAMP).offset >= log.lookup(EARLIEST_TIMESTAMP).offset
    assert cli.main(["recover", "--log-dirs", os.fspath(data)]) == 0
    assert cli.main(["offsets", "--log-dirs", os.fspath(data), "--topic", "kr-compact"]) == 0
    capsys.readouterr()

    assert _metadata_files(kraft) == before

    kraft.start()
    try:
        assert "-stray" not in " ".join(p.name for p in data.iterdir())
        got = bc.consume_all(kraft, "kr-compact")
        assert got and got[-1].value == b"x"

        # while the broker holds the dir, modifying jobs refuse it and name the broker and the dir
        with pytest.raises(LogDirLockedError) as refused:
            clean_log_dir(data, configs=configs, now_ms=now)
        assert "Kafka broker" in str(refused.value) and os.fspath(data) in str(refused.value)
        with pytest.raises(LogDirLockedError) as refused:
            with lock_log_dir(data):
                pass
        assert f"PID {kraft.process.pid}" in str(refused.value)
        assert cli.main(["recover", "--log-dirs", os.fspath(data)]) != 0
        err = capsys.readouterr().err
        assert "Kafka broker" in err and os.fspath(data) in err and "Traceback" not in err
    finally:
        kraft.stop()


def test_cluster_metadata_decoder_prints_what_kafka_prints(kraft, capsys):
    folder = kraft.data_dir / METADATA
    files = sorted(folder.glob("*.log")) + sorted(folder.glob("*.checkpoint"))
    assert len(files) >= 2
    arg = ",".join(os.fspath(f) for f in files)
    kafka = run_tool(DUMP_LOG_SEGMENTS, "--cluster-metadata-decoder", "--files", arg)
    assert cli.main(["dump", "--cluster-metadata-decoder", "--files", arg]) == 0
    ours = capsys.readouterr().out.splitlines()
    theirs = kafka.stdout.splitlines()
    payloads = [line for line in theirs if " payload: {" in line]
    # the log holds the records a single-node KRaft cluster writes: registrations, topics, partitions...
    for kind in ("FEATURE_LEVEL_RECORD", "REGISTER_BROKER_RECORD", "TOPIC_RECORD", "PARTITION_RECORD",
                 "CONFIG_RECORD"):
        assert any(f'"type":"{kind}"' in line for line in payloads), kind
    assert any("LeaderChange:" in line for line in theirs) and any("SnapshotHeader" in line for line in theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b, f"line {i}"
    assert len(ours) == len(theirs)
