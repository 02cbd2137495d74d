#!/usr/bin/env bash
# Run a kafkalog job with the installed pyspark's spark-submit:  ./spark-submit.sh <job> [job args]
#
# Ships kafkalog/ and udfs/ as a zip (--py-files), so the same command works against a cluster whose
# executors do not have kafkalog installed; conf/ is the Spark conf dir (spark-defaults.conf,
# log4j2.properties) unless SPARK_CONF_DIR is set; Python workers run this interpreter.
# --master URL (or SPARK_MASTER) passes through to spark-submit; the default is local[*].
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${KAFKALOG_PYTHON:-$ROOT/.venv/bin/python}"
if [ ! -x "$PY" ]; then
  PY="$(command -v python3 || true)"
fi

usage() {
  echo "usage: ./spark-submit.sh <job> [--help | job arguments]"
  echo
  echo "jobs:"
  for f in "$ROOT"/jobs/*.py; do
    name="$(basename "$f" .py)"
    line="$(head -n 1 "$f" | sed -e 's/^"""//' -e 's/"""$//' -e "s/^$name: //")"
    printf '  %-12s %s\n' "$name" "$line"
  done
  echo
  echo "Every job takes --help, --log-dirs DIR[,DIR...], --report PATH (JSON) and --master URL."
  echo "Environment: SPARK_MASTER (default local[*]), SPARK_CONF_DIR (default conf/), KAFKALOG_PYTHON."
}

if [ $# -eq 0 ]; then usage >&2; exit 2; fi
case "$1" in -h|--help|help) usage; exit 0;; esac
job="$1"; shift
if [ ! -f "$ROOT/jobs/$job.py" ]; then
  echo "spark-submit.sh: unknown job '$job'" >&2; echo >&2; usage >&2; exit 2
fi
if [ -z "$PY" ]; then
  echo "spark-submit.sh: no Python found; run scripts/bootstrap.sh (or set KAFKALOG_PYTHON)" >&2; exit 2
fi

master="${SPARK_MASTER:-local[*]}"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --master) [ $# -ge 2 ] || { echo "spark-submit.sh $job: error: --master needs a URL" >&2; exit 2; }
              master="$2"; shift 2;;
    --master=*) master="${1#--master=}"; shift;;
    -h|--help) exec env PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PY" "$ROOT/jobs/$job.py" --help;;
    *) args+=("$1"); shift;;
  esac
done

SUBMIT="$(dirname "$PY")/spark-submit"
if [ ! -x "$SUBMIT" ]; then SUBMIT="$(command -v spark-submit || true)"; fi
if [ -z "$SUBMIT" ]; then
  echo "spark-submit.sh: spark-submit not found; install the project (scripts/bootstrap.sh) or pyspark" >&2; exit 2
fi

# kafkalog + udfs as one zip for --py-files, rebuilt when a source file is newer.
ZIP="$ROOT/build/kafkalog-py.zip"
"$PY" - "$ROOT" "$ZIP" <<'PYEOF'
import os, sys, zipfile
root, target = sys.argv[1], sys.argv[2]
sources = [os.path.join(d, f) for pkg in ("kafkalog", "udfs") for d, _, fs in os.walk(os.path.join(root, pkg))
           if "__pycache__" not in d for f in fs if f.endswith(".py")]
if os.path.exists(target) and os.path.getmtime(target) >= max(os.path.getmtime(s) for s in sources):
    sys.exit(0)
os.makedirs(os.path.dirname(target), exist_ok=True)
tmp = target + ".tmp"
with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
    for s in sorted(sources):
        z.write(s, os.path.relpath(s, root))
os.replace(tmp, target)
PYEOF

export SPARK_CONF_DIR="${SPARK_CONF_DIR:-$ROOT/conf}"
export PYSPARK_PYTHON="$PY" PYSPARK_DRIVER_PYTHON="$PY"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
# A local master's Python workers import kafkalog from this tree (PYTHONPATH), not from the zip: numba
# can only cache compiled kernels of modules that are files, so workers load them from the cache
# instead of compiling them in every run. Executors elsewhere get the zip (and compile once per worker).
pyfiles=(--py-files "$ZIP")
case "$master" in local|local\[*) pyfiles=();; esac
exec "$SUBMIT" --master "$master" --name "kafkalog-$job" ${pyfiles[@]+"${pyfiles[@]}"} "$ROOT/jobs/$job.py" \
  ${args[@]+"${args[@]}"}
