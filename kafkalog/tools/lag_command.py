"""``kafkalog lag``: consumer lag from log dirs alone, printed as ``kafka-consumer-groups.sh
--describe`` prints it (one table row per group, topic and partition) or as JSON lines."""
from __future__ import annotations

import json
import sys
import time
from typing import List

from kafkalog.errors import UsageError
from kafkalog.coordinator.lag import DEFAULT_OFFSETS_RETENTION_MS, check_groups
from kafkalog.coordinator.log_dirs import CONSUMER_OFFSETS_TOPIC, consumer_lag, live_partitions

HEADER = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "STATUS", "NOTE")
UNKNOWN_CELL = "-"


def format_table(rows: List[dict]) -> List[str]:
    """The lag rows as an aligned text table; LOG-END-OFFSET is the high watermark, as in
    kafka-consumer-groups.sh (ListOffsets latest, read_uncommitted)."""
    cells = [HEADER] + [tuple(UNKNOWN_CELL if v is None else str(v) for v in (
        r["group"], r["topic"], r["partition"], r["committed_offset"], r["high_watermark"], r["lag"],
        r["status"] + (" expired" if r["expired"] else ""), r["note"] or "")) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
    return [" ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]


def run(args) -> int:
    """The command: 0 done, 1 done but some partition could not be read (stderr says which)."""
    if not live_partitions(args.log_dirs, CONSUMER_OFFSETS_TOPIC):
        raise UsageError(f"no {CONSUMER_OFFSETS_TOPIC}-<partition> folder in {', '.join(args.log_dirs)}",
                         hint="pass the log dirs of the brokers that hosted the group coordinators "
                              "(kafkalog demo DIR --consumer-groups 3 writes an example)")
    now_ms = args.now_ms if args.now_ms is not None else int(time.time() * 1000)
    report = consumer_lag(args.log_dirs, groups=args.group or (), patterns=args.group_pattern or (),
                          now_ms=now_ms, retention_ms=args.offsets_retention_ms)
    check_groups(args.group or (), report.loaded.seen_groups, complete=not report.errors)
    if args.json:
        for row in report.rows:
            print(json.dumps(row))
        print(json.dumps({"type": "summary", "now_ms": now_ms, **report.summary()}))
    else:
        for line in format_table(report.rows):
            print(line)
    for error in report.errors:
        print(f"kafkalog lag: error: {error}", file=sys.stderr)
    return 1 if report.errors else 0


def add_arguments(p) -> None:
    p.add_argument("--group", action="append", metavar="GROUP", help="a group id (repeatable; default: every group)")
    p.add_argument("--group-pattern", action="append", metavar="REGEX",
                   help="groups whose id fully matches this regular expression (repeatable)")
    p.add_argument("--offsets-retention-ms", type=int, default=DEFAULT_OFFSETS_RETENTION_MS, metavar="MS",
                   help="the brokers' offsets.retention.minutes in ms, for the expiry column (default: 7 days)")
    p.add_argument("--json", action="store_true", help="one JSON object per row, then a summary object")
