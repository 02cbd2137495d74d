"""A real Apache Kafka broker for tests and benchmarks: one KRaft node (broker and controller in one
JVM) run from Kafka's own jars, which Maven fetches from Maven Central once into a cache.

No tarball, no Docker: ``kafka-broker.pom.xml`` beside this file pins ``kafka_2.13`` and ``kafka-tools``
(``KAFKA_VERSION``) with one SLF4J binding, and ``mvn dependency:copy-dependencies`` copies the runtime
classpath into ``cache_dir()/kafka-<version>/lib``. The broker is started exactly as Kafka's
``bin/kafka-server-start.sh`` does (``kafka.Kafka server.properties``) after ``kafka.tools.StorageTool
format``, on free loopback ports, with its own ``server.log`` and ``log-cleaner.log`` kept for the test.

    from kafkalog.testing.broker import KafkaBroker

    with KafkaBroker(tmp_path / "broker").started() as broker:
        broker.bootstrap          # "127.0.0.1:PORT", for kafka-python or Spark's Kafka source
        broker.data_dir           # the log dir (log.dirs), read by kafkalog after broker.stop()
    broker.server_log()           # what the broker said

``stop()`` sends SIGTERM (a controlled shutdown: ``.kafka_cleanshutdown`` is written) or, with
``clean=False``, SIGKILL (the next start recovers every unflushed segment). The settings that make the
cleaner and the retention task run promptly and one at a time (``log.cleaner.backoff.ms``,
``log.retention.check.interval.ms``, ``log.initial.task.delay.ms`` …) are in ``SERVER_DEFAULTS``.

Where Java or Maven is missing, or Maven Central cannot be reached, ``BrokerUnavailable`` says which
and what to do; tests turn it into a skip, or a failure where ``KAFKALOG_BROKER_REQUIRED=1`` (CI).
"""
from __future__ import annotations

import base64
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Optional, Sequence

KAFKA_VERSION = "4.4.0"
SCALA_VERSION = "2.13"
POM = Path(__file__).with_name("kafka-broker.pom.xml")
LOG4J2 = Path(__file__).with_name("kafka-log4j2.properties")
TOOLS_LOG4J2 = Path(__file__).with_name("kafka-tools-log4j2.properties")
# A Kafka tool is a JVM that lives a second or two: the client compiler alone and the serial collector
# start it faster than the broker's G1 (measured on the Spark test JVMs: about half the JVM's CPU).
TOOL_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
# Extra JVM options for the broker (space-separated); a GC named here replaces the broker's G1. The test suite
# sets the tools' pair (tests/conftest.py): a test broker lives seconds and starts faster so. Benchmarks leave
# it unset, so the broker's cleaner they measure runs as a broker does.
BROKER_JVM_OPTIONS_ENV = "KAFKALOG_BROKER_JVM_OPTIONS"
CACHE_ENV = "KAFKALOG_BROKER_CACHE"        # where the jars go; default ~/.cache/kafkalog/broker
REQUIRED_ENV = "KAFKALOG_BROKER_REQUIRED"  # "1": a broker that cannot run is a failure, not a skip
# Maven's own plugin version: Maven 3.8's default dependency plugin predates the options used here.
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

# Main classes (Kafka 4.4): StorageTool and the broker stay in core; DumpLogSegments moved to the tools
# module in 4.3 (it was kafka.tools.DumpLogSegments before).
STORAGE_TOOL = "kafka.tools.StorageTool"
KAFKA_MAIN = "kafka.Kafka"
DUMP_LOG_SEGMENTS = "org.apache.kafka.tools.DumpLogSegments"
GET_OFFSET_SHELL = "org.apache.kafka.tools.GetOffsetShell"
CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"

READY_LINE = "Kafka Server started"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 60.0
TOOL_TIMEOUT_S = 300.0

# One node, replication factor 1 everywhere, and the background tasks on short, fixed periods so a test
# can wait for the cleaner or the retention task instead of sleeping for Kafka's defaults (15 s, 5 min).
SERVER_DEFAULTS: Dict[str, str] = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "log.initial.task.delay.ms": "0",
    "log.retention.check.interval.ms": "500",
    "log.cleaner.backoff.ms": "200",
    "log.cleaner.threads": "1",
    "log.segment.delete.delay.ms": "0",
    "log.flush.offset.checkpoint.interval.ms": "1000",
    "log.flush.start.offset.checkpoint.interval.ms": "1000",
}


