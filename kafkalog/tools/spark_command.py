"""``kafkalog spark <job> [args]``: run a Spark job from an installed package, as ``./spark-submit.sh
<job>`` does from a clone — the job's driver is this interpreter running ``jobs/<job>.py``; PySpark starts
the JVM through the installed pyspark's spark-submit (client mode) with ``PYSPARK_SUBMIT_ARGS`` carrying
the master, the app name and (for a master that is not local) kafkalog + udfs as a ``--py-files`` zip.

Where the jobs and Spark's conf come from: a clone's ``jobs/`` and ``conf/`` (beside this package), else
the wheel's data files (``<prefix>/share/kafkalog/{jobs,conf}``, pyproject ``data-files``). ``kafkalog
spark --where`` prints them. This module starts no Spark itself: it replaces this process with the job's.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import List, Optional

from kafkalog.errors import UsageError

COMMAND = "spark"
MIN_JAVA = 17          # Spark 4 runs on Java 17 or 21
_MASTER = re.compile(r"local|local\[.+\]|local-cluster\[.+\]|spark://.+|yarn|k8s://.+|mesos://.+")
_PYTHON_NEEDS = ("pyarrow", "numpy", "numba", "pyspark", "deltalake", "pandas")


def home() -> Path:
    """The folder holding ``jobs/`` and ``conf/``: the clone's, else the installed data files'."""
    clone = Path(__file__).resolve().parents[2]
    for candidate in (clone, Path(sys.prefix) / "share" / "kafkalog"):
        if (candidate / "jobs" / "compact.py").is_file() and (candidate / "conf").is_dir():
            return candidate
    raise UsageError("cannot find the jobs (jobs/compact.py) beside kafkalog or in "
                     f"{Path(sys.prefix) / 'share' / 'kafkalog'}",
                     hint="reinstall with `pip install 'kafkalog[spark]'`, or run ./spark-submit.sh in a clone")


def jobs(root: Path) -> List[str]:
    """The job names (``jobs/*.py``)."""
    return sorted(p.stem for p in (root / "jobs").glob("*.py"))


def _summary_line(path: Path) -> str:
    first = path.read_text(encoding="utf-8").splitlines()[0].strip('"')
    return first.split(": ", 1)[-1]


def add_parser(subparsers) -> None:
    """The ``spark`` subcommand."""
    p = subparsers.add_parser(
        COMMAND, help="run a Spark job (compact, retention, catalog, ...) through spark-submit (installed or in a clone)",
        description="Run one of kafkalog's Spark jobs, as ./spark-submit.sh <job> does in a clone: "
                    "`kafkalog spark <job> --help` for a job's arguments; `kafkalog spark` lists the jobs. "
                    "--master URL (or SPARK_MASTER) sets the master (default local[*]); conf/ is the Spark conf dir "
                    "unless SPARK_CONF_DIR is set. Needs Java 17+ and kafkalog[spark].")
    p.add_argument("--where", action="store_true", help="print where the jobs and conf/ are, and stop")
    p.add_argument("job", nargs="?", help="the job: catalog, compact, retention, reindex, lookup, lag, export, restore")
    p.add_argument("args", nargs="...", help="the job's arguments (e.g. --log-dirs DIR --dry-run)")
    p.set_defaults(handler=run)


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    install = (f"install a Java {MIN_JAVA}+ runtime (Debian/Ubuntu: sudo apt-get install openjdk-17-jre-headless; "
               "macOS: brew install openjdk@17)")
    if not java or not os.access(java, os.X_OK):
        raise UsageError(f"Spark needs Java {MIN_JAVA}+ and there is " +
                         (f"no bin/java in JAVA_HOME={java_home}" if java_home else "no java on PATH"), hint=install)
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    major = int(m.group(2) if m and m.group(1) == "1" else m.group(1)) if m else 0
    if major < MIN_JAVA:
        which = f"Java {major}" if major else "of no known version"
        raise UsageError(f"Spark needs Java {MIN_JAVA}+ and {java} is {which}", hint=install)
    return java


def _py_files_zip() -> Path:
    """kafkalog + udfs as one zip for ``--py-files`` (executors that do not have them installed), cached."""
    import importlib.util

    import kafkalog
    from kafkalog import __version__
    # located, not imported: the command only ships udfs' files to spark-submit (the layers keep the
    # core below the Spark glue, so nothing in kafkalog runs udfs' code)
    udfs_spec = importlib.util.find_spec("udfs")
    if udfs_spec is None or not udfs_spec.origin:
        raise UsageError("the Spark glue (package udfs) is not installed beside kafkalog",
                         hint="pip install kafkalog[spark]")
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    target = cache / "kafkalog" / f"kafkalog-py-{__version__}.zip"
    roots = [Path(kafkalog.__file__).parent, Path(udfs_spec.origin).parent]
    sources = [p for r in roots for p in r.rglob("*.py") if "__pycache__" not in p.parts]
    if target.exists() and target.stat().st_mtime >= max(p.stat().st_mtime for p in sources):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for r in roots:
            for p in sorted(q for q in sources if r in q.parents):
                z.write(p, p.relative_to(r.parent))
    os.replace(tmp, target)
    return target


def run(args) -> int:
    """Replace this process with the job's driver (so Ctrl-C and SIGTERM reach the job itself)."""
    import importlib.util

    root = home()
    names = jobs(root)
    if args.where:
        print(f"jobs: {root / 'jobs'}\nconf: {root / 'conf'}")
        return 0
    if not args.job:
        print("usage: kafkalog spark <job> [--help | job arguments]\n\njobs:")
        for name in names:
            print(f"  {name:<12} {_summary_line(root / 'jobs' / f'{name}.py')}")
        return 0
    if args.job not in names:
        from kafkalog.config import did_you_mean
        raise UsageError(f"unknown job {args.job!r}{did_you_mean(args.job, names)}", hint=f"jobs: {', '.join(names)}")
    missing = [m for m in _PYTHON_NEEDS if importlib.util.find_spec(m) is None]
    if missing:
        raise UsageError(f"{sys.executable} lacks what the jobs need ({' '.join(missing)})",
                         hint="pip install 'kafkalog[spark]'")
    job_args: List[str] = list(args.args)
    master: Optional[str] = os.environ.get("SPARK_MASTER") or "local[*]"
    for i, a in enumerate(job_args):
        if a == "--master" and i + 1 < len(job_args):
            master = job_args[i + 1]
        elif a.startswith("--master="):
            master = a.split("=", 1)[1]
    wants_help = any(a in ("-h", "--help") for a in job_args)
    if not wants_help:
        if not _MASTER.fullmatch(master):
            raise UsageError(f"{master!r} is not a Spark master URL: use local[*], local[N], spark://HOST:PORT, "
                             "yarn or k8s://URL (--master or SPARK_MASTER)")
        _java()
    env = dict(os.environ)
    env.setdefault("SPARK_CONF_DIR", str(root / "conf"))
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_MASTER=master)
    submit = ["--master", master, "--name", f"kafkalog-{args.job}"]
    if not master.startswith("local"):
        submit += ["--py-files", str(_py_files_zip())]
    env["PYSPARK_SUBMIT_ARGS"] = " ".join(shlex.quote(a) for a in submit) + " pyspark-shell"
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, str(root / "jobs" / f"{args.job}.py"), *job_args], env)
    return 0   # not reached

