"""``kafkalog compact``: Kafka's log compaction of one log dir in this process, no Spark — the rounds
``spark-submit.sh compact`` runs as tasks, one partition after another, with the same JSON report,
the same lock rule (a log dir a broker holds is refused; a dry run plans it with a warning) and the
same fence (nothing is changed once the lock is lost).
"""
from __future__ import annotations

import argparse
import sys

from kafkalog.errors import UsageError
from kafkalog.tools import offline_job

COMMAND = "compact"
CLEANED, WOULD_CLEAN, ERROR = "cleaned", "would-clean", "error"     # kafkalog.cleaner.partition_run's statuses
OUTPUT_DIR_HINT = ("compact it into a new place instead: --output-dir DIR_OR_URI writes the compacted copy (local or "
                   "s3://...) and leaves this one as it is; or --dry-run to plan")


def _explain_target(text: str):
    topic, sep, rest = text.rpartition(":")
    topic, sep2, partition = topic.rpartition(":")
    if not (sep and sep2 and topic and partition.isdigit() and rest.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r} is not TOPIC:PARTITION:OFFSET (integers >= 0)")
    return topic, int(partition), int(rest)


def add_parser(subparsers) -> None:
    """The ``compact`` subcommand."""
    p = subparsers.add_parser(
        COMMAND, help="compact one log dir's compacted topics as Kafka's log cleaner does (no Spark)",
        description="Compact every partition of one log dir whose cleanup.policy contains compact and whose dirty "
                    "ratio is above min.cleanable.dirty.ratio (or max.compaction.lag.ms passed), one partition after "
                    "the other in this process, as Kafka's log cleaner would; the same rounds and JSON report as "
                    "`spark-submit.sh compact`. A log dir whose .lock a broker holds is refused (a --dry-run plans it "
                    "with a warning). --output-dir writes the compacted copy elsewhere (a local folder or a URI) and "
                    "only reads the log dir. Exit 0 done, 1 some partition failed (its row says why; nothing of it "
                    "changed), 2 bad arguments.")
    offline_job.add_common_arguments(p)
    p.add_argument("--dry-run", action="store_true", help="compute everything, change nothing")
    p.add_argument("--explain", action="append", default=[], type=_explain_target, metavar="TOPIC:PARTITION:OFFSET",
                   help="print why that record is kept or removed (repeatable)")
    p.add_argument("--output-dir", metavar="DIR_OR_URI",
                   help="write the compacted log dir there (a new or empty local folder, or any pyarrow.fs URI such "
                        "as s3://bucket/prefix) and leave the log dir as it is; a rerun after a kill finishes it")
    p.set_defaults(handler=run)


def run(args) -> int:
    """The command: 0 done, 1 some partition failed."""
    from kafkalog.cleaner.log_dir_run import compact_log_dir    # numba and the kernels: only when run
    configs, topics = offline_job.load(args, COMMAND)
    for topic, partition, offset in args.explain:
        if topics is not None and topic not in topics:
            raise UsageError(f"--explain {topic}:{partition}:{offset}: --topics leaves {topic} out")
    if args.output_dir is not None and args.dry_run:
        raise UsageError("--dry-run writes nothing, --output-dir writes a copy: give one of them")
    if args.output_dir is None and not args.dry_run:
        from kafkalog.fs.filesystem import refuse_uris
        refuse_uris([args.log_dir], COMMAND, hint=OUTPUT_DIR_HINT)
    report = compact_log_dir(args.log_dir, configs=configs, now_ms=args.now_ms, dry_run=args.dry_run, topics=topics,
                             explain=args.explain, output_dir=args.output_dir)
    print_summary(report)
    offline_job.write_report(args.report, report, COMMAND)
    return 1 if report["summary"]["statuses"].get(ERROR) or report["summary"].get("output_unfinished") else 0


def print_summary(report: dict) -> None:
    """The report in a few lines: the totals, then one line per partition."""
    from kafkalog.cleaner.log_dir_run import summary_lines

    for w in report["summary"].get("warnings", ()):
        print(f"kafkalog {COMMAND}: warning: {w}", file=sys.stderr)
    for line in summary_lines(report):
        print(line)
