"""Replica divergence (kafkalog.log.replica_divergence): several brokers' copies of a partition compared by
batch headers and CRCs, with Kafka's leader-epoch truncation (OffsetsForLeaderEpoch,
AbstractFetcherThread.getOffsetTruncationState) computed offline.

The replicas are written by our writer: a common prefix, then each copy appended differently under its own
leader epoch (an unclean leader election simulated by copies; no multi-broker cluster was run), with the
leader-epoch-checkpoint the writer derives from the batches' epochs, as recovery assigns it.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Sequence, Tuple

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.checkpoint.leader_epoch import EpochEntry, read_leader_epoch_checkpoint
from kafkalog.log.logdir import scan_log_dir
from kafkalog.log.replica_divergence import (AHEAD, COMPACTED, DIVERGED, IDENTICAL, LAGGING, ReplicaBatches,
                                             compare_replicas, diverge_partition, end_offset_for_epoch,
                                             truncation_offset)
from kafkalog.log.roll import RollConfig
from kafkalog.log.writer import write_log_dir
from kafkalog.testing import partition_table

TOPIC = "orders"
Batch = Tuple[int, List[str]]          # (leader epoch, record values)


def _table(batches: Sequence[Batch]) -> pa.Table:
    """One partition's records, one batch per (epoch, values), offsets from 0 with no gaps."""
    tables, offset = [], 0
    for epoch, values in batches:
        rows = [{"topic": TOPIC, "offset": offset + k, "key": f"k{(offset + k) % 7}", "value": v}
                for k, v in enumerate(values)]
        t = partition_table(rows, records_per_batch=len(values))
        col = t.schema.get_field_index("partitionLeaderEpoch")
        tables.append(t.set_column(col, "partitionLeaderEpoch", pa.array([epoch] * t.num_rows, pa.int32())))
        offset += len(values)
    return pa.concat_tables(tables)


def replica(path: Path, batches: Sequence[Batch], *, segment_bytes: int = 1 << 30, node_id: int = 1) -> Path:
    write_log_dir(path, [(TOPIC, 0, _table(batches))], roll=RollConfig(segment_bytes=segment_bytes), node_id=node_id)
    return path


def compare(*log_dirs: Path, leader: str = "epoch"):
    pdirs = [next(p for p in scan_log_dir(d).partitions if p.topic == TOPIC) for d in log_dirs]
    return diverge_partition(pdirs, names=[d.name for d in log_dirs], leader=leader)


def by_name(result, name: str):
    return next(r for r in result.replicas if r.name == name)


PREFIX: List[Batch] = [(0, ["a", "b", "c"]), (0, ["d", "e"]), (1, ["f", "g", "h", "i"])]     # offsets 0..8


# --- the scenarios -----------------------------------------------------------------------------

def test_identical_replicas(tmp_path):
    a, b = replica(tmp_path / "b1", PREFIX), replica(tmp_path / "b2", PREFIX, node_id=2)
    res = compare(a, b)
    assert res.verdict == IDENTICAL and res.first_differing_offset is None
    assert [r.truncated for r in res.replicas] == [0, 0]


def test_different_segment_boundaries_are_not_a_divergence(tmp_path):
    batches = PREFIX + [(1, [f"v{i}" for i in range(5)]) for _ in range(6)]
    a = replica(tmp_path / "b1", batches)
    b = replica(tmp_path / "b2", batches, segment_bytes=200)
    assert len(list(b.glob("orders-0/*.log"))) > 2 and len(list(a.glob("orders-0/*.log"))) == 1
    res = compare(a, b)
    assert res.verdict == IDENTICAL, res.describe()


def test_a_lagging_replica_is_not_a_divergence(tmp_path):
    a = replica(tmp_path / "b1", PREFIX + [(1, ["j", "k"])])
    b = replica(tmp_path / "b2", PREFIX)
    res = compare(a, b)
    f = by_name(res, "b2")
    assert res.leader == "b1" and res.verdict == LAGGING and f.lag == 2 and f.truncated == 0
    assert res.ahead == ("b1",) and "lagging by 2" in res.describe()


