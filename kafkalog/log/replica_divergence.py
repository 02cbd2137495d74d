"""Replica divergence: where several brokers' copies of one partition stop holding the same batches, which
copy is ahead, and what Kafka's leader-epoch truncation would keep on each.

After an unclean leader election or a disk fault two replicas of a partition differ from some offset on.
Kafka's ReplicaVerificationTool needs a live cluster; this compares the partition folders already on disk.

How replicas are compared: each replica is its sequence of batch headers across all its segments (segment
boundaries are where a broker happened to roll, so they are never compared). Batches are aligned from the
larger of the replicas' first offsets and compared field by field: base offset, last offset, partition
leader epoch, CRC (it covers every byte after it: attributes, timestamps, producer fields, records),
producer id and epoch, base sequence, attributes. Records inside a batch are not compared one by one: a
batch that differs is reported at its base offset.

The leader: Kafka's controller elects a replica and every other one truncates against it. Offline, the
leader is taken as (``leader="epoch"``, the default) the replica whose leader-epoch-checkpoint has the
highest latest epoch (the last broker to have been leader wrote it), then the longest log, then the first
log dir given; ``leader="longest"`` takes the longest log first; a log dir (its path as given) names one.

What Kafka would keep (KIP-101 / KIP-279, OffsetsForLeaderEpoch): the follower asks the leader for the end
offset of the follower's latest epoch (``LeaderEpochFileCache.endOffsetFor``); with the answer it
truncates as ``AbstractFetcherThread.getOffsetTruncationState`` does, asking again about an older epoch
while the leader's answer names an epoch the follower does not hold. The leader answers as a newly elected
one: becoming leader starts a new epoch at its log end (``Partition.makeLeader`` assigns the controller's
epoch in its ``LeaderEpochFileCache``), so its cache gets one more entry, (the highest latest epoch of all
replicas + 1, its log end offset). The result is the follower's offset after truncation; the leader keeps
its whole log.

Verdicts, one per replica against the leader (a partition's verdict is the worst of its replicas'):

- ``identical``: the same batches and the same log end offset.
- ``lagging``: a prefix of the leader (the leader holds ``lag`` more offsets); not a divergence.
- ``ahead``: the leader is a prefix of this replica (only with a chosen leader that is shorter); Kafka's
  truncation would cut the extra offsets.
- ``compacted``: the copies differ only as two log cleaners make them differ: where they differ, every
  batch present in both has the same base and last offset, leader epoch, producer fields and attributes
  and one side holds strictly fewer records (the cleaner rewrites a batch keeping its offsets: Kafka's
  ``MemoryRecords.filterTo``), batches present in one only are ones a cleaner removed, and Kafka's
  truncation would keep everything both hold. Each broker cleans its own copy, so this is not a divergence.
- ``diverged``: anything else; ``first_differing_offset`` is the base offset of the first batch that
  differs (the smaller of the two when the copies' batches start at different offsets).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from kafkalog.checkpoint.leader_epoch import EpochEntry, read_leader_epoch_checkpoint
from kafkalog.checkpoint.offset import read_offset_checkpoint
from kafkalog.errors import KafkalogError
from kafkalog.format.file_records import scan_batches
from kafkalog.log.logdir import PartitionDir
from kafkalog.fs.names import LEADER_EPOCH_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT

UNDEFINED_EPOCH = -1               # Kafka's RecordBatch.NO_PARTITION_LEADER_EPOCH / UNDEFINED_EPOCH
UNDEFINED_OFFSET = -1              # Kafka's UNDEFINED_EPOCH_OFFSET

LEADER_BY_EPOCH = "epoch"          # highest latest leader epoch, then longest log, then first given
LEADER_BY_LENGTH = "longest"       # longest log, then highest latest epoch, then first given
LEADER_POLICIES = (LEADER_BY_EPOCH, LEADER_BY_LENGTH)

IDENTICAL, LAGGING, AHEAD, COMPACTED, DIVERGED = "identical", "lagging", "ahead", "compacted", "diverged"
VERDICTS = (IDENTICAL, LAGGING, AHEAD, COMPACTED, DIVERGED)          # in increasing severity

# the header fields whose equality makes two batches the same batch (the CRC covers the records)
COMPARED_FIELDS = ("base_offset", "last_offset", "leader_epoch", "crc", "producer_id", "producer_epoch",
                   "base_sequence", "attributes")
# the fields a log cleaner keeps when it rewrites a batch (everything but the CRC and the record count)
CLEANER_KEPT_FIELDS = ("base_offset", "last_offset", "leader_epoch", "producer_id", "producer_epoch",
                       "base_sequence", "attributes")

PathLike = Union[str, os.PathLike]


# --- data structures ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ReplicaBatches:
    """One replica of a partition: its batch headers in offset order (one numpy array per field, one element
    per batch), its leader-epoch-checkpoint entries, and its log start offset and high watermark.

    ``name`` is how reports name the replica (its log dir as given)."""

    name: str
    base_offset: np.ndarray
    last_offset: np.ndarray
    leader_epoch: np.ndarray
    crc: np.ndarray
    producer_id: np.ndarray
    producer_epoch: np.ndarray
    base_sequence: np.ndarray
    attributes: np.ndarray
    records_count: np.ndarray
    epochs: Tuple[EpochEntry, ...] = ()
    log_start_offset: Optional[int] = None       # None: the first batch's base offset
    high_watermark: Optional[int] = None         # replication-offset-checkpoint, when present
    note: Optional[str] = None                   # e.g. where a corrupt batch ended the walk

    def __len__(self) -> int:
        return len(self.base_offset)

    @property
    def log_end_offset(self) -> int:
        if len(self):
            return int(self.last_offset[-1]) + 1
        return self.log_start_offset or 0

    @property
    def start_offset(self) -> int:
        if self.log_start_offset is not None:
            return self.log_start_offset
        return int(self.base_offset[0]) if len(self) else 0

    @property
    def latest_epoch(self) -> int:
        """The latest epoch of the leader-epoch-checkpoint (else of the last batch that has one), -1 if none."""
        if self.epochs:
            return self.epochs[-1].epoch
        stamped = self.leader_epoch[self.leader_epoch >= 0] if len(self) else self.leader_epoch
        return int(stamped[-1]) if len(stamped) else UNDEFINED_EPOCH

    @staticmethod
    def from_headers(name: str, headers: Sequence[dict], **kwargs) -> "ReplicaBatches":
        """A replica from header dicts with this class's field names (tests, small inputs)."""
        cols: dict = {f: np.array([h[f] for h in headers], dtype=np.int64) for f in COMPARED_FIELDS + ("records_count",)}
        return ReplicaBatches(name=name, **cols, **kwargs)


