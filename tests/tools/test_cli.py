"""The kafkalog console entry point: kafkalog.tools.cli.main(argv) -> exit code, output via stdout/stderr."""
from __future__ import annotations

import json
import sys
import types

import pytest

from kafkalog import __version__
from kafkalog.tools.cli import main
from kafkalog.errors import KafkalogError
from kafkalog.format import record_batch as rb


def segment(tmp_path, name="00000000000000000000.log", offsets=(0, 1)):
    path = tmp_path / name
    path.write_bytes(rb.encode_batch([rb.V2Record(o, 10 + o, b"k%d" % o, b"v%d" % o) for o in offsets]))
    return path


def test_help_lists_the_commands(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "usage: kafkalog" in out and "dump" in out and "demo" in out


def test_dump_help_lists_kafka_dump_log_options(capsys):
    assert main(["dump", "--help"]) == 0
    out = capsys.readouterr().out
    for option in ("--files", "--deep-iteration", "--print-data-log", "--verify-index-only", "--index-sanity-check",
                   "--max-bytes", "--max-message-size", "--skip-record-metadata", "--json"):
        assert option in out


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"kafkalog {__version__}"


@pytest.mark.parametrize("argv, message", [
    ([], "required: COMMAND"),
    (["frobnicate"], "invalid choice"),
    (["dump"], "the following arguments are required: --files"),
    (["dump", "--files"], "expected one argument"),
    (["dump", "--files", ","], "no file names given"),
    (["dump", "--files", "x.log", "--max-bytes", "-1"], "must be >= 0"),
    (["dump", "--files", "x.log", "--max-bytes", "lots"], "invalid integer"),
    (["dump", "--files", "x.log", "--max-message-size", "0"], "must be > 0"),
    (["dump", "--files", "x.log", "--no-such-option"], "unrecognized arguments"),
    (["demo"], "required: out"),
    (["demo", "out", "--compression", "brotli"], "invalid choice"),
    (["demo", "out", "--partitions", "0"], "must be > 0"),
])
def test_bad_arguments_exit_2(capsys, argv, message):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""
    assert "Traceback" not in captured.err


def test_dump_a_segment(tmp_path, capsys):
    path = segment(tmp_path)
    assert main(["dump", "--files", str(path), "--print-data-log"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[:2] == [f"Dumping {path}", "Log starting offset: 0"]
    assert lines[2].startswith("baseOffset: 0 lastOffset: 1 count: 2 ") and lines[2].endswith(" isvalid: true")
    assert lines[3:] == ["| offset: 0 CreateTime: 10 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [] key: k0 payload: v0",
                         "| offset: 1 CreateTime: 11 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [] key: k1 payload: v1"]
    assert captured.err == ""


def test_a_missing_file_is_a_bad_argument_and_nothing_is_dumped(tmp_path, capsys):
    good = segment(tmp_path, "00000000000000000005.log", offsets=(5,))
    missing = tmp_path / "00000000000000000000.log"
    assert main(["dump", "--files", f"{good},{missing}"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"kafkalog dump: error: {missing}: no such file (check the path")
    assert len(captured.err.splitlines()) == 1


def test_bad_files_do_not_stop_the_run(tmp_path, capsys):
    good = segment(tmp_path, "00000000000000000005.log", offsets=(5,))
    truncated = tmp_path / "00000000000000000000.log"
    truncated.write_bytes(segment(tmp_path, "full.log").read_bytes()[:-3])
    missing = tmp_path / "00000000000000000009.index"
    missing.write_bytes(b"\0" * 5)                  # not a whole entry: an error for that file only
    assert main(["dump", "--files", f"{truncated},{missing},{good}"]) == 1
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert out[:3] == [f"Dumping {truncated}", "Log starting offset: 0",
                       f"Found {truncated.stat().st_size} invalid bytes at the end of {truncated.name}"]
    assert f"Dumping {missing}" in out and f"Dumping {good}" in out
    assert out[-1].startswith("baseOffset: 5 lastOffset: 5 ")
    err = captured.err.splitlines()
    assert err[0].startswith(f"kafkalog dump: error: {truncated}: byte 0: batch of ")
    assert err[1].startswith(f"kafkalog dump: error: {missing}: ")
    assert "Traceback" not in captured.err


def test_json_lines(tmp_path, capsys):
    path = segment(tmp_path)
    assert main(["dump", "--files", str(path), "--deep-iteration", "--json"]) == 0
    objects = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [o["type"] for o in objects] == ["batch", "record", "record", "summary"]
    assert objects[-1]["batches"] == 1 and objects[-1]["records"] == 2 and objects[-1]["errors"] == []


def test_dump_real_fixture_with_reports(real_fixtures, capsys):
    d = real_fixtures / "pinterest__tiered-storage/ts-consumer/src/test/resources/log-files/test_topic_a-0"
    files = [d / "00000000000000000000.log", d / "00000000000000000000.index", d / "00000000000000000000.timeindex"]
    assert main(["dump", "--files", ",".join(map(str, files)), "--verify-index-only"]) == 0
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert out[0] == f"Dumping {files[0]}" and out[1] == "Log starting offset: 0"
    assert f"Dumping {files[1]}" in out and out[-1] == f"Dumping {files[2]}"
    assert captured.err.splitlines()[0] == "The following indexed offsets are not found in the log."


def test_unprintable_payload_never_crashes(tmp_path, capsys, monkeypatch):
    import io

    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(rb.encode_batch([rb.V2Record(0, 1, "\u2603".encode(), b"\xff")]))
    stream = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    monkeypatch.setattr(sys, "stdout", stream)
    assert main(["dump", "--files", str(path), "--print-data-log"]) == 0
    stream.flush()
    text = stream.buffer.getvalue().decode("ascii")
    assert text.splitlines()[-1].endswith("key: \\u2603 payload: \\ufffd")


# --- demo ----------------------------------------------------------------------------------

def test_demo_passes_its_arguments(tmp_path, monkeypatch, capsys):
    seen = {}

    def fake_main(args):
        seen.update(vars(args))
        print("demo ran")
        return 0

    monkeypatch.setitem(sys.modules, "kafkalog.tools.demo", types.SimpleNamespace(main=fake_main))
    assert main(["demo", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out == "demo ran\n"
    assert (seen["out"], seen["partitions"], seen["records"], seen["compression"], seen["seed"]) == (
        str(tmp_path / "out"), 3, 20000, "none", 1)
    assert main(["demo", "o", "--partitions", "2", "--records", "5", "--compression", "zstd", "--seed", "7"]) == 0
    assert (seen["partitions"], seen["records"], seen["compression"], seen["seed"]) == (2, 5, "zstd", 7)


def test_demo_errors(monkeypatch, capsys):
    def failing(args):
        raise KafkalogError("cannot write there", path="/nowhere")

    monkeypatch.setitem(sys.modules, "kafkalog.tools.demo", types.SimpleNamespace(main=failing))
    assert main(["demo", "/nowhere"]) == 1
    assert capsys.readouterr().err == "kafkalog demo: error: /nowhere: cannot write there\n"
    monkeypatch.setitem(sys.modules, "kafkalog.tools.demo", None)      # the module is not installed
    assert main(["demo", "/nowhere"]) == 2
    assert "kafkalog demo: error: the demo is not available" in capsys.readouterr().err
