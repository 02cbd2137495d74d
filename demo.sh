#!/usr/bin/env bash
# Set up, generate a demo Kafka log dir, catalogue it and plan its retention with the Spark jobs (dry run),
# writing Delta tables, JSON reports and HTML pages under demo-tables/.
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
  .venv/bin/kafkalog demo "$OUT" --partitions 3 --records 20000
else
  echo "--- using the demo log dir $OUT from an earlier run"
fi
SEG="$OUT/demo-orders-0/00000000000000000000"
if [ -f "$SEG.log" ]; then
  echo "--- first records of $SEG.log, as kafka-dump-log.sh --deep-iteration --print-data-log prints them"
  ( set +o pipefail; .venv/bin/kafkalog dump --files "$SEG.log" --deep-iteration --print-data-log | head -n 4 )
fi
echo "--- the segment catalog (Spark job), written to $TABLES/catalog as a Delta table"
./spark-submit.sh catalog --log-dirs "$OUT" --catalog "$TABLES/catalog" --report "$TABLES/catalog.json" \
  --html "$TABLES/catalog.html"
echo "--- retention as a broker would decide it on 2026-01-08T03:00Z with retention.bytes=1000000 (dry run)"
./spark-submit.sh retention --log-dirs "$OUT" --now-ms 2026-01-08T03:00:00Z \
  --topic-config demo-orders:retention.bytes=1000000 \
  --audit "$TABLES/retention-audit" --report "$TABLES/retention.json" --html "$TABLES/retention.html"
echo "--- reports: $TABLES/catalog.json, $TABLES/retention.json; add --execute to the retention command to apply it"
echo "--- the retention plan as a page (open it in a browser; it works offline): $(cd "$TABLES" && pwd)/retention.html"
echo "--- next: the kafkalog command lives in .venv; run 'source .venv/bin/activate' (then 'kafkalog --help'),"
echo "    or call it as .venv/bin/kafkalog, e.g. .venv/bin/kafkalog offsets --log-dirs $OUT --topic demo-orders --time -2"
