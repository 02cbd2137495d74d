"""Compaction of one whole log dir in this process, as the Spark job does it for many: hold the
dir's lock (unless a dry run), run :func:`kafkalog.cleaner.partition_run.run_partition` on every
partition folder, and build the job's JSON report. ``kafkalog compact`` calls :func:`compact_log_dir`;
the Spark job builds its rows and summary with :func:`finish_row` and :func:`compact_summary`, so
both reports have one shape.
"""
from __future__ import annotations

import os
import time
import uuid
from typing import Dict, List, Optional, Sequence, Tuple

from kafkalog.cleaner.cleaner import map_budget
from kafkalog.cleaner.clean_options import CleanOptions
from kafkalog.cleaner.partition_run import CLEANED, ERROR, WOULD_CLEAN, run_partition
from kafkalog.config import KafkaConfigs
from kafkalog.fs.durable import fenced
from kafkalog.fs.lock import held_fences, holder_and_hint, is_locked, lock_log_dir, locked_refusal
from kafkalog.log.logdir import partition_folders, topic_of_folder
from kafkalog.lookup.time_spec import format_epoch_ms

JOB = "compact"


def finish_row(row: dict) -> dict:
    """A partition's report row as the report lists it: without ``explain``, with ``bytes_before`` and
    ``bytes_after``.

    :param row: ``run_partition``'s row
    """
    out = dict(row)
    out.pop("explain", None)
    total = out.get("total_bytes")
    out["bytes_before"] = total
    out["bytes_after"] = (total - out["bytes_removed"]) if total is not None and out["bytes_removed"] is not None \
        else total
    return out


def compact_summary(partitions: List[dict]) -> dict:
    """The report's totals: partitions by status and outcome, bytes and records.

    :param partitions: the finished rows (``finish_row``)
    """
    def total(key):
        return sum(p[key] or 0 for p in partitions)
    statuses: Dict[str, int] = {}
    outcomes: Dict[str, int] = {}
    for p in partitions:
        statuses[p["status"]] = statuses.get(p["status"], 0) + 1
        outcomes[p["outcome"]] = outcomes.get(p["outcome"], 0) + 1
    return dict(partitions=len(partitions), statuses=statuses, outcomes=outcomes, bytes_before=total("bytes_before"),
                bytes_after=total("bytes_after"), bytes_removed=total("bytes_removed"),
                records_read=total("records_read"), records_kept=total("records_kept"),
                records_superseded=total("records_superseded"), tombstones_removed=total("tombstones_removed"),
                aborted_records_removed=total("aborted_records_removed"), markers_removed=total("markers_removed"))


def explain_text(topic: str, partition: int, offset: int, rows: List[dict], asked: Dict[str, List[int]]) -> str:
    """The answer to ``--explain TOPIC:PARTITION:OFFSET`` from the run's rows.

    :param rows: ``run_partition``'s rows (with ``explain``)
    :param asked: partition folder -> the offsets asked about there
    """
    matches = [r for r in rows if r["topic"] == topic and r["partition"] == partition]
    if not matches:
        return f"offset {offset}: no partition {topic}-{partition} in the log dirs"
    r = matches[0]
    offs = asked.get(r["partition_dir"], [])
    if offset in offs and len(r["explain"] or []) == len(offs):
        return r["explain"][offs.index(offset)]
    return f"offset {offset}: partition not cleaned ({r['reason']})"


