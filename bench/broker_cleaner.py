"""The broker's cleaner against ours on the same bytes (issue 30): Apache Kafka 4.4.0's cleaner thread
and ``clean_partition``, MB/s and records/s of each, in one run.

Data: ``bench.compact``'s *mixed* partitions (generated once and cached: 4 partitions of ~105 MB, 750k
records each, batches of 16 KiB rotating none / lz4 / zstd, Zipf-skewed keys over 300k per partition,
20% tombstones, 48 MiB segments plus a one-batch active segment).

The broker (kafkalog.testing.broker: one KRaft node, ``log.cleaner.threads=1``, a 128 MiB dedupe
buffer — one pass for 300k keys) adopts the partitions as the recipe says: topic ``bench`` created
with cleaning off (``min.cleanable.dirty.ratio=1.0``), stopped cleanly, its partition folders filled
with the generated segments (``partition.metadata`` kept; no indexes, so the broker rebuilds them and
reads every byte at startup: a warm page cache), their lines dropped from the recovery-point and
log-start checkpoints and the replication checkpoint set to each log end offset. Started again, the
topic's ratio is set to 0.0 and the one cleaner thread cleans the four partitions one after the
other; its time is its own statistics block (``LogCleaner.recordStats``: "X MB of log processed in S
seconds", Kafka's MB are MiB, S to 0.1 s), cross-checked with the ms timestamps of its "Beginning
cleaning" and "cleaned log" lines. Then the broker is stopped, and ``clean_partition`` cleans a fresh
copy of the same bytes (read once before, so warm too) in this process, one partition after the
other, its kernels warmed on bench.compact's *tiny* data first. MB/s = the partition's ``.log`` bytes
(all recopied by both) / 10^6 / seconds; records/s = records read / seconds (the broker's "Start
size … messages"). The records each kept are compared (the broker's "End size … messages").

    python -m bench.broker_cleaner [--readme bench/README.md]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import time
from datetime import datetime
from pathlib import Path

from bench.compact import NOW, ROOT, TOPIC, _configs, _fresh, ensure_data
from bench.readme import update_block
from kafkalog.cleaner.clean_options import CleanOptions
from kafkalog.checkpoint.offset import read_offset_checkpoint, write_offset_checkpoint
from kafkalog.fs.names import REPLICATION_OFFSET_CHECKPOINT

PARTITIONS = 4
BROKER = {"log.cleaner.dedupe.buffer.size": 128 << 20, "log.cleaner.threads": 1}
TOPIC_CONFIGS = {"cleanup.policy": "compact", "delete.retention.ms": 86_400_000, "min.cleanable.dirty.ratio": "1.0"}
README_START = "<!-- bench:broker-cleaner:start -->"
README_END = "<!-- bench:broker-cleaner:end -->"
LINE_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


def load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def _log_bytes(partition: Path) -> int:
    return sum(p.stat().st_size for p in partition.glob("*.log"))


def _line_ms(line: str) -> float:
    m = LINE_TIME.match(line)
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() * 1000 if m else float("nan")


def _line_times(cleaner_log: str, tp: str) -> float:
    """Seconds from "Beginning cleaning of log tp" to the line before "cleaned log tp (…)"."""
    lines = cleaner_log.splitlines()
    begin = next(i for i, l in enumerate(lines) if f"Beginning cleaning of log {tp}" in l)
    end = next(i for i, l in enumerate(lines) if f"cleaned log {tp} " in l)
    stamped = next(j for j in range(end, 0, -1) if LINE_TIME.match(lines[j]))
    return (_line_ms(lines[stamped]) - _line_ms(lines[begin])) / 1000


CLEANER_THREAD_COMM = "kafka-log-clea"   # "kafka-log-cleaner-thread-N" as /proc/<pid>/task/<tid>/comm cuts it (15 chars)


def cleaner_thread_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the broker's log cleaner threads have used so far, from
    ``/proc/<pid>/task/*/stat``: the broker's cleaning work without the time it waited for a core."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if not f.read().startswith(CLEANER_THREAD_COMM):
                    continue
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(rest[11]) + int(rest[12])          # utime, stime (fields 14 and 15)
    return total / tick


def run_broker(logs: Path, work: Path, log=print) -> dict:
    """Adopt the partitions, let the broker's one cleaner thread clean them, return its figures."""
    from kafkalog.testing import broker_client as bc
    from kafkalog.testing.broker import KafkaBroker, cleaner_stats

    shutil.rmtree(work, ignore_errors=True)
    broker = KafkaBroker(work, overrides=BROKER, heap="1g")
    try:
        broker.start()
        bc.create_topic(broker, TOPIC, partitions=PARTITIONS, configs=TOPIC_CONFIGS)
        broker.stop()
        hw = read_offset_checkpoint(logs / REPLICATION_OFFSET_CHECKPOINT)
        sizes = {}
        for p in range(PARTITIONS):
            dest = broker.partition_dir(TOPIC, p)
            for f in dest.iterdir():
                if f.name != "partition.metadata":
                    f.unlink()
            for seg in sorted((logs / f"{TOPIC}-{p}").glob("*.log")):
                shutil.copyfile(seg, dest / seg.name)
            sizes[p] = _log_bytes(dest)
        for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "cleaner-offset-checkpoint"):
            entries = {tp: o for tp, o in read_offset_checkpoint(broker.data_dir / name).items() if tp[0] != TOPIC}
            write_offset_checkpoint(broker.data_dir / name, entries)
        repl = {tp: o for tp, o in read_offset_checkpoint(broker.data_dir / REPLICATION_OFFSET_CHECKPOINT).items()
                if tp[0] != TOPIC}
        repl.update({tp: o for tp, o in hw.items() if tp[0] == TOPIC})
        write_offset_checkpoint(broker.data_dir / REPLICATION_OFFSET_CHECKPOINT, repl)
        t0 = time.perf_counter()
        broker.start(timeout=600)
        log(f"broker: adopted {sum(sizes.values()) / 1e6:,.0f} MB in {time.perf_counter() - t0:.1f} s "
            f"(indexes rebuilt); load {load()}")
        actives = {p: max(int(f.stem) for f in broker.partition_dir(TOPIC, p).glob("*.log")) for p in range(PARTITIONS)}
        time.sleep(2)
        load_before = load()
        cpu0 = cleaner_thread_cpu_s(broker.process.pid)
        bc.alter_topic_configs(broker, TOPIC, {"min.cleanable.dirty.ratio": "0.0"})
        broker.wait_until(lambda: all(broker.checkpoint("cleaner-offset-checkpoint").get((TOPIC, p)) == actives[p]
                                      for p in range(PARTITIONS)), timeout=900, what="the cleaner's rounds")
        cleaner_cpu = cleaner_thread_cpu_s(broker.process.pid) - cpu0
        time.sleep(1)
        text = broker.cleaner_log()
        stats = cleaner_stats(text)
        rows = []
        for p in range(PARTITIONS):
            tp = f"{TOPIC}-{p}"
            block = text[text.index(f"cleaned log {tp} "):]
            s = cleaner_stats(block)[0]
            rows.append(dict(partition=p, bytes=sizes[p], seconds=s.seconds, line_seconds=_line_times(text, tp),
                             records=s.start_messages, kept=s.end_messages, processed_mib=s.processed_mb))
        assert len(stats) >= PARTITIONS, "the broker's statistics blocks are missing from log-cleaner.log"
        return dict(rows=rows, load_before=load_before, load_after=load(), cleaner_cpu_s=cleaner_cpu)
    finally:
        try:
            broker.stop()
        except Exception:  # noqa: BLE001 - a benchmark's broker that will not stop is killed
            broker.kill()


