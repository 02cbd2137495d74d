"""A newcomer's slips: options must be spelled out, commands that create a log dir refuse a
non-empty one, and every command answers bad arguments with one line saying what to do, exit code 2,
no traceback — the Spark jobs before Spark starts."""
from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog.tools.cli import build_parser, main
from kafkalog.tools.demo import generate_demo_log_dir

REPO = Path(__file__).resolve().parents[1]
KAFKALOG = Path(sys.executable).parent / "kafkalog"
JOBS = ("catalog", "retention", "compact", "reindex", "lookup", "lag", "export", "restore", "diverge", "asof")


@pytest.fixture(scope="module")
def place(tmp_path_factory) -> Path:
    """A demo log dir ``d`` and a few wrong things beside it."""
    root = tmp_path_factory.mktemp("errors")
    generate_demo_log_dir(root / "d", partitions=2, records=300)
    (root / "file.txt").write_text("not a log dir\n")
    (root / "not-a-table").mkdir()
    (root / "not-a-table" / "notes.txt").write_text("x\n")
    (root / "queries.csv").write_text("topic,partition,timestamp\ndemo-orders,0,-1\n")
    (root / "typo.properties").write_text("retention.msx=1000\n")
    return root


def _snapshot(folder: Path) -> dict:
    return {p.relative_to(folder): (p.stat().st_size, p.read_bytes()) for p in sorted(folder.rglob("*")) if p.is_file()}


# --- abbreviations ---------------------------------------------------------------------------

def _parsers(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:                       # noqa: SLF001 - walking argparse's subparsers
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_no_parser_accepts_abbreviations():
    parsers = list(_parsers(build_parser()))
    assert len(parsers) == 13                             # kafkalog and its twelve subcommands
    parsers += [importlib.import_module(f"udfs.{job}_job").build_parser() for job in JOBS]
    assert all(p.allow_abbrev is False for p in parsers), [p.prog for p in parsers if p.allow_abbrev]


@pytest.mark.parametrize("argv", [
    ["dump", "--files", "{seg}", "--exec"],
    ["dump", "--files", "{seg}", "--deep"],                        # --deep-iteration
    ["demo", "{new}", "--exec"],
    ["demo", "{new}", "--part", "2"],                              # --partitions
    ["offsets", "--log-dirs", "{d}", "--topic", "demo-orders", "--exec"],
    ["offsets", "--log-dir", "{d}", "--topic", "demo-orders"],     # --log-dirs
    ["fetch", "--log-dirs", "{d}", "--topic", "demo-orders", "--partition", "0", "--offset", "0", "--exec"],
    ["fetch", "--log-dirs", "{d}", "--topic", "demo-orders", "--part", "0", "--offset", "0"],
    ["recover", "--log-dirs", "{d}", "--exec"],
    ["recover", "--log-dir", "{d}"],
    ["lag", "--log-dir", "{d}"],                                   # --log-dirs
    ["lag", "--log-dirs", "{d}", "--group-pat", "x"],              # --group-pattern
    ["--vers"],
])
def test_kafkalog_refuses_abbreviated_options(place, tmp_path, capsys, argv):
    seg = place / "d" / "demo-orders-0" / "00000000000000000000.log"
    argv = [a.format(seg=seg, new=tmp_path / "new", d=place / "d") for a in argv]
    before = _snapshot(place / "d")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments" in err or "required" in err, err
    assert _snapshot(place / "d") == before and not (tmp_path / "new").exists()


@pytest.mark.parametrize("job, argv", [
    ("retention", ["--exec"]),
    ("retention", ["--exec", "--delete-delay", "0"]),
    ("compact", ["--exec"]),
    ("compact", ["--dry"]),                                         # a prefix of --dry-run must not be one
    ("reindex", ["--verify"]),
    ("catalog", ["--dry"]),
    ("diverge", ["--dry"]),
])
def test_jobs_refuse_abbreviated_options_before_touching_anything(place, capsys, job, argv):
    from udfs.job import run

    before = _snapshot(place / "d")
    module = importlib.import_module(f"udfs.{job}_job")
    assert run(job, module.main, ["--log-dirs", str(place / "d"), *argv]) == 2
    err = capsys.readouterr().err
    assert f"unrecognized arguments: {argv[0]}" in err and "Traceback" not in err
    assert _snapshot(place / "d") == before


# --- a command that creates a log dir refuses a non-empty one -----------------------------------

def test_demo_refuses_an_existing_log_dir_and_writes_nothing(tmp_path, capsys):
    log_dir = tmp_path / "logs"
    generate_demo_log_dir(log_dir, partitions=1, records=50, seed=7)
    (log_dir / "meta.properties").write_text("node.id=42\ncluster.id=prod\nversion=1\n")
    before = _snapshot(log_dir)
    assert main(["demo", str(log_dir), "--partitions", "2", "--records", "10"]) == 2
    err = capsys.readouterr().err
    assert "must be a new or empty folder" in err and "nothing was written" in err
    assert _snapshot(log_dir) == before
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["demo", str(empty), "--partitions", "1", "--records", "10"]) == 0     # an empty folder is fine
    assert (empty / "demo-orders-0").is_dir()


