"""``spark-submit.sh compact``: Kafka's log compaction (``LogCleaner.java``, ``Cleaner.java``) for every
compacted partition of the log dirs at once — Spark plumbing only; the round itself is ``kafkalog.cleaner``.

One stage: one task per partition folder (largest first), each running
``kafkalog.cleaner.partition_run.run_partition``: plan the partition once, decide whether it is
cleanable (dirty ratio above ``min.cleanable.dirty.ratio`` or ``max.compaction.lag.ms`` passed), and
clean it in the task — the compiled key map within its share of ``log.cleaner.dedupe.buffer.size``
(hash-slice passes when the keys do not fit), the recopy, the ``.cleaned`` → ``.swap`` swap-in and
the partition's ``cleaner-offset-checkpoint`` entry right after its swap, as a broker does (tasks
update that file under a lock of the log dir). Only the per-partition report rows come back to the
driver: no keys, records, shuffles, sorts or windows go through the JVM.

Memory: each task's map takes at most ``log.cleaner.dedupe.buffer.size`` divided by the tasks that
run at once (``spark.default.parallelism``, as a broker divides it by ``log.cleaner.threads``).

Safety: a log dir whose ``.lock`` a live process holds (a running broker) is refused unless
``--dry-run`` (then planned with a warning); otherwise the driver holds each dir's lock for the whole
run (the tasks' cleaner calls are told so: ``lock=False``). A partition that fails reports its error,
counts nothing it did not swap in and leaves no temporary file; the others go on, and the job exits
1. ``--dry-run`` computes everything and writes nothing in the log dirs; the report is written and,
when ``--audit`` is given, the audit rows too, flagged ``dry_run``.

``--output-dir DIR_OR_URI`` (one log dir): each task writes its folder's compacted copy there
(``kafkalog.cleaner.output_dir``: the same round, the source only read, a manifest per partition
written last), the driver the log dir's checkpoints at the end; a rerun finishes a killed run.
"""
from __future__ import annotations

import argparse
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import pyarrow as pa

from kafkalog.cleaner.clean_options import CleanOptions
from kafkalog.cleaner.log_dir_run import compact_summary, explain_text, finish_row, summary_lines
from kafkalog.cleaner.output_dir import finish_output, output_summary
from kafkalog.cleaner.partition_run import CLEANED, ERROR, WOULD_CLEAN, CompactionRow, run_partition
from kafkalog.row_types import Int32, TimestampMs, arrow_schema, as_row
from kafkalog.fs.durable import fenced
from kafkalog.fs.filesystem import refuse_uris
from kafkalog.fs.lock import held_fences
from kafkalog.tools.arguments import non_negative_int

from udfs import delta_tables, interrupts
from udfs.compact_split import compact_split
from udfs.job import EXIT_OK, EXIT_PARTIAL, add_config_arguments, add_html_argument, base_parser, locked_log_dirs, parse_time_ms, progress, start_job, table_path, write_html, write_report
from kafkalog.config import did_you_mean
from kafkalog.errors import UsageError
from udfs.partitions import partition_folders_of, topics_option
from udfs.progress import count_folders
from kafkalog.lookup.time_spec import format_epoch_ms
from udfs.session import build_session
from udfs.task_attempt import folder_row, run_claimed, task_is_retry

JOB = "compact"
INTERRUPTED = "interrupted"      # status and outcome of a partition whose task a SIGINT/SIGTERM cut short
DESCRIPTION = ("Compact every compacted partition of the log dirs as Kafka's log cleaner would, in "
               "parallel, one task per partition with a compiled exact key map; --dry-run writes nothing but the "
               "report.")

ROW_SCHEMA = arrow_schema(CompactionRow)
SPLIT_THRESHOLD_BYTES = 1 << 30  # --split auto: a partition with this many cleanable bytes is split across tasks

@dataclass
class CompactionAuditRow:
    """One partition's row in the ``--audit`` Delta table (its columns, in order, with their types)."""
    run_id: Optional[str] = None
    run_at: Optional[TimestampMs] = None
    now: Optional[TimestampMs] = None
    dry_run: Optional[bool] = None
    log_dir: Optional[str] = None
    topic: Optional[str] = None
    partition: Optional[Int32] = None
    status: Optional[str] = None
    reason: Optional[str] = None
    cleanable_ratio: Optional[float] = None
    first_dirty_offset: Optional[int] = None
    end_offset: Optional[int] = None
    bytes_before: Optional[int] = None
    bytes_after: Optional[int] = None
    records_before: Optional[int] = None
    records_after: Optional[int] = None
    records_removed: Optional[int] = None
    records_superseded: Optional[int] = None
    tombstones_removed: Optional[int] = None
    aborted_records_removed: Optional[int] = None
    markers_removed: Optional[int] = None
    null_key_records_removed: Optional[int] = None
    map_size: Optional[int] = None
    duration_s: Optional[float] = None