@dataclass(frozen=True)
class ReplicaVerdict:
    """One replica compared with the leader.

    ``first_differing_offset``: None unless the batches differ (``compacted`` / ``diverged``); ``lag``:
    leader's log end offset minus this one's (negative: ahead); ``kept_offset``: this replica's log end
    after Kafka's leader-epoch truncation against the leader; ``truncated``: offsets that truncation cuts."""

    name: str
    verdict: str
    log_start_offset: int
    log_end_offset: int
    latest_epoch: int
    first_differing_offset: Optional[int]
    lag: int
    kept_offset: int
    truncated: int
    is_leader: bool = False
    detail: str = ""

    def to_dict(self) -> dict:
        return dict(replica=self.name, verdict=self.verdict, leader=self.is_leader,
                    log_start_offset=self.log_start_offset, log_end_offset=self.log_end_offset,
                    latest_epoch=self.latest_epoch, first_differing_offset=self.first_differing_offset,
                    lag=self.lag, kept_offset=self.kept_offset, truncated=self.truncated, detail=self.detail)


@dataclass(frozen=True)
class PartitionDivergence:
    """A partition's replicas compared: the leader taken, each replica's verdict, the worst verdict, the
    first offset where any replica differs from the leader, and the replica(s) with the longest log."""

    topic: str
    partition: int
    leader: Optional[str]
    leader_policy: str
    replicas: Tuple[ReplicaVerdict, ...] = ()
    error: Optional[str] = None

    @property
    def verdict(self) -> str:
        if self.error:
            return "error"
        return max((r.verdict for r in self.replicas), key=VERDICTS.index, default=IDENTICAL)

    @property
    def first_differing_offset(self) -> Optional[int]:
        offsets = [r.first_differing_offset for r in self.replicas if r.first_differing_offset is not None]
        return min(offsets) if offsets else None

    @property
    def ahead(self) -> Tuple[str, ...]:
        """The replica(s) with the largest log end offset."""
        if not self.replicas:
            return ()
        end = max(r.log_end_offset for r in self.replicas)
        return tuple(r.name for r in self.replicas if r.log_end_offset == end)

    def to_dict(self) -> dict:
        return dict(topic=self.topic, partition=self.partition, verdict=self.verdict, leader=self.leader,
                    leader_policy=self.leader_policy, first_differing_offset=self.first_differing_offset,
                    ahead=list(self.ahead), replicas=[r.to_dict() for r in self.replicas], error=self.error)

    def describe(self) -> str:
        """One line: the partition, its verdict, and per replica what differs and what Kafka would keep."""
        name = f"{self.topic}-{self.partition}"
        if self.error:
            return f"{name}: error: {self.error}"
        head = f"{name}: {self.verdict}"
        if self.first_differing_offset is not None:
            head += f" from offset {self.first_differing_offset}"
        parts = []
        for r in self.replicas:
            if r.is_leader:
                text = f"leader (by {self.leader_policy}) LEO {r.log_end_offset} epoch {r.latest_epoch}"
            elif r.verdict == LAGGING:
                text = f"lagging by {r.lag}"
            elif r.verdict == AHEAD:
                text = f"ahead by {-r.lag}"
            else:
                text = r.verdict
                if r.first_differing_offset is not None:
                    text += f" at {r.first_differing_offset}"
            if not r.is_leader:
                text += f", LEO {r.log_end_offset} epoch {r.latest_epoch}, Kafka keeps [..{r.kept_offset})"
                if r.truncated:
                    text += f" truncating {r.truncated}"
            parts.append(f"{r.name}: {text}")
        return head + "; " + "; ".join(parts)


