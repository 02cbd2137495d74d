"""Writing and reading kafkalog's Delta tables (catalog, retention audit, …) with or without Delta's
Spark jars.

* ``engine="spark"``: delta-spark (``df.write.format("delta")``), when the session has Delta configured
  — a user's cluster usually does.
* ``engine="rs"``: Spark writes the Parquet files in parallel into a staging folder inside the table;
  the driver moves them into the table folder and commits them as ONE Delta transaction with delta-rs
  (``deltalake``): ``create_table_with_add_actions`` for a new table, ``create_write_transaction``
  afterwards. Timestamps are written as UTC-adjusted TIMESTAMP_MICROS (conf/spark-defaults.conf), so the
  table stays at protocol reader 1 / writer 2, readable by every Delta reader. Local (or mounted) paths.
* ``engine="auto"`` (the jobs' default, ``--delta-engine auto``): the writer :data:`JOB_WRITERS` names for
  the job, where it can write the table here (:func:`choose_engine`).

**The writer per job** (issue 32, ``python -m bench.delta_writers``, ``docs/performance.md``): every job's
table is written with delta-rs. Measured in one delta-spark session, delta-rs takes 0.27x the time of
delta-spark for a 200-row audit append (the compaction and retention audits, lag, reindex, diverge rows)
and 0.05x for a 200,000-row overwrite (the catalog, lookup answers): delta-spark's write runs a Spark job
for the files, then more for its statistics, checkpoint and ``DESCRIBE HISTORY``; ours is one Parquet
write plus one commit the driver makes. The export table has no choice: its tasks write the Parquet files
and one commit per micro-batch adds exactly those with the ``txn`` action that makes it exactly-once
(``udfs/export_job.py``), which only a commit of given files (delta-rs) can do. What is given up is
nothing delta-spark's readers or writers see: the tables stay at protocol reader 1 / writer 2, delta-spark
reads them, appends to them, runs OPTIMIZE and MERGE on them, and delta-rs keeps writing after it
(``tests/udfs/test_delta_spark_tables.py``); Delta's conflict rules are checked by both writers (delta-rs
re-reads the log and checks the commits since its snapshot; appends never conflict). ``auto`` still
takes delta-spark — when the session has it — for a table delta-rs should not write here: a path that is
not a local (or mounted) folder (s3a://…: the staging move is a rename), or a table whose protocol a
user raised past writer 2 (deletion vectors, column mapping… enabled through delta-spark).
``--delta-engine spark`` forces delta-spark for every table but the export's (a cluster's Delta
settings, a catalog-managed location), ``--delta-engine rs`` delta-rs.

Each commit carries ``kafkalog.*`` commit metadata (job, run id) so ``DESCRIBE HISTORY`` / delta-rs
``history()`` tells which run wrote what. A commit may also carry an application transaction
(``app_transaction=(app id, version)``, Delta's ``txn`` action, which delta-spark's ``txnAppId`` /
``txnVersion`` write too): :func:`committed_version` reads it back, so a streaming job can skip a
micro-batch a table already holds (exactly-once appends). Files of a failed write are removed; the table is untouched
until the commit, which is atomic.
"""
from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence, Tuple

from udfs.session import delta_spark_available

SPARK, RS, AUTO = "spark", "rs", "auto"
ENGINES = (AUTO, SPARK, RS)
APPEND, OVERWRITE = "append", "overwrite"


@dataclass(frozen=True)
class WriteResult:
    path: str
    engine: str
    version: Optional[int]
    files: int
    rows: int

    def to_dict(self) -> dict:
        return dict(path=self.path, engine=self.engine, version=self.version, files=self.files, rows=self.rows)


# engine="auto": the writer of each job's table (module docstring: why; bench.delta_writers: the numbers).
JOB_WRITERS = {
    "catalog": RS,      # 200k-row overwrite: 0.05x delta-spark's time
    "lookup": RS,       # overwrite of the answers: the catalog's shape
    "retention": RS,    # audit append, a row per partition: 0.27x
    "compact": RS,      # audit append: 0.27x
    "reindex": RS,      # results append: 0.27x
    "lag": RS,          # lag rows append: 0.27x
    "diverge": RS,      # rows append: 0.27x
    "export": RS,       # no choice: commits the files its tasks wrote, with the txn action (exactly once)
}
# The newest writer protocol delta-rs writes here as delta-spark expects without asking which features.
RS_MAX_WRITER_VERSION = 2