class BrokerUnavailable(RuntimeError):
    """The broker cannot run here: no Java, no Maven, Maven Central out of reach, or it did not start."""


# --- the jars -----------------------------------------------------------------------------------------

def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "kafkalog" / "broker")


def classpath_dir(version: str = KAFKA_VERSION) -> Path:
    return cache_dir() / f"kafka-{version}" / "lib"


def fetch_jars(version: str = KAFKA_VERSION, *, quiet: bool = True) -> Path:
    """Copy Kafka ``version``'s runtime jars into the cache once; return the folder. Idempotent.

    Raises ``BrokerUnavailable`` with Maven's last lines when Java, Maven or the registry is missing."""
    lib = classpath_dir(version)
    done = lib / ".complete"
    if done.is_file():
        return lib
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            raise BrokerUnavailable(f"{tool} is not on the PATH: the real-broker tests need a JDK 17+ and Maven "
                                    "(apt-get install openjdk-17-jdk-headless maven)")
    staging = lib.with_name(lib.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    pom = staging.parent / "pom.xml"
    pom.write_text(POM.read_text().replace("${kafka.version}", version))
    cmd = ["mvn", "-B", "-f", str(pom), f"{DEPENDENCY_PLUGIN}:copy-dependencies", "-DincludeScope=runtime",
           f"-DoutputDirectory={staging}"]
    if quiet:
        cmd.insert(2, "-q")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    if proc.returncode != 0 or not any(staging.glob(f"kafka_{SCALA_VERSION}-{version}.jar")):
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise BrokerUnavailable(f"Maven could not fetch Apache Kafka {version}'s jars (exit {proc.returncode}); "
                                f"is Maven Central reachable?\n{tail}")
    shutil.rmtree(lib, ignore_errors=True)
    staging.rename(lib)
    done.write_text(version + "\n")
    return lib


def random_cluster_id() -> str:
    """A cluster id as ``StorageTool random-uuid`` prints it (Kafka's ``Uuid.randomUuid().toString()``: a
    random UUID's 16 bytes in URL-safe base64 without padding, never starting with '-'), made here: the tool
    is a JVM start of its own before every broker's format."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def java_command(main_class: str, args: Sequence[str], *, lib: Path, log4j2: Path, logs_dir: Optional[Path] = None,
                 heap: str = "512m", jvm_options: Sequence[str] = ()) -> List[str]:
    """The java command line that runs one of Kafka's main classes as its ``bin/`` scripts would."""
    tool = log4j2 == TOOLS_LOG4J2
    own_gc = any(o.startswith("-XX:+Use") and o.endswith("GC") for o in jvm_options)
    defaults = TOOL_JVM_OPTIONS if tool else () if own_gc else ("-XX:+UseG1GC",)
    cmd = ["java", f"-Xmx{heap}", *defaults, "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={log4j2}"]
    if logs_dir is not None:
        cmd.append(f"-Dkafka.logs.dir={logs_dir}")
    cmd += list(jvm_options)
    cmd += ["-cp", f"{lib}/*", main_class, *args]
    return cmd


def run_tool(main_class: str, *args: str, version: str = KAFKA_VERSION, heap: str = "512m",
             timeout: float = TOOL_TIMEOUT_S, check: bool = True, stdout=None) -> subprocess.CompletedProcess:
    """Run one of Kafka's command-line tools (``DUMP_LOG_SEGMENTS``, ``GET_OFFSET_SHELL`` …) and return
    the finished process with its text output. ``check``: raise with the tool's output on a non-zero exit."""
    lib = fetch_jars(version)
    cmd = java_command(main_class, args, lib=lib, log4j2=TOOLS_LOG4J2, heap=heap)
    proc = subprocess.run(cmd, stdout=stdout if stdout is not None else subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{main_class.rsplit('.', 1)[-1]} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return proc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the broker ------------------------------------------------------------------------------------------

@dataclass
class KafkaBroker:
    """One KRaft node in ``workdir``: ``data/`` (log.dirs), ``meta/`` (the metadata log, unless
    ``metadata_in_data``), ``logs/`` (server.log, log-cleaner.log, stdout.log), ``server.properties``.

    Parameters:
        workdir: a folder of its own (created).
        overrides: server.properties keys over ``SERVER_DEFAULTS`` (``log.cleaner.dedupe.buffer.size`` …).
        metadata_in_data: keep ``__cluster_metadata-0`` inside the data log dir, as a broker whose
            ``metadata.log.dir`` is unset does.
        heap: the JVM's -Xmx (the cleaner's dedupe buffer sits on it).
        version: the Kafka release whose jars run.
    """
    workdir: Path
    overrides: Mapping[str, object] = field(default_factory=dict)
    metadata_in_data: bool = False
    heap: str = "768m"
    version: str = KAFKA_VERSION
    broker_port: int = 0
    controller_port: int = 0
    cluster_id: str = ""
    process: Optional[subprocess.Popen] = None

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir)

    # paths
    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def meta_dir(self) -> Path:
        return self.data_dir if self.metadata_in_data else self.workdir / "meta"

    @property
    def logs_dir(self) -> Path:
        return self.workdir / "logs"

    @property
    def properties_file(self) -> Path:
        return self.workdir / "server.properties"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def partition_dir(self, topic: str, partition: int = 0) -> Path:
        return self.data_dir / f"{topic}-{partition}"

    # logs
    def server_log(self) -> str:
        return _read(self.logs_dir / "server.log")

    def cleaner_log(self) -> str:
        return _read(self.logs_dir / "log-cleaner.log")

    def log_tail(self, lines: int = 40) -> str:
        text = self.server_log() or _read(self.logs_dir / "stdout.log")
        return "\n".join(text.splitlines()[-lines:])

    # life cycle
    def server_properties(self) -> Dict[str, str]:
        props = dict(SERVER_DEFAULTS)
        props.update({
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.broker_port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.broker_port}",
            "log.dirs": str(self.data_dir),
        })
        if not self.metadata_in_data:
            props["metadata.log.dir"] = str(self.meta_dir)
        props.update({k: str(v) for k, v in self.overrides.items()})
        return props

    def format(self) -> None:
        """Write server.properties on new free ports and format the storage (``StorageTool format``).
        A second call keeps the cluster id and the storage (the ports are chosen anew only once)."""
        lib = fetch_jars(self.version)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        if not self.broker_port:
            self.broker_port, self.controller_port = free_port(), free_port()
        self.properties_file.write_text("".join(f"{k}={v}\n" for k, v in self.server_properties().items()))
        if (self.data_dir / "meta.properties").is_file():
            return
        if not self.cluster_id:
            self.cluster_id = random_cluster_id()
        proc = subprocess.run(java_command(STORAGE_TOOL, ["format", "-t", self.cluster_id, "-c",
                                                          str(self.properties_file)], lib=lib, log4j2=TOOLS_LOG4J2),
                              capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
        if proc.returncode != 0:
            raise BrokerUnavailable(f"StorageTool format failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}"
                                    f"{proc.stderr[-2000:]}")

    def start(self, timeout: float = START_TIMEOUT_S) -> "KafkaBroker":
        """Format if needed, start the JVM in its own process group, and wait for ``Kafka Server started``
        in a server.log written after this start. Raises ``BrokerUnavailable`` with the log's tail."""
        if self.running:
            return self
        self.format()
        lib = classpath_dir(self.version)
        server_log = self.logs_dir / "server.log"
        seen = server_log.stat().st_size if server_log.exists() else 0
        out = open(self.logs_dir / "stdout.log", "ab")
        try:
            self.process = subprocess.Popen(
                java_command(KAFKA_MAIN, [str(self.properties_file)], lib=lib, log4j2=LOG4J2,
                             logs_dir=self.logs_dir, heap=self.heap,
                             jvm_options=os.environ.get(BROKER_JVM_OPTIONS_ENV, "").split()),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrokerUnavailable(f"the broker exited with {self.process.returncode} while starting:\n"
                                        f"{self.log_tail()}")
            if READY_LINE in _read(server_log, seen):
                return self
            time.sleep(0.1)
        self.kill()
        raise BrokerUnavailable(f"the broker did not start in {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self, *, clean: bool = True, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM and wait for the controlled shutdown (``clean``), or SIGKILL (an unclean stop: no
        ``.kafka_cleanshutdown``, so the next start recovers the unflushed segments)."""
        if not self.running:
            self.process = None
            return
        if not clean:
            self.kill()
            return
        assert self.process is not None
        _signal_group(self.process, signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise BrokerUnavailable(f"the broker did not stop within {timeout:.0f} s of SIGTERM:\n{self.log_tail()}")
        self.process = None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            _signal_group(self.process, signal.SIGKILL)
            self.process.wait(30)
        self.process = None

    def restart(self, *, clean: bool = True) -> "KafkaBroker":
        self.stop(clean=clean)
        return self.start()

    @contextlib.contextmanager
    def started(self) -> Iterator["KafkaBroker"]:
        """Start; yield; stop cleanly (or kill, if the test left it unable to stop)."""
        self.start()
        try:
            yield self
        finally:
            try:
                self.stop()
            except BrokerUnavailable:
                self.kill()

    # files the broker keeps per log dir
    def checkpoint(self, name: str) -> Dict[tuple, int]:
        """One of the data dir's offset checkpoints (``cleaner-offset-checkpoint``,
        ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
        ``replication-offset-checkpoint``) as {(topic, partition): offset}; {} where absent."""
        return _read_checkpoint(self.data_dir / name)

    def wait_until(self, predicate, *, timeout: float = 60.0, what: str = "the condition", interval: float = 0.2):
        """Poll ``predicate()`` until truthy (returned) or ``timeout`` (AssertionError with the log's tail)."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; server.log:\n"
                                     f"{self.log_tail()}")
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"the broker died waiting for {what}:\n{self.log_tail()}")
            time.sleep(interval)