def run_ours(logs: Path, log=print) -> dict:
    from kafkalog.cleaner import clean_partition

    configs = _configs()
    tiny = _fresh(ensure_data("tiny", log=log), "broker-cleaner-tiny")
    for p in sorted(d for d in tiny.iterdir() if d.is_dir()):       # kernels compiled/loaded
        clean_partition(p, config=configs.for_topic(TOPIC), now_ms=NOW, broker=configs.broker,
                        options=CleanOptions(record_decisions=False))
    work = _fresh(logs, "broker-cleaner-ours")
    for f in work.rglob("*.log"):                                     # warm page cache
        with open(f, "rb") as fh:
            while fh.read(8 << 20):
                pass
    load_before = load()
    rows = []
    for p in range(PARTITIONS):
        part = work / f"{TOPIC}-{p}"
        size = _log_bytes(part)
        t0 = time.perf_counter()
        r = clean_partition(part, config=configs.for_topic(TOPIC), now_ms=NOW, broker=configs.broker,
                            options=CleanOptions(record_decisions=False))
        wall = time.perf_counter() - t0
        if not r.cleaned:
            raise SystemExit(f"clean_partition did not clean {part}: {r.error or r.skipped_reason}")
        rows.append(dict(partition=p, bytes=size, seconds=wall, records=r.counts.records_read,
                         kept=r.counts.records_kept, passes=r.map_stats.passes if r.map_stats else None))
    return dict(rows=rows, load_before=load_before, load_after=load())


