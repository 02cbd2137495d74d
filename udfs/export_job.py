"""``spark-submit.sh export``: append every record of the log dirs up to each partition's high watermark that
the Delta table does not hold yet, then exit; exactly once across kills.

How: a Spark streaming query over ``format("kafkalog")`` (Trigger.AvailableNow) with a checkpoint, whose
``foreachBatch`` appends each micro-batch to the table in ONE Delta commit carrying the application
transaction (app id = ``kafkalog-export-`` + the checkpoint's query id, version = the micro-batch id).
Spark logs a micro-batch's offsets before running it and marks it done after; a run killed anywhere
re-runs the last logged micro-batch with the same offsets, and a micro-batch the table already holds
(its version is at or below the table's transaction version for the app) is skipped, so a kill between
the table commit and Spark's commit mark duplicates nothing.

The table: the data source's columns with ``headers`` and the batch columns (producer fields, timestamp
type, codec, leader epoch, ...), control records included (``isControl``) so ``restore`` writes
transactions back with their markers; partitioned by ``topic``; UTC timestamps. Consumers of the table
filter ``NOT isControl`` (and read_committed readers drop aborted transactions' records by the markers).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Optional, Sequence

from kafkalog.errors import UsageError

from . import delta_tables
from .job import EXIT_OK, base_parser, now_ms, progress, resolve_log_dirs, table_path, write_report
from .partitions import partition_folders_of, topics_option
from .session import build_session

JOB = "export"
APP_ID_PREFIX = "kafkalog-export-"
DATA_LOSS_FOLDER = "kafkalog-data-loss"     # in the checkpoint: the data-loss events of the source
PARTITION_COLUMNS = ("topic",)
DESCRIPTION = "Append every record of the log dirs up to each partition's high watermark that is not yet in " \
              "the Delta table (exactly once, also across kills), then exit."


def build_parser():
    parser = base_parser(JOB, DESCRIPTION, epilog=(
        "Run it again to append only what is new. Killing it at any moment and running it again leaves every\n"
        "record in the table exactly once (Spark's streaming checkpoint + the Delta commit's application\n"
        "transaction). Keep --checkpoint with the table: a new checkpoint starts from the earliest offsets."))
    parser.add_argument("--table", metavar="PATH", type=table_path, required=True, help="Delta table to append to")
    parser.add_argument("--checkpoint", metavar="PATH", required=True,
                        help="the streaming checkpoint folder (created on the first run)")
    parser.add_argument("--topics", metavar="T[,T...]", help="only these topics (default: every topic)")
    parser.add_argument("--max-records-per-batch", metavar="N", type=int,
                        help="records per micro-batch and Delta commit (maxOffsetsPerTrigger; default: all at once)")
    parser.add_argument("--fail-on-data-loss", action="store_true",
                        help="fail when records are gone before they were exported (default: report them as gaps "
                             "and go on)")
    parser.add_argument("--dry-run", action="store_true", help="plan and report what would be appended; write nothing")
    return parser


def app_id(checkpoint: os.PathLike | str) -> Optional[str]:
    """The Delta application id of the query whose checkpoint this is (None before Spark wrote it)."""
    meta = Path(checkpoint) / "metadata"
    try:
        return APP_ID_PREFIX + json.loads(meta.read_text().splitlines()[0])["id"]
    except (OSError, ValueError, KeyError, IndexError):
        return None


def source_options(args, log_dirs, checkpoint: str) -> dict:
    options = {"path": ",".join(str(d) for d in log_dirs), "startingOffsets": "earliest", "includeHeaders": "true",
               "includeBatchColumns": "true", "includeControlRecords": "true",
               "failOnDataLoss": "true" if args.fail_on_data_loss else "false",
               "kafkalog.dataLossDir": os.path.join(checkpoint, DATA_LOSS_FOLDER)}
    if args.topics:
        options["subscribe"] = args.topics
    if args.max_records_per_batch:
        options["maxOffsetsPerTrigger"] = str(args.max_records_per_batch)
    return options


def partition_stats(table: str, files: Sequence[str]) -> dict:
    """{(topic, partition): [rows, min offset, max offset]} of the data files just committed (read back
    from their columns, topic from the folder name)."""
    import pyarrow.parquet as pq

    out: dict = {}
    for rel in files:
        topic = next((d.split("=", 1)[1] for d in Path(rel).parent.parts if d.startswith("topic=")), None)
        t = pq.read_table(os.path.join(table, rel), columns=["partition", "offset"])
        if t.num_rows == 0:
            continue
        grouped = t.group_by("partition").aggregate([("offset", "count"), ("offset", "min"), ("offset", "max")])
        for p, n, lo, hi in zip(*(grouped.column(c).to_pylist() for c in
                                  ("partition", "offset_count", "offset_min", "offset_max"))):
            cur = out.setdefault((delta_tables.unescape_partition_value(topic) if topic else None, p), [0, lo, hi])
            cur[0] += n
            cur[1], cur[2] = min(cur[1], lo), max(cur[2], hi)
    return out


def committed_offsets(checkpoint: str) -> dict:
    """The source offsets (Kafka checkpoint JSON) after the last micro-batch Spark marked done, or {}."""
    commits = [int(p.name) for p in Path(checkpoint, "commits").glob("[0-9]*") if p.name.isdigit()]
    if not commits:
        return {}
    lines = Path(checkpoint, "offsets", str(max(commits))).read_text().splitlines()
    return json.loads(lines[-1])


def plan_dry_run(options: dict, checkpoint: str) -> tuple:
    """What a run would append now, without Spark: per partition the offsets [from, to) past the
    checkpoint's committed offsets up to latest, and the data loss on the way."""
    from kafkalog.kafka_source_options import parse_source_options
    from kafkalog.stream_offsets import from_json_offsets, plan_ranges
    from .kafkalog_source import listed_facts

    parsed = parse_source_options({k: v for k, v in options.items() if k != "kafkalog.dataLossDir"}, streaming=True)
    facts = listed_facts(parsed)
    start = from_json_offsets(committed_offsets(checkpoint))
    ranges, losses = plan_ranges(start, {tp: f.latest for tp, f in facts.items()},
                                 {tp: f.log_start_offset for tp, f in facts.items()}, fail_on_data_loss=False)
    return ([dict(topic=r.topic, partition=r.partition, from_offset=r.start, to_offset=r.end) for r in ranges],
            [loss.to_dict() for loss in losses])


