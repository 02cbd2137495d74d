"""udfs.pause_point, the tests' pause in a compaction task (tests/udfs/test_standalone_cluster.py): the first
attempt claims and waits, later ones go on; a step name that matches nothing is an error. No Spark."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from kafkalog.cleaner.swap import STEP_CLEANED, STEP_SWAP
from udfs.pause_point import PAUSE_ENV, step_hook_from_env


def test_unset_is_no_hook_and_an_unknown_step_is_an_error(monkeypatch, tmp_path):
    monkeypatch.delenv(PAUSE_ENV, raising=False)
    assert step_hook_from_env() is None
    monkeypatch.setenv(PAUSE_ENV, f"cleaned-writen:{tmp_path / 'p'}")
    with pytest.raises(ValueError, match="cleaned-written"):
        step_hook_from_env()


def test_the_first_attempt_waits_for_the_release_later_ones_go_on(monkeypatch, tmp_path):
    pause = tmp_path / "p"
    monkeypatch.setenv(PAUSE_ENV, f"{STEP_CLEANED}:{pause}")
    hook = step_hook_from_env()
    first = threading.Thread(target=hook, args=(STEP_CLEANED, None))
    first.start()
    deadline = time.monotonic() + 10
    while not Path(f"{pause}.claimed").exists():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    hook(STEP_SWAP, None)                 # another step: no pause
    hook(STEP_CLEANED, None)              # claimed already: goes on
    time.sleep(0.1)
    assert first.is_alive()               # still waiting
    Path(f"{pause}.release").touch()
    first.join(timeout=10)
    assert not first.is_alive()
