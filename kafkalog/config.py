"""Kafka log configuration resolved as a broker resolves it: ``server.properties`` defaults, per-topic
overrides, broker synonyms and their precedence, Kafka's defaults and validators (Kafka's ``LogConfig.java``,
``ServerLogConfigs.java``, ``CleanerConfig.java``, ``ServerTopicConfigSynonyms.java``).

Sources: ``LogConfig.java``, ``ServerLogConfigs.java``, ``ServerTopicConfigSynonyms.java``,
``CleanerConfig.java``, ``KafkaConfig.logRetentionTimeMillis``. Values are parsed as Java's
``ConfigDef.parseType`` parses them (trimmed; ``Long.parseLong``/``Integer.parseInt``/
``Double.parseDouble``; booleans ``true``/``false`` in any case; lists split on ``,`` and trimmed).

Precedence for a topic's value: the topic override, else (for ``__consumer_offsets`` and
``__transaction_state``) what Kafka sets when it creates the topic, else the broker synonym (in synonym order — for
``retention.ms``: ``log.retention.ms``, then ``log.retention.minutes``, then ``log.retention.hours``),
else Kafka's default. A negative broker retention time becomes -1 (unlimited). Unknown topic keys,
unknown ``log.*`` broker keys and keys given at the wrong level (a topic key in server.properties, a
broker key as a topic override) are ignored with a warning, or with ``strict=True`` (what the jobs
that delete or rewrite use) are a :class:`ConfigError` with the closest Kafka key ("did you mean
retention.ms?"); other broker settings (listeners, quotas…) are not about log files and are ignored
silently. An invalid value is a :class:`ConfigError` naming the key and where it came from.
"""
from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from kafkalog.checkpoint.properties import parse_properties
from kafkalog.errors import ConfigError
from kafkalog.java_types import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

PathLike = os.PathLike | str

COMPACT, DELETE = "compact", "delete"
CREATE_TIME, LOG_APPEND_TIME = "CreateTime", "LogAppendTime"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
DEFAULT_LOG_DIR = "/tmp/kafka-logs"          # ServerLogConfigs.LOG_DIR_DEFAULT

# --- value types (Java ConfigDef.Type) -------------------------------------------------------------

_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")


