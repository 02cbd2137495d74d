"""``spark-submit.sh catalog``: every segment of every partition of the log dirs, listed in parallel
across partitions (``kafkalog.catalog``), as a DataFrame written to a Delta table the other jobs reuse."""
from __future__ import annotations

import time
import uuid
from typing import Optional, Sequence

from kafkalog.catalog import CATALOG_SCHEMA, ERROR, LEFTOVER, SEGMENT

from . import delta_tables
from .job import (EXIT_OK, EXIT_PARTIAL, add_config_arguments, base_parser, load_job_configs, progress,
                  resolve_log_dirs, table_path, write_report)
from .progress import count_folders
from .partitions import catalog_folder, folders_frame, list_partition_folders, map_folders
from .session import build_session

JOB = "catalog"
DESCRIPTION = "List every segment of every partition of the log dirs (offsets, sizes, largest timestamps, " \
              "indexes, leftovers) into a Delta table."


def build_parser():
    parser = base_parser(JOB, DESCRIPTION, epilog=(
        "Columns: kafkalog.catalog.CATALOG_SCHEMA (README). The table is replaced by each run (Delta keeps\n"
        "the earlier versions). Nothing in the log dirs is modified."))
    parser.add_argument("--catalog", metavar="PATH", type=table_path, help="Delta table to write (replaced each run)")
    parser.add_argument("--dry-run", action="store_true", help="list and report, but write no table")
    add_config_arguments(parser)
    return parser


def catalog_frame(spark, log_dirs):
    """The catalog DataFrame of ``log_dirs`` (lazy; recomputing it is harmless — it only reads)."""
    folders = list_partition_folders(log_dirs)
    counter = count_folders(spark, len(folders), "cataloguing")
    return map_folders(folders_frame(spark, folders), catalog_folder, CATALOG_SCHEMA, counter=counter), len(folders)


def main(argv: Sequence[str], *, spark=None) -> int:
    args = build_parser().parse_args(argv)
    configs = load_job_configs(args)
    log_dirs = resolve_log_dirs(args, configs)
    spark = spark or build_session(f"kafkalog-{JOB}", master=args.master)
    started = time.monotonic()
    run_id = uuid.uuid4().hex
    df, folders = catalog_frame(spark, log_dirs)
    progress(f"cataloguing {folders} folders in {len(log_dirs)} log dir(s)")
    df = df.cache()
    from pyspark.sql import functions as F

    kinds = {r["kind"]: (r["n"], r["bytes"]) for r in
             df.groupBy("kind").agg(F.count("*").alias("n"), F.sum("size").alias("bytes")).collect()}
    problems = [dict(partition_dir=r["partition_dir"], problems=r["problems"]) for r in
                df.where(F.size("problems") > 0).select("partition_dir", "problems").distinct().collect()]
    table = None
    if args.catalog and not args.dry_run:
        table = delta_tables.write_table(df, args.catalog, mode=delta_tables.OVERWRITE, engine=args.delta_engine,
                                         metadata={"job": JOB, "run_id": run_id}).to_dict()
        progress(f"catalog written to {args.catalog} (Delta version {table['version']}, {table['rows']} rows)")
    df.unpersist()
    segments, seg_bytes = kinds.get(SEGMENT, (0, 0))
    report = dict(job=JOB, run_id=run_id, log_dirs=[str(d) for d in log_dirs], dry_run=bool(args.dry_run),
                  summary=dict(folders=folders, segments=segments, segment_bytes=seg_bytes or 0,
                               leftover_groups=kinds.get(LEFTOVER, (0, 0))[0], failed_folders=kinds.get(ERROR, (0, 0))[0],
                               duration_s=round(time.monotonic() - started, 3)),
                  table=table, problems=sorted(problems, key=lambda p: p["partition_dir"]))
    print(f"{segments} segments ({seg_bytes or 0:,} bytes) in {folders} folders; "
          f"{len(problems)} folder(s) with problems")
    for p in report["problems"]:
        for line in p["problems"]:
            print(f"  problem: {line}")
    write_report(args.report, report)
    return EXIT_PARTIAL if kinds.get(ERROR) else EXIT_OK


def entry(argv: Optional[Sequence[str]] = None) -> int:
    from .job import run
    return run(JOB, main, argv)
