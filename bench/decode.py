"""Decode throughput: kafkalog vs aiokafka's C reader vs kafka-python, and vs bare decompression.

In one process, interleaved, on the same generated segments (bench/gen.py: 1M records, 16-byte
keys, 100-byte values, ~16 KiB batches; uncompressed, gzip, snappy, lz4, zstd), CRC checked by all:

- kafkalog   ``read_segment(path)`` -> pyarrow.Table (compiled engine, numba warmed first), and
             ``iter_segment(path)`` streaming RecordBatches;
- aiokafka   ``aiokafka.record._crecords.MemoryRecords`` (Cython): per batch ``validate_crc()``
             (CRC-32C of the raw batch, before decompression), then every record's
             offset/timestamp/key/value/headers;
- kafka-python ``kafka.record.memory_records.MemoryRecords``, the same way;
- bare       the codec library alone on every batch payload (bytes 61..end), the fastest honest
             Python way found: zlib.decompress(wbits=31); cramjam.snappy.decompress_raw per xerial
             chunk; lz4.block.decompress per Kafka LZ4 frame block; a zstandard decompressobj per
             batch (Java's zstd frames carry no content size). No record parsing, no CRC.

Every reader yields the key and value bytes of every record (Python bytes objects for the peers,
Arrow binary columns for kafkalog). The peers get the file's bytes already in memory; kafkalog
gets the path (an mmap of the page-cached file).

Peak RSS of read_segment and iter_segment is measured in a fresh subprocess each: warm up on a
small segment, reset VmHWM (/proc/self/clear_refs), decode, read VmHWM.

    python -m bench.decode                      # 1M records, writes nothing but stdout
    python -m bench.decode --quick              # 100k records smoke run
    python -m bench.decode --json out.json --readme bench/README.md
    python -m bench.decode --profile            # + stage timers and cProfile of read_segment
"""
from __future__ import annotations

import argparse
import cProfile
import datetime as _dt
import gc
import io
import json
import os
import platform
import pstats
import statistics
import struct
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Callable, Dict, List, Optional

from bench.gen import CODECS, DEFAULT_DIR, DEFAULT_RECORDS, ensure_segments
from bench import memprobe

TARGET_VS_AIOKAFKA = 3.0          # uncompressed: >= 3x aiokafka's records/s
TARGET_VS_KAFKA_PYTHON = 30.0     # uncompressed: >= 30x kafka-python's
TARGET_VS_BARE = 1.3              # compressed: <= 1.3x the codec's bare decompression time
WARM_RECORDS = 2000               # small segments used to warm up (numba cache load, codec paths)

README_START = "<!-- bench:decode:start -->"
README_END = "<!-- bench:decode:end -->"
PROFILE_START = "<!-- bench:profile:start -->"
PROFILE_END = "<!-- bench:profile:end -->"


# --- the readers -------------------------------------------------------------------------------

def has_threads_option() -> bool:
    """Whether this kafkalog's ReadOptions has ``threads`` (windows decoded on a thread pool)."""
    from kafkalog.log.records_io import ReadOptions
    return "threads" in getattr(ReadOptions, "__dataclass_fields__", {})


def kafkalog_read(path: str, **options) -> int:
    from kafkalog.log.records_io import read_segment
    return read_segment(path, **options).num_rows


def kafkalog_read_1t(path: str) -> int:
    return kafkalog_read(path, threads=1)


def kafkalog_iter(path: str, **options) -> int:
    from kafkalog.log.records_io import iter_segment
    rows = 0
    for batch in iter_segment(path, **options):
        rows += batch.num_rows
    return rows


def _peer_reader(memory_records_cls) -> Callable[[bytes], int]:
    def read(data: bytes) -> int:
        mr = memory_records_cls(data)
        rows = 0
        while True:
            batch = mr.next_batch()
            if batch is None:
                return rows
            if not batch.validate_crc():
                raise AssertionError(f"CRC mismatch in batch at offset {batch.base_offset}")
            for r in batch:
                r.offset, r.timestamp, r.key, r.value, r.headers  # noqa: B018 - touch every field
                rows += 1
    return read


def aiokafka_reader():
    from aiokafka.record._crecords import MemoryRecords
    return _peer_reader(MemoryRecords)


def kafka_python_reader():
    from kafka.record.memory_records import MemoryRecords
    return _peer_reader(MemoryRecords)


# --- bare decompression ------------------------------------------------------------------------

def batch_payloads(data: bytes) -> List[memoryview]:
    """The records region (bytes 61..end) of every v2 batch, as zero-copy views (not timed)."""
    mv = memoryview(data)
    out = []
    pos = 0
    unpack = struct.Struct(">i").unpack_from
    while pos < len(data):
        size = unpack(data, pos + 8)[0] + 12
        out.append(mv[pos + 61:pos + size])
        pos += size
    return out


def bare_gzip(payloads) -> int:
    d = zlib.decompress
    n = 0
    for p in payloads:
        n += len(d(p, 31))
    return n


