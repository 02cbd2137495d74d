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
if ! { .venv/bin/python -m pip install -q --upgrade pip && .venv/bin/python -m pip install -q -e ".[spark,test]"; } \
     > .venv/bootstrap.log 2>&1; then
  cat .venv/bootstrap.log >&2
  echo "bootstrap: installing kafkalog into .venv failed (log above, also in .venv/bootstrap.log)" >&2
  exit 1
fi
# Compile the numba kernels into the cache the jobs' Python workers read (NUMBA_CACHE_DIR, as
# udfs/session.py and conf/spark-defaults.conf set it), so no worker compiles them in its first task.
# Seconds the first time, under one after; a failure here is reported and does not stop the setup.
if ! NUMBA_CACHE_DIR="${NUMBA_CACHE_DIR:-/tmp/kafkalog-numba-cache}" .venv/bin/python -m kafkalog.tools.warm \
     2>> .venv/bootstrap.log; then
  echo "bootstrap: compiling the kernels ahead failed (see the end of .venv/bootstrap.log); jobs compile them on first use" >&2
fi
