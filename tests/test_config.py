"""Kafka config resolution: synonyms, precedence, defaults, validation (Kafka's ``LogConfig.java``,
``ServerTopicConfigSynonyms.java``)."""
from __future__ import annotations

import pytest

from kafkalog.config import LogConfig, configs_from_mappings, load_configs, parse_topic_config_arg
from kafkalog.java_types import INT64_MAX
from kafkalog.errors import ConfigError


def test_kafka_defaults_when_nothing_is_set():
    config = configs_from_mappings().for_topic("orders")
    assert config == LogConfig()
    assert (config.retention_ms, config.retention_bytes, config.cleanup_policy) == (604_800_000, -1, ("delete",))
    assert (config.file_delete_delay_ms, config.delete_retention_ms, config.max_compaction_lag_ms) == (
        60_000, 86_400_000, INT64_MAX)
    assert config.min_cleanable_dirty_ratio == 0.5 and config.sources["retention.ms"] == "default"


@pytest.mark.parametrize("broker, expected", [
    ({"log.retention.hours": "2"}, 7_200_000),
    ({"log.retention.hours": "2", "log.retention.minutes": "3"}, 180_000),
    ({"log.retention.hours": "2", "log.retention.minutes": "3", "log.retention.ms": "1234"}, 1234),
    ({"log.retention.ms": "-5"}, -1),             # a negative broker value means unlimited
    ({"log.retention.hours": "-1"}, -1),
    ({"log.retention.minutes": " 10 "}, 600_000),  # ConfigDef trims
])
def test_broker_retention_time_precedence(broker, expected):
    assert configs_from_mappings(broker).for_topic("t").retention_ms == expected


def test_topic_override_wins_and_sources_are_named():
    configs = configs_from_mappings({"log.retention.bytes": "100", "log.cleanup.policy": "compact"},
                                    {"orders": {"retention.bytes": "5", "cleanup.policy": "compact, delete"}})
    orders, other = configs.for_topic("orders"), configs.for_topic("other")
    assert orders.retention_bytes == 5 and other.retention_bytes == 100
    assert orders.cleanup_policy == ("compact", "delete") and orders.compact and orders.delete
    assert other.compact and not other.delete
    assert orders.sources["retention.bytes"] == "topic"
    assert other.sources["retention.bytes"].startswith("broker log.retention.bytes")


