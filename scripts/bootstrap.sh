#!/usr/bin/env bash
# Create (or reuse) .venv and install kafkalog with its Spark and test extras. Idempotent.
# pip's output goes to .venv/bootstrap.log and is shown only if the install fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if ! { .venv/bin/python -m pip install -q --upgrade pip && .venv/bin/python -m pip install -q -e ".[spark,test]"; } \
     > .venv/bootstrap.log 2>&1; then
  cat .venv/bootstrap.log >&2
  echo "bootstrap: installing kafkalog into .venv failed (log above, also in .venv/bootstrap.log)" >&2
  exit 1
fi
