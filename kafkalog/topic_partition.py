"""The name of one partition of a topic (Kafka's ``org.apache.kafka.common.TopicPartition``).

A NamedTuple, so it is immutable, hashable and equal to the plain ``(topic, partition)`` tuple that
checkpoint files and older callers key their maps by. Either field may be None where it is unknown
(records decoded from a bare segment file that names no partition folder).
"""
from __future__ import annotations

from typing import NamedTuple, Optional


class TopicPartition(NamedTuple):
    """A ``topic`` and ``partition``; equal to the tuple ``(topic, partition)``.

    Example::

        import kafkalog
        tp = kafkalog.TopicPartition("orders", 3)
        print(str(tp), tp == ("orders", 3))      # orders-3 True
    """
    topic: Optional[str]
    partition: Optional[int]

    def __str__(self) -> str:
        """Kafka's ``topic-partition`` form (also a live partition folder's name)."""
        return f"{self.topic}-{self.partition}"


UNKNOWN_PARTITION = TopicPartition(None, None)

__all__ = ["TopicPartition", "UNKNOWN_PARTITION"]
