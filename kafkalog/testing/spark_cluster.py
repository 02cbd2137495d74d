"""A real Spark standalone cluster for tests: one master and workers as separate JVMs, run from the jars
the installed pyspark ships (``org.apache.spark.deploy.master.Master``, ``...deploy.worker.Worker``),
exactly as Spark's ``sbin/start-master.sh`` / ``start-worker.sh`` would start them, on free loopback
ports, each with its own log file and work dir under ``root``.

    from kafkalog.testing.spark_cluster import SparkStandaloneCluster

    with SparkStandaloneCluster(tmp_path / "cluster", workers=2).started() as cluster:
        cluster.master_url        # "spark://127.0.0.1:PORT", for ./spark-submit.sh --master
        cluster.kill_worker(0)    # SIGKILL worker 0 and everything it started (its executors, their Python)
        cluster.start_worker(0)   # and back

Each worker offers 1 core and ``worker_memory`` (executors get ``EXECUTOR_MEMORY``); the JVMs run with
the client compiler and the serial collector (``JVM_OPTIONS``: they live seconds). Everything binds to
127.0.0.1 (``SPARK_LOCAL_IP``): no network beyond loopback. ``stop()`` (the context's end) SIGKILLs
every process group the cluster started and waits for them. ``conf_dir(...)`` writes a Spark conf dir
(``conf/`` plus the executors' settings) for jobs submitted to it. No pyspark import: the jars are found
from the package's location, so this module stays below the Spark layer.
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Optional

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# Test JVMs live seconds: the client compiler alone and the serial collector start them faster (see
# tests/conftest.py, SPARK_SUBMIT_OPTS) and leave the two cores to the work.
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
DAEMON_HEAP = "-Xmx256m"             # the master's and a worker's own heap (sbin's default is 1g)
EXECUTOR_MEMORY = "512m"
START_TIMEOUT_S = 120.0


class SparkClusterUnavailable(RuntimeError):
    """Java or pyspark's jars are missing: the cluster cannot start here."""


