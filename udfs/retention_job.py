"""``spark-submit.sh retention``: Kafka's retention (log start offset, retention.bytes, retention.ms)
decided for every partition of the log dirs in parallel, as a broker would decide it; a plan by
default, applied with ``--execute``. Each partition runs ``kafkalog.retention.run.retain_partition``
on an executor; the driver then rewrites each log dir's ``log-start-offset-checkpoint``, appends the
decisions to a Delta audit table and writes the JSON report.

Safety: ``--execute`` refuses a log dir whose ``.lock`` a live process holds and holds that lock itself
while it works (a broker cannot start on the dir meanwhile); the per-partition work runs in one Spark
action, collected, and a task Spark retries reports what its lost attempt renamed (the run's tag is in
the files' mtimes); deleted segments are renamed ``.deleted`` first and removed only after
``file.delete.delay.ms`` (``--delete-delay-ms`` overrides it; 0 removes them in the same run).
"""
from __future__ import annotations

from typing import Optional, Sequence

import pyarrow as pa

from kafkalog.fs.filesystem import refuse_uris
from kafkalog.errors import UsageError
from kafkalog.retention.delete_records import (apply_delete_records, describe, log_start_overrides,
                                               plan_delete_records, read_offset_json_file, with_log_starts)
from kafkalog.retention.deletion import run_tag
from kafkalog.log.local_log import HW_MISSING_CHOICES, HW_MISSING_LOG_END, HW_MISSING_ZERO
from kafkalog.retention.log_dir_run import retention_report
from kafkalog.retention.run import ERROR, OUTCOME_SCHEMA, finish_log_dir, public_outcome, retain_partition
from kafkalog.tools.arguments import non_negative_int

from udfs import delta_tables
from udfs.job import (EXIT_OK, EXIT_PARTIAL, add_config_arguments, add_html_argument, base_parser,
                      locked_log_dirs, parse_time_ms, progress, start_job, table_path, write_html, write_report)
from udfs.partitions import (cached_checkpoints, folders_frame, map_folders, partition_folders_of, spark_arrow_schema,
                             topics_option)
from udfs.progress import count_folders
from kafkalog.lookup.time_spec import format_epoch_ms
from udfs.session import build_session

JOB = "retention"
DESCRIPTION = "Decide Kafka's retention (log start offset, retention.bytes, retention.ms) for every partition " \
              "as a broker would; dry run unless --execute."