def compact_log_dir(log_dir: os.PathLike | str, *, configs: KafkaConfigs, now_ms: Optional[int] = None,
                    dry_run: bool = False, topics: Optional[set] = None,
                    explain: Sequence[Tuple[str, int, int]] = (), output_dir: Optional[str] = None) -> dict:
    """Compact every compacted partition of one log dir in this process, one partition after the
    other; returns the report the Spark job writes (``partitions``, ``summary``, ``explain``).

    Unless ``dry_run`` the dir's ``.lock`` is held for the whole run and a dir another process holds
    (a running broker, another job) raises ``LogDirLockedError`` before anything is read; a dry run of
    a locked dir goes on, with the holder in ``summary.warnings``. A partition's trouble is its row's
    ``status: error`` (nothing of it changed); the others go on. The key map's budget is the whole
    ``log.cleaner.dedupe.buffer.size`` (one partition at a time, as one cleaner thread).

    :param log_dir: the Kafka log dir
    :param configs: the Kafka configs (``load_configs`` / ``configs_from_mappings``)
    :param now_ms: 'now' in epoch ms (default: the wall clock): delete horizons, compaction lags
    :param dry_run: compute everything, change nothing
    :param topics: only these topics' folders (None: every folder)
    :param explain: (topic, partition, offset) records to explain (kept or removed, and why)
    :param output_dir: write the compacted copy there (a local folder or a URI; ``output_dir``), the log
        dir only read; a rerun after a kill finishes it
    """
    started = time.monotonic()
    now_given = now_ms is not None
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    log_dir = os.fspath(log_dir)
    warnings = []
    if output_dir is not None:
        if dry_run:
            raise ValueError("a dry run writes nothing: dry_run and output_dir do not go together")
        return _compact_to(log_dir, output_dir, configs=configs, now_ms=now_ms, now_given=now_given, topics=topics,
                           explain=explain, started=started)
    if is_locked(log_dir):
        if not dry_run:
            raise locked_refusal(log_dir, doing="compacting")
        who, _hint = holder_and_hint(log_dir)
        warnings.append(f"{log_dir}: its .lock is held by {who}; dry run only — a real run refuses it")
    folders = [f for f in partition_folders(log_dir) if topics is None or topic_of_folder(f) in topics]
    asked: Dict[str, List[int]] = {}
    for topic, partition, offset in explain:
        for folder in folders:
            if os.path.basename(folder) == f"{topic}-{partition}":
                asked.setdefault(folder, []).append(offset)
    budget = map_budget(configs.broker, concurrent_cleaners=1)

    def run() -> List[dict]:
        return [run_partition(log_dir, folder, configs=configs, now_ms=now_ms,
                              options=CleanOptions(dry_run=dry_run, map_budget_bytes=budget),
                              explain=asked.get(folder, [])) for folder in folders]
    if dry_run:
        rows = run()
    else:
        with lock_log_dir(log_dir):
            with fenced(held_fences().values()):
                rows = run()
    partitions = sorted((finish_row(r) for r in rows), key=lambda p: (p["topic"], p["partition"]))
    summary = compact_summary(partitions)
    summary.update(log_dirs_refused=[], dry_run=bool(dry_run), now_ms=now_ms,
                   duration_s=round(time.monotonic() - started, 3), warnings=warnings)
    explained = [dict(topic=t, partition=n, offset=o, explanation=explain_text(t, n, o, rows, asked))
                 for t, n, o in explain]
    return dict(job=JOB, run_id=uuid.uuid4().hex, now_ms=now_ms, dry_run=bool(dry_run), summary=summary,
                partitions=partitions, explain=explained, audit=None)


def _asked(folders: Sequence[str], explain: Sequence[Tuple[str, int, int]]) -> Dict[str, List[int]]:
    asked: Dict[str, List[int]] = {}
    for topic, partition, offset in explain:
        for folder in folders:
            if os.path.basename(folder) == f"{topic}-{partition}":
                asked.setdefault(folder, []).append(offset)
    return asked