def bare_snappy(payloads) -> int:
    import cramjam
    d = cramjam.snappy.decompress_raw
    unpack = struct.Struct(">i").unpack_from
    n = 0
    for p in payloads:          # xerial: 16-byte header, then (int32 length, raw snappy block)*
        pos, end = 16, len(p)
        while pos < end:
            (length,) = unpack(p, pos)
            pos += 4
            n += len(d(p[pos:pos + length]))
            pos += length
    return n


def bare_lz4(payloads) -> int:
    import lz4.block
    d = lz4.block.decompress
    unpack = struct.Struct("<I").unpack_from
    n = 0
    for p in payloads:          # Kafka LZ4 frame: magic, FLG, BD, HC, then (uint32 size, block)*, 0
        pos = 7
        while True:
            (word,) = unpack(p, pos)
            pos += 4
            if word == 0:
                break
            size = word & 0x7FFFFFFF
            n += size if word & 0x80000000 else len(d(p[pos:pos + size], uncompressed_size=65536))
            pos += size
    return n


def bare_zstd(payloads) -> int:
    import zstandard
    dctx = zstandard.ZstdDecompressor()
    n = 0
    for p in payloads:
        n += len(dctx.decompressobj().decompress(p))
    return n


BARE = {"gzip": bare_gzip, "snappy": bare_snappy, "lz4": bare_lz4, "zstd": bare_zstd}


# --- correctness fingerprint (untimed) ---------------------------------------------------------

def fingerprint_kafkalog(path: str, **options) -> tuple:
    import numpy as np
    import pyarrow as pa
    from kafkalog.log.records_io import read_segment
    t = read_segment(path, **options)
    crcs = []
    for name in ("key", "value"):
        crc = 0
        for chunk in t.column(name).chunks:
            offs = np.frombuffer(chunk.buffers()[1], np.int32)[chunk.offset:chunk.offset + len(chunk) + 1]
            crc = zlib.crc32(memoryview(chunk.buffers()[2])[offs[0]:offs[-1]], crc)
        crcs.append(crc)
    offsets = int(pa.compute.sum(t.column("offset")).as_py())
    ts = int(pa.compute.sum(t.column("timestamp").cast(pa.int64())).as_py())
    return t.num_rows, offsets, ts, crcs[0], crcs[1]


def fingerprint_peer(read_cls, data: bytes) -> tuple:
    mr = read_cls(data)
    rows = offsets = ts = kc = vc = 0
    while True:
        batch = mr.next_batch()
        if batch is None:
            return rows, offsets, ts, kc, vc
        assert batch.validate_crc()
        for r in batch:
            rows += 1
            offsets += r.offset
            ts += r.timestamp
            kc = zlib.crc32(r.key, kc)
            vc = zlib.crc32(r.value, vc)


# --- peak RSS in a subprocess ------------------------------------------------------------------

def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def _status_fields(*names) -> Dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key = line.split(":", 1)[0]
            if key in names:
                out[key] = int(line.split()[1])
    return out


class _RssSampler(threading.Thread):
    """Polls RssAnon / RssFile every 2 ms: VmHWM alone mixes the heap with the file's mmapped
    pages (page cache, which the kernel can drop)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.peak_anon = self.peak_file = 0

    def run(self):
        while not self.stop.is_set():
            st = _status_fields("RssAnon", "RssFile")
            self.peak_anon = max(self.peak_anon, st.get("RssAnon", 0))
            self.peak_file = max(self.peak_file, st.get("RssFile", 0))
            time.sleep(0.002)


def rss_child(mode: str, path: str, warm_path: str) -> dict:
    fn = kafkalog_read if mode == "read" else kafkalog_iter
    fn(warm_path)
    gc.collect()
    reset = True
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")            # resets VmHWM to the current RSS
    except OSError:
        reset = False
    base = _status_fields("VmRSS", "RssAnon", "RssFile")
    sampler = _RssSampler()
    sampler.start()
    table_bytes = table_distinct = None
    if mode == "read":
        from kafkalog.log.records_io import read_segment
        t = read_segment(path)
        rows = t.num_rows
        table_bytes = t.nbytes
        table_distinct = distinct_buffer_bytes(t)
    else:
        rows = fn(path)
    hwm = _status_kb("VmHWM")
    sampler.stop.set()
    sampler.join()
    return {"mode": mode, "rows": rows, "baseline_kb": base["VmRSS"], "hwm_kb": hwm, "hwm_reset": reset,
            "baseline_anon_kb": base.get("RssAnon"), "peak_anon_kb": sampler.peak_anon,
            "baseline_file_kb": base.get("RssFile"), "peak_file_kb": sampler.peak_file, "table_bytes": table_bytes,
            "table_distinct_bytes": table_distinct}


def distinct_buffer_bytes(table) -> int:
    """Bytes of the distinct buffers a table holds: Table.nbytes counts a buffer shared by several
    chunks (kafkalog's constant columns: topic, partition, magic, ...) once per chunk."""
    seen = {}

    def visit(arr):
        for buf in arr.buffers():
            if buf is not None:
                seen[buf.address] = max(seen.get(buf.address, 0), buf.size)

    for column in table.columns:
        for chunk in column.chunks:
            visit(chunk)
    return sum(seen.values())


VARIANT_OPTIONS = {"kafkalog_read": {}, "kafkalog_read_1t": {"threads": 1}, "kafkalog_iter": {}}
CALL_TIMEOUT_S = 90           # one decode taking longer than this counts as hung
CHILD_TIMEOUT_S = 600


def measure_rss(mode: str, path: str, warm_path: str) -> dict:
    cmd = [sys.executable, "-m", "bench.decode", "--rss-child", mode, path, warm_path]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=CALL_TIMEOUT_S * 2,
                         cwd=str(Path(__file__).resolve().parent.parent))
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- timing ------------------------------------------------------------------------------------