@pytest.mark.parametrize("topic_config, key", [
    ({"retention.ms": "-2"}, "retention.ms"),             # atLeast(-1)
    ({"retention.ms": "1h"}, "retention.ms"),
    ({"segment.bytes": "13"}, "segment.bytes"),           # atLeast(14)
    ({"segment.bytes": "4294967296"}, "segment.bytes"),   # an int
    ({"min.cleanable.dirty.ratio": "1.5"}, "min.cleanable.dirty.ratio"),
    ({"cleanup.policy": "compact,archive"}, "cleanup.policy"),
    ({"preallocate": "yes"}, "preallocate"),
    ({"max.compaction.lag.ms": "0"}, "max.compaction.lag.ms"),
])
def test_invalid_topic_values_name_the_key(topic_config, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        configs_from_mappings({}, {"t": topic_config})


def test_invalid_broker_value_names_the_key_and_file(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("log.retention.hours=forever\n")
    with pytest.raises(ConfigError) as info:
        load_configs(broker_config=props)
    assert "log.retention.hours" in str(info.value) and str(props) in str(info.value)


def test_unknown_keys_warn_and_are_ignored(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("# a broker\nlisteners=PLAINTEXT://:9092\nlog.retention.hour=1\nretention.ms=5\n"
                     "log.dirs=/a,/b\nlog.cleaner.enable=false\n")
    topic_file = tmp_path / "orders.properties"
    topic_file.write_text("retention.ms=1000\nlog.retention.ms=7\nbogus.key=1\nmin.insync.replicas=2\n")
    configs = load_configs(broker_config=props, topic_config_files=[f"orders:{topic_file}"],
                           topic_configs=["orders:retention.ms=2000"])
    text = "\n".join(configs.warnings)
    assert "log.retention.hour" in text and "retention.ms is a topic config" in text
    assert "bogus.key" in text and "log.retention.ms is a broker config" in text
    assert "listeners" not in text and "min.insync.replicas" not in text
    assert configs.broker.log_dirs == ("/a", "/b") and configs.broker.cleaner_enable is False
    orders = configs.for_topic("orders")
    assert orders.retention_ms == 2000                   # --topic-config wins over the file
    assert configs.for_topic("x").retention_ms == 604_800_000


def test_topic_config_argument_syntax():
    assert parse_topic_config_arg("orders.eu-1:retention.ms=5") == ("orders.eu-1", "retention.ms", "5")
    assert parse_topic_config_arg("t:cleanup.policy=compact,delete") == ("t", "cleanup.policy", "compact,delete")
    for bad in ("retention.ms=5", "t:retention.ms", "bad topic:a=1", ":a=1"):
        with pytest.raises(ConfigError):
            parse_topic_config_arg(bad)


def test_local_retention_applies_only_with_remote_copy():
    configs = configs_from_mappings({}, {
        "tiered": {"remote.storage.enable": "true", "local.retention.ms": "10", "retention.ms": "1000"},
        "plain": {"local.retention.ms": "10", "retention.ms": "1000"},
        "tiered-default": {"remote.storage.enable": "true", "retention.ms": "1000"}})
    assert configs.for_topic("tiered").local_retention_ms_effective == 10
    assert configs.for_topic("plain").local_retention_ms_effective == 1000
    assert configs.for_topic("tiered-default").local_retention_ms_effective == 1000


def test_missing_config_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_configs(broker_config=tmp_path / "nope.properties")


@pytest.mark.parametrize("text, value", [("0.25", 0.25), ("0.5d", 0.5), (".5", 0.5), ("1e-1", 0.1), ("+0.75F", 0.75)])
def test_doubles_parse_as_java_does(text, value):
    assert configs_from_mappings({}, {"t": {"min.cleanable.dirty.ratio": text}}).for_topic("t").min_cleanable_dirty_ratio == value


@pytest.mark.parametrize("text", ["0.2_5", "NaN", "half", "1e"])
def test_doubles_java_refuses_are_refused(text):
    with pytest.raises(ConfigError, match="min.cleanable.dirty.ratio"):
        configs_from_mappings({}, {"t": {"min.cleanable.dirty.ratio": text}})


# --- strict: what the jobs that delete or rewrite use -------------------------------------------

@pytest.mark.parametrize("where, text, message", [
    ("topic", "orders:retention.msx=1",
     "unknown topic config retention.msx for topic orders (did you mean retention.ms?)"),
    ("topic", "orders:retention.byte=1", "(did you mean retention.bytes?)"),
    ("topic", "orders:log.retention.ms=1",
     "log.retention.ms is a broker config, not a topic config (did you mean retention.ms?)"),
    ("file", "retention.msx=1\n", "unknown topic config retention.msx for topic orders (did you mean retention.ms?)"),
    ("file", "cleanup.polcy=compact\n", "(did you mean cleanup.policy?)"),
    ("broker", "log.retention.hour=1\n",
     "unknown broker config log.retention.hour (did you mean log.retention.hours?)"),
    ("broker", "log.cleaner.enabled=false\n", "(did you mean log.cleaner.enable?)"),
    ("broker", "retention.ms=5\n",
     "retention.ms is a topic config, not a broker config (the broker's key is log.retention.ms"),
])
def test_strict_configs_refuse_keys_that_are_not_kafkas_with_a_suggestion(tmp_path, where, text, message):
    kwargs = {}
    if where == "topic":
        kwargs["topic_configs"] = [text]
    elif where == "file":
        (tmp_path / "orders.properties").write_text(text)
        kwargs["topic_config_files"] = [f"orders:{tmp_path / 'orders.properties'}"]
    else:
        (tmp_path / "server.properties").write_text(text)
        kwargs["broker_config"] = tmp_path / "server.properties"
    lenient = load_configs(**kwargs)                           # read-only jobs: a warning, the value ignored
    assert any(message.split(" (did")[0] in w for w in lenient.warnings)
    with pytest.raises(ConfigError) as info:
        load_configs(**kwargs, strict=True)
    assert message in str(info.value)


def test_strict_configs_accept_every_kafka_key_and_ignore_non_log_broker_settings(tmp_path):
    from kafkalog.config import BROKER_CONFIGS, OTHER_TOPIC_CONFIGS, TOPIC_CONFIGS

    props = tmp_path / "server.properties"
    props.write_text("listeners=PLAINTEXT://:9092\nnum.network.threads=3\nlog.retention.hours=168\n"
                     "log.dir.failure.timeout.ms=30000\nlog.cleaner.threads=2\nlog.flush.interval.messages=10\n")
    topic = tmp_path / "t.properties"
    def text(value):
        if isinstance(value, tuple):
            return ",".join(value)
        return str(value).lower() if isinstance(value, bool) else str(value)
    values = {k: text(c.default) for k, c in TOPIC_CONFIGS.items()} | {k: "1" for k in OTHER_TOPIC_CONFIGS}
    values["retention.ms"] = "1000"
    topic.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    configs = load_configs(broker_config=props, topic_config_files=[f"t:{topic}"], strict=True)
    assert configs.warnings == [] and configs.for_topic("t").retention_ms == 1000
    assert "log.dir.failure.timeout.ms" in BROKER_CONFIGS


def test_which_jobs_are_strict():
    from types import SimpleNamespace

    from udfs.job import strict_configs

    assert strict_configs("retention", SimpleNamespace()) and strict_configs("compact", SimpleNamespace(dry_run=True))
    assert strict_configs("reindex", SimpleNamespace(verify_only=False))
    assert not strict_configs("reindex", SimpleNamespace(verify_only=True))
    assert not strict_configs("catalog", SimpleNamespace())


def test_internal_topics_take_the_configs_kafka_creates_them_with():
    """``__consumer_offsets`` and ``__transaction_state`` are compacted whatever the broker's default
    (Kafka sets cleanup.policy=compact on them at creation, GroupCoordinatorService.java /
    TransactionStateManager.scala), their segment size comes from the broker's internal-topic settings,
    and a topic override still wins over the creation config."""
    configs = configs_from_mappings({"log.cleanup.policy": "delete", "log.retention.ms": "1000",
                                     "offsets.topic.segment.bytes": "2048", "log.segment.bytes": "4096"},
                                    {"__transaction_state": {"segment.bytes": "8192"}})
    offsets, txn, user = (configs.for_topic(t) for t in ("__consumer_offsets", "__transaction_state", "orders"))
    assert offsets.cleanup_policy == txn.cleanup_policy == ("compact",) and user.cleanup_policy == ("delete",)
    assert (offsets.segment_bytes, txn.segment_bytes, user.segment_bytes) == (2048, 8192, 4096)
    assert (offsets.compression_type, txn.compression_type) == ("producer", "uncompressed")
    assert offsets.retention_ms == 1000          # not set at creation: the broker's default applies
    assert "creates __consumer_offsets" in offsets.sources["cleanup.policy"]
    assert configs_from_mappings().for_topic("__consumer_offsets").segment_bytes == 104_857_600
