"""What ``kafkalog compact`` and ``kafkalog retention`` share: the single-process versions of the Spark
jobs take the jobs' config arguments and rules (precedence topic override > broker > Kafka default; a
``--topic-config`` for a topic the log dir does not hold refused before anything is touched) and write
the jobs' JSON report, atomically.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Optional

from kafkalog.config import TOPIC_NOT_HELD_HINT, KafkaConfigs, load_configs, topics_not_held
from kafkalog.errors import ConfigError, UsageError
from kafkalog.fs.durable import AS_CREATED, replace_file
from kafkalog.log.logdir import partition_folders, topic_of_folder
from kafkalog.lookup.time_spec import parse_epoch_ms


def time_ms(text: str) -> int:
    """``--now-ms``: epoch ms or ISO-8601 (UTC unless it names a zone)."""
    try:
        return parse_epoch_ms(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    """--log-dir, --topics, --now-ms, --report and the config arguments of the Spark jobs."""
    p.add_argument("--log-dir", required=True, metavar="DIR",
                   help="REQUIRED: one Kafka log dir (a broker's log.dirs entry); the Spark job takes many")
    p.add_argument("--topics", metavar="T[,T...]", help="only these topics' partitions (default: every one)")
    p.add_argument("--now-ms", type=time_ms, metavar="TIME", help="'now': epoch ms or ISO-8601 (default: the clock)")
    p.add_argument("--report", metavar="PATH", help="write the JSON report (the Spark job's shape) here")
    group = p.add_argument_group("Kafka configuration (precedence: topic override > broker > Kafka default)")
    group.add_argument("--broker-config", metavar="server.properties", help="the broker's server.properties")
    group.add_argument("--topic-config", action="append", default=[], metavar="TOPIC:KEY=VALUE",
                       help="a per-topic override, e.g. orders:retention.ms=3600000 (repeatable)")
    group.add_argument("--topic-config-file", action="append", default=[], metavar="TOPIC:PATH",
                       help="a .properties file of topic configs for TOPIC (repeatable)")
    group.add_argument("--allow-absent-topic-configs", action="store_true",
                       help="let --topic-config name topics this log dir does not hold (warned about)")


def load(args, command: str) -> tuple[KafkaConfigs, Optional[set]]:
    """The configs and the ``--topics`` set, checked against the log dir before anything is touched:
    an unknown ``--topics`` name or a ``--topic-config`` topic the dir does not hold is an error."""
    from kafkalog.tools.arguments import check_log_dir
    check_log_dir(args.log_dir)
    try:        # a bad config is a bad argument here, as in the Spark jobs (exit 2): nothing was done
        configs = load_configs(broker_config=args.broker_config, topic_configs=args.topic_config,
                               topic_config_files=args.topic_config_file, strict=True)
    except ConfigError as e:
        raise UsageError(e.message, path=e.path, hint=e.hint) from None
    held = {t for t in (topic_of_folder(f) for f in partition_folders(args.log_dir)) if t}
    topics = None if not args.topics else {t for t in args.topics.split(",") if t}
    if topics is not None:
        unknown = sorted(topics - held)
        if unknown or not topics:
            raise UsageError(f"--topics: no partition folder of {', '.join(unknown) or 'any topic'} in {args.log_dir}",
                             hint=f"topics there: {', '.join(sorted(held)[:20]) or 'none'}")
    messages = topics_not_held(configs, held, held_in=args.log_dir)
    if messages and not args.allow_absent_topic_configs:
        raise UsageError("; ".join(messages), hint=f"{TOPIC_NOT_HELD_HINT}; --allow-absent-topic-configs lets "
                          "one set of overrides cover topics held elsewhere")
    for message in messages + list(configs.warnings):
        print(f"kafkalog {command}: warning: {message}", file=sys.stderr)
    return configs, topics


def write_report(path: Optional[str], report: dict, command: str) -> None:
    """Write ``report`` as JSON to ``path`` (a temporary file renamed over it)."""
    if not path:
        return
    data = json.dumps(report, indent=2, default=str).encode("utf-8") + b"\n"
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    replace_file(target, data, owner=AS_CREATED)
    print(f"kafkalog {command}: report written to {os.fspath(target)}", file=sys.stderr)