AUDIT_SCHEMA = arrow_schema(CompactionAuditRow)


# --- command line ----------------------------------------------------------------------------

def _explain_target(text: str) -> Tuple[str, int, int]:
    parts = text.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        raise argparse.ArgumentTypeError(f"{text!r} is not TOPIC:PARTITION:OFFSET")
    try:
        partition, offset = int(parts[1]), int(parts[2])
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: PARTITION and OFFSET must be integers") from None
    if partition < 0 or offset < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: PARTITION and OFFSET must be >= 0")
    return parts[0], partition, offset


def build_parser():
    parser = base_parser(JOB, DESCRIPTION, epilog=(
        "Which partitions: cleanup.policy contains compact, and Kafka's rules say the partition is cleanable\n"
        "(dirty ratio above min.cleanable.dirty.ratio, or max.compaction.lag.ms passed) — every such partition\n"
        "is cleaned in this run. The dirty range ends at the active segment, the high watermark, the first\n"
        "open transaction and min.compaction.lag.ms, rounded down to a segment boundary.\n\n"
        "Report: {\"partitions\": [{topic, partition, status, reason, cleanable_ratio, bytes_before, ...}],\n"
        "\"summary\": {...}, \"explain\": [...]}. Exit 0 done, 1 some partitions or log dirs failed, 2 bad arguments,\n130/143 interrupted by Ctrl-C/SIGTERM."))
    parser.add_argument("--topics", metavar="T[,T...]", help="only these topics")
    parser.add_argument("--now-ms", type=parse_time_ms, metavar="T",
                        help="clean as of this time (epoch ms or ISO-8601; default: now): delete horizons, "
                             "compaction lags, producer expiry")
    parser.add_argument("--dry-run", action="store_true", help="compute everything, write nothing but the report "
                        "(and the audit rows, flagged dry_run)")
    parser.add_argument("--audit", metavar="PATH", type=table_path,
                        help="Delta table to append one row per partition to")
    parser.add_argument("--explain", action="append", default=[], type=_explain_target,
                        metavar="TOPIC:PARTITION:OFFSET", help="print why that record was kept or removed (repeatable)")
    parser.add_argument("--split", choices=("auto", "always", "never"), default="auto",
                        help="split one partition's round across tasks — the key map in hash-slice tasks, each "
                             "segment group recopied in its own task, one swap-in — when its cleanable bytes reach "
                             "--split-threshold-bytes (auto), for every partition (always), or never (default: auto)")
    parser.add_argument("--split-threshold-bytes", type=non_negative_int, default=SPLIT_THRESHOLD_BYTES, metavar="N",
                        help=f"cleanable bytes from which --split auto splits a partition (default: "
                             f"{SPLIT_THRESHOLD_BYTES:,}, 1 GiB)")
    add_html_argument(parser)
    add_config_arguments(parser)
    parser.add_argument("--output-dir", metavar="DIR_OR_URI",
                        help="write the compacted log dir there (a new or empty local folder, or any pyarrow.fs URI "
                             "such as s3://bucket/prefix) and leave the log dir as it is (one log dir; it may be a "
                             "URI too); a rerun after a kill finishes it")
    return parser


# --- the stage: one task per partition folder ----------------------------------------------

def _log_bytes(folder: str) -> int:
    try:
        return sum(e.stat().st_size for e in os.scandir(folder) if e.name.endswith(".log"))
    except OSError:
        return 0


def map_budget_per_task(spark, configs) -> int:
    """``log.cleaner.dedupe.buffer.size`` split across the tasks that run at once."""
    from kafkalog.cleaner.cleaner import map_budget
    return map_budget(configs.broker, concurrent_cleaners=spark.sparkContext.defaultParallelism)


