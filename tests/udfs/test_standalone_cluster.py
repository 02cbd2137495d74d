"""The jobs on a real Spark standalone cluster (issue 34): one master and two workers (1 core each) as
separate JVMs from pyspark's own jars (``kafkalog.testing.spark_cluster``), module-scoped; every job is
submitted as a user would, ``./spark-submit.sh JOB --master spark://…``, so the executors import kafkalog
from the job's --py-files zip. The log dirs are at the same path for every process (one machine).

- retention and reindex on the cluster leave the log dirs byte for byte as the same job on local[2];
- compaction with a worker SIGKILLed (its JVMs and Python) in the middle of a round: the task is retried
  on the other worker and the log dirs end byte for byte as local[2]'s, every partition cleaned;
- the driver SIGKILLed mid-compaction: nothing changes once its lock is gone; ``kafkalog recover`` and a
  rerun end byte for byte as local[2]'s;
- a partition split across tasks (``--split always``) on the cluster equals local[2]'s.

Cost (measured at load 20 on the 2 cores, the Spark session already up): ~225 s, four cluster submits
of ~50-60 s each (driver JVM, two executor JVMs, Python workers) and the cluster's start (~10 s).

"In the middle" is a pause point, not a sleep (``udfs.pause_point``): the first task attempt to reach
a swap-in step waits on a file; the test kills what it means to kill while it waits.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")

from kafkalog.cleaner.swap import STEP_CLEANED  # noqa: E402
from kafkalog.fs.lock import is_locked  # noqa: E402
from kafkalog.testing.spark_cluster import SparkClusterUnavailable, SparkStandaloneCluster  # noqa: E402
from udfs import compact_job, reindex_job, retention_job  # noqa: E402
from udfs.pause_point import PAUSE_ENV  # noqa: E402

from test_spark_compact import build, job_args, tree  # noqa: E402
from test_spark_jobs import NOW as RETENTION_NOW, two_log_dirs  # noqa: E402
from test_spark_reindex import args_for as reindex_args, damaged_log_dirs  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
JOB_TIMEOUT_S = 300
pytestmark = pytest.mark.slow      # end-to-end spark-submit runs, as tests/test_interrupts.py: -m "not slow" skips them


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    try:
        with SparkStandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2).started() as c:
            yield c
    except SparkClusterUnavailable as e:
        if os.environ.get("KAFKALOG_BROKER_REQUIRED") == "1":     # .ci/run: every service its tests need must run
            pytest.fail(f"the Spark standalone cluster is required here (KAFKALOG_BROKER_REQUIRED=1) but cannot "
                        f"start: {e}", pytrace=False)
        pytest.skip(f"no Spark standalone cluster: {e}")


def submit_env(cluster, name: str, py_files: str = "none", **executor_env: str) -> dict:
    """spark-submit.sh's environment for ``cluster``: a conf dir (conf/ plus the executors' settings and
    ``executor_env``), loopback only. ``py_files``: ``none`` (executors import the kafkalog installed in
    .venv, their kernels from numba's cache) or ``zip`` (shipped as --py-files, kernels compiled in each
    executor: ~20 s idle)."""
    extra = {f"spark.executorEnv.{k}": v for k, v in executor_env.items()}
    return dict(os.environ, SPARK_CONF_DIR=str(cluster.conf_dir(REPO / "conf", name, extra)),
                SPARK_LOCAL_IP="127.0.0.1", KAFKALOG_PY_FILES=py_files)


def submit(cluster, job: str, args: list, log: Path, env: dict) -> subprocess.Popen:
    """``./spark-submit.sh JOB --master spark://… ARGS`` in a session of its own (stdout+stderr to ``log``)."""
    with open(log, "w") as out:
        return subprocess.Popen([str(REPO / "spark-submit.sh"), job, "--master", cluster.master_url, *args],
                                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=str(REPO),
                                start_new_session=True)


