"""``kafkalog compact`` and ``kafkalog retention``: the Spark jobs' rounds in one process, on one log dir,
with the jobs' report shape, dry runs that change nothing, the lock rule and the config checks; and
``kafkalog configs --describe`` against config.py's precedence (tests/broker/test_configs_describe.py
checks it against a real broker's kafka-configs --describe --all)."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time

import pytest

from kafkalog.fs.lock import is_locked
from kafkalog.tools.cli import main
from kafkalog.tools.demo import generate_demo_log_dir

TOPIC = "demo-orders"
NOW = "2026-01-08T03:00:00Z"
# the top-level keys of the Spark jobs' reports (udfs/compact_job.py, udfs/retention_job.py main)
COMPACT_REPORT_KEYS = {"job", "run_id", "now_ms", "dry_run", "summary", "partitions", "explain", "audit"}
RETENTION_REPORT_KEYS = {"job", "run_id", "now_ms", "executed", "high_watermark_missing", "segments", "summary",
                         "partitions", "checkpoints", "audit", "delete_records"}


@pytest.fixture
def log_dir(tmp_path):
    out = tmp_path / "logs"
    generate_demo_log_dir(out, partitions=2, records=12_000)
    return out


def snapshot(root) -> dict:
    """Every file under ``root``: name -> (size, sha256)."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, root)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out


def latest_values(log_dir, partition: int) -> dict:
    """key -> the value of its last record (None for a tombstone), over the partition's whole log."""
    import kafkalog
    last = {}
    folder = log_dir / f"{TOPIC}-{partition}"
    for seg in sorted(folder.glob("*.log")):
        t = kafkalog.read_segment(seg)
        for k, v in zip(t.column("key").to_pylist(), t.column("value").to_pylist()):
            if k is not None:
                last[k] = v
    return last


def test_compact_dry_run_then_run_keeps_each_keys_latest_value(log_dir, tmp_path, capsys):
    before = snapshot(log_dir)
    latest = {p: latest_values(log_dir, p) for p in (0, 1)}
    args = ["compact", "--log-dir", str(log_dir), "--topic-config", f"{TOPIC}:cleanup.policy=compact",
            "--topic-config", f"{TOPIC}:delete.retention.ms=0", "--now-ms", NOW]
    assert main(args + ["--dry-run", "--report", str(tmp_path / "plan.json")]) == 0
    assert snapshot(log_dir) == before, "a dry run changed the log dir"
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert set(plan) == COMPACT_REPORT_KEYS and plan["dry_run"] is True
    assert plan["summary"]["statuses"] == {"would-clean": 2}

    assert main(args + ["--report", str(tmp_path / "done.json"), "--explain", f"{TOPIC}:0:0"]) == 0
    out = capsys.readouterr().out
    assert "compaction done" in out and f"explain {TOPIC}-0@0:" in out
    done = json.loads((tmp_path / "done.json").read_text())
    assert set(done) == COMPACT_REPORT_KEYS and done["summary"]["statuses"] == {"cleaned": 2}
    assert done["summary"]["bytes_removed"] == plan["summary"]["bytes_removed"] > 0
    # v2: a round stamps its tombstones' delete horizon; a later round removes them (LogCleaner.java)
    assert sum(r["horizons_stamped"] for r in done["partitions"]) > 0
    assert not is_locked(log_dir)
    for p in (0, 1):
        # every key's latest value (or tombstone) survives the round; only superseded records go
        assert latest_values(log_dir, p) == latest[p]
        row = next(r for r in done["partitions"] if r["partition"] == p)
        assert row["records_kept"] < row["records_read"]


def test_retention_plan_then_execute(log_dir, tmp_path, capsys):
    before = snapshot(log_dir)
    args = ["retention", "--log-dir", str(log_dir), "--topic-config", f"{TOPIC}:retention.bytes=100000",
            "--now-ms", NOW, "--delete-delay-ms", "0"]
    assert main(args + ["--report", str(tmp_path / "plan.json")]) == 0
    assert snapshot(log_dir) == before, "a plan changed the log dir"
    assert "(dry run: nothing was changed; add --execute to apply)" in capsys.readouterr().out
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert set(plan) == RETENTION_REPORT_KEYS and plan["executed"] is False
    deleted = [s for s in plan["segments"] if s["decision"] == "delete"]
    assert deleted and all(s["rule"] == "retention.bytes" for s in deleted)

    assert main(args + ["--execute", "--report", str(tmp_path / "done.json")]) == 0
    done = json.loads((tmp_path / "done.json").read_text())
    assert done["summary"]["segments_deleted"] == len(deleted)
    for s in deleted:
        assert not (log_dir / f"{s['topic']}-{s['partition']}" / f"{s['base_offset']:020d}.log").exists()
    # Kafka checkpoints a log start offset only above the first segment's base (LogManager): here none
    starts = (log_dir / "log-start-offset-checkpoint").read_text().split("\n")[2:]
    for p in done["partitions"]:
        if p["segments_deleted"]:
            first = min(int(f.name[:20]) for f in (log_dir / f"{TOPIC}-{p['partition']}").glob("*.log"))
            assert first == p["new_log_start_offset"] == p["first_base_offset_after"]
    assert [line for line in starts if line] == [] and done["checkpoints"][0]["changed"] == []