# --- adopting a partition folder written offline -------------------------------------------------------

# The four per-log-dir offset checkpoints LogManager, ReplicaManager and LogCleanerManager keep.
OFFSET_CHECKPOINT_FILES = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                           "replication-offset-checkpoint", "cleaner-offset-checkpoint")
PARTITION_METADATA = "partition.metadata"
# Offline state the adoption carries over from our log dir: only the log start offset is ours to say
# (a DeleteRecords or retention run moved it above the first segment); the broker derives the rest.
CARRIED_CHECKPOINTS = ("log-start-offset-checkpoint",)


def adopt(broker: "KafkaBroker", topic: str, partition: int, our_partition_dir, *, clean: bool = True,
          start: bool = True) -> str:
    """Make ``broker`` load our partition folder as its replica of ``topic``-``partition`` (which must
    already exist: create it through the broker first, so the metadata image knows its topic id).

    The recipe: stop the broker (SIGTERM when ``clean``, SIGKILL otherwise);
    in its folder keep ``partition.metadata`` and remove every other file; copy ours in (mtimes kept;
    never our ``partition.metadata``); drop the partition's line from the four offset checkpoints of
    the data dir, putting back only our ``log-start-offset-checkpoint`` entry if our log dir has one.
    ``clean``: the ``.kafka_cleanshutdown`` marker stays, so the broker trusts our indexes and producer
    snapshots. Not ``clean``: no marker, no recovery point, and neither our producer snapshots nor our
    ``leader-epoch-checkpoint`` are copied, so the broker recovers every segment (CRCs, indexes, epochs
    and producer state rebuilt from the batches).

    Parameters:
        broker: the broker (running or stopped).
        topic, partition: the broker's partition to replace.
        our_partition_dir: a ``<topic>-<partition>`` folder we wrote; its parent is our log dir, whose
            log-start-offset-checkpoint is read for our folder's own topic-partition.
        clean: adopt after a clean shutdown (True) or as after a crash (False).
        start: start the broker afterwards (False: the caller adopts more partitions, then starts it).

    Returns what the broker wrote to server.log during this start ("" when not started)."""
    ours = Path(our_partition_dir)
    if not ours.is_dir():
        raise FileNotFoundError(f"{ours}: not a partition folder")
    target = broker.partition_dir(topic, partition)
    if broker.running:
        broker.stop(clean=clean)
    if not (target / PARTITION_METADATA).is_file():
        raise RuntimeError(f"{target} has no {PARTITION_METADATA}: create {topic} through the broker first, "
                           "or the broker renames the folder -stray")
    for path in target.iterdir():
        if path.name != PARTITION_METADATA:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    skipped = () if clean else (".snapshot", "leader-epoch-checkpoint")
    for path in sorted(ours.iterdir()):
        if path.is_file() and path.name != PARTITION_METADATA and not path.name.endswith(skipped):
            shutil.copy2(path, target / path.name)
    our_topic, _, our_partition = ours.name.rpartition("-")
    for name in OFFSET_CHECKPOINT_FILES:
        entries = _read_checkpoint(broker.data_dir / name)
        entries.pop((topic, partition), None)
        if name in CARRIED_CHECKPOINTS:
            mine = _read_checkpoint(ours.parent / name).get((our_topic, int(our_partition)))
            if mine is not None:
                entries[(topic, partition)] = mine
        _write_checkpoint(broker.data_dir / name, entries)
    if not clean:
        (broker.data_dir / CLEAN_SHUTDOWN_MARKER).unlink(missing_ok=True)
    if not start:
        return ""
    server_log = broker.logs_dir / "server.log"
    seen = server_log.stat().st_size if server_log.exists() else 0
    broker.start()
    return _read(server_log, seen)


