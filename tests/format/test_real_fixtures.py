"""Every broker-written segment and record set in ../shared/fixtures/real decodes with the batch,
record, CRC, magic, codec and control counts MANIFEST.tsv states — with both engines."""
from __future__ import annotations

import csv
import re

import numpy as np
import pytest

from kafkalog.log import records_io as segment
from kafkalog.errors import CorruptRecordError, TruncatedBatchError
from kafkalog.format.compression import CODEC_IDS
from kafkalog.format.file_records import check_crcs, scan_batches
from kafkalog.fs.filesystem import MappedFile

from conftest import REAL_FIXTURES
from engines import engine_param


def _manifest_rows():
    path = REAL_FIXTURES / "MANIFEST.tsv"
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return [r for r in rows if r["kind"] == "log segment" or r["kind"].startswith("DERIVED")]


ROWS = _manifest_rows()
NO_FIXTURES = f"real Kafka fixtures not found at {REAL_FIXTURES} (they live in ../shared beside the project clone)"
ROW_PARAMS = [pytest.param(r, id=r["path"]) for r in ROWS] or [pytest.param(None, marks=pytest.mark.skip(reason=NO_FIXTURES))]


def _expected(summary: str) -> dict:
    if summary.startswith("empty"):
        return {"batches": 0, "records": 0, "crc_bad": 0, "magic": set(), "codec": set(), "control": 0}
    fields = dict(re.findall(r"(\w+)=([^\s]*)", summary))
    exp = {
        "batches": int(fields["batches"]), "records": int(fields["records"]), "crc_bad": int(fields["crc_bad"]),
        "magic": {int(m) for m in fields["magic"].split(",") if m},
        "codec": {CODEC_IDS[c] for c in fields["codec"].split(",") if c},
        "control": int(fields.get("control_batches", 0)),
        "truncated_tail": "truncated-tail" in summary,
    }
    if "offsets" in fields:
        lo, hi = fields["offsets"].split("..")
        exp["offsets"] = (int(lo), int(hi))
    return exp


def test_manifest_lists_segments(real_fixtures):
    assert len(ROWS) >= 190, "MANIFEST.tsv should list the fixture segments and derived record sets"


@engine_param
@pytest.mark.parametrize("row", ROW_PARAMS)
def test_fixture_decodes_as_manifest_says(real_fixtures, row, engine):
    path = real_fixtures / row["path"]
    exp = _expected(row["summary"])
    scan = scan_batches(path, verify_crc=False, on_corrupt="stop", engine=engine)
    b = scan.batches
    assert b.num_rows == exp["batches"]
    with MappedFile(path) as f:
        crc_ok = check_crcs(f.array, scan.headers, len(scan.headers))
    assert int((~crc_ok).sum()) == exp["crc_bad"]
    assert set(b.column("magic").to_pylist()) == exp["magic"]
    assert set(b.column("codec").to_pylist()) == exp["codec"]
    assert sum(b.column("isControl").to_pylist()) == exp["control"]
    if "offsets" in exp and b.num_rows:
        assert (b.column("baseOffset")[0].as_py(), b.column("lastOffset")[-1].as_py()) == exp["offsets"]
    if exp.get("truncated_tail"):
        assert isinstance(scan.error, TruncatedBatchError) and scan.valid_bytes == 0
        with pytest.raises(TruncatedBatchError) as e:
            segment.read_segment(path, engine=engine)
        assert str(path) in str(e.value)
    elif row["kind"] == "log segment":
        assert scan.error is None and scan.valid_bytes == scan.file_size
    else:
        # Fetch responses may end inside a message (the broker sends partial tails); a tail shorter
        # than a header is not in MANIFEST's summary, but it is a truncated tail all the same.
        assert scan.error is None or isinstance(scan.error, TruncatedBatchError)
        assert scan.valid_bytes == sum(b.column("size").to_pylist())
    table = segment.read_segment(path, engine=engine, verify_crc=exp["crc_bad"] == 0, on_corrupt="stop")
    assert table.num_rows == exp["records"]
    if table.num_rows:
        offsets = np.asarray(table.column("offset"))
        assert (np.diff(offsets) > 0).all(), "record offsets strictly increase within these logs"


def test_bad_crc_fixture_is_refused_by_default(real_fixtures):
    path = real_fixtures / "kafka-rust__kafka-rust/_derived_records/fetch2.mytopic.nocompression.invalid_crc.kafka.0900.my-topic-0.records.bin"
    with pytest.raises(CorruptRecordError) as e:
        segment.read_segment(path)
    assert "CRC-32" in str(e.value) and "byte 0" in str(e.value)


def test_kafka_07_segment_is_rejected_not_crashed(real_fixtures):
    path = next((real_fixtures / "apache__kafka/core/src/test/resources/test-kafka-logs").rglob("*.kafka"))
    with pytest.raises(CorruptRecordError) as e:
        segment.read_segment(path)
    assert str(path) in str(e.value) and "byte" in str(e.value)


def test_kafka_go_fixture_values(real_fixtures):
    """Mixed v1/v2, gzip wrappers: kafka-go's message_test.go expects keys/values like these."""
    path = real_fixtures / "segmentio__kafka-go/_derived_records/v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc.hex.test-88-0.records.bin"
    t = segment.read_segment(path)
    assert t.column("offset").to_pylist() == list(range(20))
    assert set(t.column("magic").to_pylist()) == {1, 2}


def test_kafkajs_log_append_time_and_mixed(real_fixtures):
    """The 160 KB mixed v1/v2 partition decodes identically with both engines."""
    path = real_fixtures / "tulios__kafkajs/_derived_records/v4_response_mixed_formats.json.test-mixed-message-formats-0.records.bin"
    a = segment.read_segment(path, engine="reference")
    b = segment.read_segment(path, engine="compiled")
    assert a.equals(b) and a.num_rows == 2425
