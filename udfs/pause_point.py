"""A pause point in the compaction tasks, for tests that kill a process in the middle of a round
(tests/udfs/test_standalone_cluster.py): ``KAFKALOG_PAUSE_AT=STEP:PATH`` in a task's environment
(``spark.executorEnv.KAFKALOG_PAUSE_AT`` for executors) makes the FIRST task attempt that reaches the
swap-in step ``STEP`` (``kafkalog.cleaner.swap.STEP_*``, e.g. ``cleaned-written``: every group's
``.cleaned`` file written and verified, nothing swapped yet) create ``PATH.claimed`` holding its pid,
then wait until ``PATH.release`` exists. Every later attempt (the retry of a killed one, another
partition) finds the claim and goes on. Deterministic where a sleep is not: the test waits for the
claim, kills what it means to kill, and knows exactly what was on disk at that instant.

Unset (every real run), nothing is added to the round.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

from kafkalog.cleaner import swap
from kafkalog.cleaner.clean_options import StepHook

PAUSE_ENV = "KAFKALOG_PAUSE_AT"
STEPS = (swap.STEP_CLEANED, swap.STEP_SWAP, swap.STEP_MARK_DELETED, swap.STEP_INSTALL, swap.STEP_PURGE,
         swap.STEP_CHECKPOINT)
POLL_S = 0.02


def step_hook_from_env() -> Optional[StepHook]:
    """The ``on_step`` hook ``KAFKALOG_PAUSE_AT`` asks for, or None when it is unset. An unknown step
    is an error (a typo would otherwise never pause, and the test would wait for nothing)."""
    spec = os.environ.get(PAUSE_ENV)
    if not spec:
        return None
    step, _, path = spec.partition(":")
    if step not in STEPS or not path:
        raise ValueError(f"{PAUSE_ENV}={spec!r}: expected STEP:PATH with STEP one of {', '.join(STEPS)}")

    def hook(reached: str, _path: Optional[Path]) -> None:
        if reached == step:
            pause_once(path)
    return hook


def pause_once(path: str) -> None:
    """Claim ``path`` (``PATH.claimed``, created exclusively, holding this pid) and wait for
    ``PATH.release``; return at once when another attempt claimed it first."""
    try:
        fd = os.open(path + ".claimed", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
    finally:
        os.close(fd)
    while not os.path.exists(path + ".release"):
        time.sleep(POLL_S)


__all__ = ["PAUSE_ENV", "pause_once", "step_hook_from_env"]
