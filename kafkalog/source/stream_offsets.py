"""Offsets of a streaming read of log dirs (``spark.readStream.format("kafkalog")``): where a query
starts, how far a micro-batch may go, and which offset ranges a micro-batch reads — Spark's Kafka
source rules (``KafkaMicroBatchStream``, ``KafkaOffsetReader``) as pure functions over the planner's
``PartitionFacts``; nothing here imports Spark.

An offset is what Spark's Kafka source writes in its checkpoint: ``{"topic": {"0": 23, "1": 7}}``, the
next offset to read of every partition (partition numbers as strings).

* **initial**: ``startingOffsets`` (default ``latest`` for a stream) resolved per partition, timestamps
  through ListOffsets, per-partition JSON naming exactly the partitions read.
* **latest**: each partition's latest (high watermark, else log end; with read_committed the last stable
  offset). With ``maxOffsetsPerTrigger`` the records a micro-batch takes are shared out in proportion to
  each partition's backlog, rounding a share below one up and the others down (Spark's ``rateLimit``).
  With ``Trigger.AvailableNow`` the latest offsets are fixed when the query starts.
* **ranges** of a micro-batch [start, end): a partition new since ``start`` reads from its log start
  (data loss when that is not 0: "Added partition ... starts from ..."); a partition gone is data loss;
  an end below the start (the log was truncated or replaced) is data loss and the partition is skipped;
  a start below the log start offset (retention or a tiered copy moved it) is data loss and reading
  begins at the log start. Data loss raises :class:`DataLossError` with ``failOnDataLoss`` (the default)
  and is otherwise returned as :class:`DataLoss` events, which the export job reports as gaps.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Tuple

from kafkalog.errors import KafkalogError
from kafkalog.topic_partition import TopicPartition

PartitionOffsets = Dict[TopicPartition, int]

# Spark's hint after every data-loss message (KafkaMicroBatchStream.INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE)
FAIL_ON_DATA_LOSS_HINT = ("Some data may have been lost because they are not available in the log dirs any more; "
                          "either the data was aged out by Kafka or the topic may have been deleted before all the "
                          "data in the topic was processed. If you don't want your streaming query to fail on such "
                          "cases, set the source option \"failOnDataLoss\" to \"false\".")

# what kind of data loss an event is
GONE, NEW_NOT_AT_ZERO, WENT_BACK, BELOW_LOG_START = "partition-gone", "new-partition-not-at-0", "offset-went-back", \
    "below-log-start"


class DataLossError(KafkalogError):
    """Records a streaming query was to read are not in the log dirs (failOnDataLoss=true)."""


# --- data structures -------------------------------------------------------------------------------

@dataclass(frozen=True)
class DataLoss:
    """Records skipped: offsets [from_offset, to_offset) of a partition (to_offset None: unknown)."""

    topic: str
    partition: int
    kind: str
    from_offset: Optional[int]
    to_offset: Optional[int]
    message: str

    def to_dict(self) -> dict:
        return dict(topic=self.topic, partition=self.partition, kind=self.kind, from_offset=self.from_offset,
                    to_offset=self.to_offset, message=self.message)


@dataclass(frozen=True)
class OffsetRange:
    """The offsets [start, end) of one partition a micro-batch reads."""

    topic: str
    partition: int
    start: int
    end: int


# --- the checkpoint's JSON ---------------------------------------------------------------------------

def to_json_offsets(offsets: Mapping[TopicPartition, int]) -> dict:
    """{(t, 0): 5} -> {"t": {"0": 5}} (Spark's KafkaSourceOffset JSON), topics and partitions sorted."""
    out: Dict[str, Dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_json_offsets(value: Mapping) -> PartitionOffsets:
    """The inverse of :func:`to_json_offsets`; a malformed offset (a checkpoint of another source) is
    an error naming it."""
    out: PartitionOffsets = {}
    if not isinstance(value, Mapping):
        raise KafkalogError(f"streaming offset {value!r} is not Kafka's {{topic: {{partition: offset}}}} JSON")
    for topic, parts in value.items():
        if not isinstance(parts, Mapping):
            raise KafkalogError(f"streaming offset of topic {topic!r} is not a {{partition: offset}} object")
        for p, off in parts.items():
            try:
                out[TopicPartition(str(topic), int(p))] = int(off)
            except (TypeError, ValueError):
                raise KafkalogError(f"streaming offset {topic}-{p}: {off!r} is not an offset") from None
    return out


# --- decisions -----------------------------------------------------------------------------------------

def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               limit: Optional[int], log_starts: Optional[Mapping[TopicPartition, int]] = None) -> PartitionOffsets:
    """The end offsets of the next micro-batch: ``latest``, or with ``limit`` records at most about that
    many, shared out by backlog (Spark's KafkaMicroBatchStream.rateLimit). A partition not in ``start``
    counts from its log start (``log_starts``; 0 when unknown), as Spark counts a new partition from its
    earliest offset."""
    if limit is None:
        return dict(latest)
    begins = {tp: start.get(tp, (log_starts or {}).get(tp, 0)) for tp in latest}
    sizes = {tp: max(0, end - begins[tp]) for tp, end in latest.items()}
    total = sum(sizes.values())
    if total <= 0:
        return dict(latest)
    out: PartitionOffsets = {}
    for tp, end in latest.items():
        begin = begins[tp]
        if sizes[tp] <= 0:
            out[tp] = end
            continue
        prorate = limit * (sizes[tp] / total)
        step = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, begin + step)
    return out


