"""``spark-submit.sh asof``: a compacted topic as a table as of a time (or offsets), written to a Delta
table — the KTable a consumer replaying the topic held then (``kafkalog.source.as_of``: the cut per
partition, tombstones, transactions, what compaction has left answerable).

Why a job of its own and not ``export --as-of``: export appends every record exactly once, incrementally,
under a streaming checkpoint; an as-of table is a snapshot, one row per live key, that replaces the
table's content (Delta ``overwrite``: each run is a new table version, so Delta's own time travel keeps
the earlier snapshots). The job is the data source read a user would write by hand —
``spark.read.format("kafkalog").option("asOfOffsets", cuts)`` — with the cuts planned once in the driver,
checked per partition, reported, and the result written in one Delta commit.

Per partition: a cut the log dirs cannot answer exactly (the cleaner compacted past it, or records below
the log start were deleted) is reported with its reason and left out of the table (exit 1), unless
``--incomplete warn`` writes what is held and flags it.
"""
from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Optional, Sequence

from kafkalog.errors import UsageError
from kafkalog.source.as_of import plan_as_of
from kafkalog.source.options import SourceOptionError, parse_source_options

from udfs import delta_tables
from udfs.job import (EXIT_OK, EXIT_PARTIAL, add_config_arguments, base_parser, progress, start_job, table_path,
                      write_report)
from udfs.session import build_session

JOB = "asof"
DESCRIPTION = ("A compacted topic as a table as of a time or offsets (latest value per key, tombstones and "
               "transactions applied), written to a Delta table.")


def build_parser():
    parser = base_parser(JOB, DESCRIPTION, epilog=(
        "The cut of a partition is ListOffsets(--as-of): the first offset whose record timestamp is >= the time\n"
        "(the latest offset when none is); every record below it counts in offset order, the latest per key wins,\n"
        "a tombstone deletes, aborted transactions and those still open at the cut do not count. The table has\n"
        "the columns of spark.read.format(\"kafkalog\") (Spark's Kafka source), one row per live key, and is\n"
        "replaced on each run (a new Delta version). A partition compacted past its cut, or with records deleted\n"
        "below its log start, cannot be answered exactly: reported and left out (exit 1), or with\n"
        "--incomplete warn written as held and flagged. Nothing in the log dirs is modified."))
    when = parser.add_mutually_exclusive_group(required=True)
    when.add_argument("--as-of", metavar="TIME", help="epoch ms or ISO-8601 (e.g. 2026-11-27T03:00:00Z)")
    when.add_argument("--as-of-offsets", metavar="JSON",
                      help='per-partition cut offsets, as startingOffsets: {"topic":{"0":123}} (-2 earliest, -1 latest)')
    parser.add_argument("--topics", metavar="T[,T...]", help="only these topics (default: every topic)")
    parser.add_argument("--table", metavar="PATH", type=table_path, required=True,
                        help="Delta table to write (its content replaced)")
    parser.add_argument("--incomplete", choices=("error", "warn"), default="error",
                        help="a partition the log dirs cannot answer exactly: leave it out and exit 1 (error), or "
                             "write what is held and flag it (warn)")
    parser.add_argument("--include-headers", action="store_true", help="add the headers column")
    parser.add_argument("--dry-run", action="store_true", help="plan the cuts and report them; read and write nothing")
    add_config_arguments(parser)      # a topic whose cleanup.policy has no compact is answered, with a warning
    return parser


def policy_warnings(args, configs, topics) -> dict:
    """{topic: warning} for the topics whose cleanup.policy (from --broker-config / --topic-config*, when
    given: the log dirs do not hold topic configs) has no compact: answered all the same — the table is
    as well defined — but a topic that is not a table is seldom what was meant."""
    if not (args.broker_config or args.topic_config or args.topic_config_file):
        return {}
    return {t: f"{t}: cleanup.policy={','.join(configs.for_topic(t).cleanup_policy)} has no compact: the as-of "
               "table of every key's latest record is answered all the same"
            for t in sorted(topics) if not configs.for_topic(t).compact}


