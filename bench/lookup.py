"""Lookup latency: kafkalog.lookup.partition_log through the indexes vs a full scan of the segment.

Data (generated once, cached under ``--dir``, default /tmp/kafkalog-bench): one partition folder
``bench-0`` holding a rolled ~1 GiB segment (``--quick``: 64 MiB) and a small active segment after
it, as a broker with the default ``segment.bytes`` leaves them. Batches are uncompressed v2, 100
records of ~160 bytes each (~16 KiB, a producer's default ``batch.size``), CreateTime timestamps
that are NOT monotonic (each batch's base timestamp jitters by +-150 ms around a 200 ms step, and
the records' deltas inside a batch go up and down). The records region is encoded once with
``record_batch.encode_record`` (deltas are relative, so every batch can share it); each batch gets
its own header and CRC-32C. ``.index``/``.timeindex`` are what Kafka's recovery builds
(``index.interval.bytes`` 4096, trimmed, final time-index entry).

Measured, for a timestamp lookup (``PartitionLog.lookup(t)``) and an offset lookup
(``PartitionLog.translate_offset(o)``), at targets spread over the big segment:

* cold-ish: the partition's files are dropped from the page cache (``posix_fadvise(DONTNEED)``),
  then a new handle is opened and asked once; the storage bytes read (``/proc/self/io``
  ``read_bytes``) are reported too;
* warm, new handle: the same with the page cache warm (open + read indexes + walk);
* warm, reused handle: one handle answers every target (what a bulk job does per partition);
* full scan: ``iter_segment`` over the whole segment (decode + CRC, the answer computed from the
  records), and the header walk alone (``scan_batches(verify_crc=False)``), cold and warm.

Every lookup answer is checked against the full scan's. Numba kernels are loaded before timing.

    python -m bench.lookup                    # ~1 GiB segment (generated once, ~30 s)
    python -m bench.lookup --quick            # 64 MiB
    python -m bench.lookup --json out.json --readme bench/README.md
"""
from __future__ import annotations

import argparse
import datetime as _dt
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

import numpy as np

from kafkalog.format import record_batch as rb

DEFAULT_DIR = "/tmp/kafkalog-bench"
SEGMENT_BYTES = 1 << 30
QUICK_SEGMENT_BYTES = 64 << 20
RECORDS_PER_BATCH = 100
VALUE_BYTES = 140
KEY_BYTES = 16
TS0 = 1_700_000_000_000
BATCH_STEP_MS = 200
JITTER_MS = 150
ACTIVE_BATCHES = 20
INDEX_INTERVAL_BYTES = 4096
LEADER_EPOCH = 3
SEED = 20251121
FORMAT_VERSION = 1
TOPIC = "bench"
README_START = "<!-- bench:lookup:start -->"
README_END = "<!-- bench:lookup:end -->"


# --- data ------------------------------------------------------------------------------------

def records_region(rng) -> tuple:
    """The shared records region of every batch and its timestamp deltas (not monotonic)."""
    deltas = rng.integers(0, 120, RECORDS_PER_BATCH)
    deltas[0] = 0
    body = bytearray()
    for i in range(RECORDS_PER_BATCH):
        value = bytes(rng.integers(97, 123, VALUE_BYTES, dtype=np.uint8))
        rb.encode_record(body, offset_delta=i, timestamp_delta=int(deltas[i]), key=b"user-%011d" % i, value=value)
    return bytes(body), deltas