def render(broker: dict, ours: dict, when: str) -> str:
    def total(rows, key):
        return sum(r[key] for r in rows)
    b_s, o_s = total(broker["rows"], "seconds"), total(ours["rows"], "seconds")
    b_line = total(broker["rows"], "line_seconds")
    nbytes, recs = total(ours["rows"], "bytes"), total(ours["rows"], "records")
    lines = [
        f"Run {when}; load average (1, 5, 15 min) before the broker's rounds {broker['load_before']}, "
        f"before ours {ours['load_before']} (2 cores, shared with other sessions' tests: noisy).",
        "",
        "| partition | .log MB | records | broker s (stats; lines) | broker MB/s | ours s | ours MB/s | ours ÷ broker | kept: broker / ours |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for b, o in zip(broker["rows"], ours["rows"]):
        lines.append(f"| {o['partition']} | {o['bytes'] / 1e6:,.1f} | {o['records']:,} | {b['seconds']:.1f}; "
                     f"{b['line_seconds']:.2f} | {b['bytes'] / 1e6 / b['seconds']:,.1f} | {o['seconds']:.2f} | "
                     f"{o['bytes'] / 1e6 / o['seconds']:,.1f} | {b['seconds'] / o['seconds']:.2f} | "
                     f"{b['kept']:,} / {o['kept']:,} |")
    lines.append(f"| all | {nbytes / 1e6:,.1f} | {recs:,} | {b_s:.1f}; {b_line:.2f} | {nbytes / 1e6 / b_s:,.1f} "
                 f"({recs / b_s / 1e6:.2f}M records/s) | {o_s:.2f} | {nbytes / 1e6 / o_s:,.1f} "
                 f"({recs / o_s / 1e6:.2f}M records/s) | {b_s / o_s:.2f} | |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="the broker's cleaner and clean_partition on the same bytes")
    ap.add_argument("--readme", help="write the table between the bench:broker-cleaner markers of this file")
    args = ap.parse_args(argv)
    logs = ensure_data("mixed")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"load {load()}")
    broker = run_broker(logs, ROOT / "broker-cleaner-broker")
    print(f"broker done; load {load()}")
    ours = run_ours(logs)
    table = render(broker, ours, when)
    print(table)
    if args.readme:
        update_block(Path(args.readme), README_START, README_END,
                     "## The broker's cleaner and ours on the same bytes (`python -m bench.broker_cleaner`)", table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
