#!/usr/bin/env bash
# Set up, generate a demo Kafka log dir, and dump it as kafka-dump-log.sh would (the main job for now).
set -euo pipefail
cd "$(dirname "$0")"
scripts/bootstrap.sh
OUT=${1:-demo-logs}
SEG="$OUT/demo-orders-0/00000000000000000000"
.venv/bin/kafkalog demo "$OUT" --partitions 3 --records 20000
echo "--- first records, as kafka-dump-log.sh --deep-iteration --print-data-log prints them"
( set +o pipefail; .venv/bin/kafkalog dump --files "$SEG.log" --deep-iteration --print-data-log | head -n 8 )
echo "--- the offset index checked against the log"
.venv/bin/kafkalog dump --files "$SEG.index" --verify-index-only
echo "--- machine-readable summary of the segment"
.venv/bin/kafkalog dump --json --files "$SEG.log" | tail -n 1
