"""``spark-submit.sh diverge``: where several brokers' copies of each partition differ, in parallel. The driver
only lists the brokers' log dirs (folder names); each partition held by more than one broker is one task row,
and the task reads and compares its replicas with the same function ``kafkalog diverge`` uses
(``kafkalog.log.replica_divergence.diverge_partition``). Partitions held by one broker are listed, not compared.

Brokers are named the way an operator names them: ``--broker ID=DIR[,DIR...]`` (repeatable) gives one broker's
log.dirs (a JBOD broker has several; a partition lives in one of them), and the replicas are named by the
broker id; ``--log-dirs A,B`` is one log dir per broker, named by its path, exactly as ``kafkalog diverge``.
"""
from __future__ import annotations

import argparse
import json
import os
from typing import Dict, List, Optional, Sequence, Tuple

import pyarrow as pa

from kafkalog.errors import KafkalogError, UsageError
from kafkalog.log.logdir import scan_log_dir, scan_partition_dir
from kafkalog.fs.names import LIVE
from kafkalog.log.replica_divergence import (AHEAD, DIVERGED, LEADER_POLICIES, PartitionDivergence,
                                             diverge_partition)
from kafkalog.tools.arguments import check_log_dir

from udfs import delta_tables
from udfs.job import (EXIT_OK, EXIT_PARTIAL, add_html_argument, base_parser, locked_log_dirs, now_ms, progress,
                      table_path, write_html, write_report)
from udfs.partitions import folders_frame, map_folders
from udfs.progress import count_folders
from udfs.session import build_session

JOB = "diverge"
DESCRIPTION = ("Where several brokers' copies of each partition differ (batch headers and CRCs across segments), "
               "which replica is ahead, and what Kafka's leader-epoch truncation would keep on each. Read-only.")

# one row per replica of a compared partition, one per single-broker partition, one per partition that failed
ROW_SCHEMA = pa.schema([
    pa.field("run_id", pa.string()), pa.field("run_at_ms", pa.int64()),
    pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
    pa.field("status", pa.string()),              # compared | single | error
    pa.field("verdict", pa.string()),             # the partition's (worst) verdict; null unless compared
    pa.field("partition_first_differing_offset", pa.int64()),
    pa.field("leader", pa.string()), pa.field("leader_policy", pa.string()),
    pa.field("replica", pa.string()), pa.field("log_dir", pa.string()), pa.field("partition_dir", pa.string()),
    pa.field("replica_verdict", pa.string()), pa.field("is_leader", pa.bool_()),
    pa.field("log_start_offset", pa.int64()), pa.field("log_end_offset", pa.int64()),
    pa.field("latest_epoch", pa.int32()), pa.field("first_differing_offset", pa.int64()),
    pa.field("lag", pa.int64()), pa.field("kept_offset", pa.int64()), pa.field("truncated", pa.int64()),
    pa.field("detail", pa.string()), pa.field("error", pa.string()),
])
TASK_SCHEMA = pa.schema(list(ROW_SCHEMA) + [pa.field("partition_json", pa.string())])


# --- command line --------------------------------------------------------------------------------

def broker_group(text: str) -> Tuple[str, List[str]]:
    """``--broker ID=DIR[,DIR...]``: a broker's name (its node.id, or any name) and its log dirs."""
    name, sep, dirs = text.partition("=")
    name = name.strip()
    paths = [d for d in dirs.split(",") if d]
    if not sep or not name or not paths:
        raise argparse.ArgumentTypeError(f"{text!r}: give ID=DIR[,DIR...], e.g. 1=/data/b1/logs,/data/b1/logs2")
    return name, paths