def source_options(args, log_dirs) -> dict:
    """The data source's options for this command line (the cuts not yet fixed)."""
    options = {"path": ",".join(str(d) for d in log_dirs), "includeHeaders": str(bool(args.include_headers)).lower()}
    if args.as_of is not None:
        options["asOf"] = args.as_of
    else:
        options["asOfOffsets"] = args.as_of_offsets
    if args.topics:
        options["subscribe"] = args.topics
    return options


def main(argv: Sequence[str], *, spark=None) -> int:
    args, configs, log_dirs, _now, run_id, run_at, started = start_job(build_parser(), argv)
    options = source_options(args, log_dirs)
    try:
        parsed = parse_source_options(options)      # a bad --as-of / JSON: a usage error, before Spark starts
    except SourceOptionError as exc:
        raise UsageError(str(exc).replace("option asOfOffsets", "--as-of-offsets").replace("option asOf", "--as-of")) \
            from None
    plan = plan_as_of(replace(parsed, as_of_incomplete="warn"))
    warnings = policy_warnings(args, configs, {p.topic for p in plan.partitions})
    for warning in warnings.values():
        progress(f"warning: {warning}")
    partitions = [dict(p.to_dict(), policy_warning=warnings.get(p.topic)) for p in plan.partitions]
    kept = [p for p in plan.partitions if p.problem is None or args.incomplete == "warn"]
    for p in plan.partitions:
        status = "exact" if p.problem is None else ("incomplete, written" if args.incomplete == "warn" else "left out")
        progress(f"{p.topic}-{p.partition}: cut at offset {p.cut} ({p.requested}): {status}"
                 + (f" — {p.problem}" if p.problem else ""))
    if not plan.partitions:
        raise UsageError(f"no partition to read in {', '.join(map(str, log_dirs))}"
                         + (f" for topics {args.topics}" if args.topics else ""))
    output, rows = None, None
    if not args.dry_run and kept:
        cuts: dict = {}
        for p in kept:
            cuts.setdefault(p.topic, {})[str(p.partition)] = p.cut
        read = {k: v for k, v in options.items() if k not in ("asOf", "asOfOffsets", "subscribe")}
        read.update(asOfOffsets=json.dumps(cuts), asOfIncomplete=args.incomplete)
        spark = spark or build_session(f"kafkalog-{JOB}", master=args.master)
        reader = spark.read.format("kafkalog")
        for k, v in read.items():
            reader = reader.option(k, v)
        result = delta_tables.write_table(reader.load(), args.table, mode=delta_tables.OVERWRITE,
                                          engine=args.delta_engine, metadata={"job": JOB, "run_id": run_id})
        output = result.to_dict()
        rows = result.rows
    left_out = [p for p in plan.partitions if p.problem is not None and args.incomplete != "warn"]
    summary = dict(partitions=len(plan.partitions), exact=sum(1 for p in plan.partitions if p.problem is None),
                   left_out=len(left_out), rows=rows, seconds=round(time.monotonic() - started, 3))
    print(f"{summary['partitions']} partitions: {summary['exact']} exact, {summary['left_out']} left out; "
          + ("dry run: nothing read or written" if args.dry_run else f"{rows if rows is not None else 0} rows "
             f"written to {args.table}"))
    write_report(args.report, dict(job=JOB, run_id=run_id, run_at_ms=run_at, dry_run=bool(args.dry_run),
                                   as_of=args.as_of, as_of_offsets=args.as_of_offsets, incomplete=args.incomplete,
                                   summary=summary, partitions=partitions, output=output))
    return EXIT_PARTIAL if left_out else EXIT_OK


def entry(argv: Optional[Sequence[str]] = None) -> int:
    from udfs.job import run

    return run(JOB, main, argv)