def test_unclean_election_divergence_and_truncation(tmp_path):
    """Broker 1 led epoch 1 and wrote 9..14 that broker 2 never fetched; broker 2 was elected uncleanly
    (epoch 2) and wrote 9..11. Broker 2 has the higher epoch: it is the leader, broker 1 truncates to 9."""
    old = replica(tmp_path / "b1", PREFIX + [(1, ["x1", "x2", "x3"]), (1, ["x4", "x5", "x6"])])
    new = replica(tmp_path / "b2", PREFIX + [(2, ["y1", "y2", "y3"])], node_id=2)
    assert read_leader_epoch_checkpoint(new / "orders-0" / "leader-epoch-checkpoint")[-1] == (2, 9)
    res = compare(old, new)
    f = by_name(res, "b1")
    assert res.leader == "b2" and res.verdict == DIVERGED and res.first_differing_offset == 9
    assert (f.log_end_offset, f.kept_offset, f.truncated) == (15, 9, 6)
    assert res.ahead == ("b1",)
    # the longest log as leader, elected in epoch 3 at 15: broker 2 asks about its epoch 2, which broker 1 never
    # held; broker 1 answers (1, 15): epoch 1 is its largest below 2 and ended where epoch 3 starts; broker 2's
    # own epoch 1 ends at 9, where its epoch 2 starts: it truncates to min(15, 9) = 9
    res = compare(old, new, leader="longest")
    b2 = by_name(res, "b2")
    assert res.leader == "b1" and (b2.kept_offset, b2.truncated) == (9, 3) and res.first_differing_offset == 9


def test_divergence_inside_a_batch_is_reported_at_its_base(tmp_path):
    a = replica(tmp_path / "b1", PREFIX + [(2, ["p", "q", "r"])])
    b = replica(tmp_path / "b2", PREFIX + [(2, ["p", "Q", "r"])])
    res = compare(a, b)
    assert res.verdict == DIVERGED and res.first_differing_offset == 9


def test_three_replicas_each_against_the_leader(tmp_path):
    lead = replica(tmp_path / "b1", PREFIX + [(3, ["n1", "n2"])])
    lag = replica(tmp_path / "b2", PREFIX[:2])
    old = replica(tmp_path / "b3", PREFIX + [(1, ["o1"]), (1, ["o2", "o3"])])
    res = compare(lead, lag, old)
    assert res.leader == "b1" and res.verdict == DIVERGED and res.first_differing_offset == 9
    assert by_name(res, "b2").verdict == LAGGING and by_name(res, "b2").lag == 6
    assert by_name(res, "b3").kept_offset == 9 and by_name(res, "b3").truncated == 3


def test_a_named_shorter_leader_makes_the_other_ahead(tmp_path):
    a = replica(tmp_path / "b1", PREFIX + [(1, ["j"])])
    b = replica(tmp_path / "b2", PREFIX)
    res = compare(a, b, leader="b2")
    f = by_name(res, "b1")
    assert f.verdict == AHEAD and f.lag == -1 and f.kept_offset == 9 and f.truncated == 1


def test_a_replica_ahead_in_an_older_epoch_is_cut_to_where_the_leaders_epoch_ends(tmp_path):
    """A leader named by hand that holds only epoch 0 (offsets 0..2): the follower's epoch-1 batches go, as the
    elected leader answers its epoch 1 with the end of epoch 0 (3)."""
    a = replica(tmp_path / "b1", PREFIX)
    b = replica(tmp_path / "b2", PREFIX[:1])
    f = by_name(compare(a, b, leader="b2"), "b1")
    assert f.verdict == AHEAD and (f.kept_offset, f.truncated) == (3, 6)


def test_a_compacted_copy_is_told_apart(tmp_path):
    """One broker's cleaner rewrote a batch keeping its offsets (fewer records) and removed another."""
    full = ReplicaBatches.from_headers("b1", [
        _h(0, 4, 0, 11, 5), _h(5, 9, 0, 12, 5), _h(10, 14, 1, 13, 5)], epochs=(EpochEntry(0, 0), EpochEntry(1, 10)))
    cleaned = ReplicaBatches.from_headers("b2", [
        _h(0, 4, 0, 99, 2), _h(10, 14, 1, 13, 5)], epochs=(EpochEntry(0, 0), EpochEntry(1, 10)))
    res = compare_replicas(TOPIC, 0, [full, cleaned])
    assert res.verdict == COMPACTED and res.first_differing_offset == 0
    # the same offsets with the same record count but another CRC are no cleaner's work
    bad = ReplicaBatches.from_headers("b2", [_h(0, 4, 0, 99, 5), _h(5, 9, 0, 12, 5), _h(10, 14, 1, 13, 5)],
                                      epochs=(EpochEntry(0, 0), EpochEntry(1, 10)))
    assert compare_replicas(TOPIC, 0, [full, bad]).verdict == DIVERGED


