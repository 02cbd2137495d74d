"""``kafkalog dump --deep-iteration --print-data-log`` against Kafka's own DumpLogSegments (4.4.0,
``org.apache.kafka.tools.DumpLogSegments``) on the same segment of small records, output to /dev/null,
in one run: lines per second of each (wall clock, and CPU seconds of the process), plus ours with the
bulk formatter off (the per-record path: what ``kafkalog dump`` did before ``record_lines``).

The segment is ``bench.gen``'s (16-byte keys, 100-byte text values, ~16 KiB uncompressed batches,
codec none), generated once under ``--dir``. Both tools print the same lines (tests/broker/
test_dump_parity.py checks that on the broker's files; ``--check`` compares the two outputs here).

    python -m bench.dump [--records 1000000] [--dir /tmp/kafkalog-bench] [--heap 2g] [--check] [--no-before]
"""
from __future__ import annotations

import argparse
import hashlib
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from bench.gen import DEFAULT_DIR, ensure_segments

PER_RECORD = ("import sys, kafkalog.tools.dump.dumper as d, kafkalog.tools.cli as c; "
              "d.Dumper.__init__.__kwdefaults__['bulk'] = False; sys.exit(c.main(sys.argv[1:]))")
DUMP_ARGS = ("dump", "--deep-iteration", "--print-data-log", "--files")


def timed(cmd, stdout) -> dict:
    """Run ``cmd`` with its stdout to ``stdout``: wall seconds and the child's CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, text=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:3]}... exited {proc.returncode}: {proc.stderr[-2000:].decode(errors='replace')}")
    return {"wall": wall, "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)}


def digest(cmd) -> str:
    h = hashlib.sha256()
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as p:
        for chunk in iter(lambda: p.stdout.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--dir", default=DEFAULT_DIR)
    ap.add_argument("--heap", default="2g", help="DumpLogSegments' -Xmx")
    ap.add_argument("--check", action="store_true", help="also compare both outputs (sha256)")
    ap.add_argument("--no-before", action="store_true", help="skip the per-record path (slow)")
    args = ap.parse_args(argv)

    from kafkalog.testing.broker import DUMP_LOG_SEGMENTS, TOOLS_LOG4J2, fetch_jars, java_command

    facts = ensure_segments(args.dir, args.records, codecs=("none",))["none"]
    segment = facts["path"]
    lines = 2 + facts["batches"] + facts["records"]      # Dumping, Log starting offset, batches, records
    env_cache = {"NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR", str(Path(args.dir) / "numba-cache"))}
    os.environ.update(env_cache)
    ours = [sys.executable, "-m", "kafkalog.tools.cli", *DUMP_ARGS, segment]
    before = [sys.executable, "-c", PER_RECORD, *DUMP_ARGS, segment]
    kafka = java_command(DUMP_LOG_SEGMENTS, ["--deep-iteration", "--print-data-log", "--files", segment],
                         lib=fetch_jars(), log4j2=TOOLS_LOG4J2, heap=args.heap)
    with open(os.devnull, "wb") as null:
        subprocess.run(ours + ["--max-bytes", "100000"], stdout=null)      # imports warm, numba kernels compiled
        subprocess.run(["cat", segment], stdout=null)                       # page cache warm
        results = {"kafkalog dump (bulk)": timed(ours, null), "DumpLogSegments 4.4.0": timed(kafka, null)}
        if not args.no_before:
            results["kafkalog dump (per record, before)"] = timed(before, null)
    load = os.getloadavg()
    print(f"segment: {segment} ({facts['file_bytes'] / 2**20:.0f} MiB, {facts['records']} records, "
          f"{facts['batches']} batches, {lines} lines); load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print("| tool | wall s | lines/s (wall) | CPU s | lines/s per CPU s |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['wall']:.1f} | {lines / r['wall'] / 1e6:.2f}M | {r['cpu']:.1f} | "
              f"{lines / r['cpu'] / 1e6:.2f}M |")
    if args.check:
        same = digest(ours) == digest(kafka)
        print(f"outputs identical: {same}")
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
