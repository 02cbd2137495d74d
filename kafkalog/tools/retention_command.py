"""``kafkalog retention``: Kafka's time and size retention of one log dir in this process, no Spark —
the decisions ``spark-submit.sh retention`` makes in tasks, with the same JSON report; a plan unless
``--execute``, which holds the dir's lock (a log dir a broker holds is refused) and rewrites
``log-start-offset-checkpoint`` once at the end, as the Spark job's driver does.
"""
from __future__ import annotations

import sys

from kafkalog.log.local_log import HW_MISSING_CHOICES, HW_MISSING_ZERO
from kafkalog.lookup.time_spec import format_epoch_ms
from kafkalog.tools import offline_job

COMMAND = "retention"
ERROR = "error"            # kafkalog.retention.run's status of a partition that failed


def add_parser(subparsers) -> None:
    """The ``retention`` subcommand."""
    p = subparsers.add_parser(
        COMMAND, help="plan (or --execute) one log dir's retention as a broker's deleteOldSegments (no Spark)",
        description="Decide every segment of one log dir as a broker's retention task would at --now-ms "
                    "(retention.ms, retention.bytes, the log start offset), in this process; the same decisions and "
                    "JSON report as `spark-submit.sh retention`. A plan (dry run) unless --execute, which renames "
                    "the segments .deleted and rewrites log-start-offset-checkpoint, holding the dir's .lock: a log "
                    "dir a broker holds is refused. Exit 0 done, 1 some partition failed, 2 bad arguments.")
    offline_job.add_common_arguments(p)
    p.add_argument("--execute", action="store_true", help="apply the plan (default: a dry run that changes nothing)")
    p.add_argument("--high-watermark-missing", choices=HW_MISSING_CHOICES, default=HW_MISSING_ZERO,
                   help=f"what a missing replication-offset-checkpoint entry means (default {HW_MISSING_ZERO}, "
                        "as a broker)")
    p.add_argument("--delete-delay-ms", type=int, default=None, metavar="MS",
                   help="remove .deleted files after this long (default: file.delete.delay.ms)")
    p.set_defaults(handler=run)


def run(args) -> int:
    """The command: 0 done, 1 some partition failed."""
    from kafkalog.retention.log_dir_run import retain_log_dir    # the planner's modules: only when run
    configs, topics = offline_job.load(args, COMMAND)
    report = retain_log_dir(args.log_dir, configs=configs, now_ms=args.now_ms, execute=args.execute,
                            hw_missing=args.high_watermark_missing, delete_delay_ms=args.delete_delay_ms, topics=topics)
    print_summary(report)
    offline_job.write_report(args.report, report, COMMAND)
    return 1 if report["summary"]["statuses"].get(ERROR) else 0


def print_summary(report: dict) -> None:
    """The report in a few lines: the totals, one line per topic, the errors."""
    s, executed = report["summary"], report["executed"]
    for w in s.get("warnings", ()):
        print(f"kafkalog {COMMAND}: warning: {w}", file=sys.stderr)
    verb = "freed" if executed else "to be freed"
    print(f"retention {'applied' if executed else 'plan (dry run)'} as of {format_epoch_ms(report['now_ms'])}: "
          f"{s['segments_deleted']} of {s['segments']} segments, {s['bytes_freed']:,} bytes {verb}")
    for topic, t in s["topics"].items():
        print(f"  {topic}: {t['segments_deleted']} segments, {t['bytes_freed']:,} bytes {verb} in "
              f"{t['partitions']} partitions")
    for e in s["errors"]:
        print(f"  error: {e['partition_dir']}: {e['message']}")
    if not executed and s["segments_deleted"]:
        print("  (dry run: nothing was changed; add --execute to apply)")
