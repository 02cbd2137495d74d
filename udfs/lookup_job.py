"""``spark-submit.sh lookup``: thousands of offset/timestamp lookups at once (Kafka's ListOffsets and
offset → batch position), answered by ``kafkalog.lookup.partition_log.PartitionLog`` on the executors.

Plan: the driver resolves each (topic, partition) to its folder — from the segment catalog
(``--catalog``, the Delta table of the catalog job) or by listing the log dirs' top level — and the
queries are repartitioned by (topic, partition), so each task opens only the partitions it is asked
about, each once, and a partition opens only the segments its queries reach (indexes are read when a
segment is first needed; the ``.log`` is read in a few index intervals with pread).

Queries (``--queries``): CSV with a header, JSON lines, or a Delta table folder, with columns ``topic``,
``partition`` and ``timestamp`` (epoch ms, ISO-8601, -1 latest, -2 earliest, -3 max-timestamp, or their
names) and/or ``offset``; an optional ``id`` is carried through. A row with an offset is an offset
lookup (the batch a fetch from there starts at); otherwise a timestamp lookup. Bad rows are answered
with ``why = "bad_query"`` and the reason, never by failing the job.
"""
from __future__ import annotations

import argparse
import time
import uuid
from pathlib import Path
from typing import Optional, Sequence

from kafkalog.errors import KafkalogError
from kafkalog.fs.names import LIVE, parse_partition_dir_name
from kafkalog.lookup.bulk import FAILED_WHYS, RESULT_SCHEMA, answer_queries, live_partition_folders

from udfs import delta_tables
from udfs.job import EXIT_OK, EXIT_PARTIAL, base_parser, progress, report_path, resolve_log_dirs, table_path, write_report
from kafkalog.errors import UsageError
from udfs.partitions import list_partition_folders, spark_arrow_schema
from udfs.session import build_session

JOB = "lookup"
DESCRIPTION = "Answer many offset/timestamp lookups (Kafka's ListOffsets, offset -> batch position) in parallel."

def queries_path(text: str) -> str:
    """``--queries``: an existing CSV or JSON-lines file, or a Delta table folder (checked before Spark starts)."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text} does not exist; give a CSV (header topic,partition,timestamp"
                                         "/offset), a JSON-lines file or a Delta table folder")
    if path.is_dir() and not (path / "_delta_log").is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder but not a Delta table (no _delta_log); give a CSV, a "
                                         "JSON-lines file or a Delta table folder")
    return text


def delta_table_input(text: str) -> str:
    """``--catalog``: the catalog job's Delta table (a folder holding ``_delta_log``)."""
    if not (Path(text) / "_delta_log").is_dir():
        raise argparse.ArgumentTypeError(f"{text} is not a Delta table (no {text}/_delta_log); give the --catalog "
                                         "table the catalog job wrote")
    return text


def build_parser():
    parser = base_parser(JOB, DESCRIPTION, epilog=(
        "Answers follow kafkalog.lookup.partition_log (README: lookups): not found = found false, offset -1, with `why`.\n"
        "Offset lookups give the batch a fetch from that offset starts at (segment, position, base/last offset)."))
    parser.add_argument("--queries", required=True, metavar="FILE", type=queries_path,
                        help="CSV (header), JSON lines (.json/.jsonl) or a Delta table folder of queries")
    parser.add_argument("--catalog", metavar="PATH", type=delta_table_input,
                        help="resolve partitions from this catalog Delta table "
                                                           "instead of listing the log dirs")
    parser.add_argument("--isolation", choices=("log_end", "high_watermark", "read_committed"), default="log_end",
                        help="LATEST and the upper bound: the log end offset, the checkpointed high watermark, or "
                             "the last stable offset (read_committed)")
    parser.add_argument("--output", metavar="PATH", type=table_path,
                        help="Delta table to write the answers to (replaced)")
    parser.add_argument("--output-json", metavar="PATH", type=report_path, help="write the answers as JSON lines here")
    parser.add_argument("--dry-run", action="store_true", help="read and resolve the queries; look nothing up")
    return parser


