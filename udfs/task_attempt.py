"""A compaction task attempt's claim on what it changes (issue 34). Spark retries a task whose
executor it lost; an executor lost to a network partition or a long pause may still be running the
earlier attempt, writing the same ``.cleaned``/``.swap`` files. So a task claims the partition folder
(``kafkalog.fs.lock.attempt_lock``: an ``flock``, dropped when its process ends) for as long as it
changes files there; a retry waits for the earlier attempt to end, then finishes what that attempt
left (``finish_lost_attempt``) and plans the round again from what is on disk. A split round's recopy
task claims its group's first segment instead, so that the groups of one partition still run at once.
"""
from __future__ import annotations

import os
from contextlib import ExitStack
from typing import Callable, Optional, TypeVar

from kafkalog.cleaner.partition_run import ERROR, OUTCOME_FAILED, CompactionRow
from kafkalog.errors import KafkalogError
from kafkalog.fs.lock import ATTEMPT_WAIT_S, attempt_lock
from kafkalog.log.local_log import pending_swap_files
from kafkalog.log.recover import recover_partition
from kafkalog.row_types import as_row

T = TypeVar("T")


def task_is_retry() -> bool:
    """Whether the Spark task running this is a second or later attempt (False outside a task)."""
    from pyspark import TaskContext
    context = TaskContext.get()
    return context is not None and context.attemptNumber() > 0


def folder_row(log_dir: str, folder: str, *, status: str, outcome: str, reason: str) -> dict:
    """The report row of a partition that no round reported on (its task failed, was interrupted or
    could not claim the folder): its name, the status and the reason."""
    topic, _, number = os.path.basename(folder).rpartition("-")
    return as_row(CompactionRow(log_dir=log_dir, partition_dir=folder, topic=topic or os.path.basename(folder),
                                partition=int(number) if number.isdigit() else -1, status=status,
                                outcome=outcome, reason=reason))


def finish_lost_attempt(folder: str) -> None:
    """A retried task's first step, under its claim: an earlier attempt of this task, lost with its
    executor (a worker killed, a machine gone), may have left ``.cleaned``/``.swap`` files. Only this
    job's attempts can have written them (the driver has held the log dir's lock since before the
    stage), and that attempt has ended (the claim says so), so they are finished or dropped as a
    broker's startup does (``recover_partition``, each change fenced by that lock) and the round is
    planned again from what is on disk. A first attempt still refuses a pending swap it did not make
    (``plan_partition``): that one is ``kafkalog recover``'s to finish."""
    if pending_swap_files(folder):
        recover_partition(folder)    # a recovery that fails leaves them: the round then refuses, naming them


def run_claimed(log_dir: str, folder: str, run: Callable[[], T], *, retry: bool,
                wait_s: Optional[float] = None) -> T | dict:
    """``run()`` (the partition's round) while this attempt holds its claim on ``folder``; first, on a
    retry, what a lost attempt left is finished (``finish_lost_attempt``). An earlier attempt that
    still holds the folder after ``wait_s`` seconds (default ``ATTEMPT_WAIT_S``): the partition's
    error row, nothing changed.

    :param log_dir: the log dir (for the row).
    :param folder: the partition folder.
    :param run: the round; its answer is returned.
    :param retry: whether this is a retried attempt (``task_is_retry``) that may change the folder.
    :param wait_s: the longest wait for an earlier attempt.
    """
    with ExitStack() as stack:
        try:
            stack.enter_context(attempt_lock(folder, what=f"partition {os.path.basename(folder)}",
                                             wait_s=ATTEMPT_WAIT_S if wait_s is None else wait_s))
        except KafkalogError as exc:
            return folder_row(log_dir, folder, status=ERROR, outcome=OUTCOME_FAILED, reason=str(exc))
        if retry:
            finish_lost_attempt(folder)
        return run()


__all__ = ["finish_lost_attempt", "folder_row", "run_claimed", "task_is_retry"]