def write_segment_file(directory: Path, base_offset: int, n_batches: int, first_batch: int, body: bytes,
                       deltas, jitter) -> Dict[str, np.ndarray]:
    """``n_batches`` batches from batch number ``first_batch`` on, as ``<base>.log`` + indexes."""
    from kafkalog.index.builder import build_indexes
    from kafkalog.index.offset_index import write_offset_index
    from kafkalog.index.time_index import write_time_index

    size = rb.RECORD_BATCH_OVERHEAD + len(body)
    out = bytearray(size)
    out[rb.RECORDS_OFFSET:] = body
    max_delta = int(deltas.max())
    last_offsets = np.empty(n_batches, np.int64)
    max_ts = np.empty(n_batches, np.int64)
    name = f"{base_offset:020d}"
    with open(directory / f"{name}.log", "wb", buffering=8 << 20) as f:
        for i in range(n_batches):
            b = first_batch + i
            base = b * RECORDS_PER_BATCH
            base_ts = TS0 + b * BATCH_STEP_MS + int(jitter[b])
            rb.HEADER.pack_into(out, 0, base, size - rb.LOG_OVERHEAD, LEADER_EPOCH, rb.MAGIC_VALUE_V2, 0, 0,
                                RECORDS_PER_BATCH - 1, base_ts, base_ts + max_delta, -1, -1, -1, RECORDS_PER_BATCH)
            out[rb.CRC_OFFSET:rb.CRC_OFFSET + 4] = rb.compute_crc(out).to_bytes(4, "big")
            f.write(out)
            last_offsets[i] = base + RECORDS_PER_BATCH - 1
            max_ts[i] = base_ts + max_delta
    positions = np.arange(n_batches, dtype=np.int64) * size
    oi, ti = build_indexes(base_offset=base_offset, positions=positions, sizes=np.full(n_batches, size, np.int64),
                           last_offsets=last_offsets, max_timestamps=max_ts, index_interval_bytes=INDEX_INTERVAL_BYTES)
    write_offset_index(directory / f"{name}.index", oi)
    write_time_index(directory / f"{name}.timeindex", ti)
    return {"last_offsets": last_offsets, "max_timestamps": max_ts, "batch_bytes": size}