# --- Kafka's leader-epoch rules ------------------------------------------------------------------

def end_offset_for_epoch(epochs: Sequence[EpochEntry], log_end_offset: int, requested: int) -> Tuple[int, int]:
    """(epoch, end offset) a replica answers OffsetsForLeaderEpoch with for ``requested``, as
    ``LeaderEpochFileCache.endOffsetFor``: the latest epoch ends at the log end; an older one ends where
    the next higher epoch starts, named by the largest epoch not above it (or ``requested`` when none is);
    an empty cache, an undefined epoch or one above every known epoch is (-1, -1).

    :param epochs: the leader-epoch-checkpoint entries, ascending by epoch.
    :param log_end_offset: the replica's log end offset.
    :param requested: the epoch asked about."""
    if not epochs or requested == UNDEFINED_EPOCH:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    if requested == epochs[-1].epoch:
        return requested, log_end_offset
    higher = next((e for e in epochs if e.epoch > requested), None)
    if higher is None:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    floor = [e for e in epochs if e.epoch <= requested]
    return (floor[-1].epoch if floor else requested), higher.start_offset


def truncate_epochs(epochs: Sequence[EpochEntry], offset: int) -> Tuple[EpochEntry, ...]:
    """The epoch entries left after the log is truncated to ``offset`` (``truncateFromEnd``)."""
    return tuple(e for e in epochs if e.start_offset < offset)


def truncation_offset(follower_epochs: Sequence[EpochEntry], follower_end: int,
                      leader_epochs: Sequence[EpochEntry], leader_end: int, *, follower_high_watermark: Optional[int] = None,
                      max_rounds: int = 1000) -> int:
    """The follower's log end offset once it has truncated against the leader, round after round, as
    ``AbstractFetcherThread.getOffsetTruncationState`` decides: the follower asks about its latest epoch;
    an undefined answer keeps its log; otherwise it truncates to the smaller of the leader's end offset and
    its own end offset for the epoch the leader named, and asks again when it holds only an older epoch.

    :param follower_epochs: the follower's leader-epoch-checkpoint entries.
    :param follower_end: the follower's log end offset.
    :param leader_epochs: the leader's entries.
    :param leader_end: the leader's log end offset.
    :param follower_high_watermark: a follower without any epoch truncates to it (``truncateToHighWatermark``);
        None (unknown): it keeps its log.
    :param max_rounds: a bound on the rounds (each one removes at least one epoch, so it is never reached)."""
    epochs, end = tuple(follower_epochs), follower_end
    if not epochs:
        return end if follower_high_watermark is None else min(follower_high_watermark, end)
    for _ in range(max_rounds):
        latest = epochs[-1].epoch if epochs else UNDEFINED_EPOCH
        leader_epoch, leader_offset = end_offset_for_epoch(leader_epochs, leader_end, latest)
        if leader_offset == UNDEFINED_OFFSET:
            return end
        if leader_epoch == UNDEFINED_EPOCH:
            return min(leader_offset, end)
        own_epoch, own_offset = end_offset_for_epoch(epochs, end, leader_epoch)
        if own_offset == UNDEFINED_OFFSET:
            return min(leader_offset, end)
        if own_epoch == leader_epoch:
            return min(leader_offset, own_offset, end)
        new_end = min(own_offset, end)
        if new_end == end and epochs and epochs[-1].epoch == own_epoch:
            return end                              # no progress: the same answer would come again
        epochs, end = truncate_epochs(epochs, new_end), new_end
    return end


