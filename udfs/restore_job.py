"""``spark-submit.sh restore``: a Delta table of records (what ``export`` writes) — or any DataFrame with the
data source's schema — written back as a new log dir a Kafka broker loads: one Spark group per
topic-partition writes its partition folder (``kafkalog.log.writer``: segments rolled as a broker rolls by
the topic's ``segment.bytes`` / ``segment.ms`` / ``segment.index.bytes``, the indexes recovery builds), then
the driver writes the log dir's checkpoints and ``meta.properties``.

From Python, "filter a topic, restore it" is::

    df = spark.read.format("kafkalog").option("includeHeaders", "true").option("includeBatchColumns", "true") \\
        .option("includeControlRecords", "true").load("/data/kafka-logs")
    restore(df.where("topic = 'orders'"), "/data/restored")

Required columns: ``topic``, ``partition``, ``offset``, ``key``, ``value``, ``timestamp``; ``headers``,
``timestampType`` and the batch columns (``baseOffset``, ``lastOffset``, ``producerId``, ...) are used when
present (with them every batch is written back with its header fields; without, records are grouped into
new batches). One partition's records are one Arrow table on one worker: a partition must fit in a
worker's memory.
"""
from __future__ import annotations

import os
import time
from typing import Mapping, Optional, Sequence

from kafkalog.checkpoint.properties import parse_properties
from kafkalog.config import KafkaConfigs, did_you_mean
from kafkalog.errors import KafkalogError, UsageError
from kafkalog.fs.lock import held_fences, lock_log_dir
from kafkalog.log.roll import RollConfig
from kafkalog.log.writer import check_new_log_dir, write_log_dir_files, WrittenPartition

from udfs import delta_tables
from udfs.job import (EXIT_OK, add_config_arguments, base_parser, check_topic_configs, load_job_configs, now_ms,
                      progress, write_report)
from udfs.session import build_session

JOB = "restore"
REQUIRED_COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
DEFAULT_NODE_ID = 1
DESCRIPTION = "Write a Delta table of records (what export writes) back as a NEW log dir a Kafka broker loads."


def build_parser():
    parser = base_parser(JOB, DESCRIPTION, epilog=(
        "Segments roll as a broker rolls them (segment.bytes, segment.ms, segment.index.bytes of each topic,\n"
        "from --broker-config / --topic-config); .index and .timeindex are what Kafka's recovery builds;\n"
        "recovery-point, replication (high watermark) and log-start checkpoints and meta.properties are written.\n"
        "The log dir must be new or empty: a restore never merges into or overwrites a log dir."))
    parser.add_argument("--table", metavar="PATH", required=True, help="the Delta table to read")
    parser.add_argument("--log-dir", metavar="DIR", required=True, help="the new log dir to write")
    parser.add_argument("--topics", metavar="T[,T...]", help="only these topics")
    parser.add_argument("--compression", choices=CODECS, help="re-encode every batch with this codec "
                        "(default: each batch keeps its own)")
    parser.add_argument("--node-id", type=int, help="meta.properties node.id (default: node.id / broker.id of "
                        f"--broker-config, else {DEFAULT_NODE_ID})")
    parser.add_argument("--cluster-id", help="meta.properties cluster.id (default: a new random id; give your "
                        "cluster's for a broker of that cluster)")
    parser.add_argument("--dry-run", action="store_true", help="count what would be written; write nothing")
    add_config_arguments(parser)
    return parser


def node_id_of(broker_config: Optional[str]) -> Optional[int]:
    if not broker_config:
        return None
    with open(broker_config, encoding="utf-8") as f:
        props = parse_properties(f.read(), path=broker_config)
    for key in ("node.id", "broker.id"):
        if props.get(key, "").strip().lstrip("-").isdigit():
            return int(props[key])
    return None


def _written_schema():
    import pyarrow as pa

    return pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("folder", pa.string()),
                      ("segments", pa.int64()), ("batches", pa.int64()), ("records", pa.int64()),
                      ("bytes", pa.int64()), ("log_start_offset", pa.int64()), ("log_end_offset", pa.int64())])


