#!/usr/bin/env bash
# Run a kafkalog job:  ./spark-submit.sh <job> [job args]
#
# The job's driver is this interpreter running jobs/<job>.py; PySpark starts the JVM through the
# installed pyspark's spark-submit (client mode), with PYSPARK_SUBMIT_ARGS carrying what a
# spark-submit command line would: the master, the app name and kafkalog/ + udfs/ as a zip
# (--py-files), so the same command works against a cluster whose executors do not have kafkalog
# installed. (Run through spark-submit's own Python runner, the driver's stderr would be merged into
# stdout; this way the job's results are alone on stdout, its progress and Spark's log on stderr.)
# conf/ is the Spark conf dir (spark-defaults.conf, log4j2.properties) unless SPARK_CONF_DIR is set;
# Python workers run this interpreter. --master URL (or SPARK_MASTER) sets the master; default local[*].
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KAFKALOG_WHO="spark-submit.sh"
source "$ROOT/scripts/preflight.sh"
PY="${KAFKALOG_PYTHON:-$ROOT/.venv/bin/python}"
if [ ! -x "$PY" ] && [ -z "${KAFKALOG_PYTHON:-}" ]; then
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
  echo "Environment: SPARK_MASTER (default local[*]), SPARK_CONF_DIR (default conf/), KAFKALOG_PYTHON,"
  echo "KAFKALOG_PY_FILES (zip: kafkalog shipped to the executors, the default; none: installed on every worker)."
}

if [ $# -eq 0 ]; then usage >&2; exit 2; fi
case "$1" in -h|--help|help) usage; exit 0;; esac
job="$1"; shift
if [ ! -f "$ROOT/jobs/$job.py" ]; then
  echo "spark-submit.sh: unknown job '$job'" >&2; echo >&2; usage >&2; exit 2
fi
if [ -z "$PY" ] || [ ! -x "$PY" ]; then
  echo "spark-submit.sh: no Python found (${PY:-no .venv, no python3}): run scripts/bootstrap.sh (or ./demo.sh) once in the clone to set up .venv, or set KAFKALOG_PYTHON" >&2; exit 2
fi
kafkalog_require_job_python "$PY"

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

case "$master" in
  local|local\[*\]|local-cluster\[*\]|spark://?*|yarn|k8s://?*|mesos://?*) ;;
  *) echo "spark-submit.sh $job: error: '$master' is not a Spark master URL: use local[*], local[N], spark://HOST:PORT, yarn or k8s://URL (--master or SPARK_MASTER)" >&2; exit 2;;
esac
kafkalog_require_java

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
export SPARK_MASTER="$master"
# A local master's Python workers import kafkalog from this tree (PYTHONPATH), not from the zip: numba
# can only cache compiled kernels of modules that are files, so workers load them from the cache
# instead of compiling them in every run. Executors elsewhere get the zip (and compile once per worker).
# KAFKALOG_PY_FILES=none: the executors import the kafkalog installed beside their Python (the same
# venv path on every worker): no zip, so numba's on-disk kernel cache serves them too (kernels
# loaded from a zip are compiled again by every executor of every job: tens of seconds each).
pyfiles=(--py-files "$ZIP")
case "$master" in local|local\[*) pyfiles=();; esac
case "${KAFKALOG_PY_FILES:-zip}" in
  zip) ;;
  none) pyfiles=();;
  *) echo "spark-submit.sh $job: error: KAFKALOG_PY_FILES='${KAFKALOG_PY_FILES}': use zip (the default) or none" >&2; exit 2;;
esac
printf -v PYSPARK_SUBMIT_ARGS '%q ' --master "$master" --name "kafkalog-$job" ${pyfiles[@]+"${pyfiles[@]}"}
export PYSPARK_SUBMIT_ARGS="${PYSPARK_SUBMIT_ARGS}pyspark-shell"
exec "$PY" "$ROOT/jobs/$job.py" ${args[@]+"${args[@]}"}