def timed(fn, arg) -> tuple:
    """(wall s, CPU s of this process, minor page faults, rows) of one call."""
    import resource
    gc.collect()
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    c0 = time.process_time()
    t0 = time.perf_counter()
    rows = fn(arg)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    return wall, cpu, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0, rows


def machine_facts() -> dict:
    from importlib.metadata import version
    facts = {
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                     if line.startswith("model name")), platform.processor()),
        "python": platform.python_version(),
    }
    for pkg in ("numba", "pyarrow", "numpy", "aiokafka", "kafka-python", "cramjam", "lz4", "zstandard", "crc32c"):
        try:
            facts[pkg] = version(pkg)
        except Exception:
            facts[pkg] = None
    return facts


def _proc_cpu_ticks() -> Dict[int, tuple]:
    ticks = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        ticks[int(d)] = (int(fields[11]) + int(fields[12]), int(fields[1]), cmd)   # utime+stime, ppid
    return ticks


def busy_processes(interval: float = 1.0, limit: int = 5) -> List[str]:
    """Other processes' CPU use over ``interval`` seconds (from /proc), to say what ran concurrently."""
    try:
        t0 = _proc_cpu_ticks()
        time.sleep(interval)
        t1 = _proc_cpu_ticks()
    except Exception:
        return []
    hz = os.sysconf("SC_CLK_TCK")
    me = os.getpid()
    rows = []
    for pid, (ticks, ppid, cmd) in t1.items():
        if pid == me or ppid == me or pid not in t0:
            continue
        pct = 100.0 * (ticks - t0[pid][0]) / hz / interval
        if pct >= 5.0:
            rows.append((pct, f"{pct:.0f}% {cmd[:90]}"))
    return [r for _, r in sorted(rows, reverse=True)[:limit]]


def code_state() -> dict:
    """Which kafkalog code is measured: HEAD, dirty files, and a hash of kafkalog/**/*.py."""
    import hashlib
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for f in sorted((root / "kafkalog").rglob("*.py")):
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    state = {"kafkalog_sha256": h.hexdigest()[:16]}
    try:
        state["head"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                                       text=True, timeout=10).stdout.strip()
        state["dirty"] = subprocess.run(["git", "status", "--porcelain", "--", "kafkalog"], cwd=root,
                                        capture_output=True, text=True, timeout=10).stdout.split("\n")
        state["dirty"] = [line.strip() for line in state["dirty"] if line.strip()]
    except Exception:
        pass
    return state


def _short(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e)[:200]}"


def _guarded(name: str, log, fn, *a, **kw):
    """Run one kafkalog call with a marker on stderr and a watchdog: if the interpreter dies or
    hangs here, the parent process knows which reader did it (see run_codec_isolated)."""
    import faulthandler
    log(f"@@ {name}")
    faulthandler.dump_traceback_later(CALL_TIMEOUT_S, exit=True)
    try:
        return fn(*a, **kw)
    finally:
        faulthandler.cancel_dump_traceback_later()


