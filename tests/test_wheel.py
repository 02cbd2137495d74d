"""The installed user: the wheel built from this tree, installed in a fresh venv, runs ``kafkalog compact``
and ``kafkalog retention`` (no Spark) and a Spark job through the documented ``kafkalog spark <job>`` — the
jobs, conf/ and udfs coming from the wheel alone, not from the clone.

The dependencies (pyspark alone is ~300 MB) are not installed again: the fresh venv sees the project
.venv's site-packages through a ``.pth`` path line, appended after its own, which carries no editable
finder (``.pth`` files inside it are not processed), so kafkalog, udfs, the console script and the data
files resolve only to what the wheel installed — the test checks that first.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOPIC = "demo-orders"
NOW = "2026-01-08T03:00:00Z"

pytestmark = pytest.mark.slow


def run(cmd, *, cwd, env, timeout=300) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh venv with the wheel of this tree installed: its bin folder."""
    tmp = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    started = time.monotonic()
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp / "dist", REPO], cwd=tmp, env=env)
    wheel = next((tmp / "dist").glob("kafkalog-*.whl"))
    run([sys.executable, "-m", "venv", "--without-pip", tmp / "venv"], cwd=tmp, env=env)
    python = tmp / "venv" / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel],
        cwd=tmp, env=env)
    purelib = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                       cwd=tmp, env=env).stdout.strip())
    (purelib / "zz_project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    print(f"wheel built and installed in {time.monotonic() - started:.1f} s")
    return tmp / "venv" / "bin", env


def test_the_wheel_alone_provides_kafkalog_udfs_and_the_jobs(installed, tmp_path):
    bin_dir, env = installed
    venv = bin_dir.parent
    where = run([bin_dir / "python", "-c", "import kafkalog, udfs; print(kafkalog.__file__); print(udfs.__file__)"],
                cwd=tmp_path, env=env).stdout.split()
    assert all(Path(p).is_relative_to(venv) for p in where), where
    out = run([bin_dir / "kafkalog", "spark", "--where"], cwd=tmp_path, env=env).stdout
    assert f"jobs: {venv}/share/kafkalog/jobs" in out and f"conf: {venv}/share/kafkalog/conf" in out


def test_compact_retention_and_a_spark_job_from_the_installed_wheel(installed, tmp_path):
    bin_dir, env = installed
    kafkalog = bin_dir / "kafkalog"
    logs, planned = tmp_path / "logs", tmp_path / "logs-retention"
    run([kafkalog, "demo", logs, "--partitions", "2", "--records", "6000"], cwd=tmp_path, env=env)
    shutil.copytree(logs, planned)
    # The Spark job (its JVM's start) runs beside the compaction, on a copy of the demo logs it only reads (a dry
    # run): the compaction is mostly numba compiling the cleaner's kernels (its cache is keyed by the source
    # files' path, and the wheel's kafkalog has a path of its own), one core, ~24 s of CPU; one after the other
    # the two took 41.6 s + 28.3 s wall at load 4.5.
    retention = ["--topic-config", f"{TOPIC}:retention.bytes=100000", "--now-ms", NOW]
    started = time.monotonic()
    with ThreadPoolExecutor(1) as pool:
        spark_run = pool.submit(run, [kafkalog, "spark", "retention", "--log-dirs", planned, *retention, "--master",
                                      "local[2]", "--report", tmp_path / "spark.json"], cwd=tmp_path, env=env)
        run([kafkalog, "compact", "--log-dir", logs, "--topic-config", f"{TOPIC}:cleanup.policy=compact",
             "--now-ms", NOW, "--report", tmp_path / "compact.json"], cwd=tmp_path, env=env)
        run([kafkalog, "retention", "--log-dir", planned, *retention, "--report", tmp_path / "plan.json"],
            cwd=tmp_path, env=env)
        proc = spark_run.result()
    print(f"kafkalog compact, retention and spark retention: {time.monotonic() - started:.1f} s")
    compact = json.loads((tmp_path / "compact.json").read_text())
    assert compact["summary"]["statuses"] == {"cleaned": 2}
    assert "retention plan (dry run)" in proc.stdout
    ours, spark = (json.loads((tmp_path / name).read_text()) for name in ("plan.json", "spark.json"))
    assert set(ours) == set(spark)
    assert ours["segments"] == spark["segments"] and any(s["decision"] == "delete" for s in ours["segments"])
    strip = ("duration_ms",)
    assert [{k: v for k, v in p.items() if k not in strip} for p in ours["partitions"]] == \
        [{k: v for k, v in p.items() if k not in strip} for p in spark["partitions"]]
