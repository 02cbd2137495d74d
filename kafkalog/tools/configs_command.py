"""``kafkalog configs --describe``: every topic's effective log configs and where each came from —
topic override, broker key or synonym in server.properties, Kafka default — printed as
``kafka-configs.sh --describe --all`` prints them, so an operator checks what a job will use before
``--execute``. The jobs take the same arguments and ``--describe-configs``.
"""
from __future__ import annotations

import json
import sys

from kafkalog.config import load_configs
from kafkalog.errors import UsageError
from kafkalog.tools.arguments import check_log_dir, file_list

COMMAND = "configs"


def add_parser(subparsers) -> None:
    """The ``configs`` subcommand."""
    p = subparsers.add_parser(
        COMMAND, help="describe each topic's effective configs and their sources, as kafka-configs.sh --describe --all",
        description="For every topic of the log dirs (and every topic named in --topic-config): each topic config's "
                    "value and its synonyms — DYNAMIC_TOPIC_CONFIG (a --topic-config or --topic-config-file "
                    "override), "
                    "STATIC_BROKER_CONFIG (a key of --broker-config, e.g. log.retention.hours) and DEFAULT_CONFIG "
                    "(Kafka's default) — in Kafka's precedence; the first is the value a job uses.")
    p.add_argument("--describe", action="store_true", required=True, help="REQUIRED: describe (the only action)")
    p.add_argument("--log-dirs", type=file_list, default=[], metavar="DIR[,DIR...]",
                   help="the log dirs whose topics to describe")
    p.add_argument("--topics", metavar="T[,T...]", help="only these topics")
    p.add_argument("--sources", action="store_true", help="add kafkalog's words for each source (which flag or file)")
    p.add_argument("--json", action="store_true", help="one JSON object per topic")
    p.add_argument("--broker-config", metavar="server.properties", help="the broker's server.properties")
    p.add_argument("--topic-config", action="append", default=[], metavar="TOPIC:KEY=VALUE",
                   help="a per-topic override (repeatable)")
    p.add_argument("--topic-config-file", action="append", default=[], metavar="TOPIC:PATH",
                   help="a .properties file of topic configs for TOPIC (repeatable)")
    p.set_defaults(handler=run)


def run(args) -> int:
    """The command: 0 described."""
    from kafkalog.config_describe import describe_configs, describe_lines
    from kafkalog.log.logdir import partition_folders, topic_of_folder

    configs = load_configs(broker_config=args.broker_config, topic_configs=args.topic_config,
                           topic_config_files=args.topic_config_file)
    held = set()
    for log_dir in args.log_dirs:
        check_log_dir(log_dir)
        held |= {t for t in (topic_of_folder(f) for f in partition_folders(log_dir)) if t}
    topics = held | set(configs.topic_named_in)
    if args.topics:
        wanted = {t for t in args.topics.split(",") if t}
        unknown = sorted(wanted - topics)
        if unknown:
            raise UsageError(f"--topics: {', '.join(unknown)} is in no log dir given and in no --topic-config",
                             hint=f"topics known: {', '.join(sorted(topics)[:20]) or 'none (pass --log-dirs)'}")
        topics = wanted
    if not topics:
        raise UsageError("no topic to describe", hint="pass --log-dirs (every topic there) or --topic-config")
    for warning in configs.warnings:
        print(f"kafkalog {COMMAND}: warning: {warning}", file=sys.stderr)
    described = describe_configs(configs, topics)
    if args.json:
        for topic, entries in described.items():
            print(json.dumps({"topic": topic, "configs": [
                {"name": e.name, "value": e.value, "source": e.source, "where": e.where,
                 "synonyms": [{"source": s, "name": k, "value": v} for s, k, v in e.synonyms]} for e in entries]}))
    else:
        for line in describe_lines(described, where=args.sources):
            print(line)
    return 0