def _compact_to(log_dir: str, out: str, *, configs: KafkaConfigs, now_ms: int, now_given: bool, topics: Optional[set],
                explain: Sequence[Tuple[str, int, int]], started: float) -> dict:
    """``compact_log_dir`` with ``output_dir``: every partition folder written to ``out`` (cleaned, or copied
    as it is), then the log dir's files (``output_dir.finish_output``)."""
    from contextlib import ExitStack
    from kafkalog.cleaner.output_dir import finish_output, output_summary, prepare_output, run_partition_to
    from kafkalog.fs import filesystem

    if is_locked(log_dir):            # a broker's files change while they are read: no consistent copy
        raise locked_refusal(log_dir, doing="copying")
    run = prepare_output(out, log_dir, now_ms=now_ms, now_given=now_given, topics=topics)
    folders = partition_folders(log_dir)
    asked = _asked(folders, explain)
    options = CleanOptions(map_budget_bytes=map_budget(configs.broker, concurrent_cleaners=1))
    with ExitStack() as stack:
        if not filesystem.is_uri(out):
            stack.enter_context(lock_log_dir(out))
            stack.enter_context(fenced(held_fences().values()))
        rows = run.rows if run.rows is not None else [
            run_partition_to(log_dir, folder, out, configs=configs, now_ms=run.now_ms, options=options,
                             clean=topics is None or topic_of_folder(folder) in topics, explain=asked.get(folder, []))
            for folder in folders]
        problem = finish_output(run, log_dir, rows)
    partitions = sorted((finish_row(r) for r in rows), key=lambda p: (p["topic"], p["partition"]))
    summary = compact_summary(partitions)
    summary.update(log_dirs_refused=[], dry_run=False, now_ms=run.now_ms, duration_s=round(time.monotonic() - started, 3),
                   warnings=[problem] if problem else [], **output_summary(run, partitions, problem))
    explained = [dict(topic=t, partition=n, offset=o, explanation=explain_text(t, n, o, rows, asked))
                 for t, n, o in explain]
    return dict(job=JOB, run_id=uuid.uuid4().hex, now_ms=run.now_ms, dry_run=False, summary=summary,
                partitions=partitions, explain=explained, audit=None)


__all__ = ["JOB", "compact_log_dir", "compact_summary", "explain_text", "finish_row"]


def summary_lines(report: dict) -> List[str]:
    """The compaction report in a few lines, as ``kafkalog compact`` and the Spark job print it: the
    totals, one line per partition (its key map when cleaned), the refused log dirs, the explanations.

    :param report: the report :func:`compact_log_dir` or the Spark job made.
    """
    s, dry = report["summary"], report["dry_run"]
    done = s["statuses"].get(WOULD_CLEAN if dry else CLEANED, 0)
    state = "plan (dry run)" if dry else "interrupted" if report.get("interrupted") else "done"
    lines = [f"compaction {state} as of {format_epoch_ms(report['now_ms'])}: {done} of "
             f"{s['partitions']} partitions {'would be ' if dry else ''}cleaned, {s['bytes_removed']:,} bytes and "
             f"{s['records_read'] - s['records_kept']:,} records {'to be ' if dry else ''}removed"]
    for p in report["partitions"]:
        ratio = "-" if p["cleanable_ratio"] is None else f"{p['cleanable_ratio']:.3f}"
        line = f"  {p['topic']}-{p['partition']}: {p['status']} (dirty ratio {ratio}): {p['reason']}"
        if p["status"] in (CLEANED, WOULD_CLEAN):
            line += (f"; {p['bytes_before']:,} -> {p['bytes_after']:,} bytes, {p['records_read']:,} -> "
                     f"{p['records_kept']:,} records; key map: {p['passes']} pass(es), {p['map_keys']:,} keys, "
                     f"{p['map_bytes']:,} of {p['map_budget']:,} bytes")
        elif p["status"] == ERROR:
            line += f" [{p['outcome']}]"
        if p.get("output"):
            line += f" [output: {p['output']}]"
        lines.append(line)
    if s.get("output_dir"):
        lines.append(f"  output {s['output_dir']}: " + ", ".join(f"{n} {k}" for k, n in s["output"].items())
                     + (f"; NOT FINISHED: {s['output_unfinished']}" if s.get("output_unfinished") else "; complete"))
    lines += [f"  refused: {r['message']}" for r in s.get("log_dirs_refused", ())]
    lines += [f"explain {e['topic']}-{e['partition']}@{e['offset']}: {e['explanation']}" for e in report["explain"]]
    if dry and done:
        lines.append("  (dry run: nothing was changed)")
    return lines
