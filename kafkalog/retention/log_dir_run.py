"""Retention for one whole log dir in this process, as the Spark job does it for many: lock the dir
(when applying), run :func:`kafkalog.retention.run.retain_partition` on every partition folder,
rewrite ``log-start-offset-checkpoint`` once, and build the job's JSON report. ``kafkalog retention``
and the Python API call :func:`retain_log_dir`; the Spark job builds its report with
:func:`retention_report`, so both reports have one shape.
"""
from __future__ import annotations

import os
import time
import uuid
from typing import Iterable, Optional

from kafkalog.config import KafkaConfigs
from kafkalog.fs.durable import fenced
from kafkalog.log.local_log import HW_MISSING_ZERO, read_log_dir_checkpoints
from kafkalog.fs.lock import held_fences, holder_and_hint, is_locked, lock_log_dir, locked_refusal
from kafkalog.log.logdir import partition_folders, topic_of_folder
from kafkalog.retention.deletion import run_tag
from kafkalog.retention.run import ERROR, finish_log_dir, public_outcome, retain_partition, retention_summary

JOB = "retention"


def retention_report(outcomes: list, *, run_id: str, now_ms: int, executed: bool, hw_missing: str,
                     refused: list, checkpoints: list, started: float, audit: Optional[dict] = None,
                     deleted_records: Iterable[dict] = ()) -> dict:
    """The retention job's JSON report (one shape for the Spark job and ``kafkalog retention``).

    :param outcomes: the partitions' outcomes (``retain_partition``), sorted as they are to be listed
    :param run_id: the run's id
    :param now_ms: the run's 'now' (epoch ms)
    :param executed: whether the plan was applied (``--execute``)
    :param hw_missing: what a missing high-watermark entry meant (``--high-watermark-missing``)
    :param refused: {"log_dir", "message"} of each log dir refused
    :param checkpoints: ``finish_log_dir``'s result per log dir
    :param started: ``time.monotonic()`` when the run started (for ``duration_s``)
    :param audit: the Delta audit append's result, if any
    :param deleted_records: ``--delete-records-json``'s results as dicts
    """
    summary = retention_summary(outcomes)
    summary.update(log_dirs_refused=refused, dry_run=not executed, now_ms=now_ms,
                   duration_s=round(time.monotonic() - started, 3))
    return dict(
        job=JOB, run_id=run_id, now_ms=now_ms, executed=bool(executed), high_watermark_missing=hw_missing,
        segments=[dict(topic=o["topic"], partition=o["partition"], base_offset=d["base_offset"], size=d["size"],
                       decision=d["decision"], rule=d["rule"], reason=d["reason"], log_dir=o["log_dir"],
                       largest_timestamp_ms=d["largest_timestamp_ms"])
                  for o in outcomes for d in (o.get("decisions") or [])],
        summary=summary,
        partitions=[{k: v for k, v in o.items() if k != "decisions"} for o in outcomes],
        checkpoints=checkpoints, audit=audit, delete_records=list(deleted_records))


def retain_log_dir(log_dir: os.PathLike | str, *, configs: KafkaConfigs, now_ms: Optional[int] = None,
                   execute: bool = False, hw_missing: str = HW_MISSING_ZERO, delete_delay_ms: Optional[int] = None,
                   topics: Optional[set] = None) -> dict:
    """Plan (and with ``execute`` apply) retention for every partition folder of one log dir, in
    this process; returns the report the Spark job writes (``partitions``, ``segments``, ``summary``).

    With ``execute`` the dir's ``.lock`` is held for the whole run and a dir another process holds (a
    running broker, another job) raises ``LogDirLockedError`` before anything is read; a plan (no
    ``execute``) of a locked dir goes on and lists the holder in ``summary.log_dirs_refused``' place:
    ``summary.warnings``. A partition's trouble is its row's ``status: error``; the others go on.

    :param log_dir: the Kafka log dir (a broker's ``log.dirs`` entry)
    :param configs: the Kafka configs (``load_configs`` / ``configs_from_mappings``)
    :param now_ms: 'now' in epoch ms (default: the wall clock)
    :param execute: apply the plan (rename segments ``.deleted``, rewrite the checkpoint)
    :param hw_missing: what a missing ``replication-offset-checkpoint`` entry means (``zero`` as a broker)
    :param delete_delay_ms: overrides ``file.delete.delay.ms`` for removing ``.deleted`` files
    :param topics: only these topics' folders (None: every folder)

    Example::

        import kafkalog
        configs = kafkalog.configs_from_mappings(topics={"orders": {"retention.bytes": "1000000"}})
        report = kafkalog.retain_log_dir("logs", configs=configs, now_ms=1767841200000)
        print(report["summary"]["segments_deleted"], "segments would be deleted")
    """
    started = time.monotonic()
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    run_id = uuid.uuid4().hex
    log_dir = os.fspath(log_dir)
    warnings = []
    if is_locked(log_dir):
        if execute:
            raise locked_refusal(log_dir, doing="applying retention")
        who, _hint = holder_and_hint(log_dir)
        warnings.append(f"{log_dir}: its .lock is held by {who}; planned only — --execute will refuse it")
    folders = [f for f in partition_folders(log_dir) if topics is None or topic_of_folder(f) in topics]
    if execute:
        with lock_log_dir(log_dir):
            with fenced(held_fences().values()):
                outcomes = _run(log_dir, folders, configs, now_ms, True, hw_missing, delete_delay_ms, run_id)
                checkpoints = [finish_log_dir(log_dir, outcomes)]
    else:
        outcomes = _run(log_dir, folders, configs, now_ms, False, hw_missing, delete_delay_ms, run_id)
        checkpoints = []
    outcomes.sort(key=lambda o: (o["topic"] or "", o["partition"] if o["partition"] is not None else -1))
    report = retention_report(outcomes, run_id=run_id, now_ms=now_ms, executed=execute, hw_missing=hw_missing,
                              refused=[], checkpoints=checkpoints, started=started)
    report["summary"]["warnings"] = warnings
    return report


def _run(log_dir, folders, configs, now_ms, execute, hw_missing, delete_delay_ms, run_id) -> list:
    checkpoints = read_log_dir_checkpoints(log_dir)
    tag = run_tag(run_id)
    return [public_outcome(retain_partition(folder, log_dir=log_dir, configs=configs, now_ms=now_ms,
                                            hw_missing=hw_missing, execute=execute, delete_delay_ms=delete_delay_ms,
                                            tag=tag, checkpoints=checkpoints))
            for folder in folders]


__all__ = ["ERROR", "JOB", "retain_log_dir", "retention_report"]