def _h(base, last, epoch, crc, count):
    return dict(base_offset=base, last_offset=last, leader_epoch=epoch, crc=crc, producer_id=-1,
                producer_epoch=-1, base_sequence=-1, attributes=0, records_count=count)


# --- Kafka's epoch rules -------------------------------------------------------------------------

def test_end_offset_for_epoch_as_leader_epoch_file_cache():
    cache = [EpochEntry(1, 0), EpochEntry(3, 10), EpochEntry(5, 20)]
    assert end_offset_for_epoch(cache, 30, 5) == (5, 30)        # the latest epoch ends at the log end
    assert end_offset_for_epoch(cache, 30, 4) == (3, 20)        # floor epoch, next epoch's start
    assert end_offset_for_epoch(cache, 30, 0) == (0, 0)         # below every epoch: requested, first start
    assert end_offset_for_epoch(cache, 30, 6) == (-1, -1)       # above every epoch
    assert end_offset_for_epoch([], 30, 1) == (-1, -1)


def test_truncation_takes_several_rounds_when_the_follower_lacks_the_leaders_epoch():
    # the leader has epochs 1, 4; the follower 1, 2, 3: asked about 3, the leader answers (1, 10); the follower
    # holds epoch 1 and ends it at 10 (epoch 2 starts there): it truncates to 10
    leader = [EpochEntry(1, 0), EpochEntry(4, 10)]
    follower = [EpochEntry(1, 0), EpochEntry(2, 10), EpochEntry(3, 15)]
    assert truncation_offset(follower, 20, leader, 30) == 10
    # the follower holds only epoch 0, the leader's first epoch is 2 (from 5): the leader answers (0, 5), the
    # requested epoch with its first start offset; the follower holds epoch 0 and truncates to min(5, 8) = 5
    assert truncation_offset([EpochEntry(0, 0)], 8, [EpochEntry(2, 5)], 9) == 5
    # no epochs at all: truncate to the high watermark when known, else keep the log
    assert truncation_offset([], 8, leader, 30, follower_high_watermark=6) == 6
    assert truncation_offset([], 8, leader, 30) == 8


# --- the property ---------------------------------------------------------------------------------

values = st.lists(st.sampled_from(["a", "b", "c", "dd"]), min_size=1, max_size=4)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=st.lists(values, min_size=1, max_size=4), left=st.lists(values, min_size=1, max_size=3),
       right=st.lists(values, min_size=1, max_size=3), seg=st.sampled_from([150, 400, 1 << 30]),
       data=st.data())
def test_first_differing_offset_is_the_true_one(tmp_path_factory, prefix, left, right, seg, data):
    """Random common prefixes, then two suffixes under different epochs whose first batches differ: the
    reported first differing offset is where the suffixes start; segment sizes vary per replica."""
    base = [(0, v) for v in prefix]
    if left[0] == right[0]:
        right = [right[0] + ["z"]] + right[1:]
    a = tmp_path_factory.mktemp("a")
    b = tmp_path_factory.mktemp("b")
    replica(a / "d", base + [(1, v) for v in left], segment_bytes=seg)
    replica(b / "d", base + [(2, v) for v in right], segment_bytes=data.draw(st.sampled_from([150, 1 << 30])))
    res = compare(a / "d", b / "d")
    true_first = sum(len(v) for v in prefix)
    assert res.first_differing_offset == true_first, res.describe()
    assert res.verdict == DIVERGED
    follower = next(r for r in res.replicas if not r.is_leader)
    assert follower.kept_offset == true_first         # epochs 1 vs 2: the follower keeps only the common prefix


# --- kafkalog diverge ------------------------------------------------------------------------------