def cap(offsets: Mapping[TopicPartition, int], target: Optional[Mapping[TopicPartition, int]]) -> PartitionOffsets:
    """With Trigger.AvailableNow: never past the offsets fixed when the query started, and no partition
    that was not there then."""
    if target is None:
        return dict(offsets)
    return {tp: min(off, target[tp]) for tp, off in offsets.items() if tp in target}


def _name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def plan_ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
                log_starts: Mapping[TopicPartition, int], *,
                fail_on_data_loss: bool) -> Tuple[List[OffsetRange], List[DataLoss]]:
    """The ranges one micro-batch reads from ``start`` to ``end`` and the data loss on the way
    (``log_starts``: each listed partition's log start offset now). Raises DataLossError at the first
    loss with ``fail_on_data_loss``."""
    losses: List[DataLoss] = []

    def lost(tp, kind, lo, hi, message):
        if fail_on_data_loss:
            raise DataLossError(f"{message}. {FAIL_ON_DATA_LOSS_HINT}")
        losses.append(DataLoss(tp[0], tp[1], kind, lo, hi, message))

    for tp in sorted(set(start) - set(end)):
        lost(tp, GONE, start[tp], None, f"{_name(tp)} is gone (was at offset {start[tp]}); some data may have "
             "been missed")
    ranges: List[OffsetRange] = []
    for tp in sorted(end):
        until = end[tp]
        log_start = log_starts.get(tp)
        if tp in start:
            begin = start[tp]
        else:
            begin = 0 if log_start is None else log_start
            if begin != 0:
                lost(tp, NEW_NOT_AT_ZERO, 0, begin, f"added partition {_name(tp)} starts from {begin} instead of 0; "
                     "some data may have been missed")
        if until < begin:
            lost(tp, WENT_BACK, until, begin, f"partition {_name(tp)}'s offset was changed from {begin} to {until}; "
                 "some data may have been missed")
            continue
        if log_start is not None and begin < log_start:
            lost(tp, BELOW_LOG_START, begin, min(log_start, until),
                 f"cannot read {_name(tp)} from offset {begin}: its log start offset is {log_start} (records "
                 f"{begin}..{min(log_start, until) - 1} are gone); some data may have been missed")
            begin = min(log_start, until)
        if begin < until:
            ranges.append(OffsetRange(tp[0], tp[1], begin, until))
    return ranges, losses