# --- every command: bad arguments are one line, exit 2, no traceback ----------------------------

KAFKALOG_CASES = [
    (["dump", "--files", "{t}/missing.log"], "no such file"),
    (["dump", "--files", "{d}"], "is a folder, not a file"),
    (["dump", "--files", "{d}/meta.properties"], "not a file kafka-dump-log reads"),
    (["dump", "--files", "{seg}", "--max-bytes", "lots"], "invalid integer"),
    (["demo", "{d}"], "must be a new or empty folder"),
    (["demo", "{t}/file.txt"], "this is a file"),
    (["demo", "{t}/new", "--records", "-5"], "must be >= 0"),
    (["demo", "{t}/new", "--topic", "bad topic"], "not a Kafka topic name"),
    (["offsets", "--log-dirs", "{t}/missing", "--topic", "x"], "log dir does not exist"),
    (["offsets", "--log-dirs", "{t}/file.txt", "--topic", "x"], "log dir is a file"),
    (["offsets", "--log-dirs", "{d}/demo-orders-0", "--topic", "demo-orders"], "is a partition folder"),
    (["offsets", "--log-dirs", "{d}", "--topic", "nope"], "topics there: demo-orders"),
    (["offsets", "--log-dirs", "{d}", "--topic", "demo-orders", "--time", "tomorrow"], "is not a time"),
    (["offsets", "--log-dirs", "{d}", "--topic", "demo-orders", "--partitions", "7"], "partitions present: 0,1"),
    (["fetch", "--log-dirs", "{d}", "--topic", "demo-orders", "--partition", "0", "--offset", "999999"],
     "out of range"),
    (["fetch", "--log-dirs", "{d}", "--topic", "demo-orders", "--partition", "-1", "--offset", "0"], "must be >= 0"),
    (["recover", "--log-dirs", "{t}/missing"], "log dir does not exist"),
    (["recover", "--log-dirs", "{d}/demo-orders-1"], "is a partition folder"),
    ([], "required: COMMAND"),
    (["nope"], "invalid choice"),
]