def run_codec(codec: str, facts: dict, warm: dict, args, log, exclude: Optional[Dict[str, str]] = None) -> dict:
    path = facts["path"]
    n = facts["records"]
    data = Path(path).read_bytes()
    aio = aiokafka_reader()
    kp = kafka_python_reader()
    failures: Dict[str, str] = dict(exclude or {})

    # warm-up: numba cache / compile, codec paths, page cache
    warm_data = Path(warm[codec]["path"]).read_bytes()
    aio(warm_data)
    kp(warm_data)
    aio(data)

    # correctness (untimed): every kafkalog variant decodes the same records as aiokafka
    from aiokafka.record._crecords import MemoryRecords as AioMR
    fp_aio = fingerprint_peer(AioMR, data)
    if fp_aio[0] != n:
        raise AssertionError(f"{codec}: aiokafka decodes {fp_aio[0]} records, expected {n}")
    variants = [("kafkalog_read", kafkalog_read), ("kafkalog_iter", kafkalog_iter)]
    if has_threads_option():
        variants.insert(1, ("kafkalog_read_1t", kafkalog_read_1t))
    contenders = []
    for name, fn in variants:
        if name in failures:
            continue
        try:
            _guarded(name, log, fn, warm[codec]["path"])
            _guarded(name, log, fn, path)
            if name != "kafkalog_iter":
                fp = _guarded(name, log, fingerprint_kafkalog, path, **VARIANT_OPTIONS[name])
                if fp != fp_aio:
                    raise AssertionError(f"decodes other records than aiokafka: {fp} vs {fp_aio}")
        except Exception as e:  # noqa: BLE001 - a failing reader is a result, reported in the table
            failures[name] = _short(e)
            log(f"    {name} FAILED: {failures[name]}")
            continue
        contenders.append((name, fn, path))
    contenders.append(("aiokafka", aio, data))
    if codec in BARE:
        payloads = batch_payloads(data)
        if BARE[codec](payloads) != facts["record_bytes"]:
            raise AssertionError(f"{codec}: bare decompression does not give the records region")
        contenders.append(("bare", BARE[codec], payloads))
    samples: Dict[str, Dict[str, list]] = {name: {"wall": [], "cpu": [], "minflt": []}
                                              for name, _, _ in contenders}
    if not args.no_kafka_python:
        samples["kafka_python"] = {"wall": [], "cpu": [], "minflt": []}
    for rep in range(args.reps):
        order = [c for c in contenders if c[0] not in failures]
        if not args.no_kafka_python and rep < args.kp_reps:
            order.append(("kafka_python", kp, data))
        k = rep % len(order)
        order = order[k:] + order[:k]          # rotate so no reader always runs first after a GC
        done = []
        for name, fn, arg in order:
            try:
                if name.startswith("kafkalog"):
                    wall, cpu, faults, rows = _guarded(name, log, timed, fn, arg)
                else:
                    wall, cpu, faults, rows = timed(fn, arg)
                if name != "bare" and rows != n:
                    raise AssertionError(f"{rows} records, expected {n}")
            except Exception as e:  # noqa: BLE001
                if not name.startswith("kafkalog"):
                    raise
                failures[name] = f"in timed repetition {rep + 1}: {_short(e)}"
                log(f"    {name} FAILED: {failures[name]}")
                continue
            samples[name]["wall"].append(wall)
            samples[name]["cpu"].append(cpu)
            samples[name]["minflt"].append(faults)
            done.append(f"{name} {wall:.3f}s")
        log(f"    rep {rep + 1}/{args.reps}: " + "  ".join(done))
    for name in failures:              # a reader that failed once has no valid time
        samples.pop(name, None)
    med = {name: statistics.median(s["wall"]) for name, s in samples.items() if s["wall"]}
    res = {"codec": codec, "facts": facts, "samples": samples, "median_s": med, "failures": failures,
           "min_s": {name: min(s["wall"]) for name, s in samples.items() if s["wall"]},
           "minflt": {name: statistics.median(s["minflt"]) for name, s in samples.items() if s["wall"]},
           "cpu_over_wall": {name: statistics.median(c / w for c, w in zip(s["cpu"], s["wall"]))
                             for name, s in samples.items() if s["wall"]}}
    log("@@ -")
    if not args.no_rss:
        res["rss"] = {}
        for mode in ("read", "iter"):
            if ("kafkalog_read" if mode == "read" else "kafkalog_iter") in failures:
                res["rss"][mode] = {"error": "reader failed"}
                continue
            try:
                res["rss"][mode] = measure_rss(mode, path, warm[codec]["path"])
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
                res["rss"][mode] = {"error": _short(e)}
    return res


def run_codec_isolated(codec: str, args, log) -> dict:
    """run_codec in a child process; if a kafkalog reader kills or hangs the child, note it as
    that reader's failure and measure the codec again without it."""
    import signal
    excluded: Dict[str, str] = {}
    root = str(Path(__file__).resolve().parent.parent)
    for _attempt in range(4):
        cmd = [sys.executable, "-m", "bench.decode", "--codec-child", codec, "--dir", args.dir,
               "--records", str(args.records), "--reps", str(args.reps), "--kp-reps", str(args.kp_reps),
               "--exclude-json", json.dumps(excluded)]
        cmd += ["--no-kafka-python"] if args.no_kafka_python else []
        cmd += ["--no-rss"] if args.no_rss else []
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=root)
        marker = None
        tail: List[str] = []
        timer = threading.Timer(CHILD_TIMEOUT_S, proc.kill)
        timer.start()
        try:
            for line in proc.stderr:
                line = line.rstrip("\n")
                if line.startswith("@@ "):
                    marker = line[3:]
                    continue
                tail = (tail + [line])[-30:]
                log(line)
            out = proc.stdout.read()
            rc = proc.wait()
        finally:
            timer.cancel()
        if rc == 0:
            res = json.loads(out.strip().splitlines()[-1])
            res["failures"] = dict(excluded, **res.get("failures", {}))
            return res
        hung = any(t.startswith("Timeout (") for t in tail)
        if rc < 0:
            how = f"killed the interpreter ({signal.Signals(-rc).name})"
        elif hung:
            how = f"hung (no result within {CALL_TIMEOUT_S} s)"
        else:
            how = f"ended the interpreter (exit status {rc})"
        if not marker or marker == "-" or marker in excluded:
            raise RuntimeError(f"{codec}: benchmark child failed ({how}) outside a kafkalog call:\n" + "\n".join(tail))
        excluded[marker] = how
        log(f"    {marker} {how}; measuring {codec} again without it")
    raise RuntimeError(f"{codec}: too many failing readers: {excluded}")


# --- report ------------------------------------------------------------------------------------

def _fmt_rate(x: Optional[float]) -> str:
    if x is None:
        return "—"
    return f"{x / 1e6:.2f}M"