def compact_folders(spark, folders: Sequence[Tuple[str, str]], *, configs, now: int, dry_run: bool,
                    explain: Dict[str, List[int]], split: str = "never",
                    split_threshold_bytes: int = SPLIT_THRESHOLD_BYTES,
                    output: Optional[Tuple[str, Optional[set]]] = None) -> List[dict]:
    """Run every folder's round, one task per folder, largest first: the report rows. The tasks are
    the partitions of ``spark.range`` (built in the JVM), each folder found by its index in the list
    the task's function carries: no Python stage before this one, so one Python daemon serves the job.
    ``split`` (auto / always / never): folders whose .log bytes reach ``split_threshold_bytes`` (every
    folder: always) are planned in one task each and, when their cleanable bytes reach it too, cleaned
    by ``compact_split`` (a round split across tasks); the others as before.
    ``output``: (destination, the topics cleaned or None) — each task writes its folder's copy there
    (``output_dir.run_partition_to``) and the folders of other topics are copied as they are; a split
    round swaps into the log dir itself, so ``output`` never splits."""
    if not folders:
        return []
    options = CleanOptions(dry_run=dry_run, map_budget_bytes=map_budget_per_task(spark, configs))
    if split != "never" and output is None:
        threshold = 0 if split == "always" else split_threshold_bytes
        big = [df for df in folders if not explain.get(df[1]) and _log_bytes(df[1]) >= threshold]
        rest = [df for df in folders if df not in big]
        rows = compact_folders(spark, rest, configs=configs, now=now, dry_run=dry_run, explain=explain)
        try:
            return rows + compact_split(spark, big, configs=configs, now=now, options=options, threshold=threshold)
        except Exception:
            if interrupts.received() is None:
                raise
            return rows + [interrupted_row(log_dir, folder) for log_dir, folder in big]
    return _one_task_each(spark, folders, configs=configs, now=now, options=options, dry_run=dry_run, explain=explain,
                          output=output)


def _one_task_each(spark, folders, *, configs, now: int, options: CleanOptions, dry_run: bool,
                   explain: Dict[str, List[int]], output: Optional[Tuple[str, Optional[set]]] = None) -> List[dict]:
    from pyspark.sql.pandas.types import from_arrow_schema

    order = sorted(folders, key=lambda df: -_log_bytes(df[1]))

    fences = held_fences()       # the driver's locks: a worker changes nothing once they are gone
    counter = count_folders(spark, len(order), "planning compaction" if dry_run else "compacting", order)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from udfs.pause_point import step_hook_from_env
        hook = step_hook_from_env()                   # a test's pause point; None in real runs
        task_options = options if hook is None else replace(options, on_step=hook)
        retry = task_is_retry() and not dry_run
        for batch in batches:
            rows = []
            for i in batch.column(0).to_pylist():
                log_dir, folder = order[i]
                if output is not None:
                    from kafkalog.cleaner.output_dir import run_partition_to
                    from kafkalog.log.logdir import topic_of_folder
                    with fenced([fences.get(output[0])]):
                        rows.append(run_claimed(log_dir, folder, lambda: run_partition_to(
                            log_dir, folder, output[0], configs=configs, now_ms=now, options=options,
                            explain=explain.get(folder, []),
                            clean=output[1] is None or topic_of_folder(folder) in output[1]), retry=False))
                    counter.add(folder, rows[-1])
                    continue
                with fenced([fences.get(log_dir)]):
                    rows.append(run_claimed(log_dir, folder, lambda: run_partition(
                        log_dir, folder, configs=configs, now_ms=now, options=task_options,
                        explain=explain.get(folder, [])), retry=retry))
                counter.add(folder, rows[-1])
            if rows:
                yield pa.RecordBatch.from_pylist(rows, schema=ROW_SCHEMA)

    ids = spark.range(0, len(order), numPartitions=len(order))
    try:
        return ids.mapInArrow(run, from_arrow_schema(ROW_SCHEMA)).toArrow().to_pylist()
    except Exception:
        if interrupts.received() is None:
            raise
        finished = {folder: row for folder, row in counter.finished()}   # rows of the tasks that ended
        return [finished.get(folder) or interrupted_row(log_dir, folder) for log_dir, folder in order]


def interrupted_row(log_dir: str, folder: str) -> dict:
    """The report row of a partition whose task had not ended when the job was interrupted: as it
    was, compacted (a task that ended after the cancel), or with ``.cleaned``/``.swap`` files that
    ``kafkalog recover`` (or a broker's startup) finishes — never half-swapped."""
    return folder_row(log_dir, folder, status=INTERRUPTED, outcome=INTERRUPTED,
                      reason="interrupted before its task ended: untouched, or recoverable with `kafkalog recover`")


