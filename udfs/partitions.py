"""Spreading partition folders over Spark tasks: the driver lists only the log dirs' top level (one
row per folder), Spark distributes the rows, and each task runs a kafkalog function per folder inside
``mapInArrow``, returning Arrow rows. A folder's trouble is a row saying so, never a failed task.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import pyarrow as pa

from kafkalog.catalog import catalog_rows, error_rows
from kafkalog.log.local_log import load_partition, read_log_dir_checkpoints
from kafkalog.fs.durable import fenced
from kafkalog.errors import KafkalogError, UsageError
from kafkalog.fs import filesystem
from kafkalog.fs.lock import held_fences
from kafkalog.log.logdir import scan_partition_dir
from kafkalog.fs.names import REMOTE_INDEX_CACHE_DIR, parse_partition_dir_name

FOLDER_SCHEMA = pa.schema([pa.field("log_dir", pa.string()), pa.field("partition_dir", pa.string())])


def list_partition_folders(log_dirs: Iterable[os.PathLike | str]) -> list[tuple[str, str]]:
    """(log dir, folder) for every folder directly inside the log dirs, in name order. Folders that
    are not partitions are kept: the per-folder function reports them (a broker refuses such a dir)."""
    folders = []
    for log_dir in log_dirs:
        for entry in sorted(filesystem.scandir(log_dir), key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False) and entry.name != REMOTE_INDEX_CACHE_DIR:
                folders.append((os.fspath(log_dir), entry.path))
    return folders


def topic_of_folder(folder: str):
    """The topic of a partition folder's name, or None when the name is not a partition folder's."""
    try:
        return parse_partition_dir_name(Path(folder).name)[0]
    except KafkalogError:
        return None


def topics_option(text: str | None) -> set[str] | None:
    """A job's ``--topics a,b`` as a set; None when it was not given (every topic)."""
    return None if not text else {t for t in text.split(",") if t}


def partition_folders_of(log_dirs: Iterable[os.PathLike | str], topics: set[str] | None) -> list[tuple[str, str]]:
    """list_partition_folders, keeping only the folders of ``topics`` when it is given; a topic with no
    folder there is a UsageError (a misspelt ``--topics`` would otherwise do nothing, silently)."""
    log_dirs = list(log_dirs)
    folders = list_partition_folders(log_dirs)
    if topics is None:
        return folders
    present = {topic_of_folder(f[1]) for f in folders}
    unknown = sorted(topics - present)
    if unknown:
        known = ", ".join(sorted(t for t in present if t)[:20]) or "none"
        raise UsageError(f"--topics: no partition folder of {', '.join(unknown)} in "
                         f"{', '.join(map(os.fspath, log_dirs))}", hint=f"topics there: {known}")
    return [f for f in folders if topic_of_folder(f[1]) in topics]


def folders_frame(spark, folders: Sequence[tuple[str, str]], *, tasks: int | None = None):
    """A DataFrame of folders, sliced so every core gets work (a few folders per task)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    parallelism = spark.sparkContext.defaultParallelism
    slices = max(1, min(len(folders), tasks or parallelism * 4))
    rdd = spark.sparkContext.parallelize(list(folders), slices)
    return spark.createDataFrame(rdd, from_arrow_schema(FOLDER_SCHEMA))


def spark_arrow_schema(schema: pa.Schema) -> pa.Schema:
    """The schema Spark accepts back from ``mapInArrow``: timestamps in microseconds (Spark's unit)."""
    def fix(t: pa.DataType) -> pa.DataType:
        if pa.types.is_timestamp(t):
            return pa.timestamp("us", tz=t.tz)
        if pa.types.is_list(t):
            return pa.list_(pa.field(t.value_field.name, fix(t.value_type), t.value_field.nullable))
        if pa.types.is_struct(t):
            return pa.struct([pa.field(f.name, fix(f.type), f.nullable) for f in t])
        return t
    return pa.schema([pa.field(f.name, fix(f.type), f.nullable) for f in schema])


def map_folders(df, per_folder: Callable[[str, str, dict], list[dict]], schema: pa.Schema, *, counter=None):
    """``mapInArrow`` running ``per_folder(log_dir, folder, task_cache) -> rows`` for each folder; the
    task cache lets a task read each log dir's checkpoints once. ``counter`` (``udfs.progress.count_folders``)
    counts the folders done, for the job's progress line. Each folder's work is fenced by the lock this
    (driver) process holds on its log dir, if any (``kafkalog.fs.durable``): a worker changes nothing in the
    dir once the driver is gone."""
    from pyspark.sql.pandas.types import from_arrow_schema

    out_schema = spark_arrow_schema(schema)
    fences = held_fences()

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        cache: dict = {}
        for batch in batches:
            rows = []
            for log_dir, folder in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                with fenced([fences.get(log_dir)]):
                    rows.extend(per_folder(log_dir, folder, cache))
                if counter is not None:
                    counter.add(folder)
            if rows:
                yield pa.RecordBatch.from_pylist(rows, schema=schema).cast(out_schema)

    return df.mapInArrow(run, from_arrow_schema(out_schema))


def cached_checkpoints(log_dir: str, cache: dict):
    key = ("checkpoints", log_dir)
    if key not in cache:
        cache[key] = read_log_dir_checkpoints(log_dir)
    return cache[key]


def catalog_folder(log_dir: str, folder: str, cache: dict) -> list[dict]:
    """The catalog rows of one folder (kafkalog.catalog), or one ``error`` row."""
    name = Path(folder).name
    try:
        topic, partition, kind = parse_partition_dir_name(name)
    except KafkalogError as exc:
        return error_rows(log_dir=log_dir, path=folder, topic=name, partition=-1, kind="unknown",
                          problem=f"{exc}; a broker refuses a log dir holding it")
    try:
        checkpoints = cached_checkpoints(log_dir, cache)
        state = load_partition(scan_partition_dir(folder, log_dir=log_dir), checkpoints)
        state.problems[:0] = list(checkpoints.problems)
        return catalog_rows(state)
    except (KafkalogError, OSError) as exc:
        return error_rows(log_dir=log_dir, path=folder, topic=topic, partition=partition, kind=kind,
                          problem=str(exc))