def read_queries(spark, path: str):
    """The query file as a DataFrame of strings: topic, partition, timestamp, offset, id."""
    from pyspark.sql import functions as F

    p = Path(path)
    if not p.exists():
        raise UsageError(f"--queries {path} does not exist")
    if p.is_dir() and (p / "_delta_log").is_dir():
        df = delta_tables.read_table(spark, p)
    elif p.suffix.lower() in (".json", ".jsonl", ".ndjson"):
        df = spark.read.json(str(p))
    elif p.suffix.lower() in (".csv", ".txt") or p.is_file():
        df = spark.read.option("header", True).csv(str(p))
    else:
        raise UsageError(f"--queries {path}: give a CSV file, a JSON-lines file or a Delta table folder")
    columns = {c.lower(): c for c in df.columns}
    missing = [c for c in ("topic", "partition") if c not in columns]
    if missing or not ({"timestamp", "offset"} & set(columns)):
        raise UsageError(f"--queries {path}: needs columns topic, partition and timestamp and/or offset "
                         f"(found {', '.join(df.columns) or 'none'})")
    return df.select(*[(F.col(columns[c]).cast("string") if c in columns else F.lit(None).cast("string")).alias(c)
                       for c in ("topic", "partition", "timestamp", "offset", "id")])


def partition_folders(spark, log_dirs, catalog: Optional[str]) -> dict:
    """(topic, partition) -> (log dir, folder) of live partitions; a partition in two log dirs is an
    error for that partition (a broker refuses to start), recorded as None."""
    pairs = []
    if catalog:
        rows = delta_tables.read_table(spark, catalog).where("partition_kind = 'live'") \
            .select("log_dir", "partition_dir", "topic", "partition").distinct().collect()
        pairs = [((r["topic"], r["partition"]), (r["log_dir"], r["partition_dir"])) for r in rows]
    else:
        for log_dir, folder in list_partition_folders(log_dirs):
            try:
                topic, partition, kind = parse_partition_dir_name(Path(folder).name)
            except KafkalogError:
                continue
            if kind == LIVE:
                pairs.append(((topic, partition), (log_dir, folder)))
    return live_partition_folders(pairs)


def lookup_frame(queries_df, folders: dict, *, isolation: str, dry_run: bool = False):
    """The answers as a DataFrame: queries grouped by partition on the executors."""
    from pyspark.sql.pandas.types import from_arrow_schema

    out_schema = spark_arrow_schema(RESULT_SCHEMA)

    def run(batches):
        for batch in batches:
            answers = answer_queries(batch, folders, isolation=isolation, dry_run=dry_run)
            if answers.num_rows:
                yield from answers.cast(out_schema).to_batches()

    spread = queries_df.repartition("topic", "partition").sortWithinPartitions("topic", "partition")
    return spread.mapInArrow(run, from_arrow_schema(out_schema))


def main(argv: Sequence[str], *, spark=None) -> int:
    args = build_parser().parse_args(argv)
    log_dirs = [] if args.catalog and not args.log_dirs else resolve_log_dirs(args)
    spark = spark or build_session(f"kafkalog-{JOB}", master=args.master)
    started, run_id = time.monotonic(), uuid.uuid4().hex
    queries = read_queries(spark, args.queries)
    folders = partition_folders(spark, log_dirs, args.catalog)
    progress(f"{len(folders)} partitions known; answering queries from {args.queries}")
    # One action, so nothing to cache (a cached frame's tasks carry Spark 4.2's PartitionKeyedAccumulator,
    # whose half-deserialized copy the executor heartbeater reads: an NPE in the log, SPARK-59451).
    table = lookup_frame(queries, folders, isolation=args.isolation, dry_run=args.dry_run).toArrow()
    by_why: dict = {}
    for why in table.column("why").to_pylist():
        by_why[why] = by_why.get(why, 0) + 1
    elapsed = time.monotonic() - started
    output = None
    if args.output:
        df = spark.createDataFrame(table)
        output = delta_tables.write_table(df, args.output, mode=delta_tables.OVERWRITE, engine=args.delta_engine,
                                          metadata={"job": JOB, "run_id": run_id}).to_dict()
    if args.output_json:
        import json
        with open(args.output_json, "w", encoding="utf-8") as f:
            for row in table.to_pylist():
                f.write(json.dumps(row) + "\n")
    failed = sum(n for why, n in by_why.items() if why in FAILED_WHYS)
    summary = dict(queries=table.num_rows, found=sum(1 for v in table.column("found").to_pylist() if v),
                   by_why=dict(sorted(by_why.items())), failed=failed, seconds=round(elapsed, 3),
                   lookups_per_second=round(table.num_rows / elapsed, 1) if elapsed else None)
    print(f"{summary['queries']} queries: {summary['found']} found; " +
          ", ".join(f"{k} {v}" for k, v in summary["by_why"].items()))
    write_report(args.report, dict(job=JOB, run_id=run_id, isolation=args.isolation, dry_run=bool(args.dry_run),
                                   summary=summary, output=output,
                                   results=table.to_pylist() if table.num_rows <= 10_000 else None))
    return EXIT_PARTIAL if failed else EXIT_OK


def entry(argv: Optional[Sequence[str]] = None) -> int:
    from udfs.job import run
    return run(JOB, main, argv)