# --- comparing batch sequences -------------------------------------------------------------------

def choose_leader(replicas: Sequence[ReplicaBatches], policy: str = LEADER_BY_EPOCH) -> int:
    """The index of the replica taken as leader.

    :param replicas: the partition's replicas.
    :param policy: ``"epoch"`` (highest latest epoch, then longest log), ``"longest"`` (longest log, then
        highest latest epoch), or a replica's name; ties go to the first replica given."""
    if policy == LEADER_BY_EPOCH:
        key = lambda i: (replicas[i].latest_epoch, replicas[i].log_end_offset)          # noqa: E731
    elif policy == LEADER_BY_LENGTH:
        key = lambda i: (replicas[i].log_end_offset, replicas[i].latest_epoch)          # noqa: E731
    else:
        names = [r.name for r in replicas]
        if policy not in names:
            raise KafkalogError(f"leader {policy!r} is not one of the replicas ({', '.join(names)})",
                                hint=f"give {' or '.join(LEADER_POLICIES)} or one of the log dirs")
        return names.index(policy)
    best = 0
    for i in range(1, len(replicas)):
        if key(i) > key(best):
            best = i
    return best


def _from(r: ReplicaBatches, offset: int) -> int:
    """Index of the first batch of ``r`` holding an offset at or above ``offset``."""
    return int(np.searchsorted(r.last_offset, offset, side="left"))


def first_difference(a: ReplicaBatches, b: ReplicaBatches) -> Tuple[Optional[int], int, int]:
    """Where two replicas' batch sequences first differ, from the larger of their start offsets.

    Returns (first differing offset or None when one is a prefix of the other, index in ``a``, index in
    ``b`` of the first differing batches — or of the ends of the common prefix)."""
    start = max(a.start_offset, b.start_offset)
    i, j = _from(a, start), _from(b, start)
    n = min(len(a) - i, len(b) - j)
    same = np.ones(n, dtype=bool)
    for f in COMPARED_FIELDS:
        same &= getattr(a, f)[i:i + n] == getattr(b, f)[j:j + n]
    bad = np.flatnonzero(~same)
    if len(bad) == 0:
        return None, i + n, j + n
    k = int(bad[0])
    return int(min(a.base_offset[i + k], b.base_offset[j + k])), i + k, j + k


def cleaner_explains(a: ReplicaBatches, b: ReplicaBatches, i: int, j: int) -> bool:
    """Whether the differences of ``a`` and ``b`` from batches ``i`` / ``j`` on, up to the shorter log's
    end, are what log cleaners make: batches matched by base offset keep every field a cleaner keeps and,
    when their CRCs differ, one side holds strictly fewer records; unmatched batches are ones a cleaner
    removed."""
    end = min(a.log_end_offset, b.log_end_offset)
    ia, jb = i + int(np.searchsorted(a.base_offset[i:], end)), j + int(np.searchsorted(b.base_offset[j:], end))
    common, ka, kb = np.intersect1d(a.base_offset[i:ia], b.base_offset[j:jb], assume_unique=True, return_indices=True)
    ka, kb = ka + i, kb + j
    if len(common) == 0:
        return False
    for f in CLEANER_KEPT_FIELDS:
        if not np.array_equal(getattr(a, f)[ka], getattr(b, f)[kb]):
            return False
    rewritten = a.crc[ka] != b.crc[kb]
    counts_a, counts_b = a.records_count[ka][rewritten], b.records_count[kb][rewritten]
    return bool(np.all(counts_a != counts_b))


def elected_epochs(leader: ReplicaBatches, new_epoch: int) -> Tuple[EpochEntry, ...]:
    """The leader's epoch cache once it is elected in ``new_epoch``: that epoch starts at its log end."""
    return tuple(leader.epochs) + (EpochEntry(new_epoch, leader.log_end_offset),)


