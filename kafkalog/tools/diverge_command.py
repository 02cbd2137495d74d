"""``kafkalog diverge``: where several brokers' copies of each partition differ, one line or JSON object
per partition held by more than one log dir (``kafkalog.log.replica_divergence`` decides)."""
from __future__ import annotations

import json
import sys
from typing import Callable, List

from kafkalog.errors import UsageError
from kafkalog.tools.arguments import check_log_dir


def add_parser(subparsers, *, file_list: Callable, topic_name: Callable, write_line: Callable, warn: Callable
               ) -> None:
    """Add the ``diverge`` subcommand.

    :param subparsers: the ``kafkalog`` command's subparsers.
    :param file_list: the comma-separated list argument type.
    :param topic_name: the topic-name argument type.
    :param write_line: ``(stream, text)``: writes one line, as every subcommand does.
    :param warn: ``(command, text)``: a warning on stderr."""
    def topic_list(text: str) -> List[str]:
        return [topic_name(t) for t in file_list(text)]

    p = subparsers.add_parser(
        "diverge", help="where several brokers' copies of each partition differ, and what Kafka would truncate",
        description="Compare the replicas of every partition held by more than one of the log dirs (one per "
                    "broker): batch by batch across segments (base and last offset, leader epoch, CRC, producer "
                    "fields, attributes; segment boundaries do not count), and from the leader-epoch-checkpoints "
                    "what Kafka's leader-epoch truncation (OffsetsForLeaderEpoch) would keep on each follower. One "
                    "line per partition: identical, lagging (a prefix of the leader), compacted (differs only as "
                    "log cleaners make copies differ), ahead or diverged from an offset. Read-only. Exit 0 when no "
                    "partition diverged, 1 when one diverged, is ahead of the leader or could not be read.")
    p.add_argument("--log-dirs", required=True, type=file_list, metavar="DIR,DIR[,DIR...]",
                   help="REQUIRED: two or more log dirs, one per broker, comma-separated")
    p.add_argument("--topics", type=topic_list, default=None, metavar="TOPIC[,TOPIC...]",
                   help="only these topics (exact names; default: every topic held by two log dirs or more)")
    p.add_argument("--leader", default="epoch", metavar="epoch|longest|DIR",
                   help="the replica the others are judged against: epoch (default: the highest latest leader "
                        "epoch, then the longest log), longest (the longest log, then the highest epoch), or one "
                        "of the --log-dirs as given")
    p.add_argument("--json", action="store_true", help="one JSON object per partition instead of text")
    p.set_defaults(handler=lambda args: run(args, write_line=write_line, warn=warn))


def run(args, *, write_line: Callable, warn: Callable) -> int:
    """Run ``kafkalog diverge``; returns the exit code (UsageError for bad arguments).

    :param args: the parsed arguments.
    :param write_line: ``(stream, text)``: writes one line.
    :param warn: ``(command, text)``: a warning on stderr."""
    from kafkalog.log.replica_divergence import AHEAD, DIVERGED, LEADER_POLICIES, diverge_log_dirs

    if len(args.log_dirs) < 2:
        raise UsageError("give two log dirs or more (one per broker) to compare")
    for log_dir in args.log_dirs:
        check_log_dir(log_dir)
    if args.leader not in LEADER_POLICIES and args.leader not in args.log_dirs:
        raise UsageError(f"--leader {args.leader!r} is neither {' nor '.join(LEADER_POLICIES)} nor one of --log-dirs")
    results = diverge_log_dirs(args.log_dirs, topics=args.topics, leader=args.leader)
    for r in results:
        write_line(sys.stdout, json.dumps(r.to_dict(), sort_keys=True) if args.json else r.describe())
    if not results:
        warn("diverge", "no partition is held by more than one of the log dirs")
    return 1 if any(r.error or r.verdict in (DIVERGED, AHEAD) for r in results) else 0
