"""Names a user types that match nothing are errors before anything is done, with the closest name:
``compact --explain TOPIC:PARTITION:OFFSET`` and ``lag --group`` (the single-process command and the
pure check the Spark job shares)."""
from __future__ import annotations

import hashlib
import os

import pytest

from kafkalog.coordinator.lag import check_groups, unknown_groups
from kafkalog.errors import UsageError
from kafkalog.tools.demo import generate_demo_log_dir


def _tree_digest(root) -> dict:
    out = {}
    for folder, dirs, files in os.walk(root):
        for d in dirs:
            out[os.path.relpath(os.path.join(folder, d), root)] = None
        for f in files:
            with open(os.path.join(folder, f), "rb") as fh:
                out[os.path.relpath(os.path.join(folder, f), root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("names") / "logs"
    generate_demo_log_dir(log_dir, partitions=2, records=500, consumer_groups=2)
    return log_dir


@pytest.mark.parametrize("argv,message", [
    (["--explain", "demo-ordres:0:5"], "--explain demo-ordres:0:5: the run covers no partition demo-ordres-0 "
                                       "(did you mean demo-orders-0?)"),
    (["--explain", "demo-orders:7:5", "--dry-run"], "the run covers no partition demo-orders-7"),
    (["--explain", "demo-orders:0:5", "--topics", "__consumer_offsets"], "the run covers no partition demo-orders-0"),
])
def test_compact_explain_of_a_partition_the_run_does_not_cover(demo, capsys, argv, message):
    from udfs import compact_job

    before = _tree_digest(demo)
    assert compact_job.entry(["--log-dirs", str(demo), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert _tree_digest(demo) == before                     # not even a .lock file


def test_kafkalog_lag_with_a_misspelt_group(demo, capsys):
    from kafkalog.tools.cli import main

    assert main(["lag", "--log-dirs", str(demo), "--group", "demo-biling"]) == 2
    captured = capsys.readouterr()
    assert "--group demo-biling: no record of group demo-biling in __consumer_offsets (did you mean demo-billing?)" \
        in captured.err
    assert captured.out == ""
    assert main(["lag", "--log-dirs", str(demo), "--group", "demo-billing"]) == 0
    assert "demo-billing" in capsys.readouterr().out


def test_the_group_check_warns_when_a_coordinator_partition_was_unreadable():
    assert unknown_groups(["a", "demo-audit"], ["demo-audit", "demo-analytics"]) == [
        "--group a: no record of group a in __consumer_offsets"]
    with pytest.raises(UsageError, match="did you mean demo-audit"):
        check_groups(["demo-audt"], {"demo-audit"}, complete=True)
    warned = []
    check_groups(["demo-audt"], {"demo-audit"}, complete=False, warn=warned.append)
    assert warned == ["--group demo-audt: no record of group demo-audt in __consumer_offsets (did you mean "
                      "demo-audit?) among the partitions that could be read"]
    check_groups([], set(), complete=True)                    # no --group: every group, nothing to check


@pytest.mark.parametrize("job", ["retention", "compact"])
def test_a_misspelt_topics_filter_touches_nothing(demo, capsys, job):
    """--topics was refused inside the log-dir lock, whose file a log dir without one then gained."""
    from udfs import compact_job, retention_job

    before = _tree_digest(demo)
    main = {"retention": retention_job, "compact": compact_job}[job]
    extra = ["--execute"] if job == "retention" else []                # the runs that take the lock
    assert main.entry(["--log-dirs", str(demo), "--topics", "demo-ordrs", *extra]) == 2
    assert "no partition folder of demo-ordrs" in capsys.readouterr().err
    assert _tree_digest(demo) == before
