"""``spark-submit.sh reindex``: verify every segment index of the log dirs against what Kafka's recovery
would build from the ``.log`` and rebuild the ones that differ, in parallel across partitions. Each
partition runs ``kafkalog.log.reindex.reindex_partition`` on an executor (one row per index file, classified
by ``kafkalog.index.verify``: identical / valid / missing / corrupt); the driver collects the rows
once, appends them to a Delta table (``--results``) and writes the JSON report.

Safety: ``--verify-only`` touches nothing. Otherwise the job refuses a log dir whose ``.lock`` a live
process holds and holds that lock itself while it works; the per-partition work runs exactly once (one
Spark action, collected); every index is written through a temp file, fsynced and renamed; the active
segment is left alone unless ``--include-active``; a ``.log`` is only cut with ``--truncate-corrupt-tail``,
after its cut bytes are saved beside it (``corrupt-tail-<base>-at-<position>.bin``).
"""
from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Optional, Sequence

import pyarrow as pa

from kafkalog.errors import KafkalogError
from kafkalog.fs.filesystem import refuse_uris
from kafkalog.fs.names import parse_partition_dir_name
from kafkalog.log.reindex import ERROR, REINDEX_SCHEMA, partition_error_row, reindex_partition

from udfs import delta_tables
from udfs.job import EXIT_OK, EXIT_PARTIAL, add_config_arguments, base_parser, locked_log_dirs, progress, start_job, table_path, write_report
from kafkalog.errors import UsageError
from udfs.partitions import folders_frame, list_partition_folders, map_folders
from udfs.progress import count_folders
from udfs.session import build_session

JOB = "reindex"
DESCRIPTION = ("Verify every segment's .index/.timeindex/.txnindex against what Kafka's recovery would build "
               "from the .log (identical / valid / missing / corrupt) and rebuild the ones that differ.")

RESULTS_SCHEMA = pa.schema([pa.field("run_id", pa.string()), pa.field("run_at", pa.timestamp("ms", tz="UTC")),
                            pa.field("verify_only", pa.bool_())] + list(REINDEX_SCHEMA))


def build_parser():
    parser = base_parser(JOB, DESCRIPTION, epilog=(
        "Classes: identical (byte-identical to recovery's rebuild), valid (every entry agrees with the log,\n"
        "laid out differently: follower/cleaned segments, another index.interval.bytes, older brokers'\n"
        "time-index offsets; the reason says which), missing, corrupt (the first bad entry and its byte\n"
        "position). Without --verify-only every index that is not identical is rebuilt, so a second run\n"
        "reports all identical. The active (last) segment belongs to a running broker: skipped unless\n"
        "--include-active.\n\n"
        "Report: {\"files\": [one row per index file], \"summary\": {...}, \"partitions\": [...]}.\n"
        "Exit 0 done, 1 some partitions or log dirs failed or were refused (see the report), 2 bad arguments,\n130/143 interrupted by Ctrl-C/SIGTERM."))
    parser.add_argument("--verify-only", action="store_true", help="classify only; change nothing")
    parser.add_argument("--include-active", action="store_true",
                        help="also check (and rebuild) each partition's active segment; only when no broker runs")
    parser.add_argument("--truncate-corrupt-tail", action="store_true",
                        help="cut a .log's invalid tail as Kafka's recovery does, saving the cut bytes in "
                             "corrupt-tail-<base>-at-<position>.bin beside it, then reindex the segment")
    parser.add_argument("--results", metavar="PATH", type=table_path, help="Delta table to append every file's row to")
    add_config_arguments(parser)
    return parser


def reindex_frame(spark, folders, *, configs, verify_only: bool, include_active: bool, truncate_tail: bool):
    """The lazy DataFrame (``kafkalog.log.reindex.REINDEX_SCHEMA``) of reindexing ``folders`` (``(log dir,
    folder)`` pairs); evaluating it does the work, so collect it once."""
    def per_folder(log_dir: str, folder: str, cache: dict) -> list[dict]:
        name = Path(folder).name
        try:
            topic, partition, _kind = parse_partition_dir_name(name)
        except KafkalogError as exc:
            return [partition_error_row(log_dir=log_dir, folder=folder, topic=None, partition=None,
                                        message=f"{exc}; a broker refuses a log dir holding it")]
        try:
            config = configs.for_topic(topic)
            result = reindex_partition(folder, log_dir=log_dir, index_interval_bytes=config.index_interval_bytes,
                                       segment_index_bytes=config.segment_index_bytes, include_active=include_active,
                                       verify_only=verify_only, truncate_tail=truncate_tail)
            return result.rows
        except (KafkalogError, OSError) as exc:
            return [partition_error_row(log_dir=log_dir, folder=folder, topic=topic, partition=partition,
                                        message=str(exc))]

    counter = count_folders(spark, len(folders), "verifying indexes" if verify_only else "reindexing", folders)
    return map_folders(folders_frame(spark, folders), per_folder, REINDEX_SCHEMA, counter=counter)


