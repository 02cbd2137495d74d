"""The demo's compacted topic: one partition of customer records keyed by customer, with tombstones,
one transaction aborted and one committed, rolled into several segments — what Kafka's log cleaner
has work for (superseded records, tombstones to stamp, aborted records and their marker), written
as a broker would (indexes, .txnindex for the aborted transaction, leader-epoch checkpoint).
"""
from __future__ import annotations

import random
from pathlib import Path

from kafkalog.log.roll import RollConfig
from kafkalog.log.writer import WrittenPartition, write_partition
from kafkalog.testing import partition_table

COMPACTED_TOPIC = "demo-customers"
KEYS = 200
SEGMENT_BYTES = 64 * 1024                     # a few segments, so all but the active one can be cleaned
ABORTED_PRODUCER, COMMITTED_PRODUCER = 4001, 4002
TRANSACTION_RECORDS = 20


def compacted_rows(*, topic: str, records: int, start_ms: int, rnd: random.Random) -> list:
    """The rows (``kafkalog.testing`` row dicts) of the topic's partition 0: ``records`` plain records,
    about 5% tombstones, and at a third and two thirds of the way a transaction of
    ``TRANSACTION_RECORDS`` records, the first aborted, the second committed.

    :param topic: the topic
    :param records: plain (non-transactional) records
    :param start_ms: the first record's timestamp; one second apart
    :param rnd: the random source
    """
    rows: list[dict] = []

    def record(extra: dict) -> None:
        k = rnd.randrange(KEYS)
        value = None if rnd.random() < 0.05 else b'{"customer": %d, "tier": %d}' % (k, rnd.randrange(1, 4))
        rows.append(dict(topic=topic, key=b"customer-%03d" % k, value=value, timestamp=start_ms + 1000 * len(rows),
                         **extra))

    for i in range(records):
        for at, producer, outcome in ((records // 3, ABORTED_PRODUCER, "abort"),
                                      (2 * records // 3, COMMITTED_PRODUCER, "commit")):
            if i == at:
                for _ in range(TRANSACTION_RECORDS):
                    record(dict(producer_id=producer, transactional=True))
                rows.append(dict(topic=topic, control=outcome, producer_id=producer, timestamp=start_ms + 1000 * len(rows)))
        record({})
    return rows


def write_compacted_topic(out: Path, *, topic: str = COMPACTED_TOPIC, records: int = 3000, start_ms: int,
                          rnd: random.Random) -> WrittenPartition:
    """Write the topic's partition 0 under log dir ``out``; the caller writes the log dir's checkpoints.

    :param out: the log dir
    :param topic: the topic's name
    :param records: plain records (the transactions come on top)
    :param start_ms: the first record's timestamp
    :param rnd: the random source
    """
    table = partition_table(compacted_rows(topic=topic, records=records, start_ms=start_ms, rnd=rnd))
    return write_partition(out, topic, 0, table, roll=RollConfig(segment_bytes=SEGMENT_BYTES))