# --- the job ---------------------------------------------------------------------------------

def audit_rows(partitions: List[dict], *, run_id: str, run_at: int, now: int, dry_run: bool) -> List[dict]:
    rows = []
    for p in partitions:
        read, kept = p.get("records_read"), p.get("records_kept")
        rows.append(as_row(CompactionAuditRow(
            run_id=run_id, run_at=run_at, now=now, dry_run=dry_run, log_dir=p["log_dir"], topic=p["topic"],
            partition=p["partition"], status=p["status"], reason=p["reason"], cleanable_ratio=p["cleanable_ratio"],
            first_dirty_offset=p["first_dirty_offset"], end_offset=p["end_offset"], bytes_before=p["bytes_before"],
            bytes_after=p["bytes_after"], records_before=read, records_after=kept,
            records_removed=None if read is None else read - kept, records_superseded=p["records_superseded"],
            tombstones_removed=p["tombstones_removed"], aborted_records_removed=p["aborted_records_removed"],
            markers_removed=p["markers_removed"], null_key_records_removed=p["records_null_key"],
            map_size=p["map_size"], duration_s=p["duration_s"])))
    return rows


def check_explain_targets(targets, folders) -> None:
    """``--explain TOPIC:PARTITION:OFFSET`` naming a partition the run does not cover (not in the log dirs,
    or left out by ``--topics``) is a UsageError, with the closest partition: it would otherwise be
    answered with a line nobody asked for, after the job had run.

    :param targets: the parsed ``--explain`` values, (topic, partition, offset)
    :param folders: (log dir, folder) of the partitions the run covers
    """
    names = sorted({os.path.basename(f) for _d, f in folders})
    for topic, partition, offset in targets:
        name = f"{topic}-{partition}"
        if name not in names:
            raise UsageError(f"--explain {topic}:{partition}:{offset}: the run covers no partition {name}"
                             f"{did_you_mean(name, names)}", hint="name a partition folder of the log dirs "
                             "(and of --topics, when given)")


def _session_conf(master: Optional[str]) -> Dict[str, str]:
    """A local master's workers fork from ``udfs.lean_daemon`` (no pandas: see there); executors
    elsewhere keep pyspark's daemon, as their Python path may not hold this tree when it starts."""
    master = master or os.environ.get("SPARK_MASTER") or "local"
    return {"spark.python.daemon.module": "udfs.lean_daemon"} if master.startswith("local") else {}


