"""How one cleaning round runs (``clean_partition``, ``clean_log_dir``, ``run_partition``): the
caller's choices, in one frozen value with their defaults in one place.

Kafka splits the same choices between ``CleanerConfig`` (cleaner-wide: threads, dedupe buffer,
I/O buffer — here read from the broker's settings, ``BrokerConfig``, and overridable per round by
``io_buffer_size`` and ``map_budget_bytes``) and what a cleaner thread does per round. The round's
inputs (partition folder, topic config, ``now_ms``, a precomputed plan or map) stay arguments of the
call; only how it runs is here. Immutable, so a value reused across calls carries nothing from one
round into the next; ``dataclasses.replace`` makes a variant.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Collection, Optional, Union

# ``record_decisions``: True (every record's reason), False (none) or the offsets to keep reasons for.
RecordDecisions = Union[bool, Collection[int]]
# ``on_step(step, path)``: called after each swap-in step (``swap.STEP_*``); tests raise there.
StepHook = Callable[[str, Optional[Path]], None]


@dataclass(frozen=True)
class CleanOptions:
    """How a round runs.

    :param dry_run: compute everything, write nothing (no ``.cleaned`` file, no checkpoint).
    :param on_step: called after each swap-in step (``swap.STEP_*``) with the path it touched.
    :param record_decisions: keep every record's reason (True), none (False), or only those of the
        given offsets (for ``explain`` on a large partition).
    :param force: clean even when the dirty ratio is below ``min.cleanable.dirty.ratio`` (a
        compacted topic's dirty range must still be non-empty).
    :param lock: take the log dir's ``.lock`` (False: the caller holds it, in another process — the
        Spark job's driver).
    :param update_checkpoint: write ``cleaner-offset-checkpoint`` right after the swap, as the broker
        does (False: the caller does).
    :param high_watermark: the high watermark to use instead of ``replication-offset-checkpoint``'s.
    :param io_buffer_size: the recopy's read chunk in bytes (default ``log.cleaner.io.buffer.size``
        / ``log.cleaner.threads`` / 2, as Kafka's ``Cleaner``).
    :param map_budget_bytes: the key map's budget in bytes (default ``log.cleaner.dedupe.buffer.size``
        / ``log.cleaner.threads``).
    :param engine: ``"reference"`` or ``"compiled"``; None: the ``KAFKALOG_ENGINE`` environment
        variable's (default compiled).

    Example::

        import kafkalog
        options = kafkalog.CleanOptions(dry_run=True, map_budget_bytes=64 << 20, engine="reference")
        config = kafkalog.configs_from_mappings(topics={"orders": {"cleanup.policy": "compact"}}).for_topic("orders")
        result = kafkalog.clean_partition("logs/orders-0", config=config, now_ms=1767841200000, options=options)
    """

    dry_run: bool = False
    on_step: Optional[StepHook] = None
    record_decisions: RecordDecisions = True
    force: bool = False
    lock: bool = True
    update_checkpoint: bool = True
    high_watermark: Optional[int] = None
    io_buffer_size: Optional[int] = None
    map_budget_bytes: Optional[int] = None
    engine: Optional[str] = None

    def __post_init__(self) -> None:
        for name in ("io_buffer_size", "map_budget_bytes"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or int(value) <= 0):
                raise ValueError(f"CleanOptions.{name} must be a positive number of bytes, not {value!r}")
        if self.high_watermark is not None and int(self.high_watermark) < 0:
            raise ValueError(f"CleanOptions.high_watermark must be >= 0, not {self.high_watermark!r}")


__all__ = ["CleanOptions", "RecordDecisions", "StepHook"]