def compare_to_leader(replica: ReplicaBatches, leader: ReplicaBatches, *, new_epoch: Optional[int] = None
                      ) -> ReplicaVerdict:
    """One replica's verdict against the leader (see the module docstring).

    :param replica: the replica judged.
    :param leader: the replica taken as leader.
    :param new_epoch: the epoch the leader is elected in (default: one above both replicas' latest)."""
    if new_epoch is None:
        new_epoch = max(replica.latest_epoch, leader.latest_epoch) + 1
    lag = leader.log_end_offset - replica.log_end_offset
    kept = truncation_offset(replica.epochs, replica.log_end_offset, elected_epochs(leader, new_epoch),
                             leader.log_end_offset,
                             follower_high_watermark=replica.high_watermark)
    first, i, j = first_difference(replica, leader)
    detail = ""
    if first is None:
        verdict = IDENTICAL if lag == 0 else LAGGING if lag > 0 else AHEAD
        if replica.start_offset > leader.log_end_offset or leader.start_offset > replica.log_end_offset:
            detail = "the logs do not overlap (retention): nothing compared"
    else:
        overlap_end = min(replica.log_end_offset, leader.log_end_offset)
        if kept >= overlap_end and cleaner_explains(replica, leader, i, j):
            verdict = COMPACTED
            detail = "the copies differ as log cleaners make them (same batch offsets, fewer records on one)"
        else:
            verdict = DIVERGED
    if replica.note:
        detail = (detail + "; " if detail else "") + replica.note
    return ReplicaVerdict(replica.name, verdict, replica.start_offset, replica.log_end_offset, replica.latest_epoch,
                          first, lag, kept, replica.log_end_offset - kept, detail=detail)


def compare_replicas(topic: str, partition: int, replicas: Sequence[ReplicaBatches], *,
                     leader: str = LEADER_BY_EPOCH) -> PartitionDivergence:
    """Compare a partition's replicas with the one taken as leader (a pure function of the headers).

    :param topic: the topic, for the report.
    :param partition: the partition, for the report.
    :param replicas: two or more replicas of the partition.
    :param leader: ``"epoch"``, ``"longest"`` or a replica's name (:func:`choose_leader`)."""
    if len(replicas) < 2:
        raise ValueError(f"{topic}-{partition}: comparing needs two replicas or more, not {len(replicas)}")
    li = choose_leader(replicas, leader)
    lead = replicas[li]
    new_epoch = max(r.latest_epoch for r in replicas) + 1
    out = []
    for k, r in enumerate(replicas):
        if k == li:
            out.append(ReplicaVerdict(r.name, IDENTICAL, r.start_offset, r.log_end_offset, r.latest_epoch, None, 0,
                                      r.log_end_offset, 0, is_leader=True, detail=r.note or ""))
        else:
            out.append(compare_to_leader(r, lead, new_epoch=new_epoch))
    return PartitionDivergence(topic, partition, lead.name, leader, tuple(out))


# --- reading a replica (the edge) -------------------------------------------------------------------

def _checkpoint_entry(path: Path, topic: str, partition: int) -> Optional[int]:
    try:
        return read_offset_checkpoint(path).get((topic, partition))
    except (OSError, KafkalogError):
        return None


def read_replica(partition_dir: PartitionDir, *, name: Optional[str] = None) -> ReplicaBatches:
    """A partition folder's batch headers (every segment, in order), leader-epoch-checkpoint, log start
    offset and high watermark. A corrupt batch ends the walk there, as Kafka's recovery would truncate
    there; the replica's ``note`` names the file and byte position. Raises KafkalogError for an unreadable
    leader-epoch-checkpoint, OSError for an unreadable file.

    :param partition_dir: the folder, as ``kafkalog.log.logdir`` lists it.
    :param name: how reports name this replica (default: the log dir)."""
    parts = []
    note = None
    for seg in partition_dir.segments:
        res = scan_batches(seg.log, verify_crc=True, on_corrupt="stop")
        parts.append(res.batches)
        if res.error is not None:
            note = f"compared up to a corrupt batch ({res.error}); later segments not read"
            break
    cols = {}
    fields = dict(base_offset="baseOffset", last_offset="lastOffset", leader_epoch="partitionLeaderEpoch", crc="crc",
                  producer_id="producerId", producer_epoch="producerEpoch", base_sequence="baseSequence",
                  attributes="attributes", records_count="recordsCount")
    for ours, theirs in fields.items():
        arrays = [t.column(theirs).to_numpy() for t in parts if t.num_rows]
        cols[ours] = np.concatenate(arrays).astype(np.int64) if arrays else np.empty(0, np.int64)
    epochs = tuple(read_leader_epoch_checkpoint(partition_dir.path / LEADER_EPOCH_CHECKPOINT))
    log_dir = partition_dir.log_dir or partition_dir.path.parent
    start = _checkpoint_entry(log_dir / LOG_START_OFFSET_CHECKPOINT, partition_dir.topic, partition_dir.partition)
    if start is None and partition_dir.segments:
        start = partition_dir.segments[0].base_offset
    hw = _checkpoint_entry(log_dir / REPLICATION_OFFSET_CHECKPOINT, partition_dir.topic, partition_dir.partition)
    return ReplicaBatches(name=name or str(log_dir), **cols, epochs=epochs, log_start_offset=start,
                          high_watermark=hw, note=note)


