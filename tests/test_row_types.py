"""Report rows typed by their dataclass (``kafkalog.row_types``): the Arrow schema comes from the
annotations, in field order, and the compaction job's row and audit schemas are what they were."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

import pyarrow as pa
import pytest

from kafkalog.cleaner.partition_run import COUNT_FIELDS, ROW_FIELDS, CompactionRow
from kafkalog.row_types import Int32, TimestampMs, arrow_schema, arrow_type, as_row, row_fields


@dataclass
class _Row:
    name: Optional[str] = None
    count: Optional[int] = None
    small: Optional[Int32] = None
    ratio: Optional[float] = None
    flag: Optional[bool] = None
    at: Optional[TimestampMs] = None
    words: Optional[List[str]] = None


def test_each_annotation_maps_to_its_arrow_type_in_field_order():
    assert arrow_schema(_Row) == pa.schema([
        pa.field("name", pa.string()), pa.field("count", pa.int64()), pa.field("small", pa.int32()),
        pa.field("ratio", pa.float64()), pa.field("flag", pa.bool_()),
        pa.field("at", pa.timestamp("ms", tz="UTC")), pa.field("words", pa.list_(pa.string()))])
    assert row_fields(_Row) == ("name", "count", "small", "ratio", "flag", "at", "words")


def test_an_annotation_without_an_arrow_type_is_an_error_naming_it():
    with pytest.raises(TypeError, match="dict"):
        arrow_type(dict)


def test_a_row_becomes_the_dict_arrow_and_json_take():
    row = _Row(name="t", small=3, words=["a"])
    out = as_row(row)
    assert list(out) == list(row_fields(_Row)) and out["words"] == ["a"] and out["words"] is not row.words
    assert pa.Table.from_pylist([out], schema=arrow_schema(_Row)).to_pylist() == [out]


def test_the_compaction_row_keeps_its_columns_and_refuses_a_misspelt_one():
    schema = arrow_schema(CompactionRow)
    assert schema.names == list(ROW_FIELDS) and ROW_FIELDS[:4] == ("log_dir", "partition_dir", "topic", "partition")
    assert ROW_FIELDS[-1] == "explain" and COUNT_FIELDS[0] == "batches_read" and COUNT_FIELDS[-1] == "bytes_written"
    types = dict(zip(schema.names, schema.types))
    assert types["partition"] == types["groups"] == pa.int32()
    assert types["cleanable_ratio"] == types["duration_s"] == pa.float64()
    assert types["need_compaction_now"] == pa.bool_() and types["explain"] == pa.list_(pa.string())
    assert types["plan"] == pa.string() and types["records_kept"] == types["end_offset"] == pa.int64()
    row = CompactionRow()
    with pytest.raises(AttributeError):
        row.update(recods_kept=1)