def summarize(res: dict) -> dict:
    """Headline numbers of one codec. The headline reader is read_segment with default options; if
    that failed, read_segment(threads=1) stands in and the row says so."""
    f = res["facts"]
    n = f["records"]
    med = res["median_s"]
    failures = res.get("failures", {})
    main = "kafkalog_read" if "kafkalog_read" in med else "kafkalog_read_1t" if "kafkalog_read_1t" in med else None
    out = {"codec": res["codec"], "compression_ratio": f["compression_ratio"], "headline": main,
           "failures": failures, "aiokafka_s": med["aiokafka"], "aiokafka_rec_s": n / med["aiokafka"]}
    if "kafka_python" in med:
        out.update(kafka_python_s=med["kafka_python"], kafka_python_rec_s=n / med["kafka_python"])
    if "bare" in med:
        out.update(bare_s=med["bare"], bare_data_mb_s=f["record_bytes"] / med["bare"] / 1e6)
    for name, key in (("kafkalog_read", "read"), ("kafkalog_read_1t", "read_1t"), ("kafkalog_iter", "iter")):
        if name in med:
            out[f"{key}_s"] = med[name]
            out[f"{key}_rec_s"] = n / med[name]
            out[f"{key}_cpu_over_wall"] = res["cpu_over_wall"][name]
            out[f"{key}_x_aiokafka"] = med["aiokafka"] / med[name]
            if "kafka_python" in med:
                out[f"{key}_x_kafka_python"] = med["kafka_python"] / med[name]
            if "bare" in med:
                out[f"{key}_over_bare"] = med[name] / med["bare"]
    mins = res.get("min_s", {})
    if "bare" in mins:          # best of N against best of N: what is left when noise (which only adds) is least
        for name, key in (("kafkalog_read", "read"), ("kafkalog_iter", "iter")):
            if name in mins:
                out[f"{key}_best_over_bare_best"] = mins[name] / mins["bare"]
    if main is not None:
        kl = med[main]
        out.update(kafkalog_s=kl, kafkalog_rec_s=n / kl, kafkalog_file_mb_s=f["file_bytes"] / kl / 1e6,
                   kafkalog_data_mb_s=f["record_bytes"] / kl / 1e6, x_aiokafka=med["aiokafka"] / kl)
        if "kafka_python" in med:
            out["x_kafka_python"] = med["kafka_python"] / kl
        if "bare" in med:
            out["kafkalog_over_bare"] = kl / med["bare"]
    if res["codec"] == "none":
        out["target"] = f"≥{TARGET_VS_AIOKAFKA:g}× aiokafka, ≥{TARGET_VS_KAFKA_PYTHON:g}× kafka-python"
        ok = main is not None and out["x_aiokafka"] >= TARGET_VS_AIOKAFKA and \
            out.get("x_kafka_python", float("inf")) >= TARGET_VS_KAFKA_PYTHON
    else:
        out["target"] = f"≤{TARGET_VS_BARE:g}× bare"
        ok = main is not None and out.get("kafkalog_over_bare", float("inf")) <= TARGET_VS_BARE
    out["target_met"] = bool(ok) and main == "kafkalog_read"
    # The peers drop each record after touching it; iter_segment (each RecordBatch dropped after
    # counting) is the like-for-like reader, read_segment also keeps a table of every record.
    if "iter_s" in out:
        if res["codec"] == "none":
            out["streaming_target_met"] = out["iter_x_aiokafka"] >= TARGET_VS_AIOKAFKA and \
                out.get("iter_x_kafka_python", float("inf")) >= TARGET_VS_KAFKA_PYTHON
        else:
            out["streaming_target_met"] = out.get("iter_over_bare", float("inf")) <= TARGET_VS_BARE
    for mode, r in res.get("rss", {}).items():
        if "hwm_kb" in r:
            out[f"rss_{mode}_peak_mib"] = r["hwm_kb"] / 1024
            out[f"rss_{mode}_over_baseline_mib"] = (r["hwm_kb"] - r["baseline_kb"]) / 1024
            if r.get("peak_anon_kb"):
                out[f"rss_{mode}_anon_over_baseline_mib"] = (r["peak_anon_kb"] - r["baseline_anon_kb"]) / 1024
                out[f"rss_{mode}_file_over_baseline_mib"] = (r["peak_file_kb"] - r["baseline_file_kb"]) / 1024
            if r.get("table_bytes") is not None:
                out["table_mib"] = r["table_bytes"] / 2 ** 20
            if r.get("table_distinct_bytes") is not None:
                out["table_distinct_mib"] = r["table_distinct_bytes"] / 2 ** 20
        else:
            out[f"rss_{mode}_error"] = r.get("error")
    return out


def _f(x, spec: str, dash: str = "—") -> str:
    return dash if x is None else format(x, spec)