def build_parser():
    parser = base_parser(JOB, DESCRIPTION, epilog=(
        "Brokers: --broker ID=DIR[,DIR...] (repeatable: one broker's log.dirs, replicas named by ID), or\n"
        "--log-dirs A,B,... (one log dir per broker, replicas named by path, as `kafkalog diverge`).\n"
        "Rows (the report's 'rows' and the --output Delta table): one per replica of each partition held by\n"
        "two brokers or more (status compared: replica_verdict identical|lagging|ahead|compacted|diverged,\n"
        "first differing offset, lag, kept_offset = its log end after Kafka's leader-epoch truncation,\n"
        "truncated), one per partition held by one broker (status single, not compared), one per partition\n"
        "that could not be read (status error). Exit 0: nothing diverged; 1: a partition diverged, is ahead of\n"
        "the leader or could not be read (as `kafkalog diverge`). Nothing in the log dirs is modified."))
    parser.add_argument("--broker", action="append", type=broker_group, default=[], metavar="ID=DIR[,DIR...]",
                        help="one broker's log dirs (repeatable, two brokers or more)")
    parser.add_argument("--topics", metavar="TOPIC[,TOPIC...]", help="only these topics (exact names)")
    parser.add_argument("--leader", default="epoch", metavar="epoch|longest|BROKER",
                        help="the replica the others are judged against: epoch (default: the highest latest leader "
                             "epoch, then the longest log), longest, or a broker's ID (--broker) or log dir (--log-dirs)")
    parser.add_argument("--output", metavar="PATH", type=table_path, help="Delta table the rows are appended to")
    parser.add_argument("--dry-run", action="store_true", help="compare and report, but write no table")
    add_html_argument(parser)
    return parser


def brokers_of(args) -> Dict[str, List[str]]:
    """The brokers and their log dirs, in the order given; every dir checked; a dir named twice, a broker named
    twice or fewer than two brokers is a UsageError."""
    brokers: Dict[str, List[str]] = {}
    for name, dirs in args.broker:
        if name in brokers:
            raise UsageError(f"--broker {name} is given twice", hint="give each broker once, with all its log dirs")
        brokers[name] = dirs
    for group in args.log_dirs or ():
        for d in group:
            if d in brokers:
                raise UsageError(f"log dir {d} is given twice")
            brokers[d] = [d]
    if len(brokers) < 2:
        raise UsageError("give two brokers or more: --broker ID=DIR[,DIR...] per broker, or --log-dirs A,B "
                         "(one log dir per broker)")
    seen: Dict[str, str] = {}
    for name, dirs in brokers.items():
        for d in dirs:
            check_log_dir(d)
            key = os.path.realpath(d)
            if key in seen:
                raise UsageError(f"log dir {d} is given twice (broker {seen[key]} and broker {name})")
            seen[key] = name
    if args.leader not in LEADER_POLICIES and args.leader not in brokers:
        raise UsageError(f"--leader {args.leader!r} is neither {' nor '.join(LEADER_POLICIES)} nor a broker given "
                         f"({', '.join(brokers)})")
    return brokers


# --- the plan: which partitions each broker holds (folder names only) ------------------------------

Replica = Tuple[str, str, str]          # (broker name, log dir as given, partition folder)


def held_partitions(brokers: Dict[str, List[str]], topics: Optional[set]) -> Dict[Tuple[str, int], List[Replica]]:
    """Every live partition folder of each broker's log dirs, by (topic, partition), brokers in the order given.
    With ``topics``: a topic no broker holds, or a broker holding none of them, is a UsageError (before any
    segment is read)."""
    held: Dict[Tuple[str, int], List[Replica]] = {}
    per_broker: Dict[str, set] = {}
    for name, dirs in brokers.items():
        per_broker[name] = set()
        for d in dirs:
            absolute = os.path.abspath(d)       # Spark's Python workers need not share the driver's cwd
            for p in scan_log_dir(absolute).partitions:
                if p.kind == LIVE:
                    held.setdefault((p.topic, p.partition), []).append((name, absolute, str(p.path)))
                    per_broker[name].add(p.topic)
    if topics:
        present = sorted({t for t, _ in held})
        unknown = sorted(topics - set(present))
        if unknown:
            raise UsageError(f"--topics: {', '.join(unknown)} in none of the brokers' log dirs",
                             hint=f"topics there: {', '.join(present[:20]) or 'none'}")
        for name, mine in per_broker.items():
            if not mine & topics:
                raise UsageError(f"broker {name} ({', '.join(brokers[name])}) holds none of --topics "
                                 f"{', '.join(sorted(topics))}", hint="check the broker's log dirs, or leave it out")
        held = {k: v for k, v in held.items() if k[0] in topics}
    return dict(sorted(held.items()))


