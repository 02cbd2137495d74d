"""Offline consumer lag as pure functions: the committed offsets a group coordinator would load from
``__consumer_offsets`` rows, and each one's lag against the partition's end from the log dirs.

Committed offsets (Kafka's GroupMetadataManager / OffsetMetadataManager load):

* per (group, topic, partition) the record with the highest log offset wins; a tombstone removes
  the commit (and a GroupMetadata tombstone the group's metadata);
* transactional offset commits count once their COMMIT marker (same producer id, same coordinator
  partition) follows; an ABORT marker drops them; without a marker they are pending, not applied
  (counted in the summary);
* expiry is noted, not applied: a commit with an explicit expire timestamp (value v1) expires then;
  otherwise, when the group has no live members, ``offsets.retention.ms`` after the group became
  empty (classic group's ``currentStateTimestamp``) or after the commit; a group with members keeps
  its offsets.

Lag (what ``kafka-consumer-groups.sh --describe`` shows, against ListOffsets latest with
read_uncommitted: the high watermark) = high watermark - committed offset. A partition whose folder
is in none of the given log dirs is ``unknown`` (lag null), never 0. Several replicas of a partition
in the log dirs: the highest end wins (the leader's).
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from kafkalog.coordinator.group import records as gr
from kafkalog.errors import UsageError
from kafkalog.format.control_record import COMMIT, CONTROL_TYPE_NAMES
from kafkalog.topic_partition import TopicPartition

DEFAULT_OFFSETS_RETENTION_MS = 7 * 24 * 3600 * 1000      # offsets.retention.minutes = 10080
STATUS_OK = "ok"
STATUS_UNKNOWN = "unknown"
HW_CHECKPOINT = "checkpoint"
HW_LOG_END = "log-end (no replication-offset-checkpoint entry)"

CommitKey = Tuple[str, str, int]


@dataclass
class CommittedOffset:
    """The live offset commit of one (group, topic, partition)."""

    group: str
    topic: str
    partition: int
    committed_offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int          # -1 unless the record (value v1) carries one
    record_offset: int             # where in __consumer_offsets
    coordinator_partition: Optional[int]
    transactional: bool = False


@dataclass
class GroupInfo:
    """What the group's metadata records say (classic or KIP-848)."""

    protocol_type: Optional[str] = None
    state: Optional[str] = None
    current_state_timestamp: int = -1
    generation: Optional[int] = None
    members: set = field(default_factory=set)          # KIP-848 members with live metadata records
    classic_members: int = 0

    @property
    def member_count(self) -> int:
        return self.classic_members + len(self.members)


@dataclass
class LoadedOffsets:
    """The result of loading __consumer_offsets rows."""

    offsets: Dict[CommitKey, CommittedOffset] = field(default_factory=dict)
    groups: Dict[str, GroupInfo] = field(default_factory=dict)
    pending_transactional: int = 0
    undecodable: int = 0
    records: int = 0
    seen_groups: set = field(default_factory=set)    # every group id a record names, chosen or not


@dataclass(frozen=True)
class PartitionEnd:
    """A partition's offsets from the log dirs."""

    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    high_watermark_source: str
    replicas: int = 1


def group_matcher(groups: Sequence[str] = (), patterns: Sequence[str] = ()):
    """A predicate over group ids: exact names or full-match regular expressions; everything when
    neither is given. Raises re.error for a bad pattern."""
    names = set(groups)
    compiled = [re.compile(p) for p in patterns]
    if not names and not compiled:
        return lambda g: True
    return lambda g: g in names or any(c.fullmatch(g) for c in compiled)


def unknown_groups(asked: Sequence[str], seen: Iterable[str]) -> List[str]:
    """One message per ``--group`` id that no __consumer_offsets record names, with the closest id that
    one does ("did you mean orders-app?"): a misspelt group would otherwise print an empty report.

    :param asked: the group ids the user typed
    :param seen: every group id the replayed records name (``LoadedOffsets.seen_groups``)
    """
    import difflib

    seen = sorted(set(seen))
    out = []
    for group in sorted(set(asked) - set(seen)):
        close = difflib.get_close_matches(group, seen, n=1, cutoff=0.6)
        out.append(f"--group {group}: no record of group {group} in __consumer_offsets"
                   + (f" (did you mean {close[0]}?)" if close else ""))
    return out


def check_groups(asked, seen, *, complete: bool, warn=None) -> None:
    """A ``--group`` no record names is a UsageError (exit 2) when every coordinator partition was read;
    when some could not be (the group may be there), a warning line instead.

    :param asked: the ``--group`` ids typed
    :param seen: the group ids the records name
    :param complete: whether every __consumer_offsets partition was read
    :param warn: where a warning goes (default: stderr)
    """
    messages = unknown_groups(asked, seen)
    if not messages:
        return
    if complete:
        raise UsageError("; ".join(messages), hint="give a group id as kafka-consumer-groups.sh --list lists it, or "
                         "--group-pattern REGEX")
    for message in messages:
        (warn or (lambda m: print(f"kafkalog lag: warning: {m}", file=sys.stderr)))(
            f"{message} among the partitions that could be read")


def _newer(old: Optional[Tuple[int, object]], offset: int) -> bool:
    return old is None or old[0] < offset


