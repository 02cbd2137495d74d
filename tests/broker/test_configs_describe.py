"""``kafkalog configs --describe`` against the broker: a broker whose server.properties sets topic
defaults through synonyms (log.retention.hours and log.retention.minutes, log.roll.ms, log.cleaner.*), a
topic created with overrides; Kafka's ``kafka-configs.sh --describe --all`` (ConfigCommand) on it and ours
on the same server.properties and overrides must print the same line for every topic config we model."""
from __future__ import annotations


from kafkalog.config import TOPIC_CONFIGS
from kafkalog.testing import broker_client as bc
from kafkalog.testing.broker import run_tool
from kafkalog.tools.cli import main

CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"
TOPIC = "described"
BROKER_OVERRIDES = {"log.retention.hours": "24", "log.retention.minutes": "90", "log.roll.ms": "3600000",
                    "log.cleaner.min.cleanable.ratio": "0.3", "log.cleanup.policy": "delete"}
TOPIC_OVERRIDES = {"cleanup.policy": "compact,delete", "retention.bytes": "1048576", "min.compaction.lag.ms": "5000",
                   "segment.jitter.ms": "10"}


def described_lines(text: str, topic: str) -> dict:
    lines = text.splitlines()
    start = lines.index(f"All configs for topic {topic} are:")
    out = {}
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        out[line.strip().split("=", 1)[0]] = line.strip()
    return out


def test_configs_describe_matches_kafka_configs_describe_all(broker_factory, tmp_path, capsys):
    broker = broker_factory(overrides=BROKER_OVERRIDES)
    bc.create_topic(broker, TOPIC, partitions=1, configs=TOPIC_OVERRIDES)
    kafka = run_tool(CONFIG_COMMAND, "--bootstrap-server", broker.bootstrap, "--describe", "--all",
                     "--entity-type", "topics", "--entity-name", TOPIC).stdout
    theirs = described_lines(kafka, TOPIC)
    assert set(TOPIC_CONFIGS) <= set(theirs), sorted(set(TOPIC_CONFIGS) - set(theirs))

    args = ["configs", "--describe", "--broker-config", str(broker.properties_file)]
    for key, value in TOPIC_OVERRIDES.items():
        args += ["--topic-config", f"{TOPIC}:{key}={value}"]
    assert main(args) == 0
    ours = described_lines(capsys.readouterr().out, TOPIC)
    assert set(ours) == set(TOPIC_CONFIGS)
    differences = {k: (ours[k], theirs[k]) for k in TOPIC_CONFIGS if ours[k] != theirs[k]}
    assert not differences, "\n".join(f"ours:   {a}\nKafka's: {b}" for a, b in differences.values())
