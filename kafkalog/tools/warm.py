"""Compile the numba kernels the jobs run into numba's on-disk cache before the first job needs them.

A kernel is compiled the first time it is called in a process with no cached copy, and a Spark
job's Python workers would each do that in their first task (~20-30 s on two cores). This module
does the work once on a small generated log — write it (none, lz4, zstd), decode it, look up a time in
it, dump it, clean it — in
the cache the jobs use (``NUMBA_CACHE_DIR``, ``/tmp/kafkalog-numba-cache`` unless set, as
``udfs.session`` and ``conf/spark-defaults.conf`` set it), so that local workers load the kernels
instead; the ``kafkalog`` commands read the same cache. ``scripts/bootstrap.sh`` runs it; running it
again only loads what is cached.

    python -m kafkalog.tools.warm
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

from kafkalog.cleaner import CleanOptions, clean_partition, key_map
from kafkalog.config import configs_from_mappings
from kafkalog.log.records_io import iter_segment
from kafkalog.lookup.partition_log import lookup_offsets
from kafkalog.tools.cli import main as cli
from kafkalog.tools.demo import DEMO_TOPIC, START_MS, generate_demo_log_dir

DEFAULT_CACHE_DIR = "/tmp/kafkalog-numba-cache"
CODECS = ("none", "lz4", "zstd")
RECORDS = 12_000                     # three segments of the demo's 5,000 records: two of them cleanable
SLICED_BUDGET = 4096                 # bytes: ~80 keys a pass, for the demo's 600 keys


def warm(work: Path) -> int:
    """Write, decode and clean one small partition per codec under ``work`` (the last one in
    hash-slice passes, and every map grown from its smallest size, so those kernels compile too);
    returns the records decoded."""
    configs = configs_from_mappings(topics={DEMO_TOPIC: {"cleanup.policy": "compact"}})
    records = 0
    initial = key_map.INITIAL_CAPACITY
    key_map.INITIAL_CAPACITY = key_map.MIN_CAPACITY
    try:
        for codec in CODECS:
            sliced = codec == CODECS[-1]
            out = work / codec
            for log in generate_demo_log_dir(out, partitions=1, records=RECORDS, compression=codec):
                records += sum(batch.num_rows for batch in iter_segment(log))
            for folder in sorted(p for p in out.iterdir() if p.is_dir()):   # `kafkalog offsets --time`'s kernels
                lookup_offsets(folder, [START_MS + 3_600_000, -3])
            dump_quietly(min(out.rglob("*.log")))         # base offset 0: nothing to report on stderr
            for folder in sorted(p for p in out.iterdir() if p.is_dir()):
                result = clean_partition(folder, config=configs.for_topic(DEMO_TOPIC), now_ms=START_MS + 10 ** 9,
                                         broker=configs.broker,
                                         options=CleanOptions(record_decisions=False,
                                                              map_budget_bytes=SLICED_BUDGET if sliced else None))
                if not result.cleaned or (sliced and result.map_stats.passes < 2):
                    raise RuntimeError("the warm-up partition was not cleaned as planned: "
                                       f"{result.error or result.skipped_reason or result.map_stats}")
    finally:
        key_map.INITIAL_CAPACITY = initial
    return records


def dump_quietly(log: Path) -> None:
    """Run ``kafkalog dump`` on ``log`` (text with records, and JSON), its output thrown away: the dump's
    record-line kernels compile too (the demo's first command)."""
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        for extra in ([], ["--json"]):
            if cli(["dump", "--files", str(log), "--deep-iteration", "--print-data-log", *extra]) != 0:
                raise RuntimeError(f"kafkalog dump of the warm-up segment {log} failed")


def main() -> int:
    os.environ.setdefault("NUMBA_CACHE_DIR", DEFAULT_CACHE_DIR)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kafkalog-warm-") as tmp:
        records = warm(Path(tmp))
    print(f"kafkalog: numba kernels compiled into {os.environ['NUMBA_CACHE_DIR']} "
          f"({records:,} records decoded and cleaned in {time.monotonic() - started:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
