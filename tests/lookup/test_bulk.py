"""kafkalog.lookup.bulk: many lookups at once, Arrow in and out, without Spark — the same answers as
PartitionLog one query at a time, and an answer row (never an exception) for every bad query."""
from __future__ import annotations

import pyarrow as pa

from kafkalog.lookup.bulk import QUERY_SCHEMA, RESULT_SCHEMA, answer_queries, live_partition_folders
from kafkalog.lookup.partition_log import PartitionLog

from logdirs import make_partition, write_checkpoints

T0 = 1_700_000_000_000


def log_dir(tmp_path):
    d = tmp_path / "logs"
    for p in range(2):
        make_partition(d, "events", p, [[T0 + 10 * i + p for i in range(8)], [T0 + 100 + i for i in range(4)]],
                       first_offset=100 * p)
    write_checkpoints(d, high_watermarks={("events", p): 100 * p + 12 for p in range(2)}, log_start_offsets={})
    return d


def folders_of(d):
    return live_partition_folders(((("events", p), (str(d), str(d / f"events-{p}"))) for p in range(2)))


def table(rows):
    return pa.Table.from_pylist([{c: r.get(c) for c in QUERY_SCHEMA.names} for r in rows], schema=QUERY_SCHEMA)


def test_answers_match_one_by_one_lookups(tmp_path):
    d = log_dir(tmp_path)
    rows = [dict(id=f"{p}:{ts}", topic="events", partition=str(p), timestamp=str(ts))
            for p in range(2) for ts in (-1, -2, -3, T0, T0 + 35, T0 + 102, T0 + 10_000)]
    rows.append(dict(id="iso", topic="events", partition="0", timestamp="2023-11-14T22:13:20Z"))
    answers = answer_queries(table(rows), folders_of(d), isolation="log_end")
    assert answers.schema == RESULT_SCHEMA and answers.num_rows == len(rows)
    for q, a in zip(rows, answers.to_pylist()):
        with PartitionLog(d / f"events-{q['partition']}") as log:
            want = log.lookup(T0 if q["id"] == "iso" else int(q["timestamp"]))
        assert (a["id"], a["found"], a["offset"], a["timestamp"], a["why"]) == \
            (q["id"], want.found, want.offset, want.timestamp, want.why)
        assert a["query"] == "timestamp" and a["partition_dir"] == str(d / f"events-{q['partition']}")


def test_offset_queries_give_the_batch_a_fetch_starts_at(tmp_path):
    d = log_dir(tmp_path)
    rows = [dict(id="a", topic="events", partition="1", offset="105"),
            dict(id="end", topic="events", partition="0", offset="12"),
            dict(id="far", topic="events", partition="0", offset="5000")]
    a, end, far = answer_queries(table(rows), folders_of(d), isolation="log_end").to_pylist()
    with PartitionLog(d / "events-1") as log:
        pos = log.translate_offset(105)
    assert (a["found"], a["why"], a["segment"], a["position"], a["batch_base_offset"], a["batch_last_offset"]) == \
        (True, "found", pos.segment, pos.position, pos.base_offset, pos.last_offset)
    assert (end["found"], end["why"], end["offset"]) == (False, "at_end", 12)
    assert (far["found"], far["why"]) == (False, "out_of_range") and "5000" in far["message"]


def test_bad_rows_unknown_and_doubled_partitions_are_answers(tmp_path):
    d = log_dir(tmp_path)
    folders = live_partition_folders([(("events", 0), (str(d), str(d / "events-0"))),
                                      (("events", 1), (str(d), str(d / "events-1"))),
                                      (("events", 1), ("/other", "/other/events-1"))])
    assert folders[("events", 1)] is None and folders[("events", 0)] == (str(d), str(d / "events-0"))
    rows = [dict(id="p", topic="events", partition="zero", timestamp="-1"),
            dict(id="t", topic="events", partition="0", timestamp="yesterday"),
            dict(id="n", topic="events", partition="0"),
            dict(id="u", topic="events", partition="7", timestamp="-1"),
            dict(id="twice", topic="events", partition="1", timestamp="-1")]
    answers = answer_queries(table(rows), folders, isolation="log_end").to_pylist()
    got = {r["id"]: (r["why"], r["message"]) for r in answers}
    assert got["p"][0] == got["t"][0] == got["n"][0] == "bad_query"
    assert "is not a time" in got["t"][1] and "neither timestamp nor offset" in got["n"][1]
    assert got["u"] == ("unknown_partition", "no live folder events-7 in the log dirs")
    assert got["twice"] == ("unknown_partition", "events-1 is in more than one log dir")


def test_dry_run_resolves_without_reading(tmp_path):
    d = log_dir(tmp_path)
    folders = {("events", 0): (str(d), str(tmp_path / "gone"))}     # never opened on a dry run
    [a] = answer_queries(table([dict(id="a", topic="events", partition="0", timestamp="-1")]), folders,
                         isolation="log_end", dry_run=True).to_pylist()
    assert (a["why"], a["found"], a["partition_dir"]) == ("dry_run", False, str(tmp_path / "gone"))
    [b] = answer_queries(table([dict(id="b", topic="events", partition="0", timestamp="-1")]), folders,
                         isolation="log_end").to_pylist()
    assert b["why"] == "error"