def _loss_events(folder: str) -> dict:
    out = {}
    for p in Path(folder).glob("loss-*.json") if os.path.isdir(folder) else ():
        try:
            out[p.name] = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
    return out


def main(argv: Sequence[str], *, spark=None) -> int:
    args = build_parser().parse_args(argv)
    if args.max_records_per_batch is not None and args.max_records_per_batch < 1:
        raise UsageError("--max-records-per-batch must be at least 1")
    log_dirs = resolve_log_dirs(args)
    partition_folders_of(log_dirs, topics_option(args.topics))     # an unknown --topics name: exit 2
    checkpoint = os.path.abspath(args.checkpoint)
    table = os.path.abspath(args.table)
    started, run_at = time.monotonic(), now_ms()
    options = source_options(args, log_dirs, checkpoint)
    report = dict(job=JOB, run_at_ms=run_at, log_dirs=[str(d) for d in log_dirs], table=table, checkpoint=checkpoint,
                  dry_run=bool(args.dry_run))
    if args.dry_run:
        progress("dry run: planning what would be appended (nothing is written)")
        report["partitions"], report["data_loss"] = plan_dry_run(options, checkpoint)
        offsets = sum(p["to_offset"] - p["from_offset"] for p in report["partitions"])
        report["summary"] = dict(offsets=offsets, partitions=len(report["partitions"]),
                                 data_loss_gaps=len(report["data_loss"]), duration_s=round(time.monotonic() - started, 3))
        print(f"would append up to {offsets} offsets' worth of records from {len(report['partitions'])} partition(s) "
              "(gaps in compacted logs hold none)")
        write_report(args.report, report)
        return EXIT_OK
    spark = spark or build_session(f"kafkalog-{JOB}", master=args.master)

    cleaned = delta_tables.remove_staging_leftovers(table)
    if cleaned:
        progress(f"removed {cleaned} staging folder(s) an interrupted run left in {table}")
    losses_dir = os.path.join(checkpoint, DATA_LOSS_FOLDER)
    losses_before = _loss_events(losses_dir)
    batches: list = []
    per_partition: dict = {}

    def append_batch(df, batch_id: int) -> None:
        app = app_id(checkpoint)
        if app is None:
            raise RuntimeError(f"the streaming checkpoint {checkpoint} has no query id (metadata file)")
        done = delta_tables.committed_version(table, app)
        if done is not None and done >= batch_id:
            progress(f"micro-batch {batch_id}: already in the table (Delta transaction {app} at {done}); skipped")
            batches.append(dict(batch_id=batch_id, skipped=True))
            return
        result = delta_tables.write_table(df, table, mode=delta_tables.APPEND, engine=delta_tables.RS,
                                          partition_by=PARTITION_COLUMNS, app_transaction=(app, batch_id),
                                          metadata={"job": JOB, "batch_id": batch_id})
        for tp, (n, lo, hi) in partition_stats(table, result.file_paths).items():
            cur = per_partition.setdefault(tp, [0, lo, hi])
            cur[0] += n
            cur[1], cur[2] = min(cur[1], lo), max(cur[2], hi)
        progress(f"micro-batch {batch_id}: {result.rows} records appended (Delta version {result.version})")
        batches.append(dict(batch_id=batch_id, skipped=False, rows=result.rows, version=result.version))

    reader = spark.readStream.format("kafkalog")
    for k, v in options.items():
        reader = reader.option(k, v)
    query = (reader.load().writeStream.foreachBatch(append_batch).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    gaps = [e for name, e in sorted(_loss_events(losses_dir).items()) if name not in losses_before]
    partitions = [dict(topic=t, partition=p, rows=n, from_offset=lo, to_offset=hi)
                  for (t, p), (n, lo, hi) in sorted(per_partition.items())]
    rows = sum(p["rows"] for p in partitions)
    report.update(partitions=partitions, data_loss=gaps, micro_batches=batches,
                  summary=dict(rows=rows, partitions=len(partitions), micro_batches=len(batches),
                               skipped_micro_batches=sum(1 for b in batches if b.get("skipped")),
                               data_loss_gaps=len(gaps), duration_s=round(time.monotonic() - started, 3)))
    print(f"{rows} records appended to {table} from {len(partitions)} partition(s) in {len(batches)} micro-batch(es)")
    for g in gaps:
        print(f"  data loss: {g['message']}")
    write_report(args.report, report)
    return EXIT_OK


def entry(argv: Optional[Sequence[str]] = None) -> int:
    from .job import run
    return run(JOB, main, argv)
