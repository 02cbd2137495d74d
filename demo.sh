#!/usr/bin/env bash
# Set up, generate a demo Kafka log dir (an append-only topic, a compacted topic with tombstones and an
# aborted and a committed transaction, a consumer group), compact it and plan its retention with the Spark
# jobs, writing JSON reports, HTML pages and an audit Delta table under demo-tables/.
set -euo pipefail
cd "$(dirname "$0")"
KAFKALOG_WHO="demo.sh"
source scripts/preflight.sh
kafkalog_require_java
scripts/bootstrap.sh
OUT=${1:-demo-logs}
TABLES=${2:-demo-tables}
if [ ! -d "$OUT" ]; then
  echo "--- generating a demo log dir in $OUT (kafkalog demo)"
  .venv/bin/kafkalog demo "$OUT" --partitions 3 --records 20000 --consumer-groups 1 --compacted-topic demo-customers
else
  echo "--- using the demo log dir $OUT from an earlier run"
fi
SEG="$OUT/demo-orders-0/00000000000000000000"
if [ -f "$SEG.log" ]; then
  echo "--- first records of $SEG.log, as kafka-dump-log.sh --deep-iteration --print-data-log prints them"
  ( set +o pipefail; .venv/bin/kafkalog dump --files "$SEG.log" --deep-iteration --print-data-log | head -n 4 )
fi
echo "--- what the compaction will use for demo-customers: its configs and where each came from"
.venv/bin/kafkalog configs --describe --log-dirs "$OUT" --topics demo-customers \
  --topic-config demo-customers:cleanup.policy=compact | grep -E "^All|cleanup.policy|min.cleanable|delete.retention"
echo "--- compaction of demo-customers as Kafka's log cleaner does it (Spark job, one task per partition)"
./spark-submit.sh compact --log-dirs "$OUT" --now-ms 2026-01-08T03:00:00Z \
  --topic-config demo-customers:cleanup.policy=compact --explain demo-customers:0:1000 \
  --audit "$TABLES/compact-audit" --report "$TABLES/compact.json" --html "$TABLES/compact.html"
echo "--- retention as a broker would decide it on 2026-01-08T03:00Z with retention.bytes=1000000 (dry run)"
./spark-submit.sh retention --log-dirs "$OUT" --now-ms 2026-01-08T03:00:00Z \
  --topic-config demo-orders:retention.bytes=1000000 --topic-config demo-customers:cleanup.policy=compact \
  --audit "$TABLES/retention-audit" --report "$TABLES/retention.json" --html "$TABLES/retention.html"
echo "--- reports: $TABLES/compact.json, $TABLES/retention.json; add --execute to the retention command to apply it"
echo "--- look at next (open in a browser; they work offline):"
echo "    the compaction:     $(cd "$TABLES" && pwd)/compact.html"
echo "    the retention plan: $(cd "$TABLES" && pwd)/retention.html"
echo "--- next: the kafkalog command lives in .venv; run 'source .venv/bin/activate' (then 'kafkalog --help'),"
echo "    or call it as .venv/bin/kafkalog, e.g. .venv/bin/kafkalog offsets --log-dirs $OUT --topic demo-orders --time -2,"
echo "    .venv/bin/kafkalog lag --log-dirs $OUT (the consumer group), or .venv/bin/kafkalog compact --help (no Spark)"