def load_committed_offsets(rows: Iterable[Mapping], *, include_group=lambda g: True) -> LoadedOffsets:
    """Replay typed __consumer_offsets rows (``kafkalog.coordinator.group.rows.GROUP_ROW_SCHEMA``,
    each coordinator partition in offset order) into the live commits and group metadata."""
    out = LoadedOffsets()
    latest: Dict[CommitKey, Tuple[int, Optional[CommittedOffset]]] = {}
    group_meta: Dict[str, Tuple[int, Optional[GroupInfo]]] = {}
    members: Dict[Tuple[str, str], Tuple[int, bool]] = {}
    pending: Dict[Tuple[Optional[int], int], List[Tuple[int, CommitKey, Optional[CommittedOffset]]]] = {}

    for row in rows:
        out.records += 1
        cpart = row.get("partition")
        control = row.get("control_type")
        if control is not None:
            txn = pending.pop((cpart, row.get("producer_id")), [])
            if control == CONTROL_TYPE_NAMES[COMMIT]:
                for offset, key, commit in txn:
                    if _newer(latest.get(key), offset):
                        latest[key] = (offset, commit)
            continue
        if row.get("error") is not None:
            out.undecodable += 1
            continue
        group = row.get("group")
        if group is not None:
            out.seen_groups.add(group)
        if group is None or not include_group(group):
            continue
        rtype, offset = row.get("record_type"), row["offset"]
        if rtype in gr.OFFSET_COMMIT_TYPES:
            key = (group, row["commit_topic"], row["commit_partition"])
            commit = None if row.get("tombstone") else CommittedOffset(
                group, row["commit_topic"], row["commit_partition"], row["committed_offset"],
                row["leader_epoch"], row["metadata"], row["commit_timestamp"], row["expire_timestamp"],
                offset, cpart, bool(row.get("is_transactional")))
            if row.get("is_transactional"):
                pending.setdefault((cpart, row.get("producer_id")), []).append((offset, key, commit))
            elif _newer(latest.get(key), offset):
                latest[key] = (offset, commit)
        elif rtype == gr.GROUP_METADATA:
            info = None if row.get("tombstone") else GroupInfo(
                protocol_type=row["protocol_type"], state=row["group_state"],
                current_state_timestamp=row["current_state_timestamp"], generation=row["generation"],
                classic_members=len(row["members"] or []))
            if _newer(group_meta.get(group), offset):
                group_meta[group] = (offset, info)
        elif rtype == gr.CONSUMER_GROUP_MEMBER_METADATA:
            members[(group, row["member_id"])] = (offset, not row.get("tombstone"))
        elif rtype == gr.CONSUMER_GROUP_METADATA and _newer(group_meta.get(group), offset):
            info = None if row.get("tombstone") else GroupInfo(protocol_type="consumer", generation=row["group_epoch"])
            group_meta[group] = (offset, info)
    out.pending_transactional = sum(len(v) for v in pending.values())
    out.offsets = {k: v for k, (_, v) in latest.items() if v is not None}
    out.groups = {g: info for g, (_, info) in group_meta.items() if info is not None}
    for (g, member), (_, live) in members.items():
        if live:
            out.groups.setdefault(g, GroupInfo(protocol_type="consumer")).members.add(member)
    return out


def expires_at(commit: CommittedOffset, group: Optional[GroupInfo], retention_ms: int) -> Optional[int]:
    """When Kafka's offset expiry would remove this commit (ms), None while the group has members."""
    if commit.expire_timestamp != -1:
        return commit.expire_timestamp
    if group is not None and group.member_count > 0:
        return None
    if group is not None and group.current_state_timestamp != -1:
        return group.current_state_timestamp + retention_ms
    return commit.commit_timestamp + retention_ms


def lag_rows(loaded: LoadedOffsets, ends: Mapping[TopicPartition, PartitionEnd], *, now_ms: int,
             retention_ms: int = DEFAULT_OFFSETS_RETENTION_MS) -> List[dict]:
    """One row per live commit, sorted by group, topic, partition (:data:`LAG_COLUMNS`)."""
    rows = []
    for (group, topic, partition), c in sorted(loaded.offsets.items()):
        info = loaded.groups.get(group)
        end = ends.get(TopicPartition(topic, partition))
        exp = expires_at(c, info, retention_ms)
        notes = []
        row = {"group": group, "topic": topic, "partition": partition, "committed_offset": c.committed_offset,
               "leader_epoch": c.leader_epoch, "metadata": c.metadata, "commit_timestamp": c.commit_timestamp,
               "expire_timestamp": c.expire_timestamp, "expires_at": exp,
               "expired": None if exp is None else now_ms >= exp, "group_state": info.state if info else None,
               "coordinator_partition": c.coordinator_partition, "commit_record_offset": c.record_offset,
               "transactional": c.transactional,
               "log_start_offset": None, "log_end_offset": None, "high_watermark": None,
               "high_watermark_source": None, "lag": None, "status": STATUS_UNKNOWN}
        if end is None:
            notes.append("partition not in the given log dirs: lag unknown")
        else:
            row.update(log_start_offset=end.log_start_offset, log_end_offset=end.log_end_offset,
                       high_watermark=end.high_watermark, high_watermark_source=end.high_watermark_source,
                       lag=end.high_watermark - c.committed_offset, status=STATUS_OK)
            if c.committed_offset < end.log_start_offset:
                notes.append("committed offset is below the log start offset (those records were deleted)")
            if c.committed_offset > end.high_watermark:
                notes.append("committed offset is above the high watermark")
        if row["expired"]:
            notes.append("expired: a broker would remove this commit at its next offset expiration check")
        row["note"] = "; ".join(notes) or None
        rows.append(row)
    return rows


LAG_COLUMNS = ("group", "topic", "partition", "committed_offset", "leader_epoch", "metadata", "commit_timestamp",
               "expire_timestamp", "expires_at", "expired", "group_state", "coordinator_partition",
               "commit_record_offset", "transactional", "log_start_offset", "log_end_offset", "high_watermark",
               "high_watermark_source", "lag", "status", "note")