AUDIT_SCHEMA = pa.schema([
    pa.field("run_id", pa.string()),
    pa.field("run_at", pa.timestamp("ms", tz="UTC")),
    pa.field("now", pa.timestamp("ms", tz="UTC")),
    pa.field("executed", pa.bool_()),
    pa.field("log_dir", pa.string()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("base_offset", pa.int64()),
    pa.field("size", pa.int64()),
    pa.field("largest_timestamp", pa.timestamp("ms", tz="UTC")),
    pa.field("largest_timestamp_source", pa.string()),
    pa.field("decision", pa.string()),
    pa.field("rule", pa.string()),
    pa.field("reason", pa.string()),
    pa.field("partition_status", pa.string()),
    pa.field("log_start_offset", pa.int64()),
    pa.field("new_log_start_offset", pa.int64()),
    pa.field("high_watermark", pa.int64()),
])


def build_parser():
    parser = base_parser(JOB, DESCRIPTION, epilog=(
        "High watermark: a broker never deletes data at or above it and reads it from\n"
        "replication-offset-checkpoint. With no entry for a partition, --high-watermark-missing=zero (the\n"
        "default, as a broker) means HW 0, clamped to the log start offset: nothing but log-start-offset\n"
        "breaches is deletable. For a backup copied without that file, --high-watermark-missing=log-end\n"
        "treats everything as replicated.\n\n"
        "Report: {\"segments\": [{topic, partition, base_offset, size, decision, rule, ...}], \"summary\": {...},\n"
        "\"partitions\": [...]}. Exit 0 done, 1 some partitions failed (see the report), 2 bad arguments,\n130/143 interrupted by Ctrl-C/SIGTERM."))
    parser.add_argument("--now-ms", type=parse_time_ms, metavar="T",
                        help="decide as of this time (epoch ms or ISO-8601; default: now)")
    parser.add_argument("--execute", action="store_true",
                        help="apply the plan: rename deleted segments to .deleted, roll, update checkpoints")
    parser.add_argument("--delete-delay-ms", type=non_negative_int, metavar="MS",
                        help="remove .deleted files this long after they were renamed (default: each topic's "
                             "file.delete.delay.ms; 0: at once)")
    parser.add_argument("--high-watermark-missing", choices=HW_MISSING_CHOICES, default=HW_MISSING_ZERO,
                        help=f"what a missing replication-offset-checkpoint entry means (default {HW_MISSING_ZERO}; "
                             f"{HW_MISSING_LOG_END}: log end offset)")
    parser.add_argument("--delete-records-json", metavar="FILE",
                        help="first advance log start offsets as kafka-delete-records.sh's --offset-json-file asks "
                             "(kafkalog delete-records; -1: the high watermark), so the segments wholly below them "
                             "go in this run; with a dry run the plan assumes them and nothing is written")
    parser.add_argument("--topics", metavar="T[,T...]", help="only these topics")
    parser.add_argument("--audit", metavar="PATH", type=table_path,
                        help="Delta table to append every segment's decision to")
    add_html_argument(parser)
    add_config_arguments(parser)
    return parser


def plan_and_apply(spark, folders, *, configs, now, hw_missing, execute, delete_delay_ms, run_id,
                   log_starts: Optional[dict] = None) -> list[dict]:
    """Run retain_partition over the folders on the executors, once; the outcomes on the driver. A
    task Spark retries reports what its lost attempt deleted: they share the run's tag.
    ``log_starts``: {log dir: {TopicPartition: log start offset}} to plan with in place of the
    checkpoint's (a dry run of --delete-records-json)."""
    tag = run_tag(run_id)
    log_starts = log_starts or {}

    def per_folder(log_dir: str, folder: str, cache: dict) -> list[dict]:
        checkpoints = cached_checkpoints(log_dir, cache)
        if log_dir in log_starts:
            checkpoints = with_log_starts(checkpoints, log_starts[log_dir])
        outcome = retain_partition(folder, log_dir=log_dir, configs=configs, now_ms=now, hw_missing=hw_missing,
                                   execute=execute, delete_delay_ms=delete_delay_ms, tag=tag,
                                   checkpoints=checkpoints)
        return [public_outcome(outcome)]

    counter = count_folders(spark, len(folders), "applying retention" if execute else "planning retention", folders)
    df = map_folders(folders_frame(spark, folders), per_folder, OUTCOME_SCHEMA, counter=counter)
    return df.toArrow().to_pylist()


def audit_rows(outcomes: list[dict], *, run_id: str, run_at: int, now: int, executed: bool) -> list[dict]:
    rows = []
    for o in outcomes:
        for d in o.get("decisions") or []:
            rows.append(dict(
                run_id=run_id, run_at=run_at, now=now, executed=executed and o["status"] == "applied",
                log_dir=o["log_dir"], topic=o["topic"], partition=o["partition"], base_offset=d["base_offset"],
                size=d["size"], largest_timestamp=d["largest_timestamp_ms"],
                largest_timestamp_source=d["largest_timestamp_source"], decision=d["decision"], rule=d["rule"],
                reason=d["reason"], partition_status=o["status"], log_start_offset=o["log_start_offset"],
                new_log_start_offset=o["new_log_start_offset"], high_watermark=o["high_watermark"]))
    return rows


def main(argv: Sequence[str], *, spark=None) -> int:
    args, configs, log_dirs, now, run_id, run_at, started = start_job(build_parser(), argv)
    if args.execute:
        refuse_uris(log_dirs, "retention --execute")
    topics = topics_option(args.topics)
    partition_folders_of(log_dirs, topics)     # an unknown --topics name: exit 2 before any lock file is opened

    note = "planning only — --execute will refuse it"
    requests = read_offset_json_file(args.delete_records_json) if args.delete_records_json else None
    with locked_log_dirs(log_dirs, modifying=bool(args.execute), read_only_note=note) as (usable, refused):
        deleted_records, log_starts = [], {}
        if requests:
            deleted_records, log_starts = _delete_records(usable, requests, configs=configs, args=args, refused=refused)
        folders = partition_folders_of(usable, topics)
        spark = spark or build_session(f"kafkalog-{JOB}", master=args.master)
        progress(f"{'applying' if args.execute else 'planning'} retention for {len(folders)} folders "
                 f"in {len(usable)} log dir(s) as of {format_epoch_ms(now)}")
        outcomes = plan_and_apply(spark, folders, configs=configs, now=now, hw_missing=args.high_watermark_missing,
                                  execute=args.execute, delete_delay_ms=args.delete_delay_ms,
                                  run_id=run_id, log_starts=None if args.execute else log_starts) if folders else []
        checkpoints = []
        if args.execute:
            for log_dir in usable:
                try:
                    checkpoints.append(finish_log_dir(log_dir, [o for o in outcomes if o["log_dir"] == str(log_dir)]))
                except OSError as exc:
                    refused.append(dict(log_dir=str(log_dir), message=f"cannot rewrite its log-start-offset-"
                                        f"checkpoint: {exc.strerror or exc}; a broker derives the log start "
                                        "offset from the first segment, so no data is at risk"))

    outcomes.sort(key=lambda o: (o["log_dir"] or "", o["topic"] or "", o["partition"] if o["partition"] is not None else -1))
    audit = None
    if args.audit and outcomes:
        rows = audit_rows(outcomes, run_id=run_id, run_at=run_at, now=now, executed=args.execute)
        if rows:
            audit = delta_tables.append_rows(spark, rows, AUDIT_SCHEMA, args.audit, engine=args.delta_engine,
                                             metadata={"job": JOB, "run_id": run_id,
                                                       "executed": str(args.execute).lower()})
            progress(f"{len(rows)} decisions appended to {args.audit} (Delta version {audit['version']})")

    report = retention_report(outcomes, run_id=run_id, now_ms=now, executed=args.execute,
                              hw_missing=args.high_watermark_missing, refused=refused, checkpoints=checkpoints,
                              started=started, audit=audit, deleted_records=[r.to_dict() for r in deleted_records])
    summary = report["summary"]
    _print_summary(report)
    write_report(args.report, report)
    write_html(args.html, report)
    failed = summary["statuses"].get(ERROR, 0) or refused
    return EXIT_PARTIAL if failed else EXIT_OK


def _delete_records(usable, requests, *, configs, args, refused) -> tuple[list, dict]:
    """--delete-records-json: decide every partition first (a partition in no usable log dir, or any
    partition's error, is a UsageError: nothing is changed); with --execute write the log start
    offsets (this process holds the locks); return the results and the log starts a dry run plans with."""
    try:
        results = plan_delete_records(usable, requests, configs=configs, hw_missing=args.high_watermark_missing)
    except UsageError as exc:
        if refused:
            raise UsageError(f"{exc} (log dirs refused: {', '.join(r['log_dir'] for r in refused)})") from None
        raise
    errors = [describe(r) for r in results if r.error]
    if errors:
        raise UsageError("--delete-records-json refused, nothing changed:\n  " + "\n  ".join(errors))
    if args.execute:
        results = apply_delete_records(results, lock=False)
    for r in results:
        progress(f"delete-records {describe(r)}" + ("" if args.execute or not r.changes else " (dry run)"))
    return results, log_start_overrides(results)


def _print_summary(report: dict) -> None:
    s = report["summary"]
    verb = "freed" if report["executed"] else "to be freed"

    def earlier(t: dict) -> str:        # what a lost attempt of a retried task did, counted in the totals
        if not t["segments_deleted_earlier"]:
            return ""
        return (f" ({t['segments_deleted_earlier']} segments, {t['bytes_freed_earlier']:,} bytes of them by an "
                "earlier attempt of a retried task)")

    print(f"retention {'applied' if report['executed'] else 'plan (dry run)'} as of {format_epoch_ms(report['now_ms'])}: "
          f"{s['segments_deleted'] + s['segments_deleted_earlier']} of {s['segments']} segments, "
          f"{s['bytes_freed'] + s['bytes_freed_earlier']:,} bytes {verb}{earlier(s)}")
    for topic, t in s["topics"].items():
        print(f"  {topic}: {t['segments_deleted'] + t['segments_deleted_earlier']} segments, "
              f"{t['bytes_freed'] + t['bytes_freed_earlier']:,} bytes {verb} in {t['partitions']} partitions"
              + earlier(t) + (f"; {t['bytes_purged']:,} bytes of .deleted files removed" if t["bytes_purged"] else ""))
    for e in s["errors"]:
        print(f"  error: {e['partition_dir']}: {e['message']}")
    for r in s["log_dirs_refused"]:
        print(f"  refused: {r['message']}")
    if not report["executed"] and s["segments_deleted"]:
        print("  (dry run: nothing was changed; add --execute to apply)")


def entry(argv: Optional[Sequence[str]] = None) -> int:
    from udfs.job import run
    return run(JOB, main, argv)


def plan_catalog(catalog_df, *, configs, now: int, hw_missing: str = HW_MISSING_ZERO, tasks: Optional[int] = None):
    """Retention decisions for every live partition of a catalog DataFrame (e.g. the Delta catalog),
    as a DataFrame (kafkalog.retention.catalog_plan.PLAN_SCHEMA). The catalog rows are hash-partitioned by
    (log dir, topic, partition), so each Kafka partition's segments land in one task, and each task plans
    all of its rows at once with the local planner (no per-group Python call). Reads no log dir."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from kafkalog.retention.catalog_plan import PLAN_SCHEMA, plan_catalog_table

    out_schema = spark_arrow_schema(PLAN_SCHEMA)

    def plan_task(batches):
        batches = list(batches)
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        planned = plan_catalog_table(table, configs, now, hw_missing=hw_missing).cast(out_schema)
        yield from planned.to_batches(max_chunksize=65_536)

    columns = ["log_dir", "topic", "partition", "partition_kind", "kind", "base_offset", "size",
               "largest_timestamp_ms", "log_start_offset", "log_end_offset", "high_watermark_checkpoint"]
    segments = catalog_df.where((F.col("kind") == "segment") & (F.col("partition_kind") == "live")).select(*columns)
    n = tasks or max(1, catalog_df.sparkSession.sparkContext.defaultParallelism * 2)
    spread = segments.repartition(n, "log_dir", "topic", "partition")
    return spread.mapInArrow(plan_task, from_arrow_schema(out_schema))