JOB_CASES = [
    (["catalog", "--log-dirs", "{t}/missing"], "log dir does not exist"),
    (["catalog"], "give --log-dirs"),
    (["catalog", "--log-dirs", "{d}", "--catalog", "{t}/file.txt"], "is a file; give a folder"),
    (["catalog", "--log-dirs", "{d}", "--catalog", "{t}/not-a-table"], "not a Delta table"),
    (["catalog", "--log-dirs", "{d}", "--report", "{t}"], "is a folder; give the path of a .json"),
    (["retention", "--log-dirs", "{d}", "--exec"], "unrecognized arguments: --exec"),
    (["retention", "--log-dirs", "{d}", "--topic-config", "demo-orders:retention.msx=1"],
     "did you mean retention.ms?"),
    (["retention", "--log-dirs", "{d}", "--now-ms", "yesterday"], "neither epoch milliseconds"),
    (["retention", "--log-dirs", "{d}", "--topics", "orders"], "no partition folder of orders"),
    (["retention", "--broker-config", "{t}/missing.properties"], "cannot read"),
    (["retention", "--log-dirs", "{d}", "--broker-config", "{seg}"], "not a .properties text file"),
    (["retention", "--log-dirs", "{d},{d}"], "is given twice"),
    (["retention", "--log-dirs", "{d}", "--delete-delay-ms", "-1"], "must be >= 0"),
    (["compact", "--log-dirs", "{d}", "--exec"], "unrecognized arguments: --exec"),
    (["compact", "--log-dirs", "{d}", "--explain", "nope"], "is not TOPIC:PARTITION:OFFSET"),
    (["compact", "--log-dirs", "{d}", "--topic-config-file", "demo-orders:{t}/typo.properties", "--dry-run"],
     "did you mean retention.ms?"),
    (["compact", "--log-dirs", "{d}", "--topics", "orders", "--dry-run"], "no partition folder of orders"),
    (["reindex", "--log-dirs", "{d}", "--verify-only", "--truncate-corrupt-tail"], "cannot be combined"),
    (["reindex", "--log-dirs", "{d}/demo-orders-0"], "is a partition folder"),
    (["lookup", "--log-dirs", "{d}", "--queries", "{t}/missing.csv"], "does not exist"),
    (["lookup", "--log-dirs", "{d}", "--queries", "{t}/not-a-table"], "not a Delta table"),
    (["lookup", "--queries", "{t}/queries.csv", "--catalog", "{t}/not-a-table"], "is not a Delta table"),
    (["lookup", "--log-dirs", "{d}"], "required: --queries"),
    (["export", "--log-dirs", "{d}"], "required: --table, --checkpoint"),
    (["export", "--log-dirs", "{d}", "--table", "{t}/not-a-table", "--checkpoint", "{t}/c"], "not a Delta table"),
    (["export", "--log-dirs", "{d}", "--table", "{t}/new-table", "--checkpoint", "{t}/c", "--topics", "orders"],
     "no partition folder of orders"),
    (["export", "--log-dirs", "{d}", "--table", "{t}/new-table", "--checkpoint", "{t}/c", "--max-records-per-batch",
      "0"], "must be at least 1"),
    (["restore", "--table", "{t}/not-a-table", "--log-dir", "{t}/new"], "is not a Delta table"),
    (["restore", "--log-dirs", "{d}", "--table", "{t}/not-a-table", "--log-dir", "{t}/new"], "give it as --log-dir"),
    (["catalog", "--log-dirs", "{d}", "--master", "nonsense"], "is not a Spark master URL"),
    (["nope"], "unknown job 'nope'"),
    ([], "usage: ./spark-submit.sh <job>"),
]


def _fill(argv, place: Path):
    seg = place / "d" / "demo-orders-0" / "00000000000000000000.log"
    return [a.format(t=place, d=place / "d", seg=seg) for a in argv]


def _check(done: subprocess.CompletedProcess, message: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout, done.stderr
    assert message in done.stderr, done.stderr
    assert done.stdout == "", done.stdout


@pytest.mark.parametrize("argv, message", KAFKALOG_CASES, ids=[" ".join(c[0])[:60] for c in KAFKALOG_CASES])
def test_kafkalog_bad_arguments(place, argv, message):
    before = _snapshot(place / "d")
    done = subprocess.run([str(KAFKALOG), *_fill(argv, place)], capture_output=True, text=True, timeout=120)
    _check(done, message)
    assert _snapshot(place / "d") == before and not (place / "new").exists()


@pytest.mark.parametrize("argv, message", JOB_CASES, ids=[" ".join(c[0])[:60] for c in JOB_CASES])
def test_spark_job_bad_arguments_fail_before_spark_starts(place, argv, message):
    before = _snapshot(place / "d")
    env = dict(os.environ, KAFKALOG_PYTHON=sys.executable)
    done = subprocess.run([str(REPO / "spark-submit.sh"), *_fill(argv, place)], capture_output=True, text=True,
                          env=env, timeout=120)
    _check(done, message)
    assert "starting Spark" not in done.stderr
    assert _snapshot(place / "d") == before
