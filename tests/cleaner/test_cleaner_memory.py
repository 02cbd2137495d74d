"""A compaction task's memory (issue 34): the report's ``rss_anon_above_idle_bytes`` — the process's
anonymous memory (RssAnon) at its peak during the round, above the process before its first round —
stays within the key map's budget + 64 MiB on a log with many keys, whether the keys fit one map (the
map pass then keeps decompressed windows for the recopy) or take hash-slice passes. Shared library
pages (llvmlite, pyarrow) are not in RssAnon and do not count."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kafkalog.checkpoint.offset import write_offset_checkpoint
from kafkalog.cleaner.clean_options import CleanOptions
from kafkalog.cleaner.partition_run import CLEANED, rss_anon_bytes, run_partition
from kafkalog.config import configs_from_mappings
from kafkalog.format import compression as C, record_batch as rb
from kafkalog.fs.names import REPLICATION_OFFSET_CHECKPOINT, format_segment_file_name

TOPIC = "mem"
T0 = 1_700_000_000_000
KEYS = 150_000                 # 150k distinct keys: 6 MB of map slots
VALUE = bytes(range(256)) * 4  # 1 KiB, compressible: 150 MiB of records in ~1 MB of zstd batches
PER_BATCH = 500
MARGIN = 64 << 20

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or rss_anon_bytes() is None,
                                reason="RssAnon is read from /proc/self/status (Linux)")


def _log_dir(tmp_path: Path) -> Path:
    """One partition: every key once, then every tenth key again (so a round removes records and
    rewrites batches), zstd batches of 500 records, the last batch alone in the active segment."""
    log_dir = tmp_path / "logs"
    d = log_dir / f"{TOPIC}-0"
    d.mkdir(parents=True)
    keys = list(range(KEYS)) + list(range(0, KEYS, 10))
    batches = []
    for base in range(0, len(keys), PER_BATCH):
        records = [rb.V2Record(base + i, T0 + base + i, b"key-%09d" % k, VALUE, ())
                   for i, k in enumerate(keys[base:base + PER_BATCH])]
        batches.append(rb.encode_batch(records, codec=C.ZSTD))
    (d / format_segment_file_name(0, "log")).write_bytes(b"".join(batches[:-1]))
    active = (len(batches) - 1) * PER_BATCH
    (d / format_segment_file_name(active, "log")).write_bytes(batches[-1])
    write_offset_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT, {(TOPIC, 0): len(keys)})
    return d


# slices first: a worker keeps the pages of its last round's kept windows for the next round (warm),
# so a 4 MiB round right after a 32 MiB one would start with that round's windows still resident
def measure(log_dir: str, budget_mib: int) -> dict:
    """One round in this process (a fresh one: see the test), its report row."""
    d = Path(log_dir) / f"{TOPIC}-0"
    configs = configs_from_mappings(topics={TOPIC: {"cleanup.policy": "compact"}})
    return run_partition(str(d.parent), str(d), configs=configs, now_ms=T0 + 1000,
                         options=CleanOptions(map_budget_bytes=budget_mib << 20))


@pytest.mark.parametrize("budget_mib, passes", [(4, 2), (32, 1)])
def test_a_task_stays_within_the_budget_and_64_mib(tmp_path, budget_mib, passes):
    """The round runs in a new Python process, as a Spark task runs in a worker: the suite's own process,
    two thousand tests into a run, is not a worker (its heap and the pages earlier tests' rounds left moved
    the figure by a few MiB between CI runs)."""
    import json
    import subprocess
    d = _log_dir(tmp_path)
    code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            f"from test_cleaner_memory import measure; "
            f"print(json.dumps(measure({str(d.parent)!r}, {budget_mib})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    row = json.loads(done.stdout.strip().splitlines()[-1])
    budget = budget_mib << 20
    assert row["status"] == CLEANED, row["reason"]
    assert (row["passes"] > 1) == (passes > 1) and row["map_keys"] == KEYS
    assert row["records_kept"] == KEYS                      # each key's last (the active segment is not recopied)
    above = row["rss_anon_above_idle_bytes"]
    assert above is not None and 0 < above <= budget + MARGIN, f"{above / 2**20:.0f} MiB above idle"
