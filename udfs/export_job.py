"""``spark-submit.sh export``: append every record of the log dirs up to each partition's high watermark that
the Delta table does not hold yet, then exit; exactly once across kills.

How: a Spark streaming query over ``format("kafkalog")`` (Trigger.AvailableNow) with a checkpoint. Its
tasks write their records as Parquet files into a staging folder of the table (the source's
``kafkalog.exportDir``: records go from the decoder to Parquet in the Python worker, never through the
JVM) and the query's rows are those files; ``foreachBatch`` moves a micro-batch's files into the table
and adds them in ONE delta-rs commit carrying the application transaction (app id =
``kafkalog-export-`` + the checkpoint's query id, version = the micro-batch id).
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

from udfs import delta_tables
from udfs.job import EXIT_OK, base_parser, now_ms, progress, resolve_log_dirs, table_path, write_report
from udfs.partitions import partition_folders_of, topics_option
from udfs.session import build_session

JOB = "export"
APP_ID_PREFIX = "kafkalog-export-"
DATA_LOSS_FOLDER = "kafkalog-data-loss"     # in the checkpoint: the data-loss events of the source
STAGING_FOLDER = "_kafkalog_staging_export"  # in the table folder (Delta readers skip names starting with _)
PARTITION_COLUMNS = ("topic",)
DESCRIPTION = "Append every record of the log dirs up to each partition's high watermark that is not yet in " \
              "the Delta table (exactly once, also across kills), then exit."


def build_parser():
    parser = base_parser(JOB, DESCRIPTION, epilog=(
        "Run it again to append only what is new. Killing it at any moment and running it again leaves every\n"
        "record in the table exactly once (Spark's streaming checkpoint + the Delta commit's application\n"
        "transaction). Keep --checkpoint with the table: a table exported with another checkpoint is refused."))
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


def source_options(args, log_dirs, checkpoint: str, table: str) -> dict:
    options = {"path": ",".join(str(d) for d in log_dirs), "startingOffsets": "earliest", "includeHeaders": "true",
               "includeBatchColumns": "true", "includeControlRecords": "true",
               "failOnDataLoss": "true" if args.fail_on_data_loss else "false",
               "kafkalog.dataLossDir": os.path.join(checkpoint, DATA_LOSS_FOLDER),
               "kafkalog.exportDir": os.path.join(table, STAGING_FOLDER)}
    if args.topics:
        options["subscribe"] = args.topics
    if args.max_records_per_batch:
        options["maxOffsetsPerTrigger"] = str(args.max_records_per_batch)
    return options


def table_schema():
    """The table's columns: the data source's with headers, batch columns and control records."""
    from kafkalog.source.options import parse_source_options
    from pyspark.sql.pandas.types import to_arrow_schema
    from udfs.kafkalog_source import source_schema

    parsed = parse_source_options({"path": "-", "includeHeaders": "true", "includeBatchColumns": "true"})
    return to_arrow_schema(source_schema(parsed, records=True), timezone="UTC")


def commit_micro_batch(table: str, file_rows: Sequence[dict], app: str, batch_id: int) -> Optional[int]:
    """Move the micro-batch's files into the table and add them in one commit with (app, batch_id);
    None (and the files removed) when the table already holds this micro-batch."""
    done = delta_tables.committed_version(table, app)
    files = sorted({r["file"]: r["topic"] for r in file_rows}.items())
    if done is not None and done >= batch_id:
        for path, _topic in files:
            Path(path).unlink(missing_ok=True)
        return None
    records = {}
    for r in file_rows:
        records[r["file"]] = records.get(r["file"], 0) + r["rows"]
    data_files = []
    for path, topic in files:
        values = {"topic": topic}
        rel = f"{delta_tables.partition_folder(values, PARTITION_COLUMNS)}/{Path(path).name}"
        target = Path(table, rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
        data_files.append(delta_tables.DataFile(rel, target.stat().st_size, values, records[path]))
    return delta_tables.commit_files(table, data_files, table_schema(), partition_by=PARTITION_COLUMNS,
                                     app_transaction=(app, batch_id),
                                     metadata={"kafkalog.job": JOB, "kafkalog.batch_id": str(batch_id),
                                               "kafkalog.app_id": app})


def check_table_belongs_to(table: str, checkpoint: str) -> None:
    """A table exported with another checkpoint would get every record again from a new one: refused."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(table):
        return
    apps = {h.get("kafkalog.app_id") for h in DeltaTable(table).history()} - {None}
    mine = app_id(checkpoint)
    if apps and mine not in apps:
        raise UsageError(f"--table {table} was exported with another streaming checkpoint ({', '.join(sorted(apps))}); "
                         f"--checkpoint {checkpoint} {'is new' if mine is None else 'is ' + mine} and would export "
                         "every record again. Give the table's own checkpoint, or a new table")


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
    from kafkalog.source.options import parse_source_options
    from kafkalog.source.stream_offsets import from_json_offsets, plan_ranges
    from udfs.kafkalog_source import listed_facts

    parsed = parse_source_options({k: v for k, v in options.items()
                                   if k not in ("kafkalog.dataLossDir", "kafkalog.exportDir")}, streaming=True)
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
    options = source_options(args, log_dirs, checkpoint, table)
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

    check_table_belongs_to(table, checkpoint)
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
        file_rows = [r.asDict() for r in df.collect()]          # the tasks wrote the files; these are their rows
        version = commit_micro_batch(table, file_rows, app, batch_id)
        if version is None:
            progress(f"micro-batch {batch_id}: already in the table (Delta transaction {app}); skipped")
            batches.append(dict(batch_id=batch_id, skipped=True))
            return
        for r in file_rows:
            cur = per_partition.setdefault((r["topic"], r["partition"]), [0, r["minOffset"], r["maxOffset"]])
            cur[0] += r["rows"]
            cur[1], cur[2] = min(cur[1], r["minOffset"]), max(cur[2], r["maxOffset"])
        rows = sum(r["rows"] for r in file_rows)
        progress(f"micro-batch {batch_id}: {rows} records appended (Delta version {version})")
        batches.append(dict(batch_id=batch_id, skipped=False, rows=rows, version=version))

    reader = spark.readStream.format("kafkalog")
    for k, v in options.items():
        reader = reader.option(k, v)
    query = (reader.load().writeStream.foreachBatch(append_batch).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    delta_tables.remove_staging_leftovers(table)      # files of task attempts Spark retried: never committed
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
    from udfs.job import run
    return run(JOB, main, argv)