def stray_folders(broker: "KafkaBroker") -> List[str]:
    """The partition folders the broker renamed ``…-stray`` (a replica its metadata does not know)."""
    return sorted(p.name for p in broker.data_dir.iterdir() if p.is_dir() and p.name.endswith("-stray"))


def _read_checkpoint(path: Path) -> Dict[tuple, int]:
    out: Dict[tuple, int] = {}
    for line in _read(path).splitlines()[2:]:
        parts = line.split()
        if len(parts) == 3:
            out[(parts[0], int(parts[1]))] = int(parts[2])
    return out


def _write_checkpoint(path: Path, entries: Mapping[tuple, int]) -> None:
    """An offset checkpoint as Kafka's CheckpointFile writes it (version 0, count, one line each)."""
    lines = ["0", str(len(entries))] + [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


# --- what the cleaner says ----------------------------------------------------------------------------------

CLEANED_RE = re.compile(r"cleaned log (?P<tp>\S+) \(dirty section = \[(?P<start>\d+), (?P<end>\d+)\]\)")
STATS_RE = re.compile(
    r"(?P<processed>[\d.]+) MB of log processed in (?P<seconds>[\d.]+) seconds \((?P<mbps>[\d.]+) MB/sec\)\.\s*"
    r".*?Start size: (?P<start_mb>[\d.]+) MB \((?P<start_messages>[\d,]+) messages\)\s*"
    r".*?End size: (?P<end_mb>[\d.]+) MB \((?P<end_messages>[\d,]+) messages\)", re.S)


@dataclass(frozen=True)
class CleanerStats:
    """One ``LogCleaner.recordStats`` report (Kafka's MB are MiB). ``seconds`` covers the whole round."""
    processed_mb: float
    seconds: float
    mb_per_sec: float
    start_mb: float
    start_messages: int
    end_mb: float
    end_messages: int


def cleaner_rounds(cleaner_log: str) -> List[tuple]:
    """Every ``cleaned log T-P (dirty section = [a, b])`` line, as (topic-partition, a, b), oldest first."""
    return [(m["tp"], int(m["start"]), int(m["end"])) for m in CLEANED_RE.finditer(cleaner_log)]


def _count(text: str) -> int:
    """A count as ``recordStats`` prints it: Java's ``%,d`` (``749,950``)."""
    return int(text.replace(",", ""))


def cleaner_stats(cleaner_log: str) -> List[CleanerStats]:
    """Every statistics block of the cleaner's log, oldest first."""
    return [CleanerStats(float(m["processed"]), float(m["seconds"]), float(m["mbps"]), float(m["start_mb"]),
                         _count(m["start_messages"]), float(m["end_mb"]), _count(m["end_messages"]))
            for m in STATS_RE.finditer(cleaner_log)]


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


def _read(path: Path, offset: int = 0) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m kafkalog.testing.broker fetch``: fetch the jars into the cache (what .ci/run does)."""
    import argparse
    parser = argparse.ArgumentParser(prog="python -m kafkalog.testing.broker",
                                     description="Fetch Apache Kafka's jars for the real-broker tests.")
    parser.add_argument("command", choices=["fetch", "where"])
    parser.add_argument("--version", default=KAFKA_VERSION)
    ns = parser.parse_args(argv)
    if ns.command == "where":
        print(classpath_dir(ns.version))
        return 0
    try:
        lib = fetch_jars(ns.version)
    except (BrokerUnavailable, subprocess.TimeoutExpired) as e:
        print(f"broker: {e}")
        return 1
    print(f"broker: Apache Kafka {ns.version}'s jars are in {lib} ({len(list(lib.glob('*.jar')))} jars)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