def restore(df, log_dir, *, compression: Optional[str] = None, configs: Optional[KafkaConfigs] = None,
            node_id: int = DEFAULT_NODE_ID, cluster_id: Optional[str] = None) -> list:
    """Write the records of ``df`` (the data source's schema) as the new log dir ``log_dir``; returns one
    :class:`kafkalog.log.writer.WrittenPartition` per topic-partition."""
    import pyarrow as pa

    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise UsageError(f"the records lack the column(s) {', '.join(missing)} (need the data source's schema)")
    log_dir = os.path.abspath(os.fspath(log_dir))
    check_new_log_dir(log_dir)
    os.makedirs(log_dir, exist_ok=True)
    configs = configs or KafkaConfigs()
    topics = [r[0] for r in df.select("topic").distinct().collect()]
    rolls: Mapping[str, RollConfig] = {t: RollConfig.from_log_config(configs.for_topic(t)) for t in topics}
    schema = _written_schema()

    with lock_log_dir(log_dir):         # no broker starts on a half-written dir; workers are fenced by it
        fence = held_fences()[log_dir]

        def write_group(table: pa.Table) -> pa.Table:
            from kafkalog.fs.durable import fenced
            from kafkalog.log.writer import write_partition

            topic, partition = table.column("topic")[0].as_py(), table.column("partition")[0].as_py()
            with fenced([fence]):
                w = write_partition(log_dir, topic, partition, table, compression=compression, roll=rolls[topic])
            return pa.Table.from_pylist([w.to_dict()], schema=schema)

        from pyspark.sql.pandas.types import from_arrow_schema

        rows = df.groupBy("topic", "partition").applyInArrow(write_group, from_arrow_schema(schema)).collect()
        written = [WrittenPartition(**r.asDict()) for r in rows]
        write_log_dir_files(log_dir, written, node_id=node_id, cluster_id=cluster_id)
    return sorted(written, key=lambda w: (w.topic, w.partition))


def table_partitions(table: str, topics: Optional[Sequence[str]]) -> list:
    """(topic, partition, [data files]) of a Delta table written by export (partitioned by topic), from the
    Delta log and each file's ``partition`` column (one int column read per file)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    dt = DeltaTable(table)
    if dt.metadata().partition_columns != ["topic"]:
        return []
    actions = pa.table(dt.get_add_actions(flatten=True)).to_pylist()          # an arro3 table: via Arrow C
    by_tp: dict = {}
    for a in actions:
        topic = a.get("partition.topic")
        if topics and topic not in topics:
            continue
        path = os.path.join(table, a["path"])
        for p in pc.unique(pq.read_table(path, columns=["partition"]).column("partition")).to_pylist():
            by_tp.setdefault((topic, p), []).append(path)
    return [(t, p, files) for (t, p), files in sorted(by_tp.items())]


def restore_table(spark, table: str, log_dir, *, topics: Optional[Sequence[str]] = None,
                  compression: Optional[str] = None, configs: Optional[KafkaConfigs] = None,
                  node_id: int = DEFAULT_NODE_ID, cluster_id: Optional[str] = None) -> list:
    """Restore an export table without moving its records through the JVM: one Spark task per
    topic-partition reads that partition's rows from the table's Parquet files (row groups of other
    partitions skipped by their statistics) and writes its folder. Falls back to :func:`restore` of the
    table's DataFrame for a table not partitioned by topic."""
    parts = table_partitions(os.path.abspath(table), topics)
    if not parts:
        df = delta_tables.read_table(spark, table, engine=delta_tables.RS)
        if topics:
            df = df.where(df.topic.isin(list(topics)))
        return restore(df, log_dir, compression=compression, configs=configs, node_id=node_id, cluster_id=cluster_id)
    log_dir = os.path.abspath(os.fspath(log_dir))
    check_new_log_dir(log_dir)
    os.makedirs(log_dir, exist_ok=True)
    configs = configs or KafkaConfigs()
    rolls = {t: RollConfig.from_log_config(configs.for_topic(t)) for t in {t for t, _p, _f in parts}}

    with lock_log_dir(log_dir):         # no broker starts on a half-written dir; workers are fenced by it
        fence = held_fences()[log_dir]

        def write_one(item):
            import pyarrow.dataset as ds
            from kafkalog.fs.durable import fenced
            from kafkalog.log.writer import write_partition

            topic, partition, files = item
            table_ = ds.dataset(files, format="parquet").to_table(filter=ds.field("partition") == partition)
            with fenced([fence]):
                return write_partition(log_dir, topic, partition, table_, compression=compression,
                                       roll=rolls[topic]).to_dict()

        rows = spark.sparkContext.parallelize(parts, numSlices=len(parts)).map(write_one).collect()
        written = [WrittenPartition(**r) for r in rows]
        write_log_dir_files(log_dir, written, node_id=node_id, cluster_id=cluster_id)
    return sorted(written, key=lambda w: (w.topic, w.partition))