def diverge_partition(partition_dirs: Sequence[PartitionDir], *, names: Optional[Sequence[str]] = None,
                      leader: str = LEADER_BY_EPOCH) -> PartitionDivergence:
    """Read and compare one partition's folders from several brokers' log dirs; a problem reading any of
    them is the result's ``error`` (naming the file), never an exception, so a job goes on.

    :param partition_dirs: the same topic-partition's folders, one per broker.
    :param names: the replicas' names in reports (default: their log dirs).
    :param leader: the leader policy (:func:`choose_leader`)."""
    first = partition_dirs[0]
    try:
        replicas = [read_replica(p, name=None if names is None else names[k]) for k, p in enumerate(partition_dirs)]
        return compare_replicas(first.topic, first.partition, replicas, leader=leader)
    except KafkalogError as e:
        return PartitionDivergence(first.topic, first.partition, None, leader, error=str(e))
    except OSError as e:
        return PartitionDivergence(first.topic, first.partition, None, leader,
                                   error=f"{getattr(e, 'filename', None) or first.path}: cannot read ({e.strerror or e})")


def find_replicas(log_dirs: Sequence[PathLike], topics: Optional[Sequence[str]] = None
                  ) -> List[Tuple[str, int, List[Tuple[str, PartitionDir]]]]:
    """The live partitions held by more than one of ``log_dirs`` (one per broker), as (topic, partition,
    [(log dir as given, folder)]) sorted by topic and partition. A topic of ``topics`` that no log dir holds
    is a UsageError naming the closest topic there, before anything is read; so is a log dir given twice.

    :param log_dirs: one log dir per broker.
    :param topics: only these topics (default: all)."""
    from difflib import get_close_matches

    from kafkalog.errors import UsageError
    from kafkalog.log.logdir import scan_log_dir
    from kafkalog.fs.names import LIVE

    seen: dict = {}
    for d in log_dirs:
        key = os.path.realpath(d)
        if key in seen:
            raise UsageError(f"log dir {d} is given twice (also as {seen[key]})", hint="give each broker's log dir once")
        seen[key] = d
    held: dict = {}
    for d in log_dirs:
        for p in scan_log_dir(d).partitions:
            if p.kind == LIVE:
                held.setdefault((p.topic, p.partition), []).append((os.fspath(d), p))
    present = sorted({t for t, _ in held})
    for topic in topics or ():
        if topic not in present:
            close = get_close_matches(topic, present, n=1, cutoff=0.6)
            raise UsageError(f"topic {topic!r} is in none of the log dirs" + (f" (did you mean {close[0]}?)" if close else ""),
                             hint=f"topics there: {', '.join(present[:20])}" if present else
                             "there are no <topic>-<partition> folders there: are these brokers' log dirs?")
    wanted = set(topics) if topics else None
    return [(t, p, reps) for (t, p), reps in sorted(held.items())
            if len(reps) > 1 and (wanted is None or t in wanted)]


def diverge_log_dirs(log_dirs: Sequence[PathLike], *, topics: Optional[Sequence[str]] = None,
                     leader: str = LEADER_BY_EPOCH) -> List[PartitionDivergence]:
    """Every partition held by more than one of ``log_dirs`` compared (:func:`diverge_partition`); read-only.

    :param log_dirs: one log dir per broker; replicas are named by these paths as given.
    :param topics: only these topics (default: all); an unknown one is a UsageError.
    :param leader: the leader policy (:func:`choose_leader`)."""
    return [diverge_partition([p for _, p in reps], names=[name for name, _ in reps], leader=leader)
            for _, _, reps in find_replicas(log_dirs, topics)]
