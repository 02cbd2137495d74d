"""``spark-submit.sh compact --split always`` on local[2]: every cleanable partition's round split
across tasks (hash-slice tasks, a task per segment group, the driver's swap-in) writes the bytes the
one-task path writes (``--split never``, which test_spark_compact shows equal to the single-process
cleaner: compared with that here, one Spark run less), and the report says it was split and into
how many slices and groups, and the memory its slice and group tasks used (the largest task's peak
RssAnon above its worker's idle, as a one-task round reports it)."""
from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")

from kafkalog.cleaner import clean_log_dir  # noqa: E402
from udfs import compact_job  # noqa: E402

from test_spark_compact import NOW, build, job_args, local_configs, tree  # noqa: E402

COUNTS = ("records_read", "records_kept", "records_superseded", "markers_removed", "bytes_written", "end_offset",
          "map_size")
MIB = 1 << 20


def test_split_always_writes_the_bytes_of_split_never(spark, tmp_path):
    dirs = build(tmp_path / "split")
    shutil.copytree(tmp_path / "split", tmp_path / "local")
    local = {}
    for d in dirs:
        for r in clean_log_dir(tmp_path / "local" / d.name, configs=local_configs(), now_ms=NOW):
            local[(r.topic, r.partition)] = r
    assert compact_job.main(job_args(dirs, "--split", "always", "--report", str(tmp_path / "s.json")),
                            spark=spark) == 0
    assert tree(tmp_path / "split") == tree(tmp_path / "local")
    rows = {(p["topic"], p["partition"]): p for p in json.loads((tmp_path / "s.json").read_text())["partitions"]}
    for tp, row in rows.items():
        r = local.get(tp)
        if r is not None and r.cleaned:
            assert row["status"] == "cleaned" and row["split_slices"] == 2 and row["groups"] == len(r.groups)
            assert {k: row[k] for k in COUNTS} == {k: r.audit()[k] for k in COUNTS}
            # issue 34: a task's RssAnon above its idle worker stays within the key-map budget + 64 MiB
            above = row["rss_anon_above_idle_bytes"]
            assert above is not None and 0 < above < row["map_budget"] + 64 * MIB, (above, row["map_budget"])
        else:
            assert row["status"] == "skipped" and row["split_slices"] is None
    assert sum(row["status"] == "cleaned" for row in rows.values()) == 3
    assert any(row["groups"] > 1 for row in rows.values() if row["status"] == "cleaned")


def test_group_chunks_deal_every_group_once_to_at_most_that_many_tasks():
    """The recopy tasks of a split partition (``udfs.compact_split.group_chunks``): every segment group
    in exactly one task, in log order within it, no more tasks than asked, the bytes spread."""
    from types import SimpleNamespace

    from udfs.compact_split import group_chunks
    sizes = [48, 48, 48, 48, 48, 48, 48, 48, 9]
    split = SimpleNamespace(groups=[[g] for g in range(len(sizes))],
                            group_segments=lambda g: [SimpleNamespace(size=sizes[g])])
    chunks = group_chunks(split, 4)
    assert len(chunks) == 4 and sorted(g for c in chunks for g in c) == list(range(len(sizes)))
    assert all(c == sorted(c) for c in chunks)
    loads = [sum(sizes[g] for g in c) for c in chunks]
    assert max(loads) - min(loads) <= 48
    assert group_chunks(split, 20) == [[g] for g in range(len(sizes))]
    assert group_chunks(split, 1) == [list(range(len(sizes)))]