# --- the task: one partition compared --------------------------------------------------------------

def rows_of(result: PartitionDivergence, replicas: Sequence[Replica]) -> List[dict]:
    """The table rows of one compared partition (one per replica), or one error row."""
    where = {name: (log_dir, folder) for name, log_dir, folder in replicas}
    base = dict(topic=result.topic, partition=result.partition, leader=result.leader,
                leader_policy=result.leader_policy, partition_json=json.dumps(result.to_dict(), sort_keys=True))
    if result.error:
        return [dict(base, status="error", verdict="error", error=result.error,
                     log_dir=",".join(d for _, d, _ in replicas))]
    rows = []
    for r in result.replicas:
        log_dir, folder = where[r.name]
        rows.append(dict(base, status="compared", verdict=result.verdict,
                         partition_first_differing_offset=result.first_differing_offset, replica=r.name,
                         log_dir=log_dir, partition_dir=folder, replica_verdict=r.verdict, is_leader=r.is_leader,
                         log_start_offset=r.log_start_offset, log_end_offset=r.log_end_offset,
                         latest_epoch=r.latest_epoch, first_differing_offset=r.first_differing_offset, lag=r.lag,
                         kept_offset=r.kept_offset, truncated=r.truncated, detail=r.detail))
    return rows


def compare_task(leader: str):
    """The per-partition function: the task row's first column is the replicas as JSON, the second its name."""
    def run(replicas_json: str, label: str, cache: dict) -> list:
        replicas = [tuple(r) for r in json.loads(replicas_json)]
        names = [name for name, _, _ in replicas]
        topic, _, part = label.rpartition("-")

        def error(message: str) -> list:
            return [dict(topic=topic, partition=int(part), status="error", verdict="error", error=message,
                         leader_policy=leader, log_dir=",".join(d for _, d, _ in replicas))]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:                     # Kafka refuses to start with a partition in two of its log dirs
            return error(f"broker {', '.join(twice)} holds {label} in two log dirs "
                         f"({', '.join(f for n, _, f in replicas if n in twice)}); a broker refuses that")
        try:
            pdirs = [scan_partition_dir(folder, log_dir=log_dir) for _, log_dir, folder in replicas]
        except (OSError, KafkalogError) as e:      # a folder's trouble is its row, never a failed task
            return error(str(e))
        result = diverge_partition(pdirs, names=names, leader=leader)
        return rows_of(result, replicas)
    return run


def single_rows(held: Dict[Tuple[str, int], List[Replica]]) -> List[dict]:
    """Partitions held by one broker: listed, not compared."""
    return [dict(topic=t, partition=p, status="single", replica=name, log_dir=d, partition_dir=folder,
                 detail="held by one broker only: not compared")
            for (t, p), reps in held.items() if len(reps) == 1 for name, d, folder in reps]


# --- the job ---------------------------------------------------------------------------------------

