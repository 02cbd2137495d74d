#!/usr/bin/env bash
# Set up, generate a demo Kafka log dir, and dump it as kafka-dump-log.sh would (the main job for now).
set -euo pipefail
cd "$(dirname "$0")"
scripts/bootstrap.sh
OUT=${1:-demo-logs}
.venv/bin/kafkalog demo "$OUT" --partitions 3 --records 20000
.venv/bin/kafkalog dump --files "$OUT/demo-orders-0/00000000000000000000.log" --deep-iteration --print-data-log | head -n 12
.venv/bin/kafkalog dump --files "$OUT/demo-orders-0/00000000000000000000.index" --verify-index-only
.venv/bin/kafkalog dump --json --files "$OUT/demo-orders-0/00000000000000000000.log" | tail -n 1
