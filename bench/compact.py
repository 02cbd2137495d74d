"""Compaction throughput and memory of ``spark-submit.sh compact`` (udfs.compact_job) on local[2].

Two generated log dirs (cached under /tmp/kafkalog-bench/compact-*, regenerated when the parameters
change; every run works on a fresh copy):

- **throughput**: topic ``bench``, 4 partitions, 10M records in all (~1 GB of .log), keys drawn
  uniformly from 1M (``key-%011d``), 30% tombstones, 72-byte values, uncompressed v2 batches of at
  most 16 KiB, segments of 128 MiB plus a one-batch active segment, high watermark = log end. The
  whole log below the active segment is dirty (no cleaner checkpoint).
- **memory**: one partition whose dirty range holds 10M distinct keys (8-byte values, ~330 MB): the
  key map is 10M entries, more than fits in a capped Python worker as a dict.

Timed: ``compact_job.main`` end to end (plan, key-map aggregation, rewrite, swap-in, checkpoint) on
a local[2] session built with ``spark.driver.memory=2g`` (in local mode the driver JVM is the
executor: the heap cap), ``spark.executor.pyspark.memory`` (PySpark sets RLIMIT_AS of each Python
worker to it; default 4g here because RLIMIT_AS counts address space — pyarrow, numba/LLVM and the
mmap'd segments reserve ~2 GB of it while the worker's resident set stays ~0.3 GB) and ``spark.python.worker.reuse``. MB/s = bytes of the recopied segments read / wall
time; records/s = records of those segments / wall time. Peak memory: a sampler thread reads
``/proc/<pid>/status`` of every descendant process (the JVM and the Python workers) every 0.2 s and
keeps each one's VmHWM (peak resident set) and max RssAnon (anonymous memory: what counts against a
memory cap; file-backed pages of mmap'd segments are reclaimable and excluded).

    python -m bench.compact               # full size (10M records, 1M keys; memory check: 10M keys)
    python -m bench.compact --quick       # 1M records, 100k keys; memory check: 1M keys
    python -m bench.compact --readme bench/README.md
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import threading
import time
from pathlib import Path

import numpy as np

from bench.gen import Batch, frame_batch
from bench.readme import update_block
from kafkalog.checkpoint import REPLICATION_OFFSET_CHECKPOINT, write_offset_checkpoint
from kafkalog.format import compression as C
from kafkalog.format import record_batch as rb
from kafkalog.logdir import format_segment_file_name

ROOT = Path("/tmp/kafkalog-bench")
TOPIC = "bench"
T0 = 1_700_000_000_000
DAY = 86_400_000
NOW = T0 + 10 * DAY
BATCH_BYTES = 16 * 1024
FORMAT_VERSION = 1
README_START = "<!-- bench:compact:start -->"
README_END = "<!-- bench:compact:end -->"


# --- data --------------------------------------------------------------------------------------

def _write_partition(folder: Path, keys: np.ndarray, tombstone: np.ndarray, value_bytes: int, segment_bytes: int,
                     rng) -> int:
    """One partition folder: records key-<id>, values (None where ``tombstone``) in 16 KiB batches,
    segments of ``segment_bytes`` and a final one-batch active segment. Returns the log end offset."""
    folder.mkdir(parents=True)
    pool = rng.integers(ord("a"), ord("z") + 1, 1 << 16, dtype=np.uint8).tobytes()
    n = len(keys)
    starts = rng.integers(0, len(pool) - value_bytes, n).tolist()
    key_list = [b"key-%011d" % k for k in keys.tolist()]
    dead = tombstone.tolist()
    enc = rb.encode_record
    batches, i = [], 0
    while i < n:
        body = bytearray()
        j = i
        while j < n and len(body) < BATCH_BYTES - 2 * value_bytes - 40:
            s = starts[j]
            enc(body, offset_delta=j - i, timestamp_delta=j - i, key=key_list[j],
                value=None if dead[j] else pool[s:s + value_bytes])
            j += 1
        batches.append(frame_batch(Batch(i, j - i, T0 + i, T0 + j - 1, bytes(body)), C.NONE))
        i = j
    segments, current, size, base = [], [], 0, 0
    for k, raw in enumerate(batches):
        last = k == len(batches) - 1
        if current and (size + len(raw) > segment_bytes or last):
            segments.append((base, current))
            current, size = [], 0
        if not current:
            base = int(np.frombuffer(raw[:8], ">i8")[0])
        current.append(raw)
        size += len(raw)
    segments.append((base, current))
    for base, raws in segments:
        (folder / format_segment_file_name(base, "log")).write_bytes(b"".join(raws))
    return n


def ensure_data(kind: str, *, records: int, keys: int, partitions: int, tombstones: float, value_bytes: int,
                segment_bytes: int, log=print) -> Path:
    params = dict(format_version=FORMAT_VERSION, kind=kind, records=records, keys=keys, partitions=partitions,
                  tombstones=tombstones, value_bytes=value_bytes, segment_bytes=segment_bytes)
    root = ROOT / f"compact-{kind}-{records}-{keys}"
    meta = root / "meta.json"
    if meta.exists() and json.loads(meta.read_text()) == params:
        return root / "logs"
    shutil.rmtree(root, ignore_errors=True)
    t0 = time.perf_counter()
    rng = np.random.default_rng(20261121)
    logs = root / "logs"
    hw = {}
    per = records // partitions
    for p in range(partitions):
        if keys >= per * partitions:       # distinct keys: a permutation
            ids = rng.permutation(per).astype(np.int64) + p * per
        else:
            ids = rng.integers(0, keys, per)
        dead = rng.random(per) < tombstones
        hw[(TOPIC, p)] = _write_partition(logs / f"{TOPIC}-{p}", ids, dead, value_bytes, segment_bytes, rng)
    write_offset_checkpoint(logs / REPLICATION_OFFSET_CHECKPOINT, hw)
    meta.write_text(json.dumps(params))
    log(f"generated {kind} data ({records:,} records, {_du(logs) / 1e6:,.0f} MB) in {time.perf_counter() - t0:.0f} s")
    return logs


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# --- memory sampling ---------------------------------------------------------------------------

class PeakMemory:
    """Peak VmHWM and RssAnon of every descendant process (JVM, Python daemon and workers)."""

    def __init__(self, interval: float = 0.2):
        self.interval = interval
        self.peaks: dict = {}
        self.rlimit_as = None          # RLIMIT_AS seen on a forked Python worker (spark.executor.pyspark.memory)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _descendants(self) -> list:
        children: dict = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                children.setdefault(ppid, []).append(int(entry))
        out, todo = [], [os.getpid()]
        while todo:
            pid = todo.pop()
            for c in children.get(pid, []):
                out.append(c)
                todo.append(c)
        return out

    def sample(self) -> None:
        for pid in self._descendants():
            try:
                fields = {}
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        name, _, value = line.partition(":")
                        if name in ("Name", "VmHWM", "RssAnon"):
                            fields[name] = value.strip()
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            kind = "jvm" if "java" in fields.get("Name", "") else "python worker" if "pyspark" in cmd else "other"
            if kind == "python worker" and self.rlimit_as is None:
                try:
                    with open(f"/proc/{pid}/limits") as f:
                        for line in f:
                            if line.startswith("Max address space") and line.split()[3] != "unlimited":
                                self.rlimit_as = int(line.split()[3])
                except OSError:
                    pass
            hwm = int(fields.get("VmHWM", "0 kB").split()[0]) * 1024
            anon = int(fields.get("RssAnon", "0 kB").split()[0]) * 1024
            old = self.peaks.get(pid, (kind, 0, 0))
            self.peaks[pid] = (kind, max(old[1], hwm), max(old[2], anon))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.sample()

    def summary(self) -> dict:
        out = {}
        for kind, hwm, anon in self.peaks.values():
            k = out.setdefault(kind, {"processes": 0, "peak_rss": 0, "peak_anon": 0})
            k["processes"] += 1
            k["peak_rss"] = max(k["peak_rss"], hwm)
            k["peak_anon"] = max(k["peak_anon"], anon)
        return out


# --- runs --------------------------------------------------------------------------------------

def run_job(spark, logs: Path, work: Path, extra_config: list) -> dict:
    from udfs import compact_job

    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(logs, work)
    report = work.parent / (work.name + ".json")
    args = ["--log-dirs", str(work), "--now-ms", str(NOW), "--report", str(report),
            "--topic-config", f"{TOPIC}:cleanup.policy=compact", "--topic-config", f"{TOPIC}:delete.retention.ms={DAY}"]
    for c in extra_config:
        args += ["--topic-config", f"{TOPIC}:{c}"]
    with PeakMemory() as mem:
        t0 = time.perf_counter()
        code = compact_job.main(args, spark=spark)
        wall = time.perf_counter() - t0
    rep = json.loads(report.read_text())
    if code != 0:
        raise SystemExit(f"compact job exited {code}: {[p['reason'] for p in rep['partitions']]}")
    parts = rep["partitions"]
    out = dict(wall_s=round(wall, 1), partitions=len(parts), bytes_read=sum(p["bytes_read"] for p in parts),
               bytes_written=sum(p["bytes_written"] for p in parts), records_read=sum(p["records_read"] for p in parts),
               records_kept=sum(p["records_kept"] for p in parts), map_size=sum(p["map_size"] for p in parts),
               tombstones_kept=sum(p["tombstones_kept"] for p in parts),
               task_s=max(p["duration_s"] for p in parts), memory=mem.summary(), worker_rlimit_as=mem.rlimit_as)
    out["mb_per_s"] = round(out["bytes_read"] / 1e6 / wall, 1)
    out["records_per_s"] = round(out["records_read"] / wall)
    shutil.rmtree(work, ignore_errors=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="compaction benchmark (see module docstring)")
    ap.add_argument("--quick", action="store_true", help="1M records / 100k keys; memory check with 1M keys")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--memory-keys", type=int, help="distinct keys of the memory check (default 10M, --quick 1M)")
    ap.add_argument("--pyspark-memory", default="4g",
                    help="spark.executor.pyspark.memory: RLIMIT_AS of each Python worker (address space, which "
                         "counts mappings and reservations, not only memory used; 2g fails at import + mmap)")
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--readme", metavar="PATH")
    args = ap.parse_args(argv)
    scale = 10 if args.quick else 1
    seg = (128 << 20) // scale
    results = {}
    from udfs.session import build_session
    spark = build_session("kafkalog-bench-compact", master="local[2]", conf={
        "spark.driver.memory": "2g", "spark.executor.pyspark.memory": args.pyspark_memory, "spark.python.worker.reuse": "true",
        "spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": "8",
        "spark.local.dir": str(ROOT / "spark-local")})
    try:
        if not args.skip_throughput:
            logs = ensure_data("throughput", records=10_000_000 // scale, keys=1_000_000 // scale, partitions=4,
                               tombstones=0.3, value_bytes=72, segment_bytes=seg)
            results["throughput"] = run_job(spark, logs, ROOT / "compact-work", [f"segment.bytes={seg}"])
            print(json.dumps(results["throughput"]), flush=True)
        if not args.skip_memory:
            n = args.memory_keys or 10_000_000 // scale
            logs = ensure_data("memory", records=n, keys=n, partitions=1,
                               tombstones=0.0, value_bytes=8, segment_bytes=seg)
            results["memory"] = run_job(spark, logs, ROOT / "compact-work-memory", [f"segment.bytes={seg}"])
            print(json.dumps(results["memory"]), flush=True)
    finally:
        spark.stop()
    results.update(machine=platform.node(), python=platform.python_version(), quick=args.quick,
                   cpus=os.cpu_count())
    table = render(results)
    print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    if args.readme:
        update_readme(Path(args.readme), table)
    return 0


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.2f} GiB"


def render(results: dict) -> str:
    lines = ["| run | .log read | records read → kept | keys in map | wall (local[2]) | MB/s | records/s | "
             "peak RSS JVM / Python worker | peak anon JVM / Python worker |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, label in (("throughput", "4 partitions, 30% tombstones"), ("memory", "1 partition, all keys distinct")):
        r = results.get(name)
        if not r:
            continue
        m = r["memory"]
        jvm, py = m.get("jvm", {}), m.get("python worker", {})
        lines.append(
            f"| {name}: {label} | {r['bytes_read'] / 1e6:,.0f} MB | {r['records_read']:,} → {r['records_kept']:,} | "
            f"{r['map_size']:,} | {r['wall_s']:.0f} s | {r['mb_per_s']:.1f} | {r['records_per_s']:,} | "
            f"{_gib(jvm.get('peak_rss', 0))} / {_gib(py.get('peak_rss', 0))} | "
            f"{_gib(jvm.get('peak_anon', 0))} / {_gib(py.get('peak_anon', 0))} |")
    return "\n".join(lines)


def update_readme(path: Path, table_md: str) -> None:
    update_block(path, README_START, README_END, "## `bench/compact.py`", table_md)


if __name__ == "__main__":
    raise SystemExit(main())