def ensure_partition(root: str, segment_bytes: int, log=print) -> Path:
    """The cached partition folder (regenerated when missing or made with other parameters)."""
    params = {"version": FORMAT_VERSION, "segment_bytes": segment_bytes, "records_per_batch": RECORDS_PER_BATCH,
              "value_bytes": VALUE_BYTES, "seed": SEED, "active_batches": ACTIVE_BATCHES}
    folder = Path(root) / f"lookup-{segment_bytes >> 20}MiB"
    part = folder / f"{TOPIC}-0"
    stamp = folder / "params.json"
    if stamp.exists() and json.loads(stamp.read_text()) == params and (part / f"{0:020d}.log").exists():
        return part
    t0 = time.perf_counter()
    part.mkdir(parents=True, exist_ok=True)
    for f in part.iterdir():
        f.unlink()
    rng = np.random.default_rng(SEED)
    body, deltas = records_region(rng)
    batch_bytes = rb.RECORD_BATCH_OVERHEAD + len(body)
    n_big = max(1, segment_bytes // batch_bytes)
    jitter = rng.integers(-JITTER_MS, JITTER_MS + 1, n_big + ACTIVE_BATCHES)
    write_segment_file(part, 0, n_big, 0, body, deltas, jitter)
    write_segment_file(part, n_big * RECORDS_PER_BATCH, ACTIVE_BATCHES, n_big, body, deltas, jitter)
    stamp.write_text(json.dumps(params))
    log(f"generated {part} ({n_big} + {ACTIVE_BATCHES} batches of {batch_bytes} bytes) in "
        f"{time.perf_counter() - t0:.1f} s")
    return part


# --- measuring -------------------------------------------------------------------------------

def drop_cache(folder: Path) -> None:
    """Ask the kernel to drop the folder's files from the page cache (clean pages only)."""
    for f in folder.iterdir():
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def storage_read_bytes() -> int:
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    return 0


def measure(fn: Callable[[], object], *, cold_folder: Path = None) -> tuple:
    """(wall s, storage bytes read, result) of one call, after dropping the cache if asked."""
    gc.collect()
    if cold_folder is not None:
        drop_cache(cold_folder)
    r0 = storage_read_bytes()
    t0 = time.perf_counter()
    result = fn()
    wall = time.perf_counter() - t0
    return wall, storage_read_bytes() - r0, result


def full_scan_timestamps(log_path: Path, targets) -> List[int]:
    """The answers by decoding every record of the segment: per target, the first offset whose
    timestamp is >= it (-1 when none). Always reads the whole segment."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from kafkalog.log.records_io import iter_segment
    answers = [-1] * len(targets)
    for batch in iter_segment(log_path):
        ts = batch.column("timestamp").cast(pa.int64())
        for k, t in enumerate(targets):
            if answers[k] < 0:
                hit = pc.index(pc.greater_equal(ts, t), True).as_py()
                if hit >= 0:
                    answers[k] = batch.column("offset")[hit].as_py()
    return answers


def header_walk(log_path: Path, offsets) -> List[int]:
    """Per offset, the position of the first batch whose last offset >= it, from a walk of every
    batch header of the segment."""
    from kafkalog.format.file_records import scan_batches
    b = scan_batches(log_path, verify_crc=False).batches
    last = b.column("lastOffset").to_numpy()
    pos = b.column("position").to_numpy()
    return [int(pos[int(np.searchsorted(last, o))]) for o in offsets]


def run(part: Path, reps: int, log) -> dict:
    from kafkalog.lookup.partition_log import PartitionLog

    big = sorted(part.glob("*.log"))[0]
    with PartitionLog.open(part) as warm:                 # numba kernels loaded, files read once
        leo = warm.log_end_offset
        warm.lookup(TS0)
        warm.translate_offset(leo // 2)
    rng = np.random.default_rng(7)
    big_end = int(sorted(part.glob("*.log"))[1].stem)
    offsets = [int(o) for o in rng.integers(0, big_end, reps)]
    times = [TS0 + int(o) // RECORDS_PER_BATCH * BATCH_STEP_MS for o in rng.integers(0, big_end, reps)]
    res: Dict[str, dict] = {}

    def lookup_ts(t):
        with PartitionLog.open(part) as h:
            return h.lookup(t).offset

    def lookup_off(o):
        with PartitionLog.open(part) as h:
            return h.translate_offset(o).position

    for name, fn, targets in (("timestamp", lookup_ts, times), ("offset", lookup_off, offsets)):
        cold = [measure(lambda x=x: fn(x), cold_folder=part) for x in targets]
        warm_new = [measure(lambda x=x: fn(x)) for x in targets]
        with PartitionLog.open(part) as h:
            call = (lambda x: h.lookup(x).offset) if name == "timestamp" else (lambda x: h.translate_offset(x).position)
            call(targets[0])
            reused = [measure(lambda x=x: call(x)) for x in targets]
        res[name] = {"targets": targets, "cold_s": [c[0] for c in cold], "cold_bytes": [c[1] for c in cold],
                     "warm_new_s": [w[0] for w in warm_new], "warm_reused_s": [r[0] for r in reused],
                     "answers": [c[2] for c in cold]}
        assert [c[2] for c in cold] == [w[2] for w in warm_new] == [r[2] for r in reused]
        log(f"{name}: cold {statistics.median(res[name]['cold_s']) * 1e3:.2f} ms, "
            f"warm {statistics.median(res[name]['warm_new_s']) * 1e3:.3f} ms")
    # every answer checked against full scans
    assert res["timestamp"]["answers"] == full_scan_timestamps(big, times), "timestamp lookup != full scan"
    assert res["offset"]["answers"] == header_walk(big, offsets), "offset lookup != header walk"
    scans = {}
    full_reps = max(1, min(3, reps))
    for label, fn in (("full decode scan (iter_segment, CRC)", lambda: full_scan_timestamps(big, times[:1])),
                      ("header walk (scan_batches, no CRC)", lambda: header_walk(big, offsets[:1]))):
        cold = measure(fn, cold_folder=part)
        warm_runs = [measure(fn) for _ in range(full_reps)]
        scans[label] = {"cold_s": cold[0], "cold_bytes": cold[1], "warm_s": [w[0] for w in warm_runs]}
        log(f"{label}: cold {cold[0]:.2f} s, warm {statistics.median(scans[label]['warm_s']):.2f} s")
    return {"lookups": res, "scans": scans, "segment_bytes": big.stat().st_size,
            "index_bytes": (big.with_suffix(".index").stat().st_size, big.with_suffix(".timeindex").stat().st_size),
            "segments": len(list(part.glob("*.log"))), "log_end_offset": leo}


# --- report ----------------------------------------------------------------------------------

def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}" if ms < 100 else f"{ms:,.0f}"


def _kib(n: float) -> str:
    return f"{n / 1024:,.0f} KiB"


def markdown(out: dict, meta: dict) -> str:
    facts = meta["facts"]
    lines = [f"**{facts['date']}** · segment {out['segment_bytes'] / 2**20:,.0f} MiB "
             f"({out['segments']} segments, LEO {out['log_end_offset']:,}) · .index {_kib(out['index_bytes'][0])}, "
             f".timeindex {_kib(out['index_bytes'][1])} · nproc {facts['nproc']} · Python {facts['python']} · "
             f"numba {facts.get('numba')} · pyarrow {facts.get('pyarrow')} · kafkalog at {meta['code'].get('head')} "
             f"(source hash {meta['code'].get('kafkalog_sha256')}) · medians of {meta['reps']} targets · "
             f"load average {meta['load'][0]} at start, {meta['load'][1]} at end",
             "",
             "| operation | cold-ish ms | storage read, cold | warm, new handle ms | warm, reused handle ms | "
             "full scan it replaces | scan cold s | scan warm s | × faster, cold | × faster, warm (new handle) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    baselines = {"timestamp": "full decode scan (iter_segment, CRC)", "offset": "header walk (scan_batches, no CRC)"}
    for name, label in (("timestamp", "timestamp lookup `lookup(t)`"),
                        ("offset", "offset lookup `translate_offset(o)`")):
        r = out["lookups"][name]
        scan = out["scans"][baselines[name]]
        cold, warm_new = statistics.median(r["cold_s"]), statistics.median(r["warm_new_s"])
        scan_warm = statistics.median(scan["warm_s"])
        lines.append(f"| {label} | {_ms(cold)} | {_kib(statistics.median(r['cold_bytes']))} | {_ms(warm_new)} | "
                     f"{_ms(statistics.median(r['warm_reused_s']))} | {baselines[name]} | {scan['cold_s']:.2f} | "
                     f"{scan_warm:.3f} | {scan['cold_s'] / cold:,.0f}× | {scan_warm / warm_new:,.1f}× |")
    read = sorted({f"{s['cold_bytes'] / 2**20:,.0f} MiB" for s in out["scans"].values()})
    lines += ["", f"Each full scan read the whole segment from storage when cold ({' / '.join(read)})."]
    return "\n".join(lines) + "\n"


def replace_block(text: str, body: str) -> str:
    if README_START in text and README_END in text:
        a = text.index(README_START) + len(README_START)
        b = text.index(README_END)
        return text[:a] + "\n" + body + text[b:]
    return text.rstrip("\n") + f"\n\n{README_START}\n{body}{README_END}\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="kafkalog lookup latency (see module docstring)")
    ap.add_argument("--dir", default=DEFAULT_DIR, help="data cache (generated once)")
    ap.add_argument("--quick", action="store_true", help="a 64 MiB segment instead of 1 GiB")
    ap.add_argument("--segment-mib", type=int, default=None, help="size of the big segment in MiB")
    ap.add_argument("--reps", type=int, default=7, help="targets per measurement (medians are reported)")
    ap.add_argument("--json", metavar="PATH", help="write the raw numbers here")
    ap.add_argument("--readme", metavar="PATH", help="write the table into this markdown file's lookup block")
    args = ap.parse_args(argv)
    from bench.decode import code_state, machine_facts

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    size = (args.segment_mib << 20) if args.segment_mib else QUICK_SEGMENT_BYTES if args.quick else SEGMENT_BYTES
    part = ensure_partition(args.dir, size, log)
    load0 = " ".join(f"{x:.2f}" for x in os.getloadavg())
    out = run(part, args.reps, log)
    meta = {"facts": machine_facts(), "code": code_state(), "reps": args.reps,
            "load": (load0, " ".join(f"{x:.2f}" for x in os.getloadavg())),
            "finished": _dt.datetime.now().astimezone().isoformat(timespec="seconds")}
    text = markdown(out, meta)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, **out}, indent=1, default=str))
    if args.readme:
        p = Path(args.readme)
        p.write_text(replace_block(p.read_text(), text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
