"""A compaction task attempt's claim on its partition (issue 34, ``udfs.task_attempt``): a retry that
Spark starts while an earlier attempt is still running (its executor lost to the driver, not dead)
waits for it, then finishes what it left; one that waits too long changes nothing and reports an
error row. The earlier attempt is a separate process holding the claim, as a zombie executor would."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from kafkalog.cleaner.partition_run import ERROR
from kafkalog.fs.lock import attempt_lock
from logdirs import make_partition
from udfs.task_attempt import run_claimed

HOLD = (
    "import sys, time\n"
    "from kafkalog.fs.lock import attempt_lock\n"
    "with attempt_lock(sys.argv[1], what='test'):\n"
    "    print('held', flush=True)\n"
    "    time.sleep(float(sys.argv[2]))\n"
)


def _hold(path: Path, seconds: float) -> subprocess.Popen:
    """Another process holding the claim on ``path`` for ``seconds`` (returned once it holds it)."""
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def _folder(tmp_path: Path) -> Path:
    return make_partition(tmp_path / "logs", "t", 0, [[1000, 1001, 1002]])


def test_a_retry_waits_for_the_earlier_attempt_then_finishes_what_it_left(tmp_path):
    folder = _folder(tmp_path)
    stray = folder / "00000000000000000000.log.cleaned"       # what a lost attempt leaves mid-round
    stray.write_bytes(b"half a segment")
    earlier = _hold(folder, 1.0)
    ran = []
    t0 = time.monotonic()
    answer = run_claimed(str(folder.parent), str(folder), lambda: ran.append(stray.exists()) or {"status": "ok"},
                         retry=True, wait_s=30)
    waited = time.monotonic() - t0
    assert earlier.wait(10) == 0
    assert answer == {"status": "ok"}
    assert waited >= 0.7, f"the retry ran after {waited:.2f} s, beside the attempt still holding the folder"
    assert ran == [False]                    # the lost attempt's file was dropped before the round


def test_a_retry_that_waits_too_long_changes_nothing_and_reports_the_partition(tmp_path):
    folder = _folder(tmp_path)
    stray = folder / "00000000000000000000.log.cleaned"
    stray.write_bytes(b"half a segment")
    earlier = _hold(folder, 30)
    try:
        ran = []
        row = run_claimed(str(folder.parent), str(folder), lambda: ran.append(1) or {}, retry=True, wait_s=0.3)
    finally:
        earlier.kill()
        earlier.wait(10)
    assert ran == [] and stray.exists()
    assert row["status"] == ERROR and row["topic"] == "t" and row["partition"] == 0
    assert "still holds it" in row["reason"] and str(folder) in row["reason"]


def test_the_claim_ends_with_the_process_that_held_it(tmp_path):
    """A zombie's executor that is finally killed releases the folder at once (no stale lock file)."""
    folder = _folder(tmp_path)
    before = sorted(p.name for p in folder.iterdir())
    earlier = _hold(folder, 30)
    earlier.kill()
    earlier.wait(10)
    t0 = time.monotonic()
    with attempt_lock(folder, what="t-0", wait_s=5) as held:
        assert held
    assert time.monotonic() - t0 < 1
    assert sorted(p.name for p in folder.iterdir()) == before      # no lock file left in the partition