def is_local_path(path: str) -> bool:
    """A folder delta-rs's staging rename works in: no URI scheme, or file:."""
    from urllib.parse import urlparse

    scheme = urlparse(path).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def rs_can_write(path: str) -> bool:
    """delta-rs may write the table at ``path`` as this module does: a local folder, and no table yet or
    one whose protocol a user has not raised past writer :data:`RS_MAX_WRITER_VERSION`."""
    if not is_local_path(path):
        return False
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(path):
        return True
    protocol = DeltaTable(path).protocol()
    return protocol.min_reader_version <= 1 and protocol.min_writer_version <= RS_MAX_WRITER_VERSION


def choose_engine(spark, engine: str = AUTO, *, job: Optional[str] = None, path: Optional[str] = None) -> str:
    """The writer (or reader) of a table: ``engine`` when it is spark or rs (spark without delta-spark in
    the session is an error); for auto, the job's :data:`JOB_WRITERS` entry (delta-rs for every job)
    unless delta-rs cannot write ``path`` here and the session has delta-spark; without a job of
    :data:`JOB_WRITERS` (a read, a caller's own write), delta-spark when the session has it.

    :param spark: the session; :param engine: auto, spark or rs; :param job: the job writing (its
        ``JOB`` name); :param path: the table, for auto's check of where delta-rs can write."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")
    if engine == AUTO:
        choice = JOB_WRITERS.get(job or "")
        if choice is None:          # a read, or a caller of our own: what the session has
            return SPARK if delta_spark_available(spark) else RS
        if choice == RS and path is not None and not rs_can_write(path) and delta_spark_available(spark):
            return SPARK
        if choice == SPARK and not delta_spark_available(spark):
            return RS
        return choice
    if engine == SPARK and not delta_spark_available(spark):
        raise RuntimeError("this Spark session has no Delta (spark.sql.extensions lacks "
                           "io.delta.sql.DeltaSparkSessionExtension or its jars are missing); "
                           "use --delta-engine rs or auto")
    return engine


def write_table(df, path: os.PathLike | str, *, mode: str = APPEND, engine: str = AUTO,
                metadata: Optional[Mapping[str, str]] = None) -> WriteResult:
    """Write a DataFrame as (or append it to) the Delta table at ``path``."""
    if mode not in (APPEND, OVERWRITE):
        raise ValueError(f"mode must be append or overwrite, not {mode!r}")
    path = os.fspath(path)
    engine = choose_engine(df.sparkSession, engine, job=(metadata or {}).get("job"), path=path)
    metadata = {f"kafkalog.{k}": str(v) for k, v in (metadata or {}).items()}
    if engine == SPARK:
        rows = df.count()
        writer = df.write.format("delta").mode(mode).option("userMetadata", json.dumps(metadata, sort_keys=True))
        writer.save(path)
        version = df.sparkSession.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()[0]["version"]
        return WriteResult(path, SPARK, int(version), -1, rows)
    return _write_with_delta_rs(df, path, mode=mode, metadata=metadata)


def committed_version(path: os.PathLike | str, app_id: str) -> Optional[int]:
    """The last version of application ``app_id`` committed to the table (None: none, or no table)."""
    from deltalake import DeltaTable

    path = os.fspath(path)
    if not DeltaTable.is_deltatable(path):
        return None
    return DeltaTable(path).transaction_version(app_id)


def remove_staging_leftovers(path: os.PathLike | str) -> int:
    """Staging folders a killed delta-rs write left in the table folder (never part of the table)."""
    table = Path(path)
    gone = 0
    for leftover in table.glob("_kafkalog_staging_*") if table.is_dir() else ():
        shutil.rmtree(leftover, ignore_errors=True)
        gone += 1
    return gone


def append_rows(spark, rows, schema, path: os.PathLike | str, *, engine: str = AUTO,
                metadata: Optional[Mapping[str, str]] = None) -> dict:
    """Append rows (dicts shaped by the Arrow ``schema``) to the Delta table at ``path``: what a job's
    audit or results table takes. Returns the write as a report entry."""
    import pyarrow as pa

    df = spark.createDataFrame(pa.Table.from_pylist(list(rows), schema=schema))
    return write_table(df, path, mode=APPEND, engine=engine, metadata=metadata).to_dict()


@dataclass(frozen=True)
class DataFile:
    """A Parquet file inside the table folder, to be added by :func:`commit_files`."""

    path: str                                   # relative to the table, '/'-separated
    size: int
    partition_values: Mapping[str, Optional[str]]
    records: int


def commit_files(path: str, files: Sequence[DataFile], schema, *, mode: str = APPEND,
                 partition_by: Sequence[str] = (), app_transaction: Optional[Tuple[str, int]] = None,
                 metadata: Optional[Mapping[str, str]] = None) -> int:
    """ONE delta-rs commit adding ``files`` (already in the table folder) — creating the table with
    ``schema`` (Arrow) when there is none — with the application transaction; returns the new version."""
    import time as _time

    from deltalake import DeltaTable, Schema
    from deltalake.transaction import AddAction, CommitProperties, Transaction, create_table_with_add_actions

    now = int(_time.time() * 1000)
    adds = [AddAction(f.path, f.size, dict(f.partition_values), now, True, json.dumps({"numRecords": f.records}))
            for f in files]
    txns = [Transaction(app_transaction[0], int(app_transaction[1]))] if app_transaction else None
    custom = dict(metadata or {})
    if custom:
        # also as commitInfo's userMetadata, the one field of it delta-spark's DESCRIBE HISTORY shows (the
        # kafkalog.* keys stay for delta-rs history()); the same JSON engine="spark" writes
        custom["userMetadata"] = json.dumps(dict(metadata), sort_keys=True)
    commit = CommitProperties(custom_metadata=custom, app_transactions=txns)
    if DeltaTable.is_deltatable(path):
        DeltaTable(path).create_write_transaction(adds, mode=mode, schema=schema, partition_by=list(partition_by) or None,
                                                  commit_properties=commit)
    else:
        create_table_with_add_actions(path, Schema.from_arrow(schema), adds, mode="error",
                                      partition_by=list(partition_by) or None, commit_properties=commit)
    return DeltaTable(path).version()


def partition_folder(values: Mapping[str, Optional[str]], columns: Sequence[str]) -> str:
    """``topic=orders`` (Hive style, escaped as Spark escapes) for a file's partition values."""
    from urllib.parse import quote

    return "/".join(f"{c}={'__HIVE_DEFAULT_PARTITION__' if values[c] is None else quote(values[c], safe='')}"
                    for c in columns)


