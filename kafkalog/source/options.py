"""Spark's Kafka-source options (``subscribe``, ``startingOffsets``, ``includeHeaders`` ...) parsed and
checked into a plain :class:`SourceOptions`, for reading log dirs with the same query as a live topic.

Names and meanings are those of Spark's Kafka source for batch queries (its ``KafkaSourceProvider``
and ``KafkaOffsetReader``): exactly one of ``subscribe`` / ``subscribePattern`` / ``assign`` (here:
none means every topic of the log dirs); ``startingOffsets`` ``earliest`` (default) or per-partition
JSON with -2 = earliest (``latest`` / -1 not allowed for a batch query); ``endingOffsets`` ``latest``
(default) or JSON with -1 = latest (``earliest`` / -2 not allowed); ``startingTimestamp`` /
``startingOffsetsByTimestamp`` and their ``ending`` twins (ListOffsets for a time), which take
precedence over the offsets options in that order; ``failOnDataLoss``; ``minPartitions``;
``includeHeaders``; ``kafka.isolation.level``. Options a broker-less read has no use for
(``kafka.bootstrap.servers`` and every other ``kafka.*``, the streaming and consumer knobs) are accepted
and ignored, so a query copied from a Kafka job runs unchanged; an unknown name is an error (a typo
would otherwise change what is read without a word). Every bad value raises :class:`SourceOptionError`
naming the option and what is wrong. Keys are case-insensitive, as Spark's options are.

Streaming (``spark.readStream``, ``parse_source_options(..., streaming=True)``): ``startingOffsets``
defaults to ``latest``, ``ending*`` are refused, ``maxOffsetsPerTrigger`` caps each micro-batch
(a batch read accepts and ignores it, as Spark does).

Ours (no Kafka counterpart): ``path`` / ``logDirs`` (comma-separated log dirs), ``includeBatchColumns``,
``includeControlRecords`` (control batches' records as rows, for a faithful export),
``kafkalog.dataLossDir`` (streaming, failOnDataLoss=false: each data-loss event written there as JSON),
``kafkalog.exportDir`` (the export job's: each task writes its rows as Parquet files there, one per topic,
and the query's rows are those files — path, topic, partition, rows, offsets — so records never pass
through the JVM),
``asOf`` / ``asOfOffsets`` / ``asOfIncomplete`` / ``kafkalog.asOfMapBytes`` (the topic as a table as of a time or
offsets, one row per live key: ``kafkalog.source.as_of``),
``maxPartitionBytes`` (bytes of ``.log`` per input partition), ``kafkalog.metricsDir`` (each task writes
the bytes of ``.log`` it read there, for benchmarks), ``kafkalog.pushdown`` (only ``false`` is accepted: a
query's filters never prune — see ``udfs.kafkalog_source`` for why — and ``true`` is refused rather than
ignored).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional, Tuple

from kafkalog.errors import KafkalogError
from kafkalog.topic_partition import TopicPartition


EARLIEST = -2                       # Kafka's per-partition JSON: -2 = earliest, -1 = latest
LATEST = -1
DEFAULT_MAX_PARTITION_BYTES = 64 << 20
MIN_MAX_PARTITION_BYTES = 1 << 20

# what a starting/ending position is given as
KIND_EARLIEST, KIND_LATEST, KIND_OFFSETS, KIND_TIMESTAMP, KIND_TIMESTAMPS = (
    "earliest", "latest", "offsets", "timestamp", "timestamps")
STRATEGY_ERROR, STRATEGY_LATEST = "error", "latest"   # startingOffsetsByTimestampStrategy

READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"

# Spark Kafka-source options that mean nothing for a batch read of files (lower case).
IGNORED_OPTIONS = frozenset(o.lower() for o in (
    "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
    "minOffsetsPerTrigger", "maxTriggerDelay", "groupIdPrefix",
    "maxRecordsPerPartition", "topic", "includeTimestamp",
))
KNOWN_OPTIONS = frozenset(o.lower() for o in (
    "path", "paths", "logDirs", "subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets",
    "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy", "failOnDataLoss", "minPartitions", "includeHeaders",
    "includeBatchColumns", "maxPartitionBytes", "kafkalog.metricsDir", "kafkalog.pushdown",
    "maxOffsetsPerTrigger", "includeControlRecords", "kafkalog.dataLossDir", "kafkalog.exportDir",
    "asOf", "asOfOffsets", "asOfIncomplete", "kafkalog.asOfMapBytes",
))
ENDING_OPTIONS = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
# ours: a compacted topic as a table as of a time or offsets (kafkalog.source.as_of)
AS_OF_INCOMPLETE = ("error", "warn")
AS_OF_EXCLUSIVE = ("startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
                   "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "includeControlRecords",
                   "kafkalog.exportDir")
DEFAULT_AS_OF_MAP_BYTES = 1 << 30


class SourceOptionError(KafkalogError):
    """A data-source option that is missing, unknown or has a bad value (names the option)."""


# --- data structures -------------------------------------------------------------------------------

@dataclass(frozen=True)
class OffsetSpec:
    """Where reading starts or ends: ``kind`` earliest / latest / offsets (per partition, -2 / -1
    allowed) / timestamp (one time for every partition) / timestamps (per partition)."""

    kind: str
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)   # offsets or timestamps
    timestamp: Optional[int] = None


@dataclass(frozen=True)
class SourceOptions:
    log_dirs: Tuple[str, ...]
    subscribe: Optional[Tuple[str, ...]] = None
    subscribe_pattern: Optional[str] = None          # a Python regex, matched against the whole name
    assign: Optional[Tuple[TopicPartition, ...]] = None
    starting: OffsetSpec = OffsetSpec(KIND_EARLIEST)
    ending: OffsetSpec = OffsetSpec(KIND_LATEST)
    starting_by_timestamp_strategy: str = STRATEGY_ERROR
    fail_on_data_loss: bool = True
    min_partitions: Optional[int] = None
    include_headers: bool = False
    include_batch_columns: bool = False
    isolation: str = READ_UNCOMMITTED
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES
    metrics_dir: Optional[str] = None
    streaming: bool = False                          # parsed for spark.readStream (see parse_source_options)
    max_offsets_per_trigger: Optional[int] = None    # streaming: records per micro-batch, over all partitions
    include_control_records: bool = False            # ours: control batches' records as rows (isControl=true)
    data_loss_dir: Optional[str] = None              # ours, streaming: each data-loss event as a JSON file there
    export_dir: Optional[str] = None                 # ours: tasks write the rows as Parquet there, yield file rows
    as_of: Optional[OffsetSpec] = None               # ours: the table as of a time (timestamp) or offsets
    as_of_incomplete: str = "error"                  # ours: error | warn when compaction took the history needed
    as_of_map_bytes: int = DEFAULT_AS_OF_MAP_BYTES   # ours: the key map's budget per partition

    @property
    def read_committed(self) -> bool:
        return self.isolation == READ_COMMITTED

    def wants_topic(self, topic: str) -> bool:
        if self.subscribe is not None:
            return topic in self.subscribe
        if self.subscribe_pattern is not None:
            return re.fullmatch(self.subscribe_pattern, topic) is not None
        if self.assign is not None:
            return any(t == topic for t, _ in self.assign)
        return True

    def wants(self, topic: str, partition: int) -> bool:
        if self.assign is not None:
            return (topic, partition) in self.assign
        return self.wants_topic(topic)


# --- parsing ------------------------------------------------------------------------------------------

def _bad(option: str, value: object, why: str) -> SourceOptionError:
    return SourceOptionError(f"option {option}={value!r}: {why}")


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise _bad(name, raw, "must be true or false")
    return text == "true"


def _int(options: Mapping[str, str], name: str, *, minimum: int) -> Optional[int]:
    raw = options.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise _bad(name, raw, "must be an integer") from None
    if value < minimum:
        raise _bad(name, raw, f"must be at least {minimum}")
    return value


def _json_object(name: str, raw: str) -> dict:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise _bad(name, raw, f"is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise _bad(name, raw, "must be a JSON object")
    return value


def parse_partition_json(name: str, raw: str) -> Dict[TopicPartition, int]:
    """``{"topicA":{"0":23,"1":-2}}`` -> {("topicA", 0): 23, ("topicA", 1): -2} (Spark's JsonUtils)."""
    out: Dict[TopicPartition, int] = {}
    for topic, parts in _json_object(name, raw).items():
        if not isinstance(parts, dict):
            raise _bad(name, raw, f"topic {topic!r} must map partitions to numbers")
        for p, v in parts.items():
            try:
                partition = int(p)
            except ValueError:
                raise _bad(name, raw, f"partition {p!r} of topic {topic!r} is not a number") from None
            if isinstance(v, bool) or not isinstance(v, int):
                raise _bad(name, raw, f"{topic}-{partition}: {v!r} is not an integer")
            out[TopicPartition(topic, partition)] = v
    return out


def parse_assign(raw: str) -> Tuple[TopicPartition, ...]:
    """``{"topicA":[0,1],"topicB":[2,4]}`` -> ((topicA, 0), (topicA, 1), ...)."""
    out: list = []
    for topic, parts in _json_object("assign", raw).items():
        if not isinstance(parts, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in parts):
            raise _bad("assign", raw, f"topic {topic!r} must map to a list of partition numbers")
        out.extend((topic, p) for p in parts)
    if not out:
        raise _bad("assign", raw, "assigns no partition")
    return tuple(out)


def java_regex_to_python(name: str, pattern: str) -> str:
    """A ``java.util.regex`` pattern as Python's ``re`` reads it (Spark matches it against the whole
    topic name). Named groups ``(?<n>`` become ``(?P<n>``; constructs Python lacks (``\\p{..}``,
    ``\\Q..\\E``, ``[a&&b]``) are refused with the option named."""
    for java_only, what in ((r"\p{", "\\p{..} classes"), (r"\P{", "\\P{..} classes"), (r"\Q", "\\Q..\\E quoting"),
                            ("&&", "class intersections")):
        if java_only in pattern:
            raise _bad(name, pattern, f"uses {what}, which this reader does not translate; write it as a plain class")
    translated = re.sub(r"\(\?<(?![=!])", "(?P<", pattern)
    try:
        re.compile(translated)
    except re.error as exc:
        raise _bad(name, pattern, f"is not a valid regular expression ({exc})") from None
    return translated


def _offsets_spec(options: Mapping[str, str], which: str, *, streaming: bool = False) -> OffsetSpec:
    """startingX / endingX by Spark's precedence: Timestamp > OffsetsByTimestamp > Offsets."""
    ts_name, by_ts_name, off_name = f"{which}Timestamp", f"{which}OffsetsByTimestamp", f"{which}Offsets"
    raw = options.get(ts_name.lower())
    if raw is not None:
        ts = _int(options, ts_name, minimum=0)
        return OffsetSpec(KIND_TIMESTAMP, timestamp=ts)
    raw = options.get(by_ts_name.lower())
    if raw is not None:
        stamps = parse_partition_json(by_ts_name, raw)
        for tp, ts in stamps.items():
            if ts < 0:
                raise _bad(by_ts_name, raw, f"{tp[0]}-{tp[1]}: timestamp {ts} is negative")
        return OffsetSpec(KIND_TIMESTAMPS, offsets=stamps)
    raw = options.get(off_name.lower())
    default = KIND_EARLIEST if which == "starting" and not streaming else KIND_LATEST
    if raw is None:
        return OffsetSpec(default)
    text = str(raw).strip()
    if text.lower() in (KIND_EARLIEST, KIND_LATEST):
        kind = text.lower()
        if which == "starting" and kind == KIND_LATEST and not streaming:
            raise _bad(off_name, raw, "starting offset can't be latest for batch queries on Kafka")
        if which == "ending" and kind == KIND_EARLIEST:
            raise _bad(off_name, raw, "ending offset can't be earliest for batch queries on Kafka")
        return OffsetSpec(kind)
    offsets = parse_partition_json(off_name, text)
    for (topic, partition), off in offsets.items():
        if which == "starting" and off == LATEST and not streaming:
            raise _bad(off_name, raw, f"{topic}-{partition}: starting offset can't be latest (-1) for batch queries")
        if which == "ending" and off == EARLIEST:
            raise _bad(off_name, raw, f"{topic}-{partition}: ending offset can't be earliest (-2) for batch queries")
        if off < EARLIEST:
            raise _bad(off_name, raw, f"{topic}-{partition}: {off} is neither an offset nor -2/-1")
    return OffsetSpec(KIND_OFFSETS, offsets=offsets)


def parse_source_options(options: Mapping[str, str], *, streaming: bool = False) -> SourceOptions:
    """Check every option and return them parsed; raises :class:`SourceOptionError` on the first bad one.

    ``streaming`` (``spark.readStream``) follows Spark's streaming rules: ``startingOffsets`` defaults to
    ``latest`` and may be latest / -1, the ``ending*`` options are refused (a stream has no end), and
    ``maxOffsetsPerTrigger`` caps the records of a micro-batch."""
    opts = {str(k).lower(): v for k, v in options.items() if v is not None}
    if streaming:
        for name in ENDING_OPTIONS:
            if name.lower() in opts:
                raise SourceOptionError(f"option {name}: ending offsets are not valid in streaming queries "
                                        "(as in Spark's Kafka source)")
    for key in opts:
        if key.startswith("kafka.") or key in KNOWN_OPTIONS or key in IGNORED_OPTIONS:
            continue
        raise SourceOptionError(f"option {key!r} is not an option of Spark's Kafka source nor of kafkalog's "
                                f"(known: {', '.join(sorted(KNOWN_OPTIONS))}, and kafka.*)")
    dirs: list = []
    for name in ("path", "paths", "logdirs"):
        raw = opts.get(name)
        if raw:
            text = str(raw)
            if name == "paths" and text.startswith("["):   # load(a, b) passes a JSON list
                try:
                    items = json.loads(text)
                except ValueError:
                    items = [text]
            else:
                items = text.split(",")
            dirs.extend(d.strip() for d in items if str(d).strip())
    if not dirs:
        raise SourceOptionError("no log dir given: load(\"/path/to/log-dir\") or option logDirs=\"/d1,/d2\"")

    chosen = [n for n in ("subscribe", "subscribepattern", "assign") if n in opts]
    if len(chosen) > 1:
        raise SourceOptionError(f"options {', '.join(chosen)}: only one of assign, subscribe or subscribePattern "
                                "may be given (as in Spark's Kafka source)")
    subscribe = pattern = assign = None
    if "subscribe" in opts:
        subscribe = tuple(t.strip() for t in str(opts["subscribe"]).split(",") if t.strip())
        if not subscribe:
            raise _bad("subscribe", opts["subscribe"], "names no topic")
    if "subscribepattern" in opts:
        if not str(opts["subscribepattern"]).strip():
            raise _bad("subscribePattern", opts["subscribepattern"], "is empty")
        pattern = java_regex_to_python("subscribePattern", str(opts["subscribepattern"]).strip())
    if "assign" in opts:
        assign = parse_assign(str(opts["assign"]))

    strategy = str(opts.get("startingoffsetsbytimestampstrategy", STRATEGY_ERROR)).strip().lower()
    if strategy not in (STRATEGY_ERROR, STRATEGY_LATEST):
        raise _bad("startingOffsetsByTimestampStrategy", strategy, "must be error or latest")
    isolation = str(opts.get("kafka.isolation.level", READ_UNCOMMITTED)).strip().lower()
    if isolation not in (READ_UNCOMMITTED, READ_COMMITTED):
        raise _bad("kafka.isolation.level", isolation, "must be read_uncommitted or read_committed")
    metrics_dir = opts.get("kafkalog.metricsdir")
    if _bool(opts, "kafkalog.pushdown", False):
        raise _bad("kafkalog.pushdown", opts["kafkalog.pushdown"],
                   "pruning by a query's filters is off for good: PySpark 4.2 reuses a DataFrame's planned read "
                   "for its later queries, so a read pruned for one query would answer the next; narrow the "
                   "read with assign, startingOffsets/endingOffsets or startingTimestamp/endingTimestamp")
    as_of = _as_of_spec(opts, streaming=streaming)
    return SourceOptions(
        as_of=as_of, as_of_incomplete=_as_of_incomplete(opts),
        as_of_map_bytes=_int(opts, "kafkalog.asOfMapBytes", minimum=1 << 16) or DEFAULT_AS_OF_MAP_BYTES,
        log_dirs=tuple(dirs), subscribe=subscribe, subscribe_pattern=pattern, assign=assign,
        starting=_offsets_spec(opts, "starting", streaming=streaming), ending=_offsets_spec(opts, "ending"),
        starting_by_timestamp_strategy=strategy,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        min_partitions=_int(opts, "minPartitions", minimum=1),
        include_headers=_bool(opts, "includeHeaders", False),
        include_batch_columns=_bool(opts, "includeBatchColumns", False),
        isolation=isolation,
        max_partition_bytes=_int(opts, "maxPartitionBytes", minimum=MIN_MAX_PARTITION_BYTES) or DEFAULT_MAX_PARTITION_BYTES,
        metrics_dir=str(metrics_dir) if metrics_dir else None,
        streaming=streaming,
        max_offsets_per_trigger=_int(opts, "maxOffsetsPerTrigger", minimum=1),
        include_control_records=_bool(opts, "includeControlRecords", False),
        data_loss_dir=str(opts["kafkalog.datalossdir"]) if opts.get("kafkalog.datalossdir") else None,
        export_dir=str(opts["kafkalog.exportdir"]) if opts.get("kafkalog.exportdir") else None,
    )


def _as_of_spec(opts: Mapping[str, str], *, streaming: bool) -> Optional[OffsetSpec]:
    """``asOf`` (epoch ms or ISO-8601) or ``asOfOffsets`` (per-partition JSON, -2 / -1 allowed) as a
    timestamp / offsets spec; None when neither is given. They exclude each other and the options that
    would shape the same read another way (the starting / ending ones, control records, exportDir), and a
    stream (a table as of a moment is a batch answer)."""
    given = [n for n in ("asOf", "asOfOffsets") if n.lower() in opts]
    if not given:
        for name in ("asOfIncomplete", "kafkalog.asOfMapBytes"):
            if name.lower() in opts:
                raise SourceOptionError(f"option {name}: only with asOf or asOfOffsets")
        return None
    if len(given) > 1:
        raise SourceOptionError("options asOf, asOfOffsets: give one (a time, or offsets per partition)")
    if streaming:
        raise SourceOptionError(f"option {given[0]}: a table as of a moment is a batch read "
                                "(spark.read, not spark.readStream)")
    clash = [n for n in AS_OF_EXCLUSIVE if n.lower() in opts]
    if clash:
        raise SourceOptionError(f"option {given[0]} with {', '.join(clash)}: the as-of table reads every record "
                                "below each partition's cut and nothing else; leave those out")
    if str(opts.get("kafka.isolation.level", READ_COMMITTED)).strip().lower() != READ_COMMITTED:
        raise SourceOptionError(f"option {given[0]} with kafka.isolation.level={opts['kafka.isolation.level']}: an "
                                "as-of table is what a read_committed consumer holds (aborted and open "
                                "transactions never count); leave the option out or set read_committed")
    if given[0] == "asOf":
        from kafkalog.lookup.time_spec import parse_epoch_ms

        raw = str(opts["asof"])
        try:
            ts = parse_epoch_ms(raw)
        except ValueError as exc:
            raise _bad("asOf", raw, str(exc)) from None
        if ts < 0:
            raise _bad("asOf", raw, "must be a time at or after 1970-01-01T00:00:00Z")
        return OffsetSpec(KIND_TIMESTAMP, timestamp=ts)
    raw = str(opts["asofoffsets"])
    offsets = parse_partition_json("asOfOffsets", raw)
    if not offsets:
        raise _bad("asOfOffsets", raw, "names no partition")
    for (topic, partition), off in offsets.items():
        if off < EARLIEST:
            raise _bad("asOfOffsets", raw, f"{topic}-{partition}: {off} is neither an offset nor -2/-1")
    return OffsetSpec(KIND_OFFSETS, offsets=offsets)


def _as_of_incomplete(opts: Mapping[str, str]) -> str:
    value = str(opts.get("asofincomplete", "error")).strip().lower()
    if value not in AS_OF_INCOMPLETE:
        raise _bad("asOfIncomplete", value, "must be error or warn")
    return value
