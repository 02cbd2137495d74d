"""``spark-submit.sh catalog``: every segment of every partition of the log dirs, listed in parallel
across partitions (``kafkalog.catalog``), as a DataFrame written to a Delta table the other jobs reuse."""
from __future__ import annotations

import time
import uuid
from typing import Optional, Sequence

from kafkalog.catalog import CATALOG_SCHEMA, ERROR, LEFTOVER, SEGMENT
from kafkalog.fs import filesystem

from udfs import delta_tables
from udfs.job import (EXIT_OK, EXIT_PARTIAL, add_config_arguments, add_html_argument, base_parser, check_topic_configs,
                      load_job_configs, now_ms, progress, resolve_log_dirs, table_path, topics_of_log_dirs, write_html,
                      write_report)
from udfs.progress import count_folders
from udfs.partitions import catalog_folder, folders_frame, list_partition_folders, map_folders
from udfs.session import build_session

JOB = "catalog"
# the report's distributions (for people and the --html page): bin edges of segment sizes (bytes) and
# ages (run time minus largest timestamp, ms); the last bin is open-ended
SIZE_BIN_EDGES = (0, 1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000, 3_000_000, 10_000_000, 30_000_000,
                  100_000_000, 300_000_000, 1_000_000_000, 3_000_000_000)
_H, _D = 3_600_000, 86_400_000
AGE_BIN_EDGES_MS = (0, _H, 6 * _H, _D, 2 * _D, 7 * _D, 30 * _D, 90 * _D, 365 * _D)
LEFTOVERS_LISTED = 1_000           # leftover groups listed in the report, largest first (all are counted)
DESCRIPTION = "List every segment of every partition of the log dirs (offsets, sizes, largest timestamps, " \
              "indexes, leftovers) into a Delta table."


def build_parser():
    parser = base_parser(JOB, DESCRIPTION, epilog=(
        "Columns: kafkalog.catalog.CATALOG_SCHEMA (README). The table is replaced by each run (Delta keeps\n"
        "the earlier versions). Nothing in the log dirs is modified."))
    parser.add_argument("--catalog", metavar="PATH", type=table_path, help="Delta table to write (replaced each run)")
    parser.add_argument("--dry-run", action="store_true", help="list and report, but write no table")
    add_html_argument(parser)
    add_config_arguments(parser)
    return parser


def catalog_frame(spark, log_dirs):
    """The catalog DataFrame of ``log_dirs`` (lazy; recomputing it is harmless — it only reads)."""
    folders = list_partition_folders(log_dirs)
    counter = count_folders(spark, len(folders), "cataloguing", folders)
    return map_folders(folders_frame(spark, folders), catalog_folder, CATALOG_SCHEMA, counter=counter), len(folders)


def _histogram(df, column, edges) -> list[dict]:
    """Segments and bytes per bin of ``column`` (``edges`` ascending; values below the first edge form a bin
    with ``lo`` None, e.g. timestamps in the future)."""
    from pyspark.sql import functions as F

    index = F.lit(-1)
    for i, edge in enumerate(edges):
        index = F.when(F.col(column) >= F.lit(edge), F.lit(i)).otherwise(index)
    counts = {r["bin"]: (r["n"], r["bytes"] or 0) for r in
              df.where(F.col(column).isNotNull()).groupBy(index.alias("bin"))
                .agg(F.count("*").alias("n"), F.sum("size").alias("bytes")).collect()}
    bins = []
    for i in ([-1] if -1 in counts else []) + list(range(len(edges))):
        n, size = counts.get(i, (0, 0))
        bins.append(dict(lo=None if i < 0 else edges[i], hi=edges[0] if i < 0 else (edges[i + 1] if i + 1 < len(edges)
                                                                                  else None), segments=n, bytes=size))
    return bins


