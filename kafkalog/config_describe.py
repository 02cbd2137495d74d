"""What a job will use, per topic and key, and where each value came from — as
``kafka-configs.sh --describe --all --entity-type topics`` prints a broker's answer to DescribeConfigs
(ConfigCommand.scala; the synonyms as ConfigHelper/``LogConfig.TopicConfigSynonyms`` list them).

A config's synonyms are listed in Kafka's order: the topic's override (``DYNAMIC_TOPIC_CONFIG``),
then the broker synonyms set in server.properties (``STATIC_BROKER_CONFIG``, in precedence order:
``log.retention.ms`` before ``log.retention.minutes`` before ``log.retention.hours``) and the synonyms'
own defaults (``DEFAULT_CONFIG``) — with Kafka's quirk that the broker entries before the first
synonym's are dropped (see :func:`broker_synonyms`): ``--sources`` says where each value really came
from. We read no
dynamic broker configs (they live in the cluster metadata, not the log dirs): kafkalog's sources
are the topic overrides given to the job, server.properties and Kafka's defaults (kafkalog/config.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, List, Optional, Tuple

from kafkalog.config import TOPIC_CONFIGS, ConfigKey, KafkaConfigs

DYNAMIC_TOPIC_CONFIG = "DYNAMIC_TOPIC_CONFIG"
STATIC_BROKER_CONFIG = "STATIC_BROKER_CONFIG"
DEFAULT_CONFIG = "DEFAULT_CONFIG"

# Kafka's broker defaults where the broker key's default is not the topic default in the topic key's unit:
# only the hours key of these has a default (KafkaConfig / ServerLogConfigs), e.g. log.retention.hours=168.
_DEFAULT_SYNONYM = {"retention.ms": "log.retention.hours", "segment.ms": "log.roll.hours",
                    "segment.jitter.ms": "log.roll.jitter.hours"}


@dataclass(frozen=True)
class ConfigEntry:
    """One topic config as DescribeConfigs answers it: ``name=value``, its ``source`` (the first
    synonym's) and every ``synonyms`` entry as (source, key, value text)."""

    name: str
    value: str
    source: str
    synonyms: Tuple[Tuple[str, str, str], ...]
    where: str          # kafkalog's own words: which flag or file set it

    def kafka_line(self) -> str:
        """The line ``kafka-configs.sh --describe --all`` prints for this config."""
        synonyms = ", ".join(f"{s}:{k}={v}" for s, k, v in self.synonyms)
        return f"{self.name}={self.value} sensitive=false synonyms={{{synonyms}}}"


def format_value(value: Any) -> str:
    """A config value as Kafka prints it: lists comma-joined, booleans lower case, whole doubles as 0.5/1.0."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)


def _default_synonym(key: ConfigKey) -> Optional[Tuple[str, str]]:
    if not key.synonyms:
        return None
    name = _DEFAULT_SYNONYM.get(key.name)
    if name is None:
        return key.synonyms[0].key, format_value(key.default)
    scale = next(s.scale for s in key.synonyms if s.key == name)
    return name, str(key.default // scale)


def broker_synonyms(configs: KafkaConfigs, key: ConfigKey) -> List[Tuple[str, str, str]]:
    """The broker's synonyms of a topic config as Kafka lists them (ConfigHelper.configSynonyms): every
    key set in server.properties, in synonym order, then every synonym's own default; then the entries
    before the first synonym's are dropped — so ``retention.ms`` set through ``log.retention.minutes``
    (``log.retention.ms`` unset, without a default) lists none, though its value comes from there.

    :param configs: the configs (their broker's ``synonym_texts``)
    :param key: the topic config
    """
    if not key.synonyms:
        return []
    texts = configs.broker.synonym_texts
    entries = [(STATIC_BROKER_CONFIG, s.key, texts[s.key]) for s in key.synonyms if s.key in texts]
    default = _default_synonym(key)
    if default is not None:
        entries.append((DEFAULT_CONFIG, *default))
    primary = key.synonyms[0].key
    while entries and entries[0][1] != primary:
        entries.pop(0)
    return entries


def describe_topic(configs: KafkaConfigs, topic: str) -> List[ConfigEntry]:
    """Every topic config of ``topic`` with its effective value and synonyms, in name order.

    :param configs: the job's configs (``load_configs``)
    :param topic: the topic
    """
    effective = configs.for_topic(topic)
    overrides = configs.topic_overrides.get(topic, {})
    entries = []
    for name in sorted(TOPIC_CONFIGS):
        key = TOPIC_CONFIGS[name]
        synonyms = [(DYNAMIC_TOPIC_CONFIG, name, format_value(overrides[name]))] if name in overrides else []
        synonyms += broker_synonyms(configs, key)
        source = synonyms[0][0] if synonyms else DEFAULT_CONFIG
        entries.append(ConfigEntry(name, format_value(getattr(effective, name.replace(".", "_"))), source,
                                   tuple(synonyms), effective.sources.get(name, "default")))
    return entries


def describe_configs(configs: KafkaConfigs, topics: Iterable[str]) -> dict:
    """Every topic's effective configs and their sources, as DescribeConfigs with synonyms answers.

    :param configs: the job's configs (``load_configs`` / ``configs_from_mappings``)
    :param topics: the topics to describe (e.g. those of a log dir)
    :returns: {topic: [ConfigEntry, ...]} in topic order

    Example::

        import kafkalog
        configs = kafkalog.configs_from_mappings({"log.retention.hours": "24"},
                                                 {"orders": {"cleanup.policy": "compact"}})
        for entry in kafkalog.describe_configs(configs, ["orders"])["orders"]:
            print(entry.kafka_line())
    """
    return {topic: describe_topic(configs, topic) for topic in sorted(set(topics))}


def describe_lines(described: dict, *, where: bool = False) -> List[str]:
    """The text ``kafka-configs.sh --describe --all`` prints, topic after topic; ``where`` adds
    kafkalog's own source words (which flag or file) after each line.

    :param described: ``describe_configs``'s result
    :param where: add ``  # <source>`` to each line
    """
    lines = []
    for topic, entries in described.items():
        lines.append(f"All configs for topic {topic} are:")
        for e in entries:
            lines.append(f"  {e.kafka_line()}" + (f"  # {e.where}" if where else ""))
    return lines


__all__ = ["DEFAULT_CONFIG", "DYNAMIC_TOPIC_CONFIG", "STATIC_BROKER_CONFIG", "ConfigEntry", "describe_configs",
           "describe_lines", "describe_topic", "format_value"]
