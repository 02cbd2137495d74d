"""The JVM jars a kafkalog SparkSession can load: Spark's own Kafka source (``format("kafka")``) and
delta-spark (``format("delta")``), fetched once from Maven Central into a cache and handed to Spark as
``spark.jars``.

Why copied jars and not ``spark.jars.packages`` (Ivy): Ivy resolves every coordinate again at each
session start (seconds, and a network round trip per start even with a warm cache), fails the whole
session when Maven Central is out of reach, and with ``configure_spark_with_delta_pip`` asks for the pip
package's version of delta-spark, which need not exist as a jar (pip's delta-spark 4.4.1 against Maven
Central's latest ``delta-spark_4.2_2.13`` 4.4.0). Copied jars cost nothing to resolve: a session that
has them starts as fast as one that has not (measured in the commit that chose this), and a machine that
fetched them once runs offline. This is what the broker harness does for Kafka's own jars
(``kafkalog.testing.broker.fetch_jars``), with the same Maven plugin.

``spark-jars.pom.xml`` beside this file names the two artifacts; ``mvn dependency:copy-dependencies``
copies their runtime closure in Maven's repository layout, and every artifact pyspark already ships
(Spark, Hadoop, Jackson, Parquet, Scala ...) is dropped, so the session's classes stay Spark's own.

    python -m udfs.spark_jars fetch     # once, before going offline (CI does it before the tests)

Nothing here imports Spark.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Dict, List, Optional, Sequence

POM = Path(__file__).with_name("spark-jars.pom.xml")
CACHE_ENV = "KAFKALOG_SPARK_JARS_CACHE"    # where the jars go; default ~/.cache/kafkalog/spark
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
# delta-spark for Spark 4.2: the newest on Maven Central (pip's delta-spark is 4.4.1, which has no jar).
DELTA_VERSION = "4.4.0"
FETCH_TIMEOUT_S = 600.0

KAFKA, DELTA = "kafka", "delta"
PACKAGES = (KAFKA, DELTA)
# The jar that proves a package is there, by package (artifactId prefix, in the cache's layout).
MARKER_ARTIFACTS = {KAFKA: "spark-sql-kafka-0-10_2.13", DELTA: "delta-spark_"}
# Artifacts a package needs beyond its marker: every other cached jar is shared or belongs to one package.
PACKAGE_GROUPS = {KAFKA: ("org/apache/spark/spark-sql-kafka", "org/apache/spark/spark-token-provider-kafka",
                          "org/apache/kafka/", "org/apache/commons/commons-pool2"),
                  DELTA: ("io/delta/", "io/unitycatalog/")}


class SparkJarsUnavailable(RuntimeError):
    """The jars cannot be had here: no Maven, or Maven Central out of reach (an offline machine)."""


def spark_version() -> str:
    """The installed pyspark's version, read from its metadata (no Spark import)."""
    return metadata.version("pyspark")


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "kafkalog" / "spark")


def jars_dir(spark: Optional[str] = None, delta: str = DELTA_VERSION) -> Path:
    return cache_dir() / f"spark-{spark or spark_version()}-delta-{delta}"


def _pyspark_jars() -> List[str]:
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return []
    folder = Path(list(spec.submodule_search_locations)[0]) / "jars"
    return sorted(p.name for p in folder.glob("*.jar"))


def _shipped_by_pyspark(artifact_id: str, shipped: Sequence[str]) -> bool:
    pattern = re.compile(re.escape(artifact_id) + r"-\d[^/]*\.jar")
    return any(pattern.fullmatch(name) for name in shipped)


def fetch(*, quiet: bool = True) -> Path:
    """Copy the Kafka source's and delta-spark's jars (without what pyspark ships) into the cache once;
    return the folder. Idempotent. Raises ``SparkJarsUnavailable`` with Maven's last lines."""
    target = jars_dir()
    done = target / ".complete"
    if done.is_file():
        return target
    if shutil.which("mvn") is None:
        raise SparkJarsUnavailable("mvn is not on the PATH (apt-get install maven)")
    version = spark_version()
    binary = ".".join(version.split(".")[:2])
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    pom = staging / "pom.xml"
    pom.write_text(POM.read_text().replace("${spark.version}", version).replace("${spark.binary}", binary)
                   .replace("${delta.version}", DELTA_VERSION))
    repo = staging / "repo"
    cmd = ["mvn", "-B", "-f", str(pom), f"{DEPENDENCY_PLUGIN}:copy-dependencies", "-DincludeScope=runtime",
           "-Dmdep.useRepositoryLayout=true", f"-DoutputDirectory={repo}"]
    if quiet:
        cmd.insert(2, "-q")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise SparkJarsUnavailable(f"Maven did not finish fetching the Spark jars in {FETCH_TIMEOUT_S:.0f} s") from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
        raise SparkJarsUnavailable(f"Maven could not fetch Spark's Kafka source and delta-spark (exit "
                                   f"{proc.returncode}); is Maven Central reachable?\n{tail}")
    shipped = _pyspark_jars()
    for jar in sorted(repo.rglob("*.jar")):
        artifact_id = jar.parent.parent.name          # <group path>/<artifactId>/<version>/<file>
        if _shipped_by_pyspark(artifact_id, shipped):
            jar.unlink()
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    (target / ".complete").write_text(f"spark {version} delta {DELTA_VERSION}\n")
    return target


def cached_jars(packages: Sequence[str]) -> Dict[str, List[str]]:
    """The cached jar paths for each of ``packages`` (``kafka``, ``delta``); a package whose jars are
    not in the cache is absent from the answer. Never fetches."""
    unknown = sorted(set(packages) - set(PACKAGES))
    if unknown:
        raise ValueError(f"unknown Spark package(s) {unknown}; known: {list(PACKAGES)}")
    target = jars_dir()
    if not (target / ".complete").is_file():
        return {}
    jars = sorted((target / "repo").rglob("*.jar"))
    found: Dict[str, List[str]] = {}
    for package in packages:
        own = [j for j in jars if any(g in j.as_posix() for g in PACKAGE_GROUPS[package])]
        if not any(j.name.startswith(MARKER_ARTIFACTS[package]) for j in own):
            continue
        others = set()
        for other in PACKAGES:
            if other != package:
                others.update(j for j in jars if any(g in j.as_posix() for g in PACKAGE_GROUPS[other]))
        # a package's own jars plus the shared rest (e.g. delta's antlr, kafka's jsr305 were dropped or are common)
        found[package] = [str(j) for j in jars if j not in others]
    return found


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args != ["fetch"]:
        print("usage: python -m udfs.spark_jars fetch", file=sys.stderr)
        return 2
    try:
        folder = fetch(quiet=True)
    except SparkJarsUnavailable as e:
        print(f"udfs.spark_jars: {e}", file=sys.stderr)
        return 1
    count = len(list((folder / "repo").rglob("*.jar")))
    print(f"Spark's Kafka source and delta-spark: {count} jars in {folder}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
