"""Bulk lookups as a Spark job: the same answers as kafkalog.lookup.partition_log one by one, from CSV, JSON lines and
Delta queries, with partitions resolved from the log dirs or the catalog table."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest

pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")

from kafkalog.lookup.partition_log import PartitionLog  # noqa: E402
from udfs import catalog_job, delta_tables, lookup_job  # noqa: E402
from udfs.job import run  # noqa: E402

from logdirs import make_partition, write_checkpoints  # noqa: E402

T0 = 1_700_000_000_000


def log_dir(tmp_path):
    d = tmp_path / "logs"
    for p in range(3):
        make_partition(d, "events", p, [[T0 + 10 * i + p for i in range(0, 8)], [T0 + 5 + 10 * i for i in range(8, 15)],
                                        [T0 + 200 + i for i in range(4)]], first_offset=100 * p)
    write_checkpoints(d, high_watermarks={("events", p): 100 * p + 17 for p in range(3)}, log_start_offsets={})
    return d


QUERIES = [dict(id=str(i), topic="events", partition=str(p), timestamp=str(ts), offset="")
           for i, (p, ts) in enumerate([(p, ts) for p in range(3)
                                        for ts in (-1, -2, -3, T0, T0 + 33, T0 + 95, T0 + 203, T0 + 10_000)])] + [
    dict(id="o1", topic="events", partition="1", timestamp="", offset="105"),
    dict(id="o2", topic="events", partition="2", timestamp="", offset="219"),     # at the end: nothing to read
    dict(id="o3", topic="events", partition="0", timestamp="", offset="5000"),    # out of range
    dict(id="x1", topic="events", partition="7", timestamp="-1", offset=""),
    dict(id="x2", topic="events", partition="zero", timestamp="-1", offset=""),
    dict(id="x3", topic="events", partition="0", timestamp="", offset=""),
]


def expected_answers(d):
    out = {}
    for q in QUERIES:
        if not q["id"].isdigit():
            continue
        with PartitionLog(d / f"events-{q['partition']}") as log:
            r = log.lookup(int(q["timestamp"]))
        out[q["id"]] = (r.found, r.offset, r.timestamp, r.why)
    return out


def test_csv_queries_match_one_by_one_lookups(spark, tmp_path):
    d = log_dir(tmp_path)
    csv = tmp_path / "q.csv"
    csv.write_text("id,topic,partition,timestamp,offset\n" +
                   "".join(f"{q['id']},{q['topic']},{q['partition']},{q['timestamp']},{q['offset']}\n" for q in QUERIES))
    report = tmp_path / "r.json"
    code = lookup_job.main(["--log-dirs", str(d), "--queries", str(csv), "--report", str(report),
                            "--output", str(tmp_path / "answers")], spark=spark)
    assert code == 1                                   # three bad or unknown queries are reported
    results = {r["id"]: r for r in json.loads(report.read_text())["results"]}
    assert len(results) == len(QUERIES)
    for qid, (found, offset, timestamp, why) in expected_answers(d).items():
        r = results[qid]
        assert (r["found"], r["offset"], r["timestamp"], r["why"]) == (found, offset, timestamp, why), qid
    assert results["0"]["offset"] == 19 and results["1"]["offset"] == 0          # latest / earliest of events-0
    assert (results["o1"]["found"], results["o1"]["segment"], results["o1"]["batch_base_offset"] <= 105
            <= results["o1"]["batch_last_offset"]) == (True, 100, True)
    assert results["o2"]["why"] == "at_end" and results["o3"]["why"] == "out_of_range"
    assert (results["x1"]["why"], results["x2"]["why"], results["x3"]["why"]) == (
        "unknown_partition", "bad_query", "bad_query")
    table = delta_tables.read_table(spark, tmp_path / "answers")
    assert table.count() == len(QUERIES) and table.where("found").count() == sum(r["found"] for r in results.values())


def test_json_and_delta_queries_and_the_catalog(spark, tmp_path):
    d = log_dir(tmp_path)
    jsonl = tmp_path / "q.jsonl"
    jsonl.write_text("".join(json.dumps({"topic": "events", "partition": p, "timestamp": T0 + 33}) + "\n"
                             for p in range(3)))
    assert catalog_job.main(["--log-dirs", str(d), "--catalog", str(tmp_path / "catalog")], spark=spark) == 0
    out = tmp_path / "a.jsonl"
    assert lookup_job.main(["--catalog", str(tmp_path / "catalog"), "--queries", str(jsonl),
                            "--output-json", str(out)], spark=spark) == 0
    answers = sorted((json.loads(line) for line in out.read_text().splitlines()), key=lambda r: r["partition"])
    with PartitionLog(d / "events-1") as log:
        assert answers[1]["offset"] == log.lookup(T0 + 33).offset
    delta_queries = tmp_path / "qdelta"
    df = spark.createDataFrame(pa.table({"topic": ["events"], "partition": [2], "offset": [203]}))
    delta_tables.write_table(df, delta_queries)
    report = tmp_path / "r.json"
    assert lookup_job.main(["--log-dirs", str(d), "--queries", str(delta_queries), "--report", str(report)],
                           spark=spark) == 0
    [r] = json.loads(report.read_text())["results"]
    assert (r["query"], r["found"], r["segment"]) == ("offset", True, 200)


def test_bad_query_files_exit_2(tmp_path, capsys):
    bad = tmp_path / "q.csv"
    bad.write_text("topic,when\nx,1\n")
    assert run("lookup", lookup_job.main, ["--log-dirs", str(tmp_path), "--queries", str(bad)]) == 2
    assert "needs columns topic, partition" in capsys.readouterr().err
    assert run("lookup", lookup_job.main, ["--log-dirs", str(tmp_path), "--queries", str(tmp_path / "none")]) == 2