def run_on_cluster(cluster, job: str, args: list, tmp_path: Path, name: str, py_files: str = "none") -> dict:
    """Submit, wait, assert exit 0, return the job's JSON report (``--report`` is added)."""
    report = tmp_path / f"{name}.json"
    log = tmp_path / f"{name}.log"
    proc = submit(cluster, job, [*args, "--report", str(report)], log, submit_env(cluster, name, py_files))
    try:
        code = proc.wait(timeout=JOB_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert code == 0, log.read_text()[-4000:]
    return json.loads(report.read_text())


def ran_on_the_cluster(cluster, *jobs: str) -> None:
    """The master ran these jobs' applications (not a local master by mistake)."""
    state = cluster.master_state()
    names = {a.get("name") for a in state.get("completedapps", []) + state.get("activeapps", [])}
    assert {f"kafkalog-{j}" for j in jobs} <= names, names


def wait_for(path: Path, proc: subprocess.Popen, log: Path, timeout: float = JOB_TIMEOUT_S) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text().strip():
        assert proc.poll() is None, log.read_text()[-4000:]
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    return path.read_text()


def test_retention_and_reindex_on_the_cluster_equal_local(cluster, spark, tmp_path):
    """Same bytes as the same jobs on local[2] (the session fixture), every file. Retention ships kafkalog
    to the executors as the --py-files zip (spark-submit.sh's default, for workers without kafkalog
    installed; its kernels are compiled in each executor), the other runs use the installed one."""
    for side in ("cluster", "local"):
        two_log_dirs(tmp_path / side / "retention")
        damaged_log_dirs(tmp_path / side / "reindex")

    def retention(side: str) -> list:
        r = tmp_path / side / "retention"
        return ["--log-dirs", f"{r / 'd1'},{r / 'd2'}", "--now-ms", str(RETENTION_NOW), "--topic-config",
                "state:cleanup.policy=compact", "--execute", "--delete-delay-ms", "0"]

    def reindex(side: str) -> list:
        r = tmp_path / side / "reindex"
        return reindex_args(r / "d1", r / "d2")

    got = run_on_cluster(cluster, "retention", retention("cluster"), tmp_path, "retention", py_files="zip")
    assert got["summary"]["segments_deleted"] == 6
    assert retention_job.main(retention("local"), spark=spark) == 0
    got = run_on_cluster(cluster, "reindex", reindex("cluster"), tmp_path, "reindex")
    assert got["summary"]["actions"].get("rebuilt", 0) > 0
    assert reindex_job.main(reindex("local"), spark=spark) == 0
    for job in ("retention", "reindex"):
        assert tree(tmp_path / "cluster" / job) == tree(tmp_path / "local" / job), job
    ran_on_the_cluster(cluster, "retention", "reindex")


@pytest.fixture(scope="module")
def compaction_reference(spark, tmp_path_factory) -> tuple:
    """(template, local): the compaction log dirs (tests/udfs/test_spark_compact.py's ``build``: two log
    dirs, four compacted partitions with transactions, tombstones, a checkpoint, and a delete-policy
    topic) and a copy compacted by the job on local[2], for the byte comparisons."""
    root = tmp_path_factory.mktemp("compaction")
    build(root / "template")
    shutil.copytree(root / "template", root / "local")
    assert compact_job.main(job_args([root / "local" / "d1", root / "local" / "d2"]), spark=spark) == 0
    return root / "template", root / "local"


def copy_of(template: Path, target: Path) -> tuple:
    shutil.copytree(template, target)
    return target, [target / "d1", target / "d2"]


def test_a_worker_killed_mid_compaction_its_task_retried_output_exact(cluster, compaction_reference, tmp_path):
    """The first task to have its .cleaned files written waits; its worker (Worker JVM, executor JVM,
    Python daemon and workers) is SIGKILLed; the task is retried on the other worker, which finds the
    lost attempt's files under the job's own lock, and the run ends exactly as on local[2]."""
    template, local = compaction_reference
    d, dirs = copy_of(template, tmp_path / "cluster")
    pause = tmp_path / "pause"
    report, log = tmp_path / "run.json", tmp_path / "run.log"
    proc = submit(cluster, "compact", job_args(dirs, "--report", str(report)), log,
                  submit_env(cluster, "worker-kill", **{PAUSE_ENV: f"{STEP_CLEANED}:{pause}"}))
    try:
        pid = int(wait_for(Path(f"{pause}.claimed"), proc, log))
        victim = cluster.worker_of(pid)
        assert victim is not None, f"the paused task's process {pid} is no worker's"
        assert list(d.rglob("*.cleaned")), "paused after its .cleaned files were written"
        cluster.kill_worker(victim)
        assert proc.wait(timeout=JOB_TIMEOUT_S) == 0, log.read_text()[-4000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        cluster.restore_workers()            # for the tests after this one
    r = json.loads(report.read_text())
    assert r["summary"]["statuses"] == {"cleaned": 3, "skipped": 2}, r["summary"]
    assert tree(d) == tree(local)
    assert not list(d.rglob("*.cleaned")) and not list(d.rglob("*.swap"))
    assert "Lost executor" in log.read_text()          # the kill was seen as one, and survived


def test_the_driver_killed_mid_compaction_then_recover_and_rerun_converge(cluster, spark, compaction_reference,
                                                                          tmp_path):
    """The job's whole process group (spark-submit.sh, its JVM, the Python driver holding the locks) is
    SIGKILLed while a task waits with its .cleaned files written; once the locks are gone nothing in the
    log dirs changes, even when the waiting task is let go (the executor's fence ends it); then
    ``kafkalog recover`` and a rerun end exactly as local[2] (the rerun on local[2]: a fourth cluster
    run would add its JVMs' start and prove nothing the other runs do not)."""
    template, local = compaction_reference
    d, dirs = copy_of(template, tmp_path / "cluster")
    pause = tmp_path / "pause"
    log = tmp_path / "killed.log"
    proc = submit(cluster, "compact", job_args(dirs), log,
                  submit_env(cluster, "driver-kill", **{PAUSE_ENV: f"{STEP_CLEANED}:{pause}"}))
    try:
        wait_for(Path(f"{pause}.claimed"), proc, log)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while any(is_locked(x) for x in dirs):            # the kernel drops a dead process's locks
        assert time.monotonic() < deadline, "the log dirs stayed locked after the driver died"
        time.sleep(0.01)
    at_unlock = tree(d)
    assert list(d.rglob("*.cleaned")), "killed while a round's .cleaned files were on disk"
    Path(f"{pause}.release").touch()                  # a task still running would now swap in: none may
    time.sleep(2.0)
    assert tree(d) == at_unlock, "a file changed after the job's driver and its locks were gone"

    done = subprocess.run([str(REPO / ".venv" / "bin" / "kafkalog"), "recover", "--log-dirs", ",".join(map(str, dirs))],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not list(d.rglob("*.cleaned")) and not list(d.rglob("*.swap"))
    report = tmp_path / "rerun.json"          # the rerun on local[2]: what converges is on disk, not in Spark
    assert compact_job.main(job_args(dirs, "--report", str(report)), spark=spark) == 0
    statuses = json.loads(report.read_text())["summary"]["statuses"]
    # the paused partition is cleaned again; another task may have finished its partition before the kill
    # (then the rerun skips it as already clean): how many depends on timing, the bytes do not
    assert statuses.get("cleaned", 0) >= 1 and sum(statuses.values()) == 5 and set(statuses) <= {"cleaned", "skipped"}, \
        statuses
    assert tree(d) == tree(local)


def test_a_split_partition_on_the_cluster_equals_local(cluster, compaction_reference, tmp_path):
    """``--split always`` (helper ``split``'s flag, issue 34): every cleaned partition's round split
    across tasks on the two workers ends byte for byte as the one-task round on local[2]. Fails until
    the split branch is merged (the compact job refuses the unknown flag: exit 2)."""
    template, local = compaction_reference
    d, dirs = copy_of(template, tmp_path / "cluster")
    r = run_on_cluster(cluster, "compact", job_args(dirs, "--split", "always"), tmp_path, "split")
    assert r["summary"]["statuses"] == {"cleaned": 3, "skipped": 2}, r["summary"]
    assert tree(d) == tree(local)
