# Checks the shell entry points (demo.sh, .ci/run, spark-submit.sh, scripts/bootstrap.sh) run before
# they start anything slow, each failing with one line that says what to install or run (exit 2).
# Source it, then call the functions; $KAFKALOG_WHO names the caller in messages.

KAFKALOG_MIN_JAVA=17          # Spark 4 runs on Java 17 or 21
KAFKALOG_MIN_PYTHON=3.10

_kafkalog_fail() {
  echo "${KAFKALOG_WHO:-kafkalog}: $*" >&2
  exit 2
}

# Java for Spark: $JAVA_HOME/bin/java when JAVA_HOME is set (as Spark's scripts pick it), else java on PATH.
kafkalog_require_java() {
  local java version major install
  install="install a Java ${KAFKALOG_MIN_JAVA}+ runtime (Debian/Ubuntu: sudo apt-get install openjdk-17-jre-headless;"
  install="$install Fedora/RHEL: sudo dnf install java-17-openjdk-headless; macOS: brew install openjdk@17)"
  if [ -n "${JAVA_HOME:-}" ]; then
    java="$JAVA_HOME/bin/java"
    [ -x "$java" ] || _kafkalog_fail "Spark needs Java ${KAFKALOG_MIN_JAVA}+, and JAVA_HOME=$JAVA_HOME has no bin/java: $install and point JAVA_HOME at it (or unset JAVA_HOME to use java on PATH)"
  else
    java="$(command -v java || true)"
    [ -n "$java" ] || _kafkalog_fail "Spark needs Java ${KAFKALOG_MIN_JAVA}+ and there is no java on PATH: $install, or set JAVA_HOME to one"
  fi
  version="$("$java" -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n 1)"
  major="${version%%[.+-]*}"
  if [ "$major" = "1" ]; then major="$(echo "$version" | cut -d. -f2)"; fi     # 1.8.0_292 is Java 8
  case "$major" in
    ''|*[!0-9]*) _kafkalog_fail "cannot tell the version of $java (java -version printed no version): Spark needs Java ${KAFKALOG_MIN_JAVA}+; $install";;
  esac
  if [ "$major" -lt "$KAFKALOG_MIN_JAVA" ]; then
    _kafkalog_fail "Spark needs Java ${KAFKALOG_MIN_JAVA}+ and $java is Java $major: $install, then put it first on PATH or set JAVA_HOME to it"
  fi
}

# A Python >= 3.10 to create .venv with (bootstrap).
kafkalog_require_python() {
  local py="$1"
  command -v "$py" >/dev/null 2>&1 || _kafkalog_fail "no $py found: install Python ${KAFKALOG_MIN_PYTHON} or newer (or set PYTHON=/path/to/python3)"
  "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
    || _kafkalog_fail "$py is Python $("$py" -c 'import platform; print(platform.python_version())'); kafkalog needs ${KAFKALOG_MIN_PYTHON} or newer: install it and run again with PYTHON=/path/to/python3.1x"
  "$py" -c 'import ensurepip, venv' >/dev/null 2>&1 \
    || _kafkalog_fail "$py cannot create virtual environments (no venv/ensurepip module): install it (Debian/Ubuntu: sudo apt-get install python3-venv) and run again"
}

# The interpreter the jobs run on has what they import (checked without importing, so it is quick).
kafkalog_require_job_python() {
  local py="$1" missing
  missing="$("$py" - <<'PYEOF' 2>/dev/null
import importlib.util, sys
if sys.version_info < (3, 10):
    print(f"Python >= 3.10 (this is {sys.version.split()[0]})")
    sys.exit()
mods = ("pyarrow", "numpy", "numba", "crc32c", "lz4", "zstandard", "cramjam", "pyspark", "deltalake", "pandas")
print(" ".join(m for m in mods if importlib.util.find_spec(m) is None))
PYEOF
)" || missing="a working interpreter"
  if [ -n "$missing" ]; then
    _kafkalog_fail "$py lacks what the jobs need ($missing): run scripts/bootstrap.sh (or ./demo.sh) once in the clone to set up .venv, or set KAFKALOG_PYTHON to a Python with kafkalog[spark] installed"
  fi
}
