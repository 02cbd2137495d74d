"""One partition's retention run, end to end — load, decide, and (with ``execute``) apply — and the
per-log-dir finish (``log-start-offset-checkpoint``). The ``kafkalog`` CLI and the Spark job call the
same two functions; the Spark job only spreads partitions over executors.

Outcomes are plain dicts in the shape of ``OUTCOME_SCHEMA`` (one per partition, its segment decisions
nested), so they cross the Arrow boundary unchanged. A partition never raises: trouble becomes
``status: "error"`` with a message naming the file and what to do, and the run goes on.

A Spark task that is retried after it applied (an executor lost before its result came back) finds
the segments it deleted already renamed. Given the run's ``tag``, applying stamps each renamed file
with the run's ``now`` and tag, so the retry recognises them and reports them as deleted by an
earlier attempt (``segments_deleted_earlier``, rule ``earlier attempt``) instead of losing them from
the report. Another run, even as of the same ``now``, has another tag and claims none of them.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

import pyarrow as pa
import pyarrow.compute as pc

from kafkalog.log.local_log import (HW_MISSING_ZERO, LocalLog, LogDirCheckpoints, load_partition,
                                    read_log_dir_checkpoints)
from kafkalog.checkpoint.offset import read_offset_checkpoint, write_offset_checkpoint
from kafkalog.fs.names import LOG_START_OFFSET_CHECKPOINT
from kafkalog.config import KafkaConfigs
from kafkalog.errors import KafkalogError
from kafkalog.format.file_records import scan_batches
from kafkalog.log.producer_snapshot import snapshot_file_name
from kafkalog.retention.deletion import (DeletionResult, apply_plan, purge_deleted_files, rename_left_behind, renamed_by_run,
                                         updated_log_start_offsets)
from kafkalog.log.logdir import scan_partition_dir
from kafkalog.fs.names import LIVE, LOG_SUFFIX, parse_partition_dir_name, parse_segment_file_name
from kafkalog.fs.names import CLEANED_SUFFIX, DELETED_SUFFIX, KRAFT_METADATA_TOPIC, SWAP_SUFFIX, format_segment_file_name
from kafkalog.retention.policy import NO_PRODUCER_SNAPSHOT, LogState, keep_active_segment, plan_retention

PLANNED, APPLIED, SKIPPED, ERROR = "planned", "applied", "skipped", "error"
EARLIER_ATTEMPT = "earlier attempt"      # the rule of a segment an earlier attempt of this run deleted

DECISION_TYPE = pa.struct([
    pa.field("base_offset", pa.int64()),
    pa.field("size", pa.int64()),
    pa.field("largest_timestamp_ms", pa.int64()),
    pa.field("largest_timestamp_source", pa.string()),
    pa.field("decision", pa.string()),
    pa.field("rule", pa.string()),
    pa.field("reason", pa.string()),
])

OUTCOME_SCHEMA = pa.schema([
    pa.field("log_dir", pa.string()),
    pa.field("partition_dir", pa.string()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("status", pa.string()),               # planned / applied / skipped / error
    pa.field("message", pa.string()),
    pa.field("cleanup_policy", pa.string()),
    pa.field("retention_ms", pa.int64()),
    pa.field("retention_bytes", pa.int64()),
    pa.field("log_start_offset", pa.int64()),
    pa.field("new_log_start_offset", pa.int64()),
    pa.field("log_end_offset", pa.int64()),
    pa.field("high_watermark", pa.int64()),
    pa.field("high_watermark_source", pa.string()),  # checkpoint / missing:zero / missing:log-end
    pa.field("first_base_offset_after", pa.int64()),
    pa.field("roll_at", pa.int64()),
    pa.field("size_before", pa.int64()),
    pa.field("bytes_freed", pa.int64()),
    pa.field("segments_deleted", pa.int32()),
    pa.field("segments_deleted_earlier", pa.int32()),   # by an earlier attempt of this run (a retried task)
    pa.field("bytes_freed_earlier", pa.int64()),
    pa.field("renamed", pa.list_(pa.string())),
    pa.field("purged", pa.list_(pa.string())),
    pa.field("bytes_purged", pa.int64()),
    pa.field("problems", pa.list_(pa.string())),
    pa.field("duration_ms", pa.int64()),
    pa.field("decisions", pa.list_(DECISION_TYPE)),
])


def _base_outcome(log_dir, path, topic, partition) -> dict:
    return dict(log_dir=None if log_dir is None else os.fspath(log_dir), partition_dir=os.fspath(path),
                topic=topic, partition=partition, decisions=[], renamed=[], purged=[], problems=[],
                bytes_freed=0, bytes_purged=0, segments_deleted=0, segments_deleted_earlier=0,
                bytes_freed_earlier=0)


def retain_partition(path: os.PathLike | str, *, log_dir: Optional[os.PathLike | str], configs: KafkaConfigs,
                     now_ms: int, hw_missing: str = HW_MISSING_ZERO, execute: bool = False,
                     delete_delay_ms: Optional[int] = None, tag: Optional[int] = None,
                     checkpoints: Optional[LogDirCheckpoints] = None) -> dict:
    """Decide (and with ``execute`` apply) retention for one partition folder; returns its outcome.

    ``delete_delay_ms`` overrides ``file.delete.delay.ms`` for removing ``.deleted`` files (0: at once).
    ``tag`` (``log_deletion.run_tag`` of the run id) lets a retried attempt of the same run report what
    an earlier one renamed; without it every call is a run of its own.
    The caller holds the log dir's lock when executing and calls :func:`finish_log_dir` afterwards
    (:func:`retain_log_dir` does both). ``path``: the partition folder; ``log_dir``: its log dir (None:
    the parent folder); ``configs``: the Kafka configs; ``now_ms``: 'now'; ``hw_missing``: what a
    missing high-watermark entry means; ``execute``: apply; ``checkpoints``: the log dir's checkpoint
    files already read.

    Example::

        import kafkalog
        configs = kafkalog.configs_from_mappings(topics={"orders": {"retention.bytes": "1000000"}})
        outcome = kafkalog.retain_partition("logs/orders-0", log_dir=None, configs=configs, now_ms=1767841200000)
        print(outcome["status"], outcome["segments_deleted"], outcome["bytes_freed"])
    """
    started = time.monotonic()
    path = Path(path)
    log_dir = path.parent if log_dir is None else Path(log_dir)
    try:
        topic, partition, kind = parse_partition_dir_name(path.name)
    except KafkalogError as exc:
        out = _base_outcome(log_dir, path, None, None)
        out.update(status=ERROR, message=str(exc))
        return out
    out = _base_outcome(log_dir, path, topic, partition)
    try:
        config = configs.for_topic(topic)
        out.update(cleanup_policy=",".join(config.cleanup_policy), retention_ms=config.retention_ms,
                   retention_bytes=config.retention_bytes)
        if kind != LIVE:
            out.update(status=SKIPPED, message=f"a {kind} folder: not a live log, a broker never retains it")
            return out
        if topic == KRAFT_METADATA_TOPIC:
            out.update(status=SKIPPED, message="the KRaft metadata log: a broker never applies retention to it "
                                               "(its snapshots trim it)")
            return out
        if checkpoints is None:
            checkpoints = read_log_dir_checkpoints(log_dir)
        listing = scan_partition_dir(path, log_dir=log_dir)
        pending = [p.name for p in listing.leftovers if p.name.endswith(("." + SWAP_SUFFIX, "." + CLEANED_SUFFIX))]
        if pending:
            out.update(status=ERROR, message=(
                f"{path}: an interrupted compaction is pending ({', '.join(pending[:3])}); a broker completes it "
                "at startup and would bring back what retention deletes now. Run `kafkalog recover --log-dirs "
                f"{log_dir}` first, then retention again"))
            return out
        state = load_partition(listing, checkpoints)
        out["problems"] = list(checkpoints.problems) + state.problems
        _decide(state, config, configs, now_ms, hw_missing, out)
        if execute and out["status"] == PLANNED:
            _count_earlier_attempt(state, now_ms, tag or 0, out)
            _apply(state, config, now_ms, tag or 0, delete_delay_ms, out)
    except KafkalogError as exc:
        out.update(status=ERROR, message=str(exc) + out.get("_partial", ""))
    except OSError as exc:
        out.update(status=ERROR, message=f"{exc.filename or path}: {exc.strerror or exc} "
                                         "(check the folder is readable and, with --execute, writable)"
                                         + out.get("_partial", ""))
    finally:
        out["duration_ms"] = int((time.monotonic() - started) * 1000)
    return out


def _decide(state: LocalLog, config, configs: KafkaConfigs, now_ms: int, hw_missing: str, out: dict) -> None:
    if not state.segments:
        out.update(status=SKIPPED, message="no segments")
        return
    hw = state.high_watermark(hw_missing)
    log = LogState(tuple(state.segments), state.log_start_offset, state.log_end_offset, hw)
    plan = plan_retention(log, config, now_ms, cleaner_enabled=configs.broker.cleaner_enable)
    if plan.roll_at is not None:
        missing = _producer_state_lost_by_roll(state, plan.roll_at)
        if missing:
            plan = keep_active_segment(plan, missing, NO_PRODUCER_SNAPSHOT)
    by_base = {s.base_offset: s for s in state.segments}
    remaining = [d.base_offset for d in plan.decisions if d.decision != "delete"]
    out.update(
        status=SKIPPED if plan.skipped else PLANNED, message=plan.skipped,
        log_start_offset=state.log_start_offset, new_log_start_offset=plan.new_log_start_offset,
        log_end_offset=state.log_end_offset, high_watermark=hw,
        high_watermark_source="checkpoint" if state.high_watermark_checkpoint is not None else f"missing:{hw_missing}",
        first_base_offset_after=plan.roll_at if plan.roll_at is not None else remaining[0],
        roll_at=plan.roll_at, size_before=state.size, bytes_freed=plan.bytes_freed,
        segments_deleted=len(plan.deleted),
        decisions=[dict(base_offset=d.base_offset, size=d.size,
                        largest_timestamp_ms=by_base[d.base_offset].largest_timestamp_ms,
                        largest_timestamp_source=by_base[d.base_offset].largest_timestamp_source,
                        decision=d.decision, rule=d.rule, reason=d.reason) for d in plan.decisions])
    out["_plan"] = plan
    out["_state"] = state


@dataclass
class EarlierAttempt:
    """What an earlier attempt of this run (a task Spark retried) deleted in a partition, and what any
    interrupted run left behind."""

    segments: list[tuple[int, int]]           # (base offset, .log bytes), ascending
    left_behind: list[Path]                   # files left live of segments whose .log a run renamed


def deleted_by_earlier_attempt(state: LocalLog, now_ms: int, tag: int) -> EarlierAttempt:
    """The segments below the first live one whose ``.log`` the run (``now_ms``, ``tag``) renamed to
    ``.deleted``; and the indexes and producer snapshots still live of every segment below the first
    live one whose ``.log`` is ``.deleted`` — by this run or any other that was killed inside the
    segment's renames (a broker deletes such orphans when it loads the dir; a rerun renames them as
    the interrupted run would have, so it ends with the files an uninterrupted run leaves)."""
    first = state.segments[0].base_offset if state.segments else None
    named = []
    for path in state.leftovers:
        try:
            named.append((path, parse_segment_file_name(path.name)))
        except KafkalogError:
            continue                      # not a segment file: nothing a run renamed
    found, bases = [], set()
    for path, name in named:
        if name.suffix != LOG_SUFFIX or name.temp != DELETED_SUFFIX:
            continue
        if first is not None and name.base_offset >= first:
            continue
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        bases.add(name.base_offset)
        if tag and renamed_by_run(stat.st_mtime_ns, now_ms, tag):
            found.append((name.base_offset, stat.st_size))
    left = [path for path, name in named
            if name.temp is None and name.suffix != LOG_SUFFIX and name.base_offset in bases]
    return EarlierAttempt(sorted(found), sorted(left))


def _count_earlier_attempt(state: LocalLog, now_ms: int, tag: int, out: dict) -> None:
    found = deleted_by_earlier_attempt(state, now_ms, tag)
    out["_left_behind"] = found.left_behind
    earlier = found.segments
    if not earlier:
        return
    out["decisions"] = [dict(base_offset=base, size=size, largest_timestamp_ms=None, largest_timestamp_source=None,
                             decision="delete", rule=EARLIER_ATTEMPT,
                             reason="already renamed to .deleted by an earlier attempt of this run's task, "
                                    "whose report was lost") for base, size in earlier] + out["decisions"]
    out.update(segments_deleted_earlier=len(earlier), bytes_freed_earlier=sum(size for _, size in earlier))


def _producer_state_lost_by_roll(state: LocalLog, roll_at: int) -> Optional[str]:
    """Why rolling and deleting every segment would lose producer state, or None. A broker's roll
    writes ``<log end offset>.snapshot`` (ProducerStateManager.takeSnapshot) and keeps it; offline we
    cannot rebuild that state, so the roll is safe only when the snapshot is already there (a clean
    shutdown writes it) or no batch of the log carries a producer id."""
    if (state.path / snapshot_file_name(roll_at)).exists():
        return None
    for seg in state.segments:
        ids = scan_batches(seg.on_disk().log, verify_crc=False, on_corrupt="stop").batches.column("producerId")
        if len(ids) and pc.max(ids).as_py() >= 0:
            return (f"kept where Kafka would roll and delete it: the roll's producer state "
                    f"({snapshot_file_name(roll_at)}, which a broker writes from memory when it rolls) is not on "
                    f"disk and the log has idempotent/transactional batches, so deleting this segment would "
                    f"lose their sequences and epochs; a broker (or a clean restart, which writes the snapshot) "
                    f"will roll it")
    return None


def _apply(state: LocalLog, config, now_ms: int, tag: int, delete_delay_ms: Optional[int], out: dict) -> None:
    plan = out["_plan"]
    result = DeletionResult()
    try:
        apply_plan(state, plan, now_ms=now_ms, tag=tag, result=result)
        rename_left_behind(out.get("_left_behind", ()), now_ms=now_ms, tag=tag, result=result)
        delay = config.file_delete_delay_ms if delete_delay_ms is None else delete_delay_ms
        leftovers = list(state.leftovers) + [state.path / name for name in result.renamed]
        purge_deleted_files(leftovers, now_ms=now_ms, delay_ms=delay, result=result)
    except BaseException:
        _count_committed(plan, result, out)
        raise
    finally:   # what was done is reported even when a later step failed
        out.update(renamed=result.renamed, purged=result.purged, bytes_purged=result.bytes_purged)
    out.update(status=APPLIED)


def _count_committed(plan, result: DeletionResult, out: dict) -> None:
    """After a failure part-way, the counts say what was done, not what was planned: a segment is
    deleted once its ``.log`` is renamed to ``.deleted`` (a broker no longer loads it)."""
    gone = {name[:-len(DELETED_SUFFIX) - 1] for name in result.renamed}
    done = [d for d in plan.deleted if format_segment_file_name(d.base_offset, LOG_SUFFIX) in gone]
    out.update(segments_deleted=len(done), bytes_freed=sum(d.size for d in done),
               _partial=f"; {len(done)} of the {len(plan.deleted)} segments planned were deleted before it failed"
                        + (f" (the rolled segment {result.rolled_segment} was created)" if result.rolled_segment else ""))


def public_outcome(outcome: dict) -> dict:
    """The outcome without its in-process attachments (the plan and state objects)."""
    return {k: v for k, v in outcome.items() if not k.startswith("_")}


def finish_log_dir(log_dir: os.PathLike | str, outcomes: Iterable[dict]) -> dict:
    """Rewrite the log dir's ``log-start-offset-checkpoint`` after its partitions were applied:
    returns {"changed": [...], "path": ...}. Writes nothing when no entry changes."""
    path = Path(log_dir) / LOG_START_OFFSET_CHECKPOINT
    changes: dict[tuple[str, int], tuple[int, int]] = {}
    for o in outcomes:     # every applied partition, as a broker rewrites every log's entry: a run after one
        if o.get("status") == APPLIED:   # killed before this step puts right the entries it left stale
            changes[(o["topic"], o["partition"])] = (o["new_log_start_offset"], o["first_base_offset_after"])
    if not changes:
        return {"path": os.fspath(path), "changed": []}
    current = read_offset_checkpoint(path)
    updated = updated_log_start_offsets(current, changes)
    changed = sorted(f"{t}-{p}" for (t, p) in set(current) | set(updated) if current.get((t, p)) != updated.get((t, p)))
    if updated != current:
        write_offset_checkpoint(path, updated)
    return {"path": os.fspath(path), "changed": changed}


_TOTALS = ("segments_deleted", "bytes_freed", "segments_deleted_earlier", "bytes_freed_earlier", "bytes_purged")


def retention_summary(outcomes: Iterable[dict]) -> dict:
    """Totals for the report: partitions by status, segments and bytes to free, per topic."""
    outcomes = list(outcomes)
    by_topic: dict[str, dict] = {}
    statuses: dict[str, int] = {}
    for o in outcomes:
        statuses[o["status"]] = statuses.get(o["status"], 0) + 1
        topic = by_topic.setdefault(o.get("topic") or "?", {"partitions": 0, **{k: 0 for k in _TOTALS}})
        topic["partitions"] += 1
        for k in _TOTALS:
            topic[k] += o.get(k) or 0
    return {
        "partitions": len(outcomes),
        "statuses": statuses,
        "segments": sum(len(o.get("decisions") or []) for o in outcomes),
        **{k: sum(o.get(k) or 0 for o in outcomes) for k in _TOTALS},
        "topics": dict(sorted(by_topic.items())),
        "errors": [{"partition_dir": o["partition_dir"], "message": o["message"]}
                   for o in outcomes if o["status"] == ERROR],
    }
