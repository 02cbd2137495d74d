#!/usr/bin/env bash
# Create (or reuse) .venv and install kafkalog with its Spark and test extras. Idempotent.
# pip's output goes to .venv/bootstrap.log and is shown only if the install fails.
set -euo pipefail
cd "$(dirname "$0")/.."
KAFKALOG_WHO="bootstrap"
source scripts/preflight.sh
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  kafkalog_require_python "$PY"
  echo "bootstrap: creating .venv and installing kafkalog with pyspark, delta and the test tools (first run: a minute or two)" >&2
  "$PY" -m venv .venv
else
  echo "bootstrap: checking .venv is up to date (pip install -e .[spark,test])" >&2
fi
# Run "$@" with its output appended to .venv/bootstrap.log, saying every few seconds what it is doing
# (the log's last line): a first install takes minutes and must not look hung. Ctrl-C stops it too.
KAFKALOG_HEARTBEAT_S=${KAFKALOG_HEARTBEAT_S:-6}
run_logged() {
  local what="$1" start; shift
  echo "bootstrap: ${what}" >&2
  start=$(wc -c < .venv/bootstrap.log)
  "$@" >> .venv/bootstrap.log 2>&1 &
  local pid=$! waited=0 line
  trap 'kill "$pid" 2>/dev/null; exit 130' INT TERM
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    waited=$((waited + 1))
    if [ $((waited % KAFKALOG_HEARTBEAT_S)) -eq 0 ]; then
      line="$(tail -c +$((start + 1)) .venv/bootstrap.log 2>/dev/null | tail -n 1 | tr -d '\r' | cut -c1-110)"
      echo "bootstrap: ${what} (${waited} s${line:+: $line})" >&2
    fi
  done
  trap - INT TERM
  wait "$pid"
}
: > .venv/bootstrap.log
if ! { run_logged "upgrading pip" .venv/bin/python -m pip install --progress-bar off --upgrade pip \
       && run_logged "installing kafkalog[spark,test]" .venv/bin/python -m pip install --progress-bar off -e ".[spark,test]"; }; then
  cat .venv/bootstrap.log >&2
  echo "bootstrap: installing kafkalog into .venv failed (log above, also in .venv/bootstrap.log)" >&2
  exit 1
fi
# Compile the numba kernels into the cache the jobs' Python workers and the kafkalog commands read
# (NUMBA_CACHE_DIR, as udfs/session.py, conf/spark-defaults.conf and kafkalog.tools.cli set it), so no
# worker compiles them in its first task and the first `kafkalog fetch` is fast. Seconds the first
# time, under one after; a failure here is reported and does not stop the setup.
echo "bootstrap: compiling the numba kernels into the cache (about 25 s the first time, under 1 s after)" >&2
if ! run_logged "compiling the kernels" env NUMBA_CACHE_DIR="${NUMBA_CACHE_DIR:-/tmp/kafkalog-numba-cache}" \
     .venv/bin/python -m kafkalog.tools.warm; then
  echo "bootstrap: compiling the kernels ahead failed (see the end of .venv/bootstrap.log); jobs compile them on first use" >&2
fi