def main(argv: Sequence[str], *, spark=None) -> int:
    args, configs, log_dirs, now, run_id, run_at, started = start_job(build_parser(), argv)
    out = start_output(args, log_dirs, now) if args.output_dir is not None else None
    now = out.now_ms if out is not None else now
    if not args.dry_run and out is None:
        refuse_uris(log_dirs, "compact", hint=OUTPUT_DIR_HINT)
    topics = topics_option(args.topics)
    if topics is not None and not topics:
        raise UsageError("--topics names no topic")

    check_explain_targets(args.explain, partition_folders_of(log_dirs, topics))   # before any lock is taken

    note = "dry run only — a real run refuses it"
    with locked_log_dirs(log_dirs, modifying=not args.dry_run and out is None, read_only_note=note) as (usable, refused), \
            output_locked(out):
        folders = partition_folders_of(usable, None if out is not None else topics)   # a copy holds every folder
        spark = spark or build_session(f"kafkalog-{JOB}", master=args.master, conf=_session_conf(args.master))
        asked: Dict[str, List[int]] = {}
        for topic, partition, offset in args.explain:
            for _d, folder in folders:
                name = os.path.basename(folder)
                if name.rsplit("-", 1)[0] == topic and name.rsplit("-", 1)[-1] == str(partition):
                    asked.setdefault(folder, []).append(offset)
        progress(f"{'dry-run of' if args.dry_run else 'compacting'} {len(folders)} folders in {len(usable)} "
                 f"log dir(s) as of {format_epoch_ms(now)}, one task per folder")
        stage_started = time.monotonic()
        rows = (out.rows if out is not None and out.rows is not None else
                compact_folders(spark, folders, configs=configs, now=now, dry_run=args.dry_run, explain=asked,
                                split=args.split, split_threshold_bytes=args.split_threshold_bytes,
                                output=None if out is None else (out.out, topics)))
        stage_s = time.monotonic() - stage_started
        unfinished = None if out is None else finish_output(out, log_dirs[0], rows)

    partitions = sorted((finish_row(r) for r in rows), key=lambda p: (p["log_dir"], p["topic"], p["partition"]))
    explained = [dict(topic=t, partition=n, offset=o, explanation=explain_text(t, n, o, rows, asked))
                 for t, n, o in args.explain]
    audit = None
    stopped = interrupts.received() is not None
    if args.audit and partitions and not stopped:     # after a signal no further Spark job runs
        audit_input = audit_rows(partitions, run_id=run_id, run_at=run_at, now=now, dry_run=args.dry_run)
        audit = delta_tables.append_rows(spark, audit_input, AUDIT_SCHEMA, args.audit, engine=args.delta_engine,
                                         metadata={"job": JOB, "run_id": run_id, "dry_run": str(args.dry_run).lower()})
        progress(f"{len(audit_input)} partition rows appended to {args.audit} (Delta version {audit['version']})")
    summary = compact_summary(partitions)
    summary.update(log_dirs_refused=refused, dry_run=bool(args.dry_run), now_ms=now,
                   duration_s=round(time.monotonic() - started, 3), stage_s=round(stage_s, 3))
    if out is not None:
        summary.update(output_summary(out, partitions, unfinished))
    report = dict(job=JOB, run_id=run_id, now_ms=now, dry_run=bool(args.dry_run), summary=summary,
                  partitions=partitions, explain=explained, audit=audit)
    if stopped:
        report["interrupted"] = dict(signal=interrupts.signal_name(), partitions=summary["statuses"].get(INTERRUPTED, 0))
    _print_summary(report)
    write_report(args.report, report)
    write_html(args.html, report)
    if stopped:
        done = summary["statuses"].get(WOULD_CLEAN if args.dry_run else CLEANED, 0)
        interrupts.note_finished(done, len(partitions), "would be compacted" if args.dry_run else "compacted",
                                 report=args.report)
    failed = summary["statuses"].get(ERROR, 0) or refused or summary.get("output_unfinished")
    return EXIT_PARTIAL if failed else EXIT_OK


OUTPUT_DIR_HINT = ("compact it into a new place instead: --output-dir DIR_OR_URI writes the compacted copy (local or "
                   "s3://...) and leaves this one as it is; or --dry-run to plan")


def start_output(args, log_dirs, now: int):
    """``--output-dir``: the checks (one log dir, not a dry run, the source not held by a broker) and the
    destination's run, started or resumed (``output_dir.prepare_output``), before any Spark work."""
    from kafkalog.cleaner.output_dir import prepare_output
    from kafkalog.fs.lock import is_locked, locked_refusal
    if args.dry_run:
        raise UsageError("--dry-run writes nothing, --output-dir writes a copy: give one of them")
    if len(log_dirs) != 1:
        raise UsageError(f"--output-dir takes one log dir, not {len(log_dirs)}",
                         hint="run the job once per log dir, each with its own --output-dir")
    if is_locked(log_dirs[0]):       # a broker's files change while they are read: no consistent copy
        raise locked_refusal(log_dirs[0], doing="copying")
    if getattr(args, "split", None) == "always":      # a split round swaps in place: never on the source
        raise UsageError("--split always does not go with --output-dir: a split round swaps its output into the "
                         "log dir itself", hint="drop --split (a copy cleans each partition in one task)")
    if getattr(args, "split", None) is not None:
        args.split = "never"
    return prepare_output(args.output_dir, os.fspath(log_dirs[0]), now_ms=now, now_given=args.now_ms is not None,
                          topics=topics_option(args.topics))


@contextmanager
def output_locked(out):
    """Hold a local destination's ``.lock`` while the tasks write there (their changes fenced by it)."""
    from kafkalog.fs.filesystem import is_uri
    from kafkalog.fs.lock import lock_log_dir
    if out is None or is_uri(out.out):
        yield
        return
    with lock_log_dir(out.out):
        yield


def _print_summary(report: dict) -> None:
    for line in summary_lines(report):
        print(line)


def entry(argv: Optional[Sequence[str]] = None) -> int:
    from udfs.job import run
    return run(JOB, main, argv)