def main(argv: Sequence[str], *, spark=None) -> int:
    import time
    import uuid

    args = build_parser().parse_args(argv)
    brokers = brokers_of(args)
    topics = None if not args.topics else {t for t in args.topics.split(",") if t}
    with locked_log_dirs([d for dirs in brokers.values() for d in dirs], modifying=False,
                         read_only_note="compared as it is now: a running broker may still be appending"):
        pass                          # read-only: a broker's lock is a warning, not a refusal
    held = held_partitions(brokers, topics)
    shared = [(json.dumps(reps), f"{t}-{p}") for (t, p), reps in held.items() if len(reps) > 1]
    run_id, run_at, started = uuid.uuid4().hex, now_ms(), time.monotonic()
    rows: List[dict] = []
    partitions: List[dict] = []
    if shared:
        spark = spark or build_session(f"kafkalog-{JOB}", master=args.master)
        progress(f"comparing {len(shared)} partition(s) held by two brokers or more ({len(brokers)} brokers)")
        counter = count_folders(spark, len(shared), "comparing replicas", shared)
        task_rows = [r.asDict() for r in map_folders(folders_frame(spark, shared), compare_task(args.leader),
                                                    TASK_SCHEMA, counter=counter).collect()]
        task_rows.sort(key=lambda r: (r["topic"], r["partition"], r["replica"] or ""))
        seen = set()
        for r in task_rows:
            if (r["topic"], r["partition"]) not in seen:
                seen.add((r["topic"], r["partition"]))
                partitions.append(json.loads(r["partition_json"]) if r["partition_json"] else
                                  dict(topic=r["topic"], partition=r["partition"], verdict="error", error=r["error"]))
            rows.append({k: v for k, v in r.items() if k != "partition_json"})
        partitions.sort(key=lambda p: (p["topic"], p["partition"]))
    singles = single_rows(held)
    rows.extend(singles)
    rows = [{**{f.name: None for f in ROW_SCHEMA}, **r, "run_id": run_id, "run_at_ms": run_at} for r in rows]

    table = None
    if args.output and not args.dry_run and rows:
        spark = spark or build_session(f"kafkalog-{JOB}", master=args.master)
        table = delta_tables.append_rows(spark, rows, ROW_SCHEMA, args.output, engine=args.delta_engine,
                                         metadata={"job": JOB, "run_id": run_id})
        progress(f"{len(rows)} rows appended to {args.output}")
    by_verdict: dict = {}
    for p in partitions:
        by_verdict[p["verdict"]] = by_verdict.get(p["verdict"], 0) + 1
    errors = [f"{p['topic']}-{p['partition']}: {p['error']}" for p in partitions if p.get("error")]
    failing = [p for p in partitions if p.get("error") or p["verdict"] in (DIVERGED, AHEAD)]
    summary = dict(brokers=len(brokers), partitions_compared=len(partitions), partitions_single=len(singles),
                   by_verdict=by_verdict, diverged=by_verdict.get(DIVERGED, 0),
                   truncated_offsets=sum(r["truncated"] or 0 for r in rows), errors=len(errors),
                   duration_s=round(time.monotonic() - started, 3))
    report = dict(job=JOB, run_id=run_id, run_at_ms=run_at, brokers={n: list(d) for n, d in brokers.items()},
                  leader_policy=args.leader, topics=sorted(topics) if topics else None, dry_run=bool(args.dry_run),
                  summary=summary, table=table, partitions=partitions,
                  single=[dict(topic=r["topic"], partition=r["partition"], broker=r["replica"]) for r in singles],
                  rows=rows, errors=errors)
    for p in partitions:
        print(partition_line(p))
    if not partitions:
        progress("warning: no partition is held by more than one broker")
    print(f"{len(partitions)} partition(s) compared ({', '.join(f'{n} {v}' for v, n in sorted(by_verdict.items())) or 'none'}), "
          f"{len(singles)} held by one broker only")
    write_report(args.report, report)
    write_html(args.html, report)
    return EXIT_PARTIAL if failing else EXIT_OK


def partition_line(p: dict) -> str:
    """One line per partition from its report dict (the CLI prints ``PartitionDivergence.describe``)."""
    name = f"{p['topic']}-{p['partition']}"
    if p.get("error"):
        return f"{name}: error: {p['error']}"
    head = f"{name}: {p['verdict']}"
    if p.get("first_differing_offset") is not None:
        head += f" from offset {p['first_differing_offset']}"
    rest = [f"{r['replica']}: {'leader' if r['leader'] else r['verdict']}, LEO {r['log_end_offset']}, "
            f"Kafka keeps [..{r['kept_offset']})" for r in p.get("replicas", [])]
    return head + "; " + "; ".join(rest)


def entry(argv: Optional[Sequence[str]] = None) -> int:
    from udfs.job import run
    return run(JOB, main, argv)
