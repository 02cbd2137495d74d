"""Retention decisions as a broker's deleteOldSegments makes them (``UnifiedLog.java``), as pure functions."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.config import LogConfig
from kafkalog.log.local_log import high_watermark
from kafkalog.log.segment import SegmentInfo
from kafkalog.retention.policy import DELETE, KEEP, LOG_START_OFFSET, RETENTION_BYTES, RETENTION_MS, LogState, plan_retention

NO_TIME = dict(retention_ms=-1)


def log_of(sizes, timestamps=None, *, step=100, log_start=None, hw=None, leo=None) -> LogState:
    """Segments at 0, step, 2*step…; the last is active and holds `step` offsets unless empty."""
    timestamps = timestamps or [0] * len(sizes)
    segments = tuple(SegmentInfo(i * step, size, ts) for i, (size, ts) in enumerate(zip(sizes, timestamps)))
    if leo is None:
        leo = segments[-1].base_offset + (step if sizes[-1] else 0)
    return LogState(segments, 0 if log_start is None else log_start, leo, leo if hw is None else hw)


def verdicts(plan):
    return [d.decision for d in plan.decisions]


# retention.bytes worked through (UnifiedLog.deleteRetentionSizeBreachedSegments): three 700 MB segments
# and an active one of size a
@pytest.mark.parametrize("retention_bytes, active, deleted", [
    (2000, 0, 0), (2000, 600, 1), (1400, 0, 1), (1400, 100, 1), (1400, 700, 2), (700, 0, 2),
])
def test_size_rule_worked_examples(retention_bytes, active, deleted):
    plan = plan_retention(log_of([700, 700, 700, active]), LogConfig(retention_bytes=retention_bytes, **NO_TIME), 0)
    assert verdicts(plan) == [DELETE] * deleted + [KEEP] * (4 - deleted)
    assert all(d.rule == RETENTION_BYTES for d in plan.deleted)
    assert plan.new_log_start_offset == deleted * 100
    remaining = 2100 + active - plan.bytes_freed
    assert remaining >= retention_bytes


@pytest.mark.parametrize("retention_records, segments_left", [(10, 2), (15, 3)])
def test_kafka_unified_log_test_size_cases(retention_records, segments_left):
    # shouldDeleteSizeBasedSegments / shouldNotDeleteSizeBasedSegmentsWhenUnderRetentionSize:
    # 15 single-record appends of equal size, segments of 5 records, the last active
    record = 70
    plan = plan_retention(log_of([5 * record] * 3, step=5),
                          LogConfig(retention_bytes=retention_records * record, **NO_TIME), 0)
    assert sum(d.decision == KEEP for d in plan.decisions) == segments_left


def test_size_equal_to_retention_deletes_nothing_but_empty_head():
    plan = plan_retention(log_of([0, 500, 500]), LogConfig(retention_bytes=1000, **NO_TIME), 0)
    assert verdicts(plan) == [DELETE, KEEP, KEEP]   # diff 0: only the zero-byte head goes


def test_time_rule_is_strict_and_the_walk_stops_at_the_first_young_segment():
    log = log_of([10, 10, 10, 10], [100, 1000, 50, 60])
    plan = plan_retention(log, LogConfig(retention_ms=900), now_ms=1000)
    # 1000-100 = 900 is not > 900: the first segment already stops the walk
    assert verdicts(plan) == [KEEP] * 4
    plan = plan_retention(log, LogConfig(retention_ms=899), now_ms=1000)
    # the future-ish second segment (age 0) pins everything after it, though 3 and 4 are old
    assert verdicts(plan) == [DELETE, KEEP, KEEP, KEEP]
    assert plan.decisions[0].rule == RETENTION_MS
    assert "retention.ms" in plan.decisions[1].reason


def test_all_segments_old_rolls_then_deletes_everything():
    log = log_of([10, 10, 10], [1, 2, 3])          # shouldDeleteTimeBasedSegmentsReadyToBeDeleted
    plan = plan_retention(log, LogConfig(retention_ms=10), now_ms=1000)
    assert verdicts(plan) == [DELETE] * 3
    assert plan.roll_at == log.log_end_offset == 300
    assert plan.new_log_start_offset == 300


def test_an_empty_active_segment_is_never_deleted():
    log = log_of([10, 10, 0], [1, 2, 3])
    plan = plan_retention(log, LogConfig(retention_ms=10), now_ms=1000)
    assert verdicts(plan) == [DELETE, DELETE, KEEP]
    assert plan.roll_at is None and plan.new_log_start_offset == 200
    assert plan.decisions[2].reason.endswith("the active segment is empty")


def test_nothing_at_or_above_the_high_watermark_is_deleted():
    log = log_of([10, 10, 10, 10], [1, 2, 3, 4], hw=250)
    plan = plan_retention(log, LogConfig(retention_ms=10), now_ms=1000)
    assert verdicts(plan) == [DELETE, DELETE, KEEP, KEEP]    # segment 200 ends at 300 > HW 250
    assert "high watermark" in plan.decisions[2].reason


def test_log_start_offset_pass_runs_for_compact_only_topics():
    log = log_of([10, 10, 10, 10], [1, 2, 3, 4], log_start=250)
    plan = plan_retention(log, LogConfig(cleanup_policy=("compact",), retention_ms=1, retention_bytes=1), now_ms=10**6)
    assert verdicts(plan) == [DELETE, DELETE, KEEP, KEEP]     # the segment holding 250 stays
    assert {d.rule for d in plan.deleted} == {LOG_START_OFFSET}
    assert plan.new_log_start_offset == 250                   # never moves backwards


def test_passes_run_in_order_on_what_the_previous_left():
    log = log_of([10, 10, 10, 10, 10], [1, 2, 3, 4, 5], log_start=100)
    plan = plan_retention(log, LogConfig(retention_bytes=30, retention_ms=1000 - 4), now_ms=1000)
    assert [d.rule for d in plan.decisions] == [LOG_START_OFFSET, RETENTION_BYTES, RETENTION_MS, None, None]


def test_cleaner_disabled_means_no_retention_for_compacted_topics():
    log = log_of([10, 10, 10], [1, 2, 3], log_start=250)
    config = LogConfig(cleanup_policy=("compact", "delete"), retention_ms=1)
    assert verdicts(plan_retention(log, config, 10**6, cleaner_enabled=False)) == [KEEP] * 3
    assert plan_retention(log, config, 10**6, cleaner_enabled=False).skipped.startswith("log.cleaner.enable=false")
    assert plan_retention(log, LogConfig(retention_ms=1), 10**6, cleaner_enabled=False).deleted


def test_tiered_topics_are_skipped_with_the_reason():
    plan = plan_retention(log_of([10, 10], [1, 2]), LogConfig(retention_ms=1, remote_storage_enable=True), 10**6)
    assert plan.skipped.startswith("tiered storage") and not plan.deleted


@pytest.mark.parametrize("checkpointed, missing, expected", [
    (None, "zero", 100), (None, "log-end", 500), (50, "zero", 100), (300, "zero", 300), (900, "zero", 500),
])
def test_high_watermark_resolution(checkpointed, missing, expected):
    assert high_watermark(checkpointed, log_start_offset=100, log_end_offset=500, missing=missing) == expected


@st.composite
def logs(draw):
    n = draw(st.integers(1, 8))
    sizes = draw(st.lists(st.integers(0, 50), min_size=n, max_size=n))
    stamps = draw(st.lists(st.integers(-1, 100), min_size=n, max_size=n))
    step = 10
    leo = (n - 1) * step + (step if sizes[-1] else 0)
    log_start = draw(st.integers(0, leo))
    hw = draw(st.integers(log_start, leo))
    return LogState(tuple(SegmentInfo(i * step, s, t) for i, (s, t) in enumerate(zip(sizes, stamps))), log_start, leo, hw)


@settings(max_examples=300, deadline=None)
@given(logs(), st.integers(-1, 200), st.integers(-1, 100), st.integers(0, 120))
def test_plan_invariants(log, retention_bytes, retention_ms, now):
    config = LogConfig(retention_bytes=retention_bytes, retention_ms=retention_ms)
    plan = plan_retention(log, config, now)
    deleted = [d.decision == DELETE for d in plan.decisions]
    count = sum(deleted)
    assert deleted == [True] * count + [False] * (len(deleted) - count)            # a prefix
    for i in range(count):                                                        # never at/after the HW
        upper = log.segments[i + 1].base_offset if i + 1 < len(log.segments) else log.log_end_offset
        assert upper <= log.high_watermark
    if count == len(log.segments):
        assert plan.roll_at == log.log_end_offset and log.segments[-1].size > 0
    assert log.log_start_offset <= plan.new_log_start_offset <= log.high_watermark
    # applying the plan and planning again at the same time deletes nothing more
    kept = tuple(s for s, d in zip(log.segments, deleted) if not d)
    if plan.roll_at is not None:
        kept = (SegmentInfo(plan.roll_at, 0, -1),)
    after = LogState(kept, plan.new_log_start_offset, log.log_end_offset, log.high_watermark)
    assert not plan_retention(after, config, now).deleted
