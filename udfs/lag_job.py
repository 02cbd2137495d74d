"""``spark-submit.sh lag``: consumer groups' committed offsets and lag from log dirs alone. Each
``__consumer_offsets`` partition is replayed in its own task (``kafkalog.coordinator.lag``: latest
record per key, tombstones, transactional commits resolved by their markers), the partitions the
commits name are measured in parallel (log start, log end, high watermark), and the driver joins the
two with the same pure function ``kafkalog lag`` uses."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional, Sequence

import pyarrow as pa

from kafkalog.coordinator import lag
from kafkalog.coordinator.log_dirs import (CONSUMER_OFFSETS_TOPIC, coordinator_rows, leading_replicas,
                                           live_partitions, merge_end, partition_end)
from kafkalog.errors import KafkalogError, UsageError
from kafkalog.log.logdir import scan_partition_dir
from kafkalog.fs.names import LIVE, parse_partition_dir_name

from udfs import delta_tables
from udfs.job import (EXIT_OK, EXIT_PARTIAL, add_config_arguments, base_parser, parse_time_ms, progress, start_job,
                      table_path, write_report)
from udfs.partitions import folders_frame, list_partition_folders, map_folders
from udfs.progress import count_folders
from udfs.session import build_session

JOB = "lag"
DESCRIPTION = ("Consumer groups' committed offsets, partition ends and lag from the log dirs' __consumer_offsets "
               "(no running cluster needed).")

COMMIT_ROW_SCHEMA = pa.schema([
    pa.field("kind", pa.string()),   # "commit" | "folder" (per-partition counts) | "group" (an id seen) | "error"
    pa.field("coordinator_dir", pa.string()), pa.field("coordinator_partition", pa.int32()),
    pa.field("group", pa.string()), pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
    pa.field("committed_offset", pa.int64()), pa.field("leader_epoch", pa.int32()), pa.field("metadata", pa.string()),
    pa.field("commit_timestamp", pa.int64()), pa.field("expire_timestamp", pa.int64()),
    pa.field("record_offset", pa.int64()), pa.field("transactional", pa.bool_()),
    pa.field("group_state", pa.string()), pa.field("group_state_timestamp", pa.int64()),
    pa.field("group_members", pa.int32()),
    pa.field("records", pa.int64()), pa.field("undecodable", pa.int64()), pa.field("pending", pa.int64()),
    pa.field("error", pa.string()),
])
END_ROW_SCHEMA = pa.schema([
    pa.field("topic", pa.string()), pa.field("partition", pa.int32()), pa.field("folder", pa.string()),
    pa.field("log_start_offset", pa.int64()), pa.field("log_end_offset", pa.int64()),
    pa.field("high_watermark", pa.int64()), pa.field("high_watermark_source", pa.string()),
    pa.field("error", pa.string()),
])
LAG_ROW_SCHEMA = pa.schema([
    pa.field("run_id", pa.string()), pa.field("run_at_ms", pa.int64()), pa.field("now_ms", pa.int64()),
    pa.field("group", pa.string()), pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
    pa.field("committed_offset", pa.int64()), pa.field("leader_epoch", pa.int32()), pa.field("metadata", pa.string()),
    pa.field("commit_timestamp", pa.int64()), pa.field("expire_timestamp", pa.int64()),
    pa.field("expires_at", pa.int64()), pa.field("expired", pa.bool_()), pa.field("group_state", pa.string()),
    pa.field("coordinator_partition", pa.int32()), pa.field("commit_record_offset", pa.int64()),
    pa.field("transactional", pa.bool_()), pa.field("log_start_offset", pa.int64()),
    pa.field("log_end_offset", pa.int64()), pa.field("high_watermark", pa.int64()),
    pa.field("high_watermark_source", pa.string()), pa.field("lag", pa.int64()), pa.field("status", pa.string()),
    pa.field("note", pa.string()),
])


def build_parser():
    parser = base_parser(JOB, DESCRIPTION, epilog=(
        "Rows (the report's 'rows' and the --output Delta table): group, topic, partition, committed offset,\n"
        "commit/expire timestamps, expires_at/expired (Kafka's offset expiry, noted, not applied), high\n"
        "watermark, log end, lag = high watermark - committed offset, status ok|unknown (the partition is in\n"
        "none of the log dirs: lag null, not 0). Nothing in the log dirs is modified."))
    parser.add_argument("--group", action="append", metavar="GROUP", help="a group id (repeatable; default: all)")
    parser.add_argument("--group-pattern", action="append", metavar="REGEX",
                        help="groups whose id fully matches this regular expression (repeatable)")
    parser.add_argument("--now-ms", type=parse_time_ms, metavar="TIME",
                        help="'now' for the expiry columns: epoch ms or ISO-8601 (default: the clock)")
    parser.add_argument("--offsets-retention-ms", type=int, default=lag.DEFAULT_OFFSETS_RETENTION_MS, metavar="MS",
                        help="the brokers' offsets.retention.minutes, in ms (default: 7 days)")
    parser.add_argument("--output", metavar="PATH", type=table_path, help="Delta table the lag rows are appended to")
    parser.add_argument("--dry-run", action="store_true", help="compute and report, but write no table")
    add_config_arguments(parser)      # --broker-config: its log.dirs when --log-dirs is not given
    return parser


def _check(args) -> None:
    for pattern in args.group_pattern or ():
        try:
            re.compile(pattern)
        except re.error as e:
            raise UsageError(f"--group-pattern {pattern!r} is not a regular expression ({e})") from None


def _topic_partition(folder: str):
    try:
        topic, partition, kind = parse_partition_dir_name(Path(folder).name)
    except KafkalogError:
        return None
    return (topic, partition) if kind == LIVE else None


def committed_folder(include):
    """The per-folder function: one __consumer_offsets partition replayed into its live commits."""
    def run(log_dir: str, folder: str, cache: dict) -> list:
        _, cpart = _topic_partition(folder)
        try:
            rows = coordinator_rows(scan_partition_dir(folder, log_dir=log_dir)).to_pylist()
        except (KafkalogError, OSError) as e:
            return [{"kind": "error", "coordinator_dir": folder, "coordinator_partition": cpart, "error": str(e)}]
        loaded = lag.load_committed_offsets(rows, include_group=include)
        out = [{"kind": "folder", "coordinator_dir": folder, "coordinator_partition": cpart,
                "records": loaded.records, "undecodable": loaded.undecodable, "pending": loaded.pending_transactional}]
        out.extend({"kind": "group", "coordinator_dir": folder, "coordinator_partition": cpart, "group": g}
                   for g in sorted(loaded.seen_groups))
        for c in loaded.offsets.values():
            g = loaded.groups.get(c.group)
            out.append({"kind": "commit", "coordinator_dir": folder, "coordinator_partition": cpart, "group": c.group,
                        "topic": c.topic, "partition": c.partition, "committed_offset": c.committed_offset,
                        "leader_epoch": c.leader_epoch, "metadata": c.metadata,
                        "commit_timestamp": c.commit_timestamp, "expire_timestamp": c.expire_timestamp,
                        "record_offset": c.record_offset, "transactional": c.transactional,
                        "group_state": g.state if g else None,
                        "group_state_timestamp": g.current_state_timestamp if g else None,
                        "group_members": g.member_count if g else None})
        return out
    return run


def end_folder(log_dir: str, folder: str, cache: dict) -> list:
    topic, partition = _topic_partition(folder)
    try:
        end = partition_end(folder, log_dir)
    except (KafkalogError, OSError) as e:
        return [{"topic": topic, "partition": partition, "folder": folder, "error": str(e)}]
    return [{"topic": topic, "partition": partition, "folder": folder, "log_start_offset": end.log_start_offset,
             "log_end_offset": end.log_end_offset, "high_watermark": end.high_watermark,
             "high_watermark_source": end.high_watermark_source}]


def loaded_from_rows(commit_rows) -> lag.LoadedOffsets:
    """The driver's LoadedOffsets from the tasks' commit rows (one replica per coordinator partition:
    ``leading_replicas``)."""
    loaded = lag.LoadedOffsets()
    for r in commit_rows:
        key = (r["group"], r["topic"], r["partition"])
        old = loaded.offsets.get(key)
        if old is not None and old.record_offset >= r["record_offset"]:
            continue
        loaded.offsets[key] = lag.CommittedOffset(
            r["group"], r["topic"], r["partition"], r["committed_offset"], r["leader_epoch"], r["metadata"],
            r["commit_timestamp"], r["expire_timestamp"], r["record_offset"], r["coordinator_partition"],
            r["transactional"])
        if r["group_state"] is not None or r["group_members"] is not None:
            loaded.groups[r["group"]] = lag.GroupInfo(state=r["group_state"],
                                                      current_state_timestamp=r["group_state_timestamp"],
                                                      classic_members=r["group_members"] or 0)
    return loaded


def main(argv: Sequence[str], *, spark=None) -> int:
    parser = build_parser()
    start = start_job(parser, argv, check=_check)
    args, log_dirs = start.args, start.log_dirs
    folders = list_partition_folders(log_dirs)
    coordinators = [(str(p.log_dir), str(p.path))
                    for p in leading_replicas(live_partitions(log_dirs, CONSUMER_OFFSETS_TOPIC))]
    if not coordinators:
        raise UsageError(f"no {CONSUMER_OFFSETS_TOPIC}-<partition> folder in {', '.join(map(str, log_dirs))}",
                         hint="pass the log dirs of the brokers that hosted the group coordinators "
                              "(kafkalog demo DIR --consumer-groups 3 writes an example)")
    spark = spark or build_session(f"kafkalog-{JOB}", master=args.master)
    include = lag.group_matcher(args.group or (), args.group_pattern or ())
    progress(f"replaying {len(coordinators)} {CONSUMER_OFFSETS_TOPIC} partition(s) in {len(log_dirs)} log dir(s)")
    counter = count_folders(spark, len(coordinators), "replaying __consumer_offsets", coordinators)
    rows = [r.asDict() for r in map_folders(folders_frame(spark, coordinators), committed_folder(include),
                                            COMMIT_ROW_SCHEMA, counter=counter).collect()]
    commits = [r for r in rows if r["kind"] == "commit"]
    loaded = loaded_from_rows(commits)
    folder_rows = [r for r in rows if r["kind"] == "folder"]
    loaded.records = sum(r["records"] for r in folder_rows)
    loaded.undecodable = sum(r["undecodable"] for r in folder_rows)
    loaded.pending_transactional = sum(r["pending"] for r in folder_rows)
    errors = [f"{r['coordinator_dir']}: {r['error']}" for r in rows if r["kind"] == "error"]
    lag.check_groups(args.group or (), {r["group"] for r in rows if r["kind"] == "group"}, complete=not errors,
                 warn=lambda m: progress(f"warning: {m}"))        # before anything is written

    wanted = {(c.topic, c.partition) for c in loaded.offsets.values()}
    measured = [f for f in folders if _topic_partition(f[1]) in wanted]
    ends: dict = {}
    if measured:
        progress(f"measuring {len(measured)} partition(s) the commits name")
        counter = count_folders(spark, len(measured), "measuring partitions", measured)
        for r in map_folders(folders_frame(spark, measured), end_folder, END_ROW_SCHEMA, counter=counter).collect():
            if r["error"] is not None:
                errors.append(f"{r['folder']}: {r['error']}")
                continue
            end = lag.PartitionEnd(r["log_start_offset"], r["log_end_offset"], r["high_watermark"],
                                   r["high_watermark_source"])
            key = (r["topic"], r["partition"])
            ends[key] = merge_end(ends.get(key), end)
    lag_rows = lag.lag_rows(loaded, ends, now_ms=start.now, retention_ms=args.offsets_retention_ms)

    table = None
    if args.output and not args.dry_run and lag_rows:
        stamped = [dict(r, run_id=start.run_id, run_at_ms=start.run_at, now_ms=start.now) for r in lag_rows]
        table = delta_tables.append_rows(spark, stamped, LAG_ROW_SCHEMA, args.output, engine=args.delta_engine,
                                         metadata={"job": JOB, "run_id": start.run_id})
        progress(f"{len(lag_rows)} rows appended to {args.output}")
    by_status: dict = {}
    for r in lag_rows:
        by_status[r["status"]] = by_status.get(r["status"], 0) + 1
    summary = dict(groups=len({r["group"] for r in lag_rows}), partitions=len(lag_rows), by_status=by_status,
                   total_lag=sum(r["lag"] for r in lag_rows if r["lag"] is not None),
                   expired=sum(1 for r in lag_rows if r["expired"]), coordinator_partitions=len(coordinators),
                   coordinator_records=loaded.records, undecodable_records=loaded.undecodable,
                   pending_transactional_commits=loaded.pending_transactional, errors=len(errors))
    report = dict(job=JOB, run_id=start.run_id, log_dirs=[str(d) for d in log_dirs], now_ms=start.now,
                  dry_run=bool(args.dry_run), summary=summary, table=table, rows=lag_rows, errors=errors)
    for group in sorted({r["group"] for r in lag_rows}):
        mine = [r for r in lag_rows if r["group"] == group]
        known = [r["lag"] for r in mine if r["lag"] is not None]
        unknown = len(mine) - len(known)
        print(f"{group}: lag {sum(known)} over {len(known)} partition(s)" +
              (f", {unknown} partition(s) unknown (not in these log dirs)" if unknown else ""))
    print(f"{summary['groups']} group(s), {summary['partitions']} partition(s), total lag {summary['total_lag']}")
    for e in errors:
        print(f"  error: {e}")
    write_report(args.report, report)
    return EXIT_PARTIAL if errors else EXIT_OK


def entry(argv: Optional[Sequence[str]] = None) -> int:
    from udfs.job import run
    return run(JOB, main, argv)
