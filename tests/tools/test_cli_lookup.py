"""``kafkalog offsets`` (kafka-get-offsets.sh's output) and ``kafkalog fetch`` (records from an offset
or a time), through kafkalog.tools.cli.main(argv) -> exit code."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from kafkalog.checkpoint.offset import write_offset_checkpoint
from kafkalog.fs.names import REPLICATION_OFFSET_CHECKPOINT
from kafkalog.tools.cli import main
from kafkalog.format import record_batch as rb
from kafkalog.log.records_io import read_segment

TS0 = 1_700_000_000_000


def write_part(log_dir: Path, topic: str, partition: int, batches, base: int = 0) -> Path:
    """One segment of v2 batches, each a list of (offset, timestamp, key, value); indexes built by
    kafkalog's recovery rule with a small interval so that lookups go through them."""
    from kafkalog.index.builder import build_indexes
    from kafkalog.index.offset_index import write_offset_index
    from kafkalog.index.time_index import write_time_index

    d = log_dir / f"{topic}-{partition}"
    d.mkdir(parents=True)
    data, positions, sizes, lasts, maxes = [], [], [], [], []
    pos = 0
    for batch in batches:
        control = batch == "commit"
        if control:
            o = lasts[-1] + 1
            raw = rb.encode_batch([rb.V2Record(o, TS0, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")],
                                  control=True, transactional=True, producer_id=7, producer_epoch=0)
            ts = TS0
        else:
            raw = rb.encode_batch([rb.V2Record(o, t, k, v) for o, t, k, v in batch], partition_leader_epoch=5)
            o, ts = batch[-1][0], max(t for _, t, _, _ in batch)
        data.append(raw)
        positions.append(pos)
        sizes.append(len(raw))
        lasts.append(o)
        maxes.append(ts)
        pos += len(raw)
    oi, ti = build_indexes(base_offset=base, positions=positions, sizes=sizes, last_offsets=lasts,
                           max_timestamps=maxes, index_interval_bytes=50)
    name = f"{base:020d}"
    (d / f"{name}.log").write_bytes(b"".join(data))
    write_offset_index(d / f"{name}.index", oi)
    write_time_index(d / f"{name}.timeindex", ti)
    return d


@pytest.fixture
def log_dir(tmp_path):
    """Topic 'orders' with partitions 0, 1, 2 and 10 (so that string order differs from numeric)."""
    ld = tmp_path / "kafka-logs"
    write_part(ld, "orders", 0, [[(0, TS0 + 10, b"a", b"x"), (1, TS0 + 30, b"b", b"y")],
                                 [(2, TS0 + 20, None, b"z"), (3, TS0 + 40, b"c", None)],
                                 [(4, TS0 + 50, b"d", b"\xff\xfe")]])
    write_part(ld, "orders", 1, [[(0, TS0 + 100, b"k", b"v")]])
    write_part(ld, "orders", 2, [[(0, TS0 + 5, b"k", b"v")], [(1, TS0 + 6, b"k", b"v")]])
    write_part(ld, "orders", 10, [[(0, TS0 + 7, b"k", b"v")], "commit", [(2, TS0 + 60, b"k", b"after")]])
    write_part(ld, "other", 0, [[(0, TS0, b"k", b"v")]])
    return ld


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.out, out.err


# --- offsets --------------------------------------------------------------------------------------

def test_offsets_latest_is_the_default_and_sorted_as_get_offset_shell(log_dir, capsys):
    code, out, err = run(capsys, "offsets", "--log-dirs", log_dir, "--topic", "orders")
    assert code == 0 and err == ""
    # TreeMap ordered by TopicPartition.toString(): orders-0, orders-1, orders-10, orders-2
    assert out.splitlines() == ["orders:0:5", "orders:1:1", "orders:10:3", "orders:2:2"]


@pytest.mark.parametrize("time, lines", [
    ("-2", ["orders:0:0", "orders:2:0"]),
    ("earliest", ["orders:0:0", "orders:2:0"]),
    ("-3", ["orders:0:4", "orders:2:1"]),
    ("max-timestamp", ["orders:0:4", "orders:2:1"]),
    (str(TS0 + 15), ["orders:0:1"]),               # partition 2 has nothing that late: left out
    (str(TS0 + 20), ["orders:0:1"]),               # the first record >= target in offset order (ts 30)
    (str(TS0 + 31), ["orders:0:3"]),
    ("2023-11-14T22:13:20.006Z", ["orders:0:0", "orders:2:1"]),
    (str(TS0 + 51), []),                           # past the end: no line, as kafka-get-offsets.sh
])
def test_offsets_by_time(log_dir, capsys, time, lines):
    code, out, err = run(capsys, "offsets", "--log-dirs", log_dir, "--topic", "orders", "--partitions", "2,0",
                         "--time", time)
    assert (code, err) == (0, "")
    assert out.splitlines() == lines


def test_offsets_json_includes_not_found(log_dir, capsys):
    code, out, _ = run(capsys, "offsets", "--log-dirs", log_dir, "--topic", "orders", "--time", TS0 + 45, "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["partition"] for r in rows] == [0, 1, 10, 2]
    assert rows[0] == {"topic": "orders", "partition": 0, "target": TS0 + 45, "offset": 4, "timestamp": TS0 + 50,
                       "leaderEpoch": 5, "segment": 0, "found": True, "why": "found", "notes": []}
    assert (rows[3]["found"], rows[3]["offset"], rows[3]["why"]) == (False, -1, "past_end")


def test_offsets_high_watermark_isolation(log_dir, capsys):
    write_offset_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT, {("orders", 0): 3, ("orders", 2): 99},
                            sync=False)
    code, out, _ = run(capsys, "offsets", "--log-dirs", log_dir, "--topic", "orders", "--partitions", "0,1,2",
                       "--isolation", "high_watermark")
    # a partition absent from the checkpoint has HW 0, clamped to its log start offset
    assert code == 0 and out.splitlines() == ["orders:0:3", "orders:1:0", "orders:2:2"]
    code, out, _ = run(capsys, "offsets", "--log-dirs", log_dir, "--topic", "orders", "--partitions", "0",
                       "--isolation", "high_watermark", "--time", TS0 + 45)
    assert out == ""                                # offset 4 is at/above the HW: not found


def test_offsets_over_several_log_dirs(tmp_path, capsys):
    write_part(tmp_path / "a", "t", 0, [[(0, TS0, b"k", b"v")]])
    write_part(tmp_path / "b", "t", 1, [[(0, TS0, b"k", b"v")], [(1, TS0, b"k", b"v")]])
    code, out, _ = run(capsys, "offsets", "--log-dirs", f"{tmp_path / 'a'},{tmp_path / 'b'}", "--topic", "t")
    assert code == 0 and out.splitlines() == ["t:0:1", "t:1:2"]
    write_part(tmp_path / "c", "t", 1, [[(0, TS0, b"k", b"v")]])
    code, _, err = run(capsys, "offsets", "--log-dirs", f"{tmp_path / 'b'},{tmp_path / 'c'}", "--topic", "t")
    assert code == 1 and "t-1 is in two log dirs" in err


@pytest.mark.parametrize("argv, code, message", [
    (["--topic", "nope"], 2, "topic 'nope' has no partition folder in"),
    (["--topic", "orders", "--partitions", "3,4"], 2, "partition(s) 3,4 of topic 'orders' not found"),
    (["--topic", "orders", "--time", "yesterday"], 2, "'yesterday' is not a time"),
    (["--topic", "orders", "--time", "-9"], 2, "negative times other than -1..-5"),
    (["--topic", "orders", "--partitions", "a,b"], 2, "--partitions expects a comma separated list"),
    (["--topic", "orders", "--isolation", "serializable"], 2, "invalid choice"),
    ([], 2, "the following arguments are required: --topic"),
])
def test_offsets_bad_input(log_dir, capsys, argv, code, message):
    got, out, err = run(capsys, "offsets", "--log-dirs", log_dir, *argv)
    assert got == code and out == ""
    assert message in err


def test_offsets_missing_log_dir(tmp_path, capsys):
    code, out, err = run(capsys, "offsets", "--log-dirs", tmp_path / "nowhere", "--topic", "t")
    assert code == 2 and out == ""
    assert err.startswith(f"kafkalog offsets: error: {tmp_path / 'nowhere'}: log dir does not exist")


def test_offsets_corrupt_index_still_answers_with_a_warning(log_dir, capsys):
    index = log_dir / "orders-0" / "00000000000000000000.index"
    index.write_bytes(index.read_bytes() + b"\x01\x02\x03")            # not a multiple of 8
    code, out, err = run(capsys, "offsets", "--log-dirs", log_dir, "--topic", "orders", "--partitions", "0",
                         "--time", TS0 + 31)
    assert code == 0 and out == "orders:0:3\n"
    assert err.startswith("kafkalog offsets: warning: ") and "rebuilt from the .log" in err


def test_offsets_real_fixture(real_fixtures, capsys):
    log_dir = real_fixtures / "pinterest__tiered-storage/ts-consumer/src/test/resources/log-files"
    ends, firsts = {}, {}
    for p in (0, 1, 2):
        logs = sorted((log_dir / f"test_topic_a-{p}").glob("*.log"))
        ends[p] = read_segment(logs[-1]).column("offset")[-1].as_py() + 1
        t = read_segment(logs[0])
        firsts[p] = (t.column("offset")[0].as_py(), t.column("timestamp").cast(pa.int64())[0].as_py())
    code, out, _ = run(capsys, "offsets", "--log-dirs", log_dir, "--topic", "test_topic_a")
    assert code == 0 and out.splitlines() == [f"test_topic_a:{p}:{ends[p]}" for p in (0, 1, 2)]
    code, out, _ = run(capsys, "offsets", "--log-dirs", log_dir, "--topic", "test_topic_a", "--partitions", "1",
                       "--time", firsts[1][1])
    assert out == f"test_topic_a:1:{firsts[1][0]}\n"


# --- fetch ----------------------------------------------------------------------------------------

def test_fetch_text_as_console_consumer(log_dir, capsys):
    code, out, err = run(capsys, "fetch", "--log-dirs", log_dir, "--topic", "orders", "--partition", 0,
                         "--offset", 1)
    assert (code, err) == (0, "")
    assert out.splitlines() == [f"CreateTime:{TS0 + 30}\tOffset:1\tb\ty",
                                f"CreateTime:{TS0 + 20}\tOffset:2\tnull\tz",
                                f"CreateTime:{TS0 + 40}\tOffset:3\tc\tnull",
                                f"CreateTime:{TS0 + 50}\tOffset:4\td\t\\xff\\xfe"]


def test_fetch_by_time_with_max_records_and_json(log_dir, capsys):
    code, out, _ = run(capsys, "fetch", "--log-dirs", log_dir, "--topic", "orders", "--partition", 0,
                       "--time", TS0 + 35, "--max-records", 1, "--json")
    assert code == 0
    (row,) = [json.loads(line) for line in out.splitlines()]
    assert row == {"topic": "orders", "partition": 0, "offset": 3, "timestamp": TS0 + 40,
                   "timestampType": "CreateTime", "leaderEpoch": 5, "key": "c", "value": None, "key_b64": "Yw==",
                   "value_b64": None, "headers": []}
    code, out, _ = run(capsys, "fetch", "--log-dirs", log_dir, "--topic", "orders", "--partition", 0,
                       "--offset", 4, "--json")
    assert json.loads(out)["value"] is None and json.loads(out)["value_b64"] == "//4="


def test_fetch_skips_control_records(log_dir, capsys):
    code, out, _ = run(capsys, "fetch", "--log-dirs", log_dir, "--topic", "orders", "--partition", 10,
                       "--offset", 0)
    assert code == 0 and [line.split("\t")[1] for line in out.splitlines()] == ["Offset:0", "Offset:2"]


def test_fetch_nothing_at_or_after_the_time(log_dir, capsys):
    code, out, err = run(capsys, "fetch", "--log-dirs", log_dir, "--topic", "orders", "--partition", 2,
                         "--time", TS0 + 999)
    assert code == 0 and out == ""
    assert "warning: no record to start from" in err
    code, out, err = run(capsys, "fetch", "--log-dirs", log_dir, "--topic", "orders", "--partition", 2,
                         "--time", "latest")
    assert (code, out, err) == (0, "", "")          # the log end: nothing to read yet


@pytest.mark.parametrize("argv, code, message", [
    (["--partition", "0", "--offset", "6"], 2, "offset 6 is out of range for orders-0: the log holds [0, 5)"),
    (["--partition", "7", "--offset", "0"], 2, "partition(s) 7 of topic 'orders' not found"),
    (["--partition", "0"], 2, "one of the arguments --offset --time is required"),
    (["--partition", "0", "--offset", "1", "--time", "-2"], 2, "not allowed with argument"),
    (["--partition", "0", "--offset", "-1"], 2, "must be >= 0"),
    (["--partition", "0", "--time", "soon"], 2, "'soon' is not a time"),
])
def test_fetch_bad_input(log_dir, capsys, argv, code, message):
    got, out, err = run(capsys, "fetch", "--log-dirs", log_dir, "--topic", "orders", *argv)
    assert got == code and out == ""
    assert message in err


def test_fetch_corrupt_batch_is_an_error_not_a_traceback(log_dir, capsys):
    log = log_dir / "orders-0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[-3] ^= 0xFF                                              # the last batch's CRC no longer matches
    log.write_bytes(bytes(data))
    code, out, err = run(capsys, "fetch", "--log-dirs", log_dir, "--topic", "orders", "--partition", 0,
                         "--offset", 4)
    assert code == 1 and out == ""
    assert err.startswith(f"kafkalog fetch: error: {log}: byte ") and "CRC" in err
    # a lookup does not check CRCs (neither does the broker's search)
    code, out, _ = run(capsys, "offsets", "--log-dirs", log_dir, "--topic", "orders", "--partitions", "0",
                       "--time", TS0 + 45)
    assert (code, out) == (0, "orders:0:4\n")


def test_help_lists_the_new_commands(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "offsets" in out and "fetch" in out
    assert main(["offsets", "--help"]) == 0
    assert "--log-dirs" in capsys.readouterr().out


def test_unreadable_segment_is_an_error_not_a_traceback(log_dir, capsys):
    (log_dir / "orders-1" / "00000000000000000005.log").symlink_to(log_dir / "gone.log")   # dangling
    code, out, err = run(capsys, "offsets", "--log-dirs", log_dir, "--topic", "orders", "--partitions", "1")
    assert code == 1 and out == ""
    assert err.startswith("kafkalog offsets: error: ") and "00000000000000000005.log" in err