def _integer(lo: int, hi: int, java_type: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        text = text.strip()
        if not _JAVA_INTEGER.fullmatch(text):
            raise ValueError(f"not a {java_type}")
        value = int(text)
        if not lo <= value <= hi:
            raise ValueError(f"out of range for a {java_type}")
        return value
    return parse


LONG = _integer(INT64_MIN, INT64_MAX, "long")
INT = _integer(INT32_MIN, INT32_MAX, "int")


# Double.parseDouble's decimal grammar (hex floats aside): optional sign, digits with an optional
# point and exponent, or Infinity, and an optional d/D/f/F suffix. No underscores (Python's float
# accepts them).
_JAVA_DOUBLE = re.compile(r"[+-]?(?:Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[dDfF]?")


def DOUBLE(text: str) -> float:
    text = text.strip()
    if not _JAVA_DOUBLE.fullmatch(text):
        raise ValueError("not a double" if text != "NaN" else "NaN is not a number Kafka accepts here")
    return float(text.rstrip("dDfF").replace("Infinity", "inf"))


def BOOLEAN(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError("expected true or false")
    return lowered == "true"


def STRING(text: str) -> str:
    return text.strip()


def LIST(text: str) -> tuple[str, ...]:
    text = text.strip()
    return () if not text else tuple(item.strip() for item in text.split(","))


# --- validators (Java ConfigDef.Range / ValidString / ValidList) -----------------------------------

def at_least(minimum) -> Callable[[Any], Optional[str]]:
    return lambda v: None if v >= minimum else f"must be at least {minimum}"


def between(lo, hi) -> Callable[[Any], Optional[str]]:
    return lambda v: None if lo <= v <= hi else f"must be between {lo} and {hi}"


def one_of(*allowed: str) -> Callable[[Any], Optional[str]]:
    return lambda v: None if v in allowed else f"must be one of {', '.join(allowed)}"


def list_of(*allowed: str) -> Callable[[Any], Optional[str]]:
    def check(values: tuple[str, ...]) -> Optional[str]:
        bad = [v for v in values if v not in allowed]
        return None if not bad else f"{bad[0]!r} is not one of {', '.join(allowed)}"
    return check


# --- definitions ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Synonym:
    """A broker key supplying a topic config's cluster default; ``scale`` converts its unit to the
    topic key's (hours → ms)."""

    key: str
    parse: Callable[[str], Any] = LONG
    scale: int = 1


@dataclass(frozen=True)
class ConfigKey:
    """One topic-level config: its type, Kafka's default, validator and broker synonyms in order."""

    name: str
    parse: Callable[[str], Any]
    default: Any
    validate: Optional[Callable[[Any], Optional[str]]] = None
    synonyms: tuple[Synonym, ...] = ()
    negative_broker_means_unlimited: bool = False   # KafkaConfig.logRetentionTimeMillis


def _ms(key: str) -> Synonym:
    return Synonym(key, LONG, 1)


TOPIC_CONFIGS: dict[str, ConfigKey] = {c.name: c for c in (
    ConfigKey("cleanup.policy", LIST, (DELETE,), list_of(COMPACT, DELETE), (Synonym("log.cleanup.policy", LIST),)),
    ConfigKey("retention.ms", LONG, 604_800_000, at_least(-1),
              (_ms("log.retention.ms"), Synonym("log.retention.minutes", INT, 60_000),
               Synonym("log.retention.hours", INT, 3_600_000)), negative_broker_means_unlimited=True),
    ConfigKey("retention.bytes", LONG, -1, None, (_ms("log.retention.bytes"),)),
    ConfigKey("local.retention.ms", LONG, -2, at_least(-2), (_ms("log.local.retention.ms"),)),
    ConfigKey("local.retention.bytes", LONG, -2, at_least(-2), (_ms("log.local.retention.bytes"),)),
    ConfigKey("remote.storage.enable", BOOLEAN, False),
    ConfigKey("remote.log.copy.disable", BOOLEAN, False),
    ConfigKey("segment.bytes", INT, 1_073_741_824, at_least(14), (Synonym("log.segment.bytes", INT),)),
    ConfigKey("segment.ms", LONG, 604_800_000, at_least(1),
              (_ms("log.roll.ms"), Synonym("log.roll.hours", INT, 3_600_000))),
    ConfigKey("segment.jitter.ms", LONG, 0, at_least(0),
              (_ms("log.roll.jitter.ms"), Synonym("log.roll.jitter.hours", INT, 3_600_000))),
    ConfigKey("segment.index.bytes", INT, 10_485_760, at_least(4), (Synonym("log.index.size.max.bytes", INT),)),
    ConfigKey("index.interval.bytes", INT, 4096, at_least(0), (Synonym("log.index.interval.bytes", INT),)),
    ConfigKey("file.delete.delay.ms", LONG, 60_000, at_least(0), (_ms("log.segment.delete.delay.ms"),)),
    ConfigKey("delete.retention.ms", LONG, 86_400_000, at_least(0), (_ms("log.cleaner.delete.retention.ms"),)),
    ConfigKey("min.cleanable.dirty.ratio", DOUBLE, 0.5, between(0, 1),
              (Synonym("log.cleaner.min.cleanable.ratio", DOUBLE),)),
    ConfigKey("min.compaction.lag.ms", LONG, 0, at_least(0), (_ms("log.cleaner.min.compaction.lag.ms"),)),
    ConfigKey("max.compaction.lag.ms", LONG, INT64_MAX, at_least(1), (_ms("log.cleaner.max.compaction.lag.ms"),)),
    ConfigKey("max.message.bytes", INT, 1_048_588, at_least(0), (Synonym("message.max.bytes", INT),)),
    ConfigKey("message.timestamp.type", STRING, CREATE_TIME, one_of(CREATE_TIME, LOG_APPEND_TIME),
              (Synonym("log.message.timestamp.type", STRING),)),
    ConfigKey("compression.type", STRING, "producer", one_of(*COMPRESSION_TYPES), (Synonym("compression.type", STRING),)),
    ConfigKey("preallocate", BOOLEAN, False, None, (Synonym("log.preallocate", BOOLEAN),)),
)}

# Topic configs Kafka knows that no decision here depends on: accepted silently.
OTHER_TOPIC_CONFIGS = frozenset((
    "flush.messages", "flush.ms", "min.insync.replicas", "unclean.leader.election.enable",
    "message.downconversion.enable", "message.format.version", "message.timestamp.difference.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
    "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
    "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
    "remote.log.delete.on.disable",
))


@dataclass(frozen=True)
class BrokerKey:
    name: str
    parse: Callable[[str], Any]
    default: Any
    validate: Optional[Callable[[Any], Optional[str]]] = None


# Broker-wide settings (no topic override) that the jobs read.
BROKER_CONFIGS: dict[str, BrokerKey] = {c.name: c for c in (
    BrokerKey("log.dirs", LIST, ()),
    BrokerKey("log.dir", STRING, DEFAULT_LOG_DIR),
    BrokerKey("log.cleaner.enable", BOOLEAN, True),
    BrokerKey("log.retention.check.interval.ms", LONG, 300_000, at_least(1)),
    BrokerKey("log.cleaner.threads", INT, 1, at_least(0)),
    BrokerKey("log.cleaner.dedupe.buffer.size", LONG, 134_217_728),
    BrokerKey("log.cleaner.io.buffer.load.factor", DOUBLE, 0.9),
    BrokerKey("log.cleaner.io.buffer.size", INT, 524_288, at_least(0)),
    BrokerKey("log.cleaner.io.max.bytes.per.second", DOUBLE, 1.7976931348623157e308),
    BrokerKey("log.cleaner.backoff.ms", LONG, 15_000, at_least(0)),
    BrokerKey("producer.id.expiration.ms", INT, 86_400_000, at_least(1)),
    BrokerKey("num.recovery.threads.per.data.dir", INT, 1, at_least(1)),
    BrokerKey("log.flush.offset.checkpoint.interval.ms", INT, 60_000, at_least(0)),
    BrokerKey("log.flush.start.offset.checkpoint.interval.ms", INT, 60_000, at_least(0)),
    BrokerKey("log.flush.interval.messages", LONG, INT64_MAX, at_least(1)),
    BrokerKey("log.flush.interval.ms", LONG, None),
    BrokerKey("log.flush.scheduler.interval.ms", LONG, INT64_MAX),
    BrokerKey("log.message.format.version", STRING, "3.0-IV1"),
    BrokerKey("log.message.timestamp.difference.max.ms", LONG, INT64_MAX),
    BrokerKey("log.message.timestamp.before.max.ms", LONG, INT64_MAX),
    BrokerKey("log.message.timestamp.after.max.ms", LONG, INT64_MAX),
    BrokerKey("log.message.downconversion.enable", BOOLEAN, True),
    BrokerKey("log.initial.task.delay.ms", LONG, 30_000),
    BrokerKey("log.dir.failure.timeout.ms", LONG, 30_000, at_least(1)),
    # the segment size Kafka gives its internal topics when it creates them (see INTERNAL_TOPIC_CONFIGS)
    BrokerKey("offsets.topic.segment.bytes", INT, 104_857_600, at_least(1)),
    BrokerKey("transaction.state.log.segment.bytes", INT, 104_857_600, at_least(1)),
)}

OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC = "__consumer_offsets", "__transaction_state"

# The topic configs Kafka sets on its internal topics when it creates them (topic overrides in the cluster
# metadata): ``GroupCoordinatorService.groupMetadataTopicConfigs`` (Kafka's ``GroupCoordinatorService.java``),
# ``TransactionStateManager.transactionTopicConfigs`` (``TransactionStateManager.scala``). Without them the
# broker's delete default would let a retention run delete committed offsets. ``("broker", key)``: that setting.
INTERNAL_TOPIC_CONFIGS: dict[str, dict[str, Any]] = {
    OFFSETS_TOPIC: {"cleanup.policy": (COMPACT,), "compression.type": "producer",
                    "segment.bytes": ("broker", "offsets.topic.segment.bytes")},
    TRANSACTION_STATE_TOPIC: {"cleanup.policy": (COMPACT,), "compression.type": "uncompressed",
                              "segment.bytes": ("broker", "transaction.state.log.segment.bytes")},
}

_BROKER_SYNONYMS: dict[str, tuple[ConfigKey, Synonym]] = {
    s.key: (c, s) for c in TOPIC_CONFIGS.values() for s in c.synonyms}

# --- resolved configuration -------------------------------------------------------------------


@dataclass(frozen=True)
class LogConfig:
    """One topic's effective log configuration, one field per topic config (``retention.ms`` is
    ``retention_ms``). ``sources`` maps each topic key to where its value came from: ``default``,
    ``broker <key> (<file>)`` or ``topic (<where>)``. Made by :meth:`KafkaConfigs.for_topic`. Example::

        config = kafkalog.load_configs(topic_configs=["orders:cleanup.policy=compact"]).for_topic("orders")
        print(config.compact, config.retention_ms, config.sources["cleanup.policy"])
    """

    cleanup_policy: tuple[str, ...] = (DELETE,)
    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_storage_enable: bool = False
    remote_log_copy_disable: bool = False
    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10_485_760
    index_interval_bytes: int = 4096
    file_delete_delay_ms: int = 60_000
    delete_retention_ms: int = 86_400_000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = INT64_MAX
    max_message_bytes: int = 1_048_588
    message_timestamp_type: str = CREATE_TIME
    compression_type: str = "producer"
    preallocate: bool = False
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def compact(self) -> bool:
        """``LogConfig.compact``: the policy list contains ``compact``."""
        return COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """``LogConfig.delete``: the policy list contains ``delete``."""
        return DELETE in self.cleanup_policy

    @property
    def remote_copy_enabled(self) -> bool:
        """Tiered storage copies this topic's segments (``remoteLogEnabledAndRemoteCopyEnabled``)."""
        return self.remote_storage_enable and not self.remote_log_copy_disable

    @property
    def local_retention_ms_effective(self) -> int:
        """``UnifiedLog.localRetentionMs``: local.retention.ms, -2 meaning retention.ms."""
        if not self.remote_copy_enabled or self.local_retention_ms == -2:
            return self.retention_ms
        return self.local_retention_ms

    def to_dict(self) -> dict:
        """The values under Kafka's topic-config names (for reports)."""
        return {name: getattr(self, _attr(name)) for name in TOPIC_CONFIGS}


def _attr(name: str) -> str:
    return name.replace(".", "_")


@dataclass(frozen=True)
class BrokerConfig:
    """A broker's ``server.properties`` as far as log files are concerned: the topic defaults it
    sets (through synonyms) and the broker-wide settings. Built by :func:`parse_broker_properties`. Example::

        broker = kafkalog.configs_from_mappings({"log.retention.hours": "24", "log.dirs": "/var/kafka"}).broker
        print(broker.topic_defaults["retention.ms"], broker.log_dirs, broker.cleaner_enable)
    """

    topic_defaults: Mapping[str, Any] = field(default_factory=dict)   # topic key -> value
    topic_default_sources: Mapping[str, str] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)         # broker key -> value (set keys only)
    source: str = "defaults"
    synonym_texts: Mapping[str, str] = field(default_factory=dict)    # every topic-default key set, as written

    def setting(self, key: str) -> Any:
        return self.settings.get(key, BROKER_CONFIGS[key].default)

    @property
    def log_dirs(self) -> tuple[str, ...]:
        """``log.dirs`` if set, else ``log.dir`` (KafkaConfig.logDirs)."""
        dirs = self.setting("log.dirs")
        return tuple(dirs) if dirs else (self.setting("log.dir"),)

    @property
    def cleaner_enable(self) -> bool:
        return self.setting("log.cleaner.enable")


@dataclass
class KafkaConfigs:
    """The broker config plus per-topic overrides: ``for_topic`` gives each topic's LogConfig
    (precedence: topic override > an internal topic's creation config > broker key or synonym > Kafka's default). ``warnings`` holds every
    ignored key, each naming where it was found. Example::

        configs = kafkalog.configs_from_mappings({"log.cleanup.policy": "compact"}, {"audit": {"retention.ms": "-1"}})
        print(configs.for_topic("audit").cleanup_policy, configs.for_topic("audit").retention_ms)   # ('compact',) -1
    """

    broker: BrokerConfig = field(default_factory=BrokerConfig)
    topic_overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    topic_override_sources: dict[str, dict[str, str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # topic -> where it was named (``--topic-config orders:…``, a ``--topic-config-file`` path), in order:
    # every topic a user typed, even one whose keys were all ignored (see :func:`topics_not_held`)
    topic_named_in: dict[str, list[str]] = field(default_factory=dict)
    _resolved: dict[str, LogConfig] = field(default_factory=dict, repr=False, compare=False)

    def for_topic(self, topic: str) -> LogConfig:
        config = self._resolved.get(topic)
        if config is None:
            config = self._resolved[topic] = self._resolve(topic)
        return config

    def _resolve(self, topic: str) -> LogConfig:
        overrides = self.topic_overrides.get(topic, {})
        override_sources = self.topic_override_sources.get(topic, {})
        created_with = INTERNAL_TOPIC_CONFIGS.get(topic, {})
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for name, key in TOPIC_CONFIGS.items():
            if name in overrides:
                values[_attr(name)], sources[name] = overrides[name], override_sources[name]
            elif name in created_with:
                value = created_with[name]
                if isinstance(value, tuple) and value[:1] == ("broker",):
                    value = self.broker.setting(value[1])
                values[_attr(name)], sources[name] = value, f"set by Kafka when it creates {topic}"
            elif name in self.broker.topic_defaults:
                values[_attr(name)] = self.broker.topic_defaults[name]
                sources[name] = self.broker.topic_default_sources[name]
            else:
                values[_attr(name)], sources[name] = key.default, "default"
        return LogConfig(**values, sources=sources)


# --- parsing -------------------------------------------------------------------------------------

def did_you_mean(key: str, known: Iterable[str]) -> str:
    """`` (did you mean retention.ms?)`` for the closest known key, or ``""``."""
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _not_kafkas(message: str, *, source: str, strict: bool, warnings: list[str], hint: str) -> None:
    """A key Kafka does not have at this level: a warning, or with ``strict`` a ConfigError."""
    if strict:
        raise ConfigError(message, path=source, hint=hint)
    warnings.append(f"{source}: {message}; ignored")


_TOPIC_KEY_HINT = ("use Kafka's topic config names, as kafka-configs.sh --describe --all lists them: an unknown key "
                   "would leave the default in force")
_BROKER_KEY_HINT = ("use Kafka's broker config names; for a newer Kafka's key kafkalog does not know, remove it from "
                    "a copy of the file: an unknown key would leave the default in force")

def _parse_value(key: str, text: str, parse: Callable[[str], Any],
                 validate: Optional[Callable[[Any], Optional[str]]], where: str) -> Any:
    try:
        value = parse(text)
    except ValueError as exc:
        raise ConfigError(f"invalid value {text!r} for {key} ({exc})", path=where) from None
    problem = validate(value) if validate is not None else None
    if problem:
        raise ConfigError(f"invalid value {text!r} for {key}: {problem}", path=where)
    return value


def parse_broker_properties(props: Mapping[str, str], *, source: str = "server.properties",
                            warnings: Optional[list[str]] = None, strict: bool = False) -> BrokerConfig:
    """Resolve the log-related part of a broker's properties. Unknown ``log.*`` keys and topic-level
    names written in a broker file are ignored with a warning appended to ``warnings`` — or, with
    ``strict``, are a ConfigError saying which Kafka key was probably meant."""
    warnings = [] if warnings is None else warnings
    settings: dict[str, Any] = {}
    synonym_values: dict[str, Any] = {}
    for key, text in props.items():
        if key in _BROKER_SYNONYMS:
            config, synonym = _BROKER_SYNONYMS[key]
            synonym_values[key] = _parse_value(key, text, synonym.parse, None, source)
        elif key in BROKER_CONFIGS:
            broker_key = BROKER_CONFIGS[key]
            settings[key] = _parse_value(key, text, broker_key.parse, broker_key.validate, source)
        elif key in TOPIC_CONFIGS or key in OTHER_TOPIC_CONFIGS:
            synonyms = TOPIC_CONFIGS[key].synonyms if key in TOPIC_CONFIGS else ()
            broker_name = f"the broker's key is {synonyms[0].key}, or " if synonyms else ""
            _not_kafkas(f"{key} is a topic config, not a broker config ({broker_name}set it per topic with "
                        f"--topic-config TOPIC:{key}=VALUE)", source=source, strict=strict, warnings=warnings,
                        hint=_BROKER_KEY_HINT)
        elif key.startswith("log."):
            guess = did_you_mean(key, list(BROKER_CONFIGS) + list(_BROKER_SYNONYMS))
            _not_kafkas(f"unknown broker config {key}{guess}",
                        source=source, strict=strict, warnings=warnings, hint=_BROKER_KEY_HINT)
    defaults: dict[str, Any] = {}
    default_sources: dict[str, str] = {}
    for name, config in TOPIC_CONFIGS.items():
        for synonym in config.synonyms:                 # the first synonym set wins
            if synonym.key not in synonym_values:
                continue
            raw = synonym_values[synonym.key]
            value = raw * synonym.scale if isinstance(raw, int) and not isinstance(raw, bool) else raw
            if config.negative_broker_means_unlimited and value < 0:
                value = -1
            elif config.parse is INT and not INT32_MIN <= value <= INT32_MAX:   # hours scaled to an int key
                raise ConfigError(f"invalid value {raw!r} for {synonym.key}: out of range", path=source)
            problem = config.validate(value) if config.validate and not config.negative_broker_means_unlimited else None
            if problem:
                raise ConfigError(f"invalid value {props[synonym.key]!r} for {synonym.key}: {problem}", path=source)
            defaults[name] = value
            default_sources[name] = f"broker {synonym.key} ({source})"
            break
    return BrokerConfig(topic_defaults=defaults, topic_default_sources=default_sources, settings=settings,
                        source=source, synonym_texts={k: props[k].strip() for k in synonym_values})


def parse_topic_overrides(topic: str, props: Mapping[str, str], *, source: str,
                          warnings: Optional[list[str]] = None, strict: bool = False) -> dict[str, Any]:
    """Parse one topic's overrides (topic-config names). Unknown keys are ignored with a warning;
    broker names given as topic configs get a pointed warning. With ``strict`` both are a
    ConfigError naming the topic key that was probably meant."""
    warnings = [] if warnings is None else warnings
    values: dict[str, Any] = {}
    for key, text in props.items():
        config = TOPIC_CONFIGS.get(key)
        if config is not None:
            values[key] = _parse_value(key, text, config.parse, config.validate, source)
        elif key in OTHER_TOPIC_CONFIGS:
            continue
        elif key in _BROKER_SYNONYMS:
            _not_kafkas(f"{key} is a broker config, not a topic config (did you mean {_BROKER_SYNONYMS[key][0].name}?)",
                        source=source, strict=strict, warnings=warnings, hint=_TOPIC_KEY_HINT)
        else:
            _not_kafkas(f"unknown topic config {key} for topic {topic}"
                        f"{did_you_mean(key, list(TOPIC_CONFIGS) + list(OTHER_TOPIC_CONFIGS))}",
                        source=source, strict=strict, warnings=warnings, hint=_TOPIC_KEY_HINT)
    return values


_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def _split_topic(text: str, what: str) -> tuple[str, str]:
    topic, sep, rest = text.partition(":")
    if not sep or not _TOPIC_NAME.fullmatch(topic):
        raise ConfigError(f"{what} {text!r} must look like TOPIC:{'KEY=VALUE' if 'config ' in what else 'PATH'} "
                          "(topic names use [a-zA-Z0-9._-])")
    return topic, rest


def parse_topic_config_arg(text: str) -> tuple[str, str, str]:
    """``--topic-config orders:retention.ms=3600000`` → ("orders", "retention.ms", "3600000")."""
    topic, assignment = _split_topic(text, "--topic-config")
    key, sep, value = assignment.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--topic-config {text!r} must look like TOPIC:KEY=VALUE")
    return topic, key.strip(), value


def _read_properties_file(path: PathLike) -> dict[str, str]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read ({exc.strerror or exc})", path=path,
                          hint="give the path of a readable .properties file") from None
    if b"\0" in data:
        raise ConfigError("not a .properties text file (it holds binary data)", path=path,
                          hint="give a server.properties or topic .properties file")
    # Properties.load(InputStream) reads ISO-8859-1; Kafka's tools read UTF-8 files the same way
    # for ASCII content, which config names and values are.
    return parse_properties(data.decode("latin-1"), path=path)


def load_configs(*, broker_config: Optional[PathLike] = None,
                 topic_configs: Iterable[str] = (),
                 topic_config_files: Iterable[str] = (), strict: bool = False) -> KafkaConfigs:
    """Build the configs a job runs with: ``broker_config`` a server.properties path,
    ``topic_configs`` ``TOPIC:key=value`` strings (they win over files), ``topic_config_files``
    ``TOPIC:PATH`` strings naming a properties file of topic configs. ``strict``: a key that is not
    Kafka's is a ConfigError instead of a warning. Example::

        configs = kafkalog.load_configs(broker_config="examples/server.properties",
                                        topic_configs=["orders:retention.ms=3600000"])
        print(configs.for_topic("orders").retention_ms, configs.warnings)
    """
    warnings: list[str] = []
    broker = BrokerConfig()
    if broker_config is not None:
        source = os.fspath(broker_config)
        broker = parse_broker_properties(_read_properties_file(broker_config), source=source, warnings=warnings,
                                         strict=strict)
    configs = KafkaConfigs(broker=broker, warnings=warnings)
    for spec in topic_config_files:
        topic, path = _split_topic(spec, "--topic-config-file")
        values = parse_topic_overrides(topic, _read_properties_file(path), source=path, warnings=warnings,
                                       strict=strict)
        _merge(configs, topic, values, f"topic ({path})")
        configs.topic_named_in.setdefault(topic, []).append(f"--topic-config-file {spec}")
    for spec in topic_configs:
        topic, key, value = parse_topic_config_arg(spec)
        values = parse_topic_overrides(topic, {key: value}, source=f"--topic-config {spec}", warnings=warnings,
                                       strict=strict)
        _merge(configs, topic, values, f"topic (--topic-config {topic}:{key})")
        configs.topic_named_in.setdefault(topic, []).append(f"--topic-config {spec}")
    return configs


TOPIC_NOT_HELD_HINT = ("check the topic's name: overrides for a topic these log dirs do not hold change nothing, and "
                       "the topic meant stays on the broker's defaults")


def topics_not_held(configs: KafkaConfigs, held: Iterable[str], *, held_in: str = "the log dirs") -> list[str]:
    """One message per topic named in ``--topic-config`` / ``--topic-config-file`` that is not among
    ``held`` (the topics of the job's log dirs), with the closest held topic ("did you mean
    demo-orders?"). A misspelt topic would leave the topic meant on the defaults — retention by the
    broker's limits — so the jobs that delete or rewrite refuse it, as they refuse a misspelt key.

    :param configs: what :func:`load_configs` built (its ``topic_named_in``)
    :param held: topic names of the partition folders the job would work on
    :param held_in: what holds them, for the message ("the log dirs", "the table")
    """
    held = sorted(set(held))
    messages = []
    for topic, where in sorted(configs.topic_named_in.items()):
        if topic in held:
            continue
        close = difflib.get_close_matches(topic, held, n=1, cutoff=0.6)
        guess = f" (did you mean {close[0]}?)" if close else ""
        messages.append(f"{where[0]}: no partition of topic {topic} in {held_in}{guess}")
    return messages


def _merge(configs: KafkaConfigs, topic: str, values: Mapping[str, Any], source: str) -> None:
    configs._resolved.clear()
    configs.topic_overrides.setdefault(topic, {}).update(values)
    configs.topic_override_sources.setdefault(topic, {}).update({k: source for k in values})


def configs_from_mappings(broker: Optional[Mapping[str, str]] = None,
                          topics: Optional[Mapping[str, Mapping[str, str]]] = None) -> KafkaConfigs:
    """Configs from plain dicts (tests, notebooks): ``broker`` properties (server.properties keys) and
    ``topics``: topic → its overrides (topic-config keys), all values as strings. Example::

        configs = kafkalog.configs_from_mappings({"log.retention.hours": "24"}, {"orders": {"cleanup.policy": "compact"}})
        print(configs.for_topic("orders").compact, configs.for_topic("other").retention_ms)   # True 86400000
    """
    warnings: list[str] = []
    configs = KafkaConfigs(
        broker=parse_broker_properties(broker or {}, source="broker", warnings=warnings), warnings=warnings)
    for topic, props in (topics or {}).items():
        _merge(configs, topic, parse_topic_overrides(topic, props, source=f"topic {topic}", warnings=warnings),
               "topic")
    return configs


__all__: Sequence[str] = (
    "LogConfig", "BrokerConfig", "KafkaConfigs", "TOPIC_CONFIGS", "BROKER_CONFIGS",
    "load_configs", "configs_from_mappings", "parse_broker_properties", "parse_topic_overrides",
    "parse_topic_config_arg", "topics_not_held",
)