def catalog_aggregates(df, run_at_ms: int) -> dict:
    """The report's per-topic totals, size and age distributions, leftovers (largest first) and unreadable folders."""
    from pyspark.sql import functions as F

    topics = {}
    for r in df.groupBy("topic").agg(
            F.countDistinct("partition_dir").alias("partitions"),
            F.sum(F.when(F.col("kind") == SEGMENT, 1).otherwise(0)).alias("segments"),
            F.sum(F.when(F.col("kind") == SEGMENT, F.col("size")).otherwise(0)).alias("bytes"),
            F.sum(F.when(F.col("kind") == LEFTOVER, 1).otherwise(0)).alias("leftovers"),
            F.sum(F.when(F.col("kind") == ERROR, 1).otherwise(0)).alias("errors")).collect():
        topics[r["topic"]] = dict(partitions=r["partitions"], segments=r["segments"], bytes=r["bytes"] or 0,
                                  leftovers=r["leftovers"], errors=r["errors"])
    segments = df.where(F.col("kind") == SEGMENT).withColumn("age_ms", F.lit(run_at_ms) - F.col("largest_timestamp_ms"))
    leftovers = [dict(partition_dir=r["partition_dir"], files=list(r["files"] or []), size=r["size"]) for r in
                 df.where(F.col("kind") == LEFTOVER).orderBy(F.desc("size"), "partition_dir")
                   .select("partition_dir", "files", "size").limit(LEFTOVERS_LISTED).collect()]
    errors = [dict(partition_dir=r["partition_dir"], problems=list(r["problems"] or [])) for r in
              df.where(F.col("kind") == ERROR).select("partition_dir", "problems").orderBy("partition_dir").collect()]
    return dict(topics=dict(sorted(topics.items())), size_histogram=_histogram(segments, "size", SIZE_BIN_EDGES),
                age_histogram=_histogram(segments, "age_ms", AGE_BIN_EDGES_MS), leftovers=leftovers, errors=errors)


def main(argv: Sequence[str], *, spark=None) -> int:
    args = build_parser().parse_args(argv)
    configs = load_job_configs(args)
    log_dirs = resolve_log_dirs(args, configs)
    check_topic_configs(args, configs, topics_of_log_dirs(log_dirs), strict=False)     # read-only: a warning
    spark = spark or build_session(f"kafkalog-{JOB}", master=args.master)
    started = time.monotonic()
    run_at = now_ms()
    run_id = uuid.uuid4().hex
    df, folders = catalog_frame(spark, log_dirs)
    progress(f"cataloguing {folders} folders in {len(log_dirs)} log dir(s)")
    # Computed once for the aggregates and the table below: a local checkpoint (blocks on the executors), not
    # cache(): a cached frame's tasks carry Spark 4.2's PartitionKeyedAccumulator, which the executor heartbeater
    # may read half-deserialized (registered before its map is read): an ERROR and a 25-line
    # NullPointerException in a successful run (SPARK-59451).
    df = df.localCheckpoint(eager=True)
    from pyspark.sql import functions as F

    kinds = {r["kind"]: (r["n"], r["bytes"]) for r in
             df.groupBy("kind").agg(F.count("*").alias("n"), F.sum("size").alias("bytes")).collect()}
    problems = [dict(partition_dir=r["partition_dir"], problems=r["problems"]) for r in
                df.where(F.size("problems") > 0).select("partition_dir", "problems").distinct().collect()]
    aggregates = catalog_aggregates(df, run_at)
    table = None
    if args.catalog and not args.dry_run:
        table = delta_tables.write_table(df, args.catalog, mode=delta_tables.OVERWRITE, engine=args.delta_engine,
                                         metadata={"job": JOB, "run_id": run_id}).to_dict()
        progress(f"catalog written to {args.catalog} (Delta version {table['version']}, {table['rows']} rows)")
    segments, seg_bytes = kinds.get(SEGMENT, (0, 0))
    report = dict(job=JOB, run_id=run_id, run_at_ms=run_at, log_dirs=[filesystem.uri_for_display(d) for d in log_dirs], dry_run=bool(args.dry_run),
                  summary=dict(folders=folders, segments=segments, segment_bytes=seg_bytes or 0,
                               leftover_groups=kinds.get(LEFTOVER, (0, 0))[0], failed_folders=kinds.get(ERROR, (0, 0))[0],
                               duration_s=round(time.monotonic() - started, 3)),
                  table=table, problems=sorted(problems, key=lambda p: p["partition_dir"]), **aggregates)
    print(f"{segments} segments ({seg_bytes or 0:,} bytes) in {folders} folders; "
          f"{len(problems)} folder(s) with problems")
    for p in report["problems"]:
        for line in p["problems"]:
            print(f"  problem: {line}")
    write_report(args.report, report)
    write_html(args.html, report)
    return EXIT_PARTIAL if kinds.get(ERROR) else EXIT_OK


def entry(argv: Optional[Sequence[str]] = None) -> int:
    from udfs.job import run
    return run(JOB, main, argv)