def summarize(rows: list[dict]) -> dict:
    classes = {kind: dict(Counter(r["class"] for r in rows if r["kind"] == kind))
               for kind in ("index", "timeindex", "txnindex", "log")}
    return dict(
        files=sum(1 for r in rows if r["kind"] in ("index", "timeindex", "txnindex")),
        classes={k: v for k, v in classes.items() if v},
        actions=dict(Counter(r["action"] for r in rows if r["action"] != "none")),
        partitions=len({r["partition_dir"] for r in rows}),
        active_segments_skipped=sum(1 for r in rows if r["class"] == "skipped" and r["kind"] == "log"),
        corrupt=[dict(partition_dir=r["partition_dir"], file=r["file"], entry=r["first_bad_entry"],
                      position=r["first_bad_position"], reason=r["reason"], action=r["action"])
                 for r in rows if r["class"] == "corrupt"],
        errors=[dict(partition_dir=r["partition_dir"], file=r["file"], message=r["reason"])
                for r in rows if r["class"] == ERROR],
    )


def _check_arguments(args) -> None:
    if args.verify_only and args.truncate_corrupt_tail:
        raise UsageError("--truncate-corrupt-tail modifies the log; it cannot be combined with --verify-only")


def main(argv: Sequence[str], *, spark=None) -> int:
    args, configs, log_dirs, _, run_id, run_at, started = start_job(build_parser(), argv, _check_arguments)
    modifying = not args.verify_only
    if modifying:
        refuse_uris(log_dirs, "reindex (without --verify-only)")

    note = "verifying only what is on disk now"
    with locked_log_dirs(log_dirs, modifying=modifying, read_only_note=note) as (usable, refused):
        folders = list_partition_folders(usable)
        rows: list[dict] = []
        if folders:
            spark = spark or build_session(f"kafkalog-{JOB}", master=args.master)
            progress(f"{'verifying' if args.verify_only else 'reindexing'} {len(folders)} folders "
                     f"in {len(usable)} log dir(s)")
            df = reindex_frame(spark, folders, configs=configs, verify_only=args.verify_only,
                               include_active=args.include_active, truncate_tail=args.truncate_corrupt_tail)
            rows = df.toArrow().to_pylist()          # the one action: each partition is processed once

    rows.sort(key=lambda r: (r["log_dir"] or "", r["partition_dir"], r["base_offset"] if r["base_offset"] is not None
                             else -1, r["kind"] != "log", r["kind"]))
    results = None
    if args.results and rows:
        spark = spark or build_session(f"kafkalog-{JOB}", master=args.master)
        results = delta_tables.append_rows(
            spark, (dict(r, run_id=run_id, run_at=run_at, verify_only=args.verify_only) for r in rows),
            RESULTS_SCHEMA, args.results, engine=args.delta_engine,
            metadata={"job": JOB, "run_id": run_id, "verify_only": str(args.verify_only).lower()})
        progress(f"{len(rows)} rows appended to {args.results} (Delta version {results['version']})")

    summary = summarize(rows)
    summary.update(log_dirs_refused=refused, verify_only=args.verify_only, include_active=args.include_active,
                   truncate_corrupt_tail=args.truncate_corrupt_tail, duration_s=round(time.monotonic() - started, 3))
    report = dict(job=JOB, run_id=run_id, run_at_ms=run_at, summary=summary, files=rows, results=results)
    _print_summary(summary)
    write_report(args.report, report)
    return EXIT_PARTIAL if summary["errors"] or refused else EXIT_OK


# Why reindex leaves the active segment alone: the only "skipped" it counts.
SKIPPED_WHY = ("the active segment: a broker writes its indexes as it appends and rebuilds them on an unclean "
               "start; --include-active checks them too")


def class_words(cls: str, n: int) -> str:
    """One class count of the summary, e.g. "12 identical"; a skip says why.

    :param cls: the row class (identical, valid, missing, corrupt, error, skipped).
    :param n: how many files or segments have it.
    """
    return f"{n} {cls} (the active segment{'s' if n != 1 else ''}, left alone without --include-active)" \
        if cls == "skipped" else f"{n} {cls}"


def _print_summary(s: dict) -> None:
    verb = "verified" if s["verify_only"] else "reindexed"
    print(f"reindex: {s['files']} index files in {s['partitions']} partitions {verb}"
          + (f"; {s['active_segments_skipped']} active segments skipped ({SKIPPED_WHY})"
             if s["active_segments_skipped"] else ""))
    for kind, counts in s["classes"].items():
        print(f"  {kind}: " + ", ".join(class_words(c, n) for c, n in sorted(counts.items())))
    for action, n in sorted(s["actions"].items()):
        print(f"  {action}: {n}")
    for c in s["corrupt"]:
        print(f"  corrupt: {c['partition_dir']}/{c['file']}: {c['reason']}")
    for e in s["errors"]:
        print(f"  error: {e['partition_dir']}{'/' + e['file'] if e['file'] else ''}: {e['message']}")
    for r in s["log_dirs_refused"]:
        print(f"  refused: {r['message']}")


def entry(argv: Optional[Sequence[str]] = None) -> int:
    from udfs.job import run
    return run(JOB, main, argv)