def main(argv: Sequence[str], *, spark=None) -> int:
    args = build_parser().parse_args(argv)
    if args.log_dirs:
        raise UsageError("restore writes ONE new log dir: give it as --log-dir DIR (--log-dirs names log dirs to read)")
    # restore writes a log dir a broker will serve, rolled by these configs: a misspelt key or topic is an
    # error, as for the jobs that delete or rewrite (udfs.job.REWRITING_JOBS)
    configs = load_job_configs(args, strict=True)
    if not delta_tables_exists(args.table):
        raise UsageError(f"--table {args.table} is not a Delta table")
    try:
        check_new_log_dir(args.log_dir)
    except KafkalogError as exc:
        raise UsageError(str(exc)) from None
    node_id = args.node_id if args.node_id is not None else (node_id_of(args.broker_config) or DEFAULT_NODE_ID)
    started, run_at = time.monotonic(), now_ms()
    spark = spark or build_session(f"kafkalog-{JOB}", master=args.master)
    df = delta_tables.read_table(spark, args.table, engine=args.delta_engine)
    held = {r["topic"] for r in df.select("topic").distinct().collect()}
    asked = [t for t in (args.topics or "").split(",") if t]
    unknown = sorted(set(asked) - held)
    if unknown:
        raise UsageError(f"--topics: no records of {', '.join(unknown)} in {args.table}"
                         f"{did_you_mean(unknown[0], held)}", hint=f"topics there: {', '.join(sorted(held)[:20]) or 'none'}")
    check_topic_configs(args, configs, held, strict=True, held_in=f"the table {args.table}")
    if asked:
        df = df.where(df.topic.isin(asked))
    report = dict(job=JOB, run_at_ms=run_at, table=os.path.abspath(args.table), log_dir=os.path.abspath(args.log_dir),
                  dry_run=bool(args.dry_run), compression=args.compression, node_id=node_id)
    if args.dry_run:
        from pyspark.sql import functions as F

        parts = [r.asDict() for r in df.groupBy("topic", "partition").agg(
            F.count("*").alias("records"), F.min("offset").alias("log_start_offset"),
            (F.max("offset") + 1).alias("log_end_offset")).orderBy("topic", "partition").collect()]
        report.update(partitions=parts, summary=dict(partitions=len(parts), records=sum(p["records"] for p in parts),
                                                     duration_s=round(time.monotonic() - started, 3)))
        print(f"would write {report['summary']['records']} records in {len(parts)} partition(s) to {args.log_dir}")
        write_report(args.report, report)
        return EXIT_OK
    progress(f"restoring {args.table} into {args.log_dir}")
    written = restore_table(spark, args.table, args.log_dir, topics=[t for t in (args.topics or "").split(",") if t],
                            compression=args.compression, configs=configs, node_id=node_id, cluster_id=args.cluster_id)
    parts = [w.to_dict() for w in written]
    report.update(partitions=parts, summary=dict(
        partitions=len(parts), records=sum(p["records"] for p in parts), segments=sum(p["segments"] for p in parts),
        bytes=sum(p["bytes"] for p in parts), duration_s=round(time.monotonic() - started, 3)))
    print(f"{report['summary']['records']} records in {len(parts)} partition(s), {report['summary']['segments']} "
          f"segment(s), written to {args.log_dir}")
    write_report(args.report, report)
    return EXIT_OK


def delta_tables_exists(path: str) -> bool:
    from deltalake import DeltaTable

    return os.path.isdir(path) and DeltaTable.is_deltatable(os.path.abspath(path))


def entry(argv: Optional[Sequence[str]] = None) -> int:
    from udfs.job import run
    return run(JOB, main, argv)
