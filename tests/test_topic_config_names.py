"""A topic named in ``--topic-config`` / ``--topic-config-file`` that the log dirs do not hold: the jobs that
delete or rewrite (retention, compact, reindex — dry runs included — and restore) stop with exit 2 and
"did you mean demo-orders?" before touching a byte; the read-only runs warn and go on;
``--allow-absent-topic-configs`` lets one set of overrides name topics held elsewhere."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from kafkalog.config import load_configs, topics_not_held
from kafkalog.tools.demo import generate_demo_log_dir

TYPO = "demo-ordrs:retention.bytes=-1"


def _tree_digest(root: Path) -> dict:
    """{relative path: sha256 of the bytes (None for a folder)} of everything under ``root``."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for d in dirs:
            out[os.path.relpath(os.path.join(folder, d), root)] = None
        for f in files:
            path = os.path.join(folder, f)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


@pytest.fixture
def demo(tmp_path):
    log_dir = tmp_path / "logs"
    generate_demo_log_dir(log_dir, partitions=2, records=3000)    # several segments: retention has work
    return log_dir


def _run(job: str, argv: list, capsys) -> tuple[int, str]:
    from udfs import compact_job, reindex_job, retention_job
    from udfs.job import run

    main = {"retention": retention_job.main, "compact": compact_job.main, "reindex": reindex_job.main}[job]
    rc = run(job, main, argv)
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("job,extra", [
    ("retention", ["--execute", "--delete-delay-ms", "0", "--broker-config", "{broker}"]),
    ("retention", ["--broker-config", "{broker}"]),                               # the plan only (dry run)
    ("compact", []),
    ("compact", ["--dry-run"]),
    ("reindex", []),
])
@pytest.mark.parametrize("how", ["--topic-config", "--topic-config-file"])
def test_a_misspelt_topic_stops_every_modifying_job_with_nothing_changed(demo, tmp_path, capsys, job, extra, how):
    broker = tmp_path / "server.properties"
    broker.write_text("log.retention.bytes=1\nlog.cleanup.policy=compact,delete\n")   # defaults that would delete
    if how == "--topic-config":
        config = ["--topic-config", TYPO]
    else:
        (tmp_path / "keep.properties").write_text("retention.bytes=-1\n")
        config = ["--topic-config-file", f"demo-ordrs:{tmp_path / 'keep.properties'}"]
    before = _tree_digest(demo)
    rc, err = _run(job, ["--log-dirs", str(demo), *config, *[a.format(broker=broker) for a in extra]], capsys)
    assert rc == 2, err
    assert "no partition of topic demo-ordrs in the log dirs (did you mean demo-orders?)" in err
    assert "Traceback" not in err
    assert _tree_digest(demo) == before


def test_the_message_names_where_the_topic_was_typed():
    configs = load_configs(topic_configs=["demo-orders:retention.ms=1", TYPO, "payments:retention.ms=5"])
    assert topics_not_held(configs, {"demo-orders", "payment"}) == [
        "--topic-config demo-ordrs:retention.bytes=-1: no partition of topic demo-ordrs in the log dirs "
        "(did you mean demo-orders?)",
        "--topic-config payments:retention.ms=5: no partition of topic payments in the log dirs "
        "(did you mean payment?)"]
    assert topics_not_held(configs, {"demo-orders", "demo-ordrs", "payments"}) == []
    # a topic whose every key was ignored (non-strict) was still typed: it is still checked
    lenient = load_configs(topic_configs=["ordrs:retention.msx=1"])
    assert topics_not_held(lenient, {"orders"}) == [
        "--topic-config ordrs:retention.msx=1: no partition of topic ordrs in the log dirs (did you mean orders?)"]


def test_read_only_runs_warn_and_go_on(spark, demo, capsys):
    from udfs import reindex_job

    before = _tree_digest(demo)
    rc = reindex_job.main(["--log-dirs", str(demo), "--verify-only", "--topic-config", TYPO], spark=spark)
    err = capsys.readouterr().err
    assert rc == 0
    assert "warning: --topic-config demo-ordrs:retention.bytes=-1: no partition of topic demo-ordrs" in err
    assert _tree_digest(demo) == before


def test_allow_absent_topic_configs_lets_a_cluster_wide_set_through(spark, demo, capsys):
    from udfs import retention_job

    rc = retention_job.main(["--log-dirs", str(demo), "--topic-config", "other-broker-topic:retention.ms=1",
                             "--allow-absent-topic-configs"], spark=spark)
    err = capsys.readouterr().err
    assert rc == 0
    assert "warning: --topic-config other-broker-topic:retention.ms=1: no partition of topic other-broker-topic" in err