def test_cli_one_line_per_shared_partition_and_exit_codes(tmp_path, capsys):
    import json

    from kafkalog.tools.cli import main

    a = replica(tmp_path / "b1", PREFIX + [(1, ["x"])])
    b = replica(tmp_path / "b2", PREFIX + [(2, ["y", "z"])], node_id=2)
    c = replica(tmp_path / "b3", PREFIX[:1], node_id=3)
    assert main(["diverge", "--log-dirs", f"{a},{b},{c}"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith("orders-0: diverged from offset 9")
    assert f"{c}: lagging by 8" in out[0] and f"{a}: diverged at 9" in out[0]
    assert main(["diverge", "--log-dirs", f"{b},{c}", "--json"]) == 0       # lagging only: not a divergence
    rec = json.loads(capsys.readouterr().out)
    assert rec["verdict"] == LAGGING and rec["leader"] == str(b) and rec["ahead"] == [str(b)]
    assert [r["kept_offset"] for r in rec["replicas"]] == [11, 3]


def test_cli_unknown_topic_is_a_usage_error_with_the_closest_name(tmp_path, capsys):
    from kafkalog.tools.cli import main

    a, b = replica(tmp_path / "b1", PREFIX), replica(tmp_path / "b2", PREFIX, node_id=2)
    assert main(["diverge", "--log-dirs", f"{a},{b}", "--topics", "order"]) == 2
    assert "did you mean orders?" in capsys.readouterr().err
    assert main(["diverge", "--log-dirs", f"{a}"]) == 2                       # one log dir: nothing to compare
    assert main(["diverge", "--log-dirs", f"{a},{b}", "--leader", "b9"]) == 2
    assert main(["diverge", "--log-dirs", f"{a},{b}", "--topics", "orders", "--leader", str(b)]) == 0
    assert "orders-0: identical" in capsys.readouterr().out


def test_a_corrupt_batch_ends_the_replica_where_recovery_would(tmp_path):
    a = replica(tmp_path / "b1", PREFIX)
    b = replica(tmp_path / "b2", PREFIX, node_id=2)
    log = next((b / "orders-0").glob("*.log"))
    data = bytearray(log.read_bytes())
    data[-3] ^= 0xFF                                  # a byte of the last batch's records: its CRC fails
    log.write_bytes(bytes(data))
    res = compare(a, b)
    f = by_name(res, "b2")
    assert f.verdict == LAGGING and f.log_end_offset == 5 and "corrupt" in f.detail and str(log) in f.detail


def test_the_readme_example_runs(tmp_path):
    """The docs' diverge page (docs/diverge.md), run as written; tests/test_readme.py leaves it to this test."""
    import os
    import re
    import subprocess
    import sys

    from test_readme import REPO, readme_commands

    section = (REPO / "docs" / "diverge.md").read_text()
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    outs = []
    for command in [c for c in readme_commands(section) if not c.startswith("./spark-submit.sh ")]:
        # (the section's ./spark-submit.sh line runs in tests/test_readme.py, on the shared SparkSession)
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (command, done.stdout, done.stderr)
        outs.append(done.stdout)
    assert re.search(r"^demo-orders-0: identical", outs[2], re.M)
    assert '"first_differing_offset": 0' in outs[4] and '"verdict": "diverged"' in outs[4] and "exit 1" in outs[4]


def test_a_copy_our_cleaner_compacted_is_compacted_not_diverged(tmp_path):
    """Two identical replicas, then one broker's log cleaner (ours, as Kafka's) compacts its copy: rewritten
    batches keep their offsets with fewer records, batches left empty go; that is no divergence."""
    import shutil

    from kafkalog.cleaner.cleaner import clean_partition
    from kafkalog.config import configs_from_mappings

    batches = [(0, [f"v{i}-{j}" for j in range(4)]) for i in range(8)] + [(1, ["w1", "w2"]) for _ in range(4)]
    a = replica(tmp_path / "b1", batches, segment_bytes=300)
    shutil.copytree(a, tmp_path / "b2")
    config = configs_from_mappings(topics={TOPIC: {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"}}
                                   ).for_topic(TOPIC)
    res = clean_partition(tmp_path / "b2" / "orders-0", config=config, now_ms=1_800_000_000_000)
    assert res.error is None
    out = compare(a, tmp_path / "b2")
    f = by_name(out, "b2")
    assert f.verdict == COMPACTED and f.first_differing_offset is not None and f.truncated == 0, out.describe()
    assert out.verdict == COMPACTED and out.leader == "b1"
