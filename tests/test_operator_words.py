"""What an operator reads (issue 33), without Spark: times as UTC ISO-8601 beside the epoch, --explain in
Kafka's words, every "skipped" with its reason, the one line an interrupted job prints, and no
Spark feature in the jobs that makes a successful run log an ERROR with a stack trace."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from kafkalog.cleaner.record_filter import BatchRetention, RecordReason
from kafkalog.cleaner.results import BatchAudit, batch_words
from kafkalog.lookup.time_spec import format_epoch_ms, parse_epoch_ms

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("ms, text", [
    (1_700_000_000_000, "2023-11-14T22:13:20Z (1700000000000 ms)"),
    (1_700_000_000_250, "2023-11-14T22:13:20.250Z (1700000000250 ms)"),
    (0, "1970-01-01T00:00:00Z (0 ms)"),
    (-1, "-1 ms"),                                   # Kafka's "no timestamp"
    (2**63 - 1, f"{2**63 - 1} ms"),                  # past the calendar
])
def test_epoch_ms_as_iso_beside_the_number(ms, text):
    assert format_epoch_ms(ms) == text
    if ms >= 0 and "Z" in text:
        assert parse_epoch_ms(text.split(" ")[0]) == ms          # what is printed reads back


@pytest.mark.parametrize("reason, words", [
    (RecordReason.REMOVED_SUPERSEDED, "removed — superseded"),
    (RecordReason.REMOVED_TOMBSTONE_EXPIRED, "removed — tombstone past horizon"),
    (RecordReason.REMOVED_ABORTED, "removed — aborted"),
    (RecordReason.REMOVED_MARKER, "removed — marker past horizon"),
    (RecordReason.KEPT_LATEST, "kept — "),
    (RecordReason.KEPT_TOMBSTONE, "kept — "),
])
def test_record_reasons_begin_with_kafkas_words(reason, words):
    assert reason.value.startswith(words) and reason.kept == words.startswith("kept")


@pytest.mark.parametrize("audit, words", [
    (BatchAudit(0, 9, BatchRetention.DELETE_EMPTY, "dropped only if no record survives", "rewritten"),
     "batch 0..9 rewritten with the records kept"),
    (BatchAudit(0, 9, BatchRetention.DELETE_EMPTY, "dropped only if no record survives", "original"),
     "batch 0..9 copied unchanged"),
    (BatchAudit(4, 4, BatchRetention.DELETE_EMPTY, "dropped only if no record survives", "removed"),
     "batch 4..4 removed: no record of it survived"),
    (BatchAudit(4, 5, BatchRetention.DELETE, "dropped: aborted transactional data of producer 7", "removed"),
     "batch 4..5 removed: aborted transactional data of producer 7"),
    (BatchAudit(0, 0, BatchRetention.RETAIN_EMPTY,
                "last batch of active producer 3: kept, empty if no record survives", "empty"),
     "batch 0..0 kept as an empty batch (last batch of active producer 3: kept even if emptied)"),
])
def test_batch_words_say_what_happened_not_the_retention_enum(audit, words):
    got = batch_words(audit)
    assert got == words
    assert not re.search(r"DELETE|RETAIN|\bwritten ", got)


def test_every_skipped_in_reindex_says_why(capsys):
    from udfs.reindex_job import _print_summary, class_words

    assert class_words("identical", 12) == "12 identical"
    assert class_words("skipped", 3) == "3 skipped (the active segments, left alone without --include-active)"
    _print_summary(dict(verify_only=True, files=9, partitions=3, active_segments_skipped=3,
                        classes={"log": {"skipped": 3}, "index": {"identical": 6}}, actions={}, corrupt=[], errors=[],
                        log_dirs_refused=[]))
    out = capsys.readouterr().out
    for line in out.splitlines():
        if "skipped" in line:
            assert re.search(r"skipped \([^)]*active segment", line), line


def test_compaction_summary_prints_the_time_as_iso_and_marks_interrupted_partitions(capsys):
    from kafkalog.cleaner.log_dir_run import compact_summary as _summary, finish_row as _finish_row
    from udfs.compact_job import _print_summary, interrupted_row

    row = _finish_row(interrupted_row("/d", "/d/orders-3"))
    assert (row["topic"], row["partition"], row["status"]) == ("orders", 3, "interrupted")
    summary = _summary([row])
    summary.update(log_dirs_refused=[])
    _print_summary(dict(summary=summary, dry_run=False, now_ms=1_700_000_000_000, partitions=[row], explain=[],
                        interrupted=dict(signal="SIGINT", partitions=1)))
    out = capsys.readouterr().out
    assert out.startswith("compaction interrupted as of 2023-11-14T22:13:20Z (1700000000000 ms): 0 of 1 partitions")
    assert "orders-3: interrupted" in out and "kafkalog recover" in out


def test_the_one_line_of_an_interrupted_job():
    import signal

    from udfs.interrupts import exit_code, report_option, summary_line

    assert (exit_code(signal.SIGINT), exit_code(signal.SIGTERM)) == (130, 143)
    line = summary_line("compact", signal.SIGINT, (3, 5, "compacted"), "/tmp/r.json")
    assert line == ("spark-submit.sh compact: interrupted (SIGINT): 3 of 5 partitions compacted; the rest untouched or "
                    "recoverable with `kafkalog recover --log-dirs …`; run the job again to finish (it plans from what "
                    "is on disk); report: /tmp/r.json")
    assert "\n" not in summary_line("catalog", signal.SIGTERM, None, None)
    assert summary_line("catalog", signal.SIGTERM, None, None).endswith("no report written")
    assert report_option(["--log-dirs", "x", "--report", "r.json"]) == "r.json"
    assert report_option(["--report=r.json"]) == "r.json" and report_option(["--log-dirs", "x"]) is None


def test_no_job_caches_a_dataframe():
    """A cached DataFrame's tasks carry Spark 4.2's PartitionKeyedAccumulator (CachedRDDBuilder), which
    the executor heartbeater can read before it is fully deserialized: "ERROR Utils: Uncaught exception
    in thread executor-heartbeater" and a 25-line NullPointerException in a successful run
    (SPARK-59451). The jobs compute such a frame once (localCheckpoint) instead."""
    calls = [f"{p.name}:{n}" for p in sorted((REPO / "udfs").glob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"\.(cache|persist)\(", line.split("#")[0])]
    assert calls == []