def _write_with_delta_rs(df, path: str, *, mode: str, metadata: Mapping[str, str]) -> WriteResult:
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema

    table = Path(path)
    table.mkdir(parents=True, exist_ok=True)
    write_id = uuid.uuid4().hex
    staging = table / f"_kafkalog_staging_{write_id}"
    moved: list[Path] = []
    try:
        df.write.mode("error").parquet(str(staging))
        files, rows = [], 0
        schema = to_arrow_schema(df.schema, timezone="UTC")
        for n, part in enumerate(sorted(staging.glob("part-*.parquet"))):
            meta = pq.read_metadata(part)
            if n == 0:
                schema = pq.read_schema(part).remove_metadata()
            name = f"part-{write_id}-{n:05d}.parquet"
            target = table / name
            os.replace(part, target)
            moved.append(target)
            rows += meta.num_rows
            files.append(DataFile(name, target.stat().st_size, {}, meta.num_rows))
        version = commit_files(path, files, schema, mode=mode, metadata=metadata)
        return WriteResult(path, RS, version, len(files), rows)
    except BaseException:
        for target in moved:
            try:
                target.unlink()
            except OSError:
                pass
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def read_table(spark, path: os.PathLike | str, *, engine: str = AUTO):
    """The current snapshot of a Delta table as a DataFrame. Without delta-spark, the snapshot's
    files (from the Delta log, via delta-rs) are read as Parquet — exact for these tables, which use
    no deletion vectors or column mapping."""
    engine = choose_engine(spark, engine)
    path = os.fspath(path)
    if engine == SPARK:
        return spark.read.format("delta").load(path)
    from deltalake import DeltaTable

    dt = DeltaTable(path)
    protocol = dt.protocol()
    if protocol.min_reader_version > 1:
        # deletion vectors or column mapping (a user enabled them through delta-spark): the files alone
        # are not the table's rows
        raise RuntimeError(f"the Delta table {path} needs reader protocol {protocol.min_reader_version} "
                           f"(features {sorted(protocol.reader_features or [])}): read it through delta-spark "
                           "(a session with Delta: KAFKALOG_SPARK_PACKAGES=delta, --delta-engine spark)")
    files = dt.file_uris()
    if not files:
        import pyarrow as pa
        from pyspark.sql.pandas.types import from_arrow_schema
        return spark.createDataFrame([], from_arrow_schema(pa.schema(dt.schema().to_arrow())))
    partition_columns = dt.metadata().partition_columns
    if not partition_columns:
        return spark.read.parquet(*files)
    # partition values live in the folder names: read them back as columns of the table's types (a topic
    # named "123" stays a string), in the table's column order
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = from_arrow_schema(pa.schema(dt.schema().to_arrow()))
    df = spark.read.schema(schema).option("basePath", os.path.abspath(path)).parquet(*files)
    return df.select(*schema.fieldNames())


def table_history(path: os.PathLike | str) -> list[dict]:
    """The table's commits, newest first (delta-rs; works whatever engine wrote them)."""
    from deltalake import DeltaTable

    return DeltaTable(os.fspath(path)).history()