def markdown(summaries: List[dict], meta: dict) -> str:
    n = meta["records"]
    fx = meta["facts"]
    code = meta.get("code_start", {})
    lines = [
        f"**{fx['date']}** · {n:,} records · nproc {fx['nproc']} ({fx['cpu']}) · Python {fx['python']} · "
        f"numba {fx['numba']} · pyarrow {fx['pyarrow']} · numpy {fx['numpy']} · aiokafka {fx['aiokafka']} · "
        f"kafka-python {fx['kafka-python']} · kafkalog at {code.get('head', '?')}"
        f"{' + uncommitted ' + ', '.join(code['dirty']) if code.get('dirty') else ''} "
        f"(source hash {code.get('kafkalog_sha256', '?')}) · medians of {meta['reps']} interleaved repetitions "
        f"({meta['kp_reps']} for kafka-python) · load average {meta['loadavg_start']} at start, "
        f"{meta['loadavg_end']} at end · first touch of new memory (bench/memprobe.py, growing) "
        f"{meta.get('growth_ms_per_mib_start', float('nan')):.2f} ms/MiB at start, "
        f"{meta.get('growth_ms_per_mib_end', float('nan')):.2f} at end · {meta['elapsed_s']:.0f} s in all",
    ]
    if meta.get("code_changed"):
        lines += ["", "**kafkalog's source changed during this run: these numbers mix two versions.**"]
    lines += [
        "",
        "| codec | ratio | kafkalog rec/s | MB/s file | MB/s records | kafkalog s | aiokafka rec/s | "
        "kafka-python rec/s | bare decompress s | × aiokafka | × kafka-python | kafkalog / bare | target | "
        "met by read_segment? | iter_segment × aiokafka | iter_segment / bare | met by iter_segment? |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for s in summaries:
        codec = s["codec"]
        if s["headline"] != "kafkalog_read":
            codec += " ¹" if s["headline"] else " ²"
        lines.append("| " + " | ".join([
            codec, f"{s['compression_ratio']:.2f}", _fmt_rate(s.get("kafkalog_rec_s")),
            _f(s.get("kafkalog_file_mb_s"), ".0f"), _f(s.get("kafkalog_data_mb_s"), ".0f"),
            _f(s.get("kafkalog_s"), ".3f"), _fmt_rate(s["aiokafka_rec_s"]), _fmt_rate(s.get("kafka_python_rec_s")),
            _f(s.get("bare_s"), ".3f"), _f(s.get("x_aiokafka"), ".2f"), _f(s.get("x_kafka_python"), ".1f"),
            _f(s.get("kafkalog_over_bare"), ".2f"), s["target"], "yes" if s["target_met"] else "**no**",
            _f(s.get("iter_x_aiokafka"), ".2f"), _f(s.get("iter_over_bare"), ".2f"),
            "—" if "streaming_target_met" not in s else "yes" if s["streaming_target_met"] else "**no**"]) + " |")
        for name, why in s["failures"].items():
            notes.append(f"- {s['codec']}: `{name}` FAILED — {why}")
    if any(s["headline"] == "kafkalog_read_1t" for s in summaries):
        notes.insert(0, "- ¹ read_segment with default options failed on this codec; the row shows "
                        "read_segment(threads=1) and the target counts as not met.")
    if notes:
        lines += [""] + notes
    lines += ["", "| codec | read_segment s (CPU/wall) | threads=1 s (CPU/wall) | threads=1 rec/s | "
              "threads=1 × aiokafka | threads=1 / bare | iter_segment s | iter rec/s | bare output MB/s | "
              "peak RSS read_segment MiB (+ over baseline; of which anon / mmapped file) | peak RSS iter_segment MiB "
              "(same) | Table MiB: nbytes / distinct buffers | fastest run / fastest bare: read_segment, iter_segment |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        def rss(m):
            if f"rss_{m}_peak_mib" in s:
                extra = ""
                if f"rss_{m}_anon_over_baseline_mib" in s:
                    extra = (f"; anon +{s[f'rss_{m}_anon_over_baseline_mib']:.0f}, "
                             f"file +{s[f'rss_{m}_file_over_baseline_mib']:.0f}")
                return f"{s[f'rss_{m}_peak_mib']:.0f} (+{s[f'rss_{m}_over_baseline_mib']:.0f}{extra})"
            return "failed" if f"rss_{m}_error" in s else "—"

        def secs(k):
            return f"{s[k + '_s']:.3f} ({s[k + '_cpu_over_wall']:.2f})" if k + "_s" in s else "failed"
        lines.append("| " + " | ".join([
            s["codec"], secs("read"), secs("read_1t"), _fmt_rate(s.get("read_1t_rec_s")),
            _f(s.get("read_1t_x_aiokafka"), ".2f"), _f(s.get("read_1t_over_bare"), ".2f"),
            _f(s.get("iter_s"), ".3f", "failed"), _fmt_rate(s.get("iter_rec_s")),
            _f(s.get("bare_data_mb_s"), ".0f"), rss("read"), rss("iter"),
            _f(s.get("table_mib"), ".0f") + " / " + _f(s.get("table_distinct_mib"), ".0f"),
            _f(s.get("read_best_over_bare_best"), ".2f") + ", " + _f(s.get("iter_best_over_bare_best"), ".2f")]) + " |")
    snaps = [meta.get("busy_start") or []] + list(meta.get("busy_between") or []) + [meta.get("busy_end") or []]
    lines += ["", f"Other processes using ≥ 5% CPU, sampled over 1 s at start, after each codec and at the end "
              f"({len(snaps)} samples; {sum(1 for x in snaps if x)} found something): "
              + ("; ".join(sorted({r.split(' ', 1)[1] for x in snaps for r in x})) or "none") + "."]
    return "\n".join(lines)


def replace_block(text: str, start: str, end: str, body: str) -> str:
    block = f"{start}\n{body}\n{end}"
    if start in text and end in text:
        a = text.index(start)
        b = text.index(end) + len(end)
        return text[:a] + block + text[b:]
    return text.rstrip("\n") + "\n\n" + block + "\n"


# --- profile -----------------------------------------------------------------------------------

class StageTimers:
    """Wrap kafkalog's pipeline stages (module attributes, in this process only) with timers.

    Nested instrumented calls are charged to the outermost one. What is left of the total is
    Python glue: the window loop, np.empty allocations, joining decompressed parts, etc.
    """

    STAGES = [
        ("kafkalog.log.records_io", "_scan", "batch walk (numba scan_kernel)"),
        ("kafkalog.log.records_io", "check_crcs", "CRC-32C (check_crcs, per batch)"),
        ("kafkalog.format.decoder", "decompress", "decompression (per batch)"),
        ("kafkalog.format.decoder", "decompress_into", "decompression (per batch)"),
        ("kafkalog.format.decoder", "_decompress_window", "decompression (compression_accel window kernel)"),
        ("kafkalog.format.records_accel", "decode_v2_kernel", "record walk + key/value copy (numba decode_v2_kernel)"),
        ("kafkalog.format.decoder", "_binary", "Arrow assembly (_binary, _headers_accel, _batch_columns, _assemble)"),
        ("kafkalog.format.decoder", "_headers_accel", "Arrow assembly (_binary, _headers_accel, _batch_columns, _assemble)"),
        ("kafkalog.format.decoder", "_batch_columns", "Arrow assembly (_binary, _headers_accel, _batch_columns, _assemble)"),
        ("kafkalog.format.decoder", "_assemble", "Arrow assembly (_binary, _headers_accel, _batch_columns, _assemble)"),
        ("kafkalog.format.decoder", "_batch_columns_accel", "Arrow assembly (_binary, _headers_accel, _batch_columns, _assemble)"),
    ]

    def __init__(self):
        import importlib
        self.totals: Dict[str, float] = {}
        self.calls: Dict[str, int] = {}
        self._saved = []
        self._local = threading.local()
        for mod_name, attr, stage in self.STAGES:
            mod = importlib.import_module(mod_name)
            orig = getattr(mod, attr, None)
            if orig is None:            # kafkalog's internals moved: time what exists
                continue
            self._saved.append((mod, attr, orig))
            setattr(mod, attr, self._wrap(orig, stage))

    def _wrap(self, fn, stage):
        def wrapper(*a, **kw):
            if getattr(self._local, "depth", 0):
                return fn(*a, **kw)
            self._local.depth = 1
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.totals[stage] = self.totals.get(stage, 0.0) + time.perf_counter() - t0
                self.calls[stage] = self.calls.get(stage, 0) + 1
                self._local.depth = 0
        return wrapper

    def reset(self):
        self.totals.clear()
        self.calls.clear()

    def restore(self):
        for mod, attr, orig in self._saved:
            setattr(mod, attr, orig)


class InlineExecutor:
    """A stand-in for ThreadPoolExecutor that runs each task at submit time on the calling thread,
    so that cProfile (which sees one thread) and the stage timers see all of read_segment's work."""

    def __init__(self, *a, **kw):
        pass

    def submit(self, fn, *a, **kw):
        from concurrent.futures import Future
        fut = Future()
        try:
            fut.set_result(fn(*a, **kw))
        except BaseException as e:  # noqa: BLE001 - handed to the caller as the pool would
            fut.set_exception(e)
        return fut

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def profile_codec(codec: str, facts: dict, reps: int) -> dict:
    """Stage timers and cProfile of read_segment on one thread (cProfile sees only the calling
    thread, and stage times of concurrent windows would overlap)."""
    from functools import partial
    from kafkalog.log.records_io import read_segment
    import kafkalog.log.records_io as seg
    if has_threads_option():
        read_segment = partial(read_segment, threads=1)
    path = facts["path"]
    saved_pool = getattr(seg, "ThreadPoolExecutor", None)
    if saved_pool is not None:
        seg.ThreadPoolExecutor = InlineExecutor
    try:
        read_segment(path)
        timers = StageTimers()
        runs = []
        try:
            for _ in range(reps):
                timers.reset()
                gc.collect()
                t0 = time.perf_counter()
                read_segment(path)
                total = time.perf_counter() - t0
                runs.append((total, dict(timers.totals), dict(timers.calls)))
        finally:
            timers.restore()
        return _profile_report(codec, path, read_segment, runs)
    finally:
        if saved_pool is not None:
            seg.ThreadPoolExecutor = saved_pool


def _profile_report(codec, path, read_segment, runs) -> dict:
    total = statistics.median(r[0] for r in runs)
    stages = sorted({s for r in runs for s in r[1]})
    stage_med = {s: statistics.median(r[1].get(s, 0.0) for r in runs) for s in stages}
    stage_med["other (Python glue: window loop, allocations, joins)"] = total - sum(stage_med.values())
    calls = runs[-1][2]
    prof = cProfile.Profile()
    gc.collect()
    prof.enable()
    read_segment(path)
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(18)
    return {"codec": codec, "total_s": total, "stages_s": stage_med, "calls": calls, "cprofile": s.getvalue()}


def profile_markdown(profiles: List[dict], n: int) -> str:
    lines = []
    for p in profiles:
        lines += [f"`read_segment` (threads=1), {p['codec']}, {n:,} records: {p['total_s']:.3f} s "
                  "(median, stage timers on)", "",
                  "| stage | s | share | calls |", "|---|---|---|---|"]
        for stage, sec in sorted(p["stages_s"].items(), key=lambda kv: -kv[1]):
            lines.append(f"| {stage} | {sec:.3f} | {sec / p['total_s']:.0%} | {p['calls'].get(stage, '')} |")
        lines.append("")
    return "\n".join(lines)


# --- main --------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="kafkalog decode benchmark (see module docstring)")
    ap.add_argument("--dir", default=DEFAULT_DIR, help="segment cache (generated once)")
    ap.add_argument("--records", type=int, default=DEFAULT_RECORDS)
    ap.add_argument("--quick", action="store_true", help="100k-record smoke run")
    ap.add_argument("--codecs", default=",".join(CODECS))
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--kp-reps", type=int, default=3, help="repetitions for kafka-python (slow)")
    ap.add_argument("--no-kafka-python", action="store_true")
    ap.add_argument("--no-rss", action="store_true")
    ap.add_argument("--profile", action="store_true", help="stage timers + cProfile of read_segment")
    ap.add_argument("--profile-codecs", default="none,lz4,snappy,zstd")
    ap.add_argument("--json", metavar="PATH", help="write the raw numbers here")
    ap.add_argument("--readme", metavar="PATH", help="write the tables into this markdown file's bench block")
    ap.add_argument("--rss-child", nargs=3, metavar=("MODE", "PATH", "WARM"), help=argparse.SUPPRESS)
    ap.add_argument("--codec-child", metavar="CODEC", help=argparse.SUPPRESS)
    ap.add_argument("--exclude-json", default="{}", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.codec_child:
        import faulthandler
        faulthandler.enable()
        c = args.codec_child
        facts = ensure_segments(args.dir, args.records, [c], log=lambda m: print(m, file=sys.stderr, flush=True))
        warm = ensure_segments(args.dir, WARM_RECORDS, [c], log=lambda m: print(m, file=sys.stderr, flush=True))
        res = run_codec(c, facts[c], warm, args, lambda m: print(m, file=sys.stderr, flush=True),
                        exclude=json.loads(args.exclude_json))
        print(json.dumps(res))
        return 0
    if args.rss_child:
        print(json.dumps(rss_child(*args.rss_child)))
        return 0
    if args.quick:
        args.records = 100_000

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    t_start = time.perf_counter()
    meta = {"records": args.records, "reps": args.reps, "kp_reps": args.kp_reps, "facts": machine_facts(),
            "loadavg_start": " ".join(open("/proc/loadavg").read().split()[:3]), "busy_start": busy_processes(),
            "code_start": code_state(), "growth_ms_per_mib_start": memprobe.growing(16, 12)}
    codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]
    facts = ensure_segments(args.dir, args.records, codecs, log=log)
    warm = ensure_segments(args.dir, WARM_RECORDS, codecs, log=log)
    results = []
    for codec in codecs:
        log(f"== {codec}: {facts[codec]['file_bytes'] / 1e6:.1f} MB, {facts[codec]['batches']} batches")
        results.append(run_codec_isolated(codec, args, log))
        meta.setdefault("busy_between", []).append(busy_processes())
    summaries = [summarize(r) for r in results]
    profiles = []
    if args.profile:
        for codec in [c for c in args.profile_codecs.split(",") if c in facts]:
            log(f"== profile {codec}")
            profiles.append(profile_codec(codec, facts[codec], args.reps))
    meta["loadavg_end"] = " ".join(open("/proc/loadavg").read().split()[:3])
    meta["growth_ms_per_mib_end"] = memprobe.growing(16, 12)
    meta["busy_end"] = busy_processes()
    meta["code_end"] = code_state()
    meta["code_changed"] = meta["code_end"]["kafkalog_sha256"] != meta["code_start"]["kafkalog_sha256"]
    meta["elapsed_s"] = time.perf_counter() - t_start

    table = markdown(summaries, meta)
    print(table)
    if profiles:
        print()
        print(profile_markdown(profiles, args.records))
        for p in profiles:
            print(f"--- cProfile, read_segment, {p['codec']} (top by tottime) ---")
            print(p["cprofile"])
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "summary": summaries, "results": results,
                                               "profiles": profiles}, indent=1, default=str))
    if args.readme:
        rp = Path(args.readme)
        text = rp.read_text() if rp.exists() else "# Benchmarks\n"
        text = replace_block(text, README_START, README_END, table)
        if profiles:
            text = replace_block(text, PROFILE_START, PROFILE_END, profile_markdown(profiles, args.records))
        rp.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