def spark_home() -> Path:
    """The installed pyspark's folder: ``jars/`` holds Spark's jars; a worker's executors are launched
    from it (``SPARK_HOME``)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise SparkClusterUnavailable("pyspark is not installed (pip install kafkalog[spark])")
    home = Path(spec.origin).parent
    if not (home / "jars").is_dir():
        raise SparkClusterUnavailable(f"{home}/jars not found: this pyspark ships no jars")
    return home


def scala_version() -> str:
    """The Scala version of pyspark's jars ("2.13"), from ``spark-core_<version>-*.jar``."""
    for jar in (spark_home() / "jars").glob("spark-core_*.jar"):
        return jar.name.split("_", 1)[1].split("-", 1)[0]
    raise SparkClusterUnavailable(f"no spark-core jar in {spark_home() / 'jars'}")


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        raise SparkClusterUnavailable("no java found (JAVA_HOME or PATH): Spark's master and workers are JVMs")
    return java


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid: int) -> List[int]:
    """``pid`` and every live process below it (by parent pid, from /proc), parents first."""
    children: Dict[int, List[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo.extend(children.get(p, []))
    return out


class SparkStandaloneCluster:
    """A master and ``workers`` workers under ``root`` (logs: ``root/master.log``, ``root/worker-N.log``;
    work dirs: ``root/work-N``).

    :param root: a folder for the logs, work dirs and conf dirs (created).
    :param workers: how many workers (each 1 core).
    :param worker_memory: the memory each worker offers its executors.
    """

    def __init__(self, root, *, workers: int = 2, worker_memory: str = "768m"):
        self.root = Path(root)
        self.workers = workers
        self.worker_memory = worker_memory
        self.host = "127.0.0.1"
        self.master_port = 0
        self.master_ui_port = 0
        self._master: Optional[subprocess.Popen] = None
        self._workers: Dict[int, subprocess.Popen] = {}
        self._ports: Dict[int, int] = {}

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.master_port}"

    # --- processes ------------------------------------------------------------------------------

    def _env(self) -> Dict[str, str]:
        # SPARK_SCALA_VERSION: the launcher that builds an executor's command asks for it, and pip's pyspark
        # has neither the RELEASE file nor the build folders it is otherwise read from
        env = dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_SCALA_VERSION=scala_version(),
                   SPARK_LOCAL_IP=self.host,
                   SPARK_LOCAL_HOSTNAME=self.host, SPARK_LOG_DIR=str(self.root))
        env.pop("PYSPARK_SUBMIT_ARGS", None)
        env.pop("PYSPARK_GATEWAY_PORT", None)
        return env

    def _spawn(self, main_class: str, args: List[str], log: Path) -> subprocess.Popen:
        cmd = [_java(), *JVM_OPTIONS, DAEMON_HEAP, "-cp", str(spark_home() / "jars" / "*"), main_class, *args]
        with open(log, "ab") as out:
            return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=self._env(), cwd=str(self.root), start_new_session=True)

    def start(self) -> "SparkStandaloneCluster":
        self.root.mkdir(parents=True, exist_ok=True)
        self.master_port, self.master_ui_port = free_port(), free_port()
        self._master = self._spawn(MASTER_CLASS, ["--host", self.host, "--port", str(self.master_port),
                                                  "--webui-port", str(self.master_ui_port)],
                                   self.root / "master.log")
        for i in range(self.workers):
            self.start_worker(i, wait=False)
        self.wait_for_workers()
        return self

    def start_worker(self, i: int, *, wait: bool = True) -> None:
        """Start worker ``i`` (again, after ``kill_worker``); wait until the master lists it alive."""
        work = self.root / f"work-{i}"
        work.mkdir(exist_ok=True)
        self._ports[i] = port = free_port()
        self._workers[i] = self._spawn(WORKER_CLASS, [
            "--host", self.host, "--port", str(port), "--webui-port", str(free_port()),
            "--cores", "1", "--memory", self.worker_memory, "--work-dir", str(work), self.master_url],
            self.root / f"worker-{i}.log")
        if wait:
            self.wait_for_workers()

    def restore_workers(self) -> None:
        """Start again every worker ``kill_worker`` ended, and wait for them."""
        for i in range(self.workers):
            if i not in self._workers:
                self.start_worker(i)

    def master_state(self) -> dict:
        """The master's JSON (``/json`` of its web UI): workers, applications."""
        with urllib.request.urlopen(f"http://{self.host}:{self.master_ui_port}/json", timeout=5) as r:
            return json.loads(r.read())

    def alive_workers(self) -> List[dict]:
        try:
            return [w for w in self.master_state().get("workers", []) if w.get("state") == "ALIVE"]
        except OSError:
            return []

    def wait_for_workers(self, timeout: float = START_TIMEOUT_S) -> None:
        """Wait until the master lists every running worker (by its port) as ALIVE."""
        deadline = time.monotonic() + timeout
        while True:
            alive = {w.get("port") for w in self.alive_workers()}
            if all(self._ports[i] in alive for i in self._workers):
                return
            for name, p in [("master", self._master), *((f"worker-{i}", w) for i, w in self._workers.items())]:
                if p is not None and p.poll() is not None:        # kill_worker forgets the workers it ends
                    raise SparkClusterUnavailable(f"the Spark {name} exited ({p.returncode}): "
                                                  f"{self.log_tail(name)}")
            if time.monotonic() > deadline:
                raise SparkClusterUnavailable(f"workers not registered after {timeout:.0f} s: "
                                              f"{self.log_tail('master')}")
            time.sleep(0.2)

    def worker_pid(self, i: int) -> int:
        return self._workers[i].pid

    def worker_of(self, pid: int) -> Optional[int]:
        """The worker whose process tree holds ``pid`` (an executor's Python worker, say), or None."""
        for i, p in self._workers.items():
            if pid in descendants(p.pid):
                return i
        return None

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker ``i`` and every process below it (its executors' JVMs, their Python daemon and
        workers, which pyspark puts in a process group of their own): a machine lost mid-task."""
        p = self._workers.pop(i)
        tree = descendants(p.pid)
        for pid in tree:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        p.wait(timeout=30)

    def stop(self) -> None:
        """SIGKILL every process group this cluster started (and their descendants), then wait."""
        procs = list(self._workers.values()) + ([self._master] if self._master else [])
        for p in procs:
            for pid in descendants(p.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=30)
        self._workers.clear()
        self._master = None

    @contextlib.contextmanager
    def started(self) -> Iterator["SparkStandaloneCluster"]:
        try:
            yield self.start()
        finally:
            self.stop()

    # --- what a job submitted to it needs --------------------------------------------------------

    def conf_dir(self, base: Path, name: str = "conf", extra: Optional[Mapping[str, str]] = None) -> Path:
        """A Spark conf dir for jobs submitted here: ``base``'s files (the project's ``conf/``) plus the
        executors' memory and lean JVM options, and ``extra`` settings (``spark.executorEnv.X`` ...)."""
        target = self.root / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(base, target)
        settings = {"spark.executor.memory": EXECUTOR_MEMORY, "spark.executor.cores": "1",
                    "spark.executor.extraJavaOptions": " ".join(JVM_OPTIONS),
                    "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                    "spark.driver.host": self.host, "spark.driver.bindAddress": self.host,
                    **(extra or {})}
        with open(target / "spark-defaults.conf", "a") as f:
            f.write("\n# a test's standalone cluster (kafkalog.testing.spark_cluster)\n")
            for k, v in settings.items():
                f.write(f"{k} {v}\n")
        return target

    def log_tail(self, name: str, chars: int = 3000) -> str:
        path = self.root / f"{name}.log"
        try:
            return path.read_text(errors="replace")[-chars:]
        except OSError:
            return f"(no {path})"
