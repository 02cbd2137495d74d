"""kafkalog.source.stream_offsets: Spark's Kafka-source offset rules for streaming reads, without Spark."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.errors import KafkalogError
from kafkalog.source.stream_offsets import (BELOW_LOG_START, GONE, NEW_NOT_AT_ZERO, WENT_BACK, DataLossError, cap,
                                     from_json_offsets, plan_ranges, rate_limit, to_json_offsets)

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def test_checkpoint_json_round_trip_as_sparks_kafka_source_writes_it():
    offsets = {A1: 7, A0: 23, B0: 0}
    assert to_json_offsets(offsets) == {"a": {"0": 23, "1": 7}, "b": {"0": 0}}
    assert from_json_offsets(to_json_offsets(offsets)) == offsets
    with pytest.raises(KafkalogError, match="not an offset"):
        from_json_offsets({"a": {"0": "x"}})
    with pytest.raises(KafkalogError):
        from_json_offsets([1, 2])


def test_rate_limit_shares_by_backlog_rounding_small_shares_up():
    # backlogs 90 and 10 of a limit of 10: 9 and 1
    assert rate_limit({A0: 0, A1: 0}, {A0: 90, A1: 10}, 10) == {A0: 9, A1: 1}
    # a share below one is rounded up (Spark: ceil when prorate < 1), a larger one down
    assert rate_limit({A0: 0, A1: 0}, {A0: 1000, A1: 1}, 10) == {A0: 9, A1: 1}
    assert rate_limit({A0: 5}, {A0: 5}, 10) == {A0: 5}                       # nothing new
    assert rate_limit({A0: 0}, {A0: 100}, None) == {A0: 100}
    # a new partition counts from its log start
    assert rate_limit({A0: 0}, {A0: 50, B0: 150}, 20, {A0: 0, B0: 100}) == {A0: 10, B0: 110}


@given(st.dictionaries(st.sampled_from([A0, A1, B0]), st.tuples(st.integers(0, 10_000), st.integers(0, 10_000)),
                       min_size=1), st.integers(1, 5_000))
def test_rate_limit_never_passes_latest_nor_goes_back(ranges, limit):
    start = {tp: min(a, b) for tp, (a, b) in ranges.items()}
    latest = {tp: max(a, b) for tp, (a, b) in ranges.items()}
    out = rate_limit(start, latest, limit)
    assert all(start[tp] <= out[tp] <= latest[tp] for tp in latest)
    taken = sum(out[tp] - start[tp] for tp in latest)
    assert taken <= limit + len(latest)            # each share rounds up by at most one


def test_available_now_caps_at_the_target():
    assert cap({A0: 10, B0: 5}, {A0: 8}) == {A0: 8}
    assert cap({A0: 10}, None) == {A0: 10}


def test_plan_ranges_and_every_data_loss_case():
    ranges, losses = plan_ranges({A0: 5, A1: 10, ("gone", 0): 3}, {A0: 9, A1: 4, B0: 20},
                                 {A0: 7, A1: 0, B0: 12}, fail_on_data_loss=False)
    assert [(r.topic, r.partition, r.start, r.end) for r in ranges] == [("a", 0, 7, 9), ("b", 0, 12, 20)]
    assert [(x.topic, x.partition, x.kind, x.from_offset, x.to_offset) for x in losses] == [
        ("gone", 0, GONE, 3, None), ("a", 0, BELOW_LOG_START, 5, 7), ("a", 1, WENT_BACK, 4, 10),
        ("b", 0, NEW_NOT_AT_ZERO, 0, 12)]
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        plan_ranges({A0: 5}, {A0: 9}, {A0: 7}, fail_on_data_loss=True)
    # a new partition from offset 0 is no loss
    ranges, losses = plan_ranges({}, {A0: 3}, {A0: 0}, fail_on_data_loss=True)
    assert [(r.start, r.end) for r in ranges] == [(0, 3)] and losses == []