def _hold_lock(log_dir):
    code = ("import sys, time; from kafkalog.fs.lock import lock_log_dir\n"
            "with lock_log_dir(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(log_dir)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_locked_log_dir_is_refused_and_a_dry_run_warns(log_dir, capsys):
    holder = _hold_lock(log_dir)
    try:
        before = snapshot(log_dir)
        config = ["--topic-config", f"{TOPIC}:cleanup.policy=compact", "--now-ms", NOW]
        assert main(["compact", "--log-dir", str(log_dir), *config]) == 1
        assert "locked" in capsys.readouterr().err
        assert main(["retention", "--log-dir", str(log_dir), "--execute", "--now-ms", NOW]) == 1
        assert main(["compact", "--log-dir", str(log_dir), "--dry-run", *config]) == 0
        err = capsys.readouterr().err
        assert "dry run only" in err and "held by" in err
        assert snapshot(log_dir) == before
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("command", ["compact", "retention"])
def test_names_that_match_nothing_are_errors_before_anything_is_touched(log_dir, command, capsys):
    before = snapshot(log_dir)
    assert main([command, "--log-dir", str(log_dir), "--topics", "demo-ordres"]) == 2
    assert "demo-ordres" in capsys.readouterr().err
    assert main([command, "--log-dir", str(log_dir), "--topic-config", "demo-ordres:retention.ms=1"]) == 2
    assert "did you mean" in capsys.readouterr().err
    assert main([command, "--log-dir", str(log_dir / f"{TOPIC}-0")]) == 2
    assert snapshot(log_dir) == before


def test_help_says_what_each_command_does(capsys):
    for command in ("compact", "retention", "configs", "spark"):
        assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "--dry-run" in out and "--execute" in out and "--describe" in out and "--where" in out


def test_configs_describe_prints_kafkas_lines_with_the_precedence(tmp_path, log_dir, capsys):
    server = tmp_path / "server.properties"
    server.write_text("log.retention.hours=24\nlog.retention.minutes=90\nlog.cleanup.policy=delete\n"
                      "log.roll.ms=60000\n")
    assert main(["configs", "--describe", "--log-dirs", str(log_dir), "--broker-config", str(server),
                 "--topic-config", f"{TOPIC}:cleanup.policy=compact,delete", "--sources"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"All configs for topic {TOPIC} are:"
    by_key = {line.split("=", 1)[0].strip(): line.split("  # ")[0].strip() for line in lines[1:]}
    assert by_key["cleanup.policy"] == ("cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
                                        "cleanup.policy=compact,delete, STATIC_BROKER_CONFIG:log.cleanup.policy=delete, "
                                        "DEFAULT_CONFIG:log.cleanup.policy=delete}")
    # log.retention.minutes wins over log.retention.hours (KafkaConfig.logRetentionTimeMillis); Kafka lists no
    # synonym when log.retention.ms (the first) is unset: ConfigHelper drops the entries before it
    assert by_key["retention.ms"] == "retention.ms=5400000 sensitive=false synonyms={}"
    assert by_key["segment.ms"] == ("segment.ms=60000 sensitive=false synonyms={STATIC_BROKER_CONFIG:"
                                    "log.roll.ms=60000, DEFAULT_CONFIG:log.roll.hours=168}")
    assert by_key["min.cleanable.dirty.ratio"] == ("min.cleanable.dirty.ratio=0.5 sensitive=false synonyms="
                                                   "{DEFAULT_CONFIG:log.cleaner.min.cleanable.ratio=0.5}")
    assert by_key["remote.storage.enable"] == "remote.storage.enable=false sensitive=false synonyms={}"
    retention_line = next(line for line in lines if line.strip().startswith("retention.ms="))
    assert retention_line.endswith(f"# broker log.retention.minutes ({server})")


def test_configs_describe_unknown_topic_is_an_error(log_dir, capsys):
    assert main(["configs", "--describe", "--log-dirs", str(log_dir), "--topics", "nope"]) == 2
    assert "nope" in capsys.readouterr().err


def test_a_jobs_describe_configs_prints_the_same_lines_and_runs_nothing(log_dir, capsys):
    from udfs.compact_job import main as compact_main
    config = ["--topic-config", f"{TOPIC}:cleanup.policy=compact"]
    assert main(["configs", "--describe", "--log-dirs", str(log_dir), *config]) == 0
    expected = capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        compact_main(["--log-dirs", str(log_dir), "--describe-configs", *config], spark=object())
    assert stop.value.code == 0
    assert capsys.readouterr().out == expected


def test_spark_lists_the_jobs_and_refuses_an_unknown_one(capsys):
    assert main(["spark"]) == 0
    out = capsys.readouterr().out
    for job in ("catalog", "compact", "retention", "reindex", "lookup", "lag", "export", "restore"):
        assert f"  {job} " in out
    assert main(["spark", "compcat"]) == 2
    assert "did you mean compact" in capsys.readouterr().err
    assert main(["spark", "--where"]) == 0
    assert "jobs: " in capsys.readouterr().out


def test_spark_runs_a_jobs_help_through_the_installed_entry():
    started = time.monotonic()
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "kafkalog"), "spark", "compact", "--help"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "usage: spark-submit.sh compact" in proc.stdout and "--dry-run" in proc.stdout
    assert time.monotonic() - started < 60
