"""A Delta-ready embedded Spark session for dbt Core.

One call, :func:`delta_session`, checks Java, fetches the Delta jars from Maven Central once into a
cache, pins the warehouse and the Derby metastore inside the project, and starts (or returns) the
process-wide SparkSession with the Delta extension, the Delta catalog, the Change Data Feed and
deletion vectors on by default, and Spark's log noise turned down.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import sys
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pyspark

DELTA_VERSION = "4.4.0"
# delta-spark 4.4.0 is built against Spark 4.2.0 with Scala 2.13 (see its POM); the PyPI package
# 4.4.1 has no jars on Maven Central, so Python and JVM sides are pinned to 4.4.0 together.
DELTA_JARS = (
    ("io.delta", "delta-spark_2.13", DELTA_VERSION),
    ("io.delta", "delta-storage", DELTA_VERSION),
)
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
MIN_JAVA = 17
LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")


class RuntimeSetupError(RuntimeError):
    """The machine cannot run the embedded runtime; the message says what to fix."""


@dataclass(frozen=True)
class RuntimePaths:
    """Where the embedded runtime keeps its files, all inside the project."""

    home: Path

    @classmethod
    def from_env(cls) -> "RuntimePaths":
        return cls(Path(os.environ.get("INCREMENTAL_JOINS_HOME", ".spark")).resolve())

    @property
    def warehouse(self) -> Path:
        return self.home / "warehouse"

    @property
    def metastore(self) -> Path:
        return self.home / "metastore_db"

    @property
    def jars(self) -> Path:
        return Path(os.environ.get("INCREMENTAL_JOINS_JARS", self.home / "jars")).resolve()


def java_major_version() -> int:
    """The major version of the `java` that Spark will launch (JAVA_HOME first, like spark-submit)."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise RuntimeSetupError(
            "No Java found: Spark needs a Java runtime (17 or 21) on PATH or in JAVA_HOME. "
            "Install one, e.g. `apt-get install openjdk-17-jre-headless`, then re-run."
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        raise RuntimeSetupError(f"Could not read the Java version from `{java} -version`: {out!r}")
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 else major


def check_java() -> None:
    major = java_major_version()
    if major < MIN_JAVA:
        raise RuntimeSetupError(
            f"Java {major} found, but Spark {pyspark.__version__} needs Java {MIN_JAVA} or newer. "
            "Point JAVA_HOME at a Java 17 or 21 installation, then re-run."
        )


def _download(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.read()
    except (urllib.error.URLError, TimeoutError) as exc:
        raise RuntimeSetupError(
            f"Could not download {url}: {exc}. The Delta Lake jars come from Maven Central; "
            "check the network, set INCREMENTAL_JOINS_MAVEN_REPO to a reachable Maven mirror, or "
            "copy the jars by hand into INCREMENTAL_JOINS_JARS."
        ) from exc


def delta_jars(jar_dir: Path, repo: str | None = None) -> list[Path]:
    """The Delta jars, fetched from Maven Central into `jar_dir` once and checked by SHA-1."""
    repo = repo or os.environ.get("INCREMENTAL_JOINS_MAVEN_REPO", MAVEN_CENTRAL)
    jar_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for group, artifact, version in DELTA_JARS:
        name = f"{artifact}-{version}.jar"
        path = jar_dir / name
        if not path.exists():
            url = f"{repo}/{group.replace('.', '/')}/{artifact}/{version}/{name}"
            content = _download(url)
            expected = _download(url + ".sha1").decode().split()[0]
            if hashlib.sha1(content).hexdigest() != expected:
                raise RuntimeSetupError(f"Checksum mismatch for {url}; delete {jar_dir} and re-run.")
            tmp = path.with_suffix(".part")
            tmp.write_bytes(content)
            tmp.replace(path)
        paths.append(path)
    return paths


def session_conf(paths: RuntimePaths) -> dict[str, str]:
    """Static settings of the embedded session; they only take effect on the first session."""
    jars = ",".join(str(p) for p in delta_jars(paths.jars))
    java_opts = f"-Dlog4j2.configurationFile=file:{LOG4J2_CONFIG} -Dderby.system.home={paths.home}"
    # More JVM options for the driver (and a local cluster's executors), e.g. JIT settings.
    java_opts = " ".join([java_opts, os.environ.get("INCREMENTAL_JOINS_JAVA_OPTS", "")]).strip()
    return {
        "spark.master": os.environ.get("INCREMENTAL_JOINS_MASTER", "local[2]"),
        "spark.app.name": "incremental_joins",
        "spark.jars": jars,
        "spark.driver.memory": os.environ.get("INCREMENTAL_JOINS_DRIVER_MEMORY", "4g"),
        "spark.driver.extraJavaOptions": java_opts,
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.warehouse.dir": str(paths.warehouse),
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={paths.metastore};create=true"
        ),
        "spark.sql.catalogImplementation": "hive",
        "spark.databricks.delta.properties.defaults.enableChangeDataFeed": "true",
        "spark.databricks.delta.properties.defaults.enableDeletionVectors": "true",
        "spark.sql.shuffle.partitions": os.environ.get("INCREMENTAL_JOINS_SHUFFLE_PARTITIONS", "4"),
        "spark.sql.ansi.enabled": "false",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Delta replays its log with 50 tasks by default; a laptop-sized table needs one or two.
        "spark.databricks.delta.snapshotPartitions": "2",
        # Delta's VACUUM lists a table's files in as many tasks as this (10,000 by default): a
        # five-row table took 118 s to vacuum here, 15 s with 8 (measured 2026-12-02).
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": "8",
        # Scalar subqueries run on one pool of threads per JVM (default 16). Models running in
        # parallel (dbt threads; every client of a Thrift server) once counted their runs with
        # several subqueries over cached views, whose building runs more subqueries: with all 16
        # threads waiting for those, Spark hung for good (README, tests section). The counts now
        # use none (`one_row`); 128, Spark's maximum, is headroom for the few single ones left.
        "spark.sql.subquery.maxThreadThreshold": "128",
        "spark.sql.session.timeZone": "UTC",
        **extra_conf(),
    }


def extra_conf() -> dict[str, str]:
    """`INCREMENTAL_JOINS_SPARK_CONF`: more settings, `key=value` separated by spaces."""
    pairs = os.environ.get("INCREMENTAL_JOINS_SPARK_CONF", "").split()
    bad = [p for p in pairs if "=" not in p]
    if bad:
        raise RuntimeSetupError(f"INCREMENTAL_JOINS_SPARK_CONF: {bad[0]!r} is not key=value; write e.g. "
                                "'spark.sql.adaptive.enabled=false spark.sql.shuffle.partitions=2'")
    return dict(p.split("=", 1) for p in pairs)


def delta_session(paths: RuntimePaths | None = None):
    """The process-wide SparkSession with Delta Lake; created on first call, reused after."""
    from pyspark.sql import SparkSession

    if _jvm_running():
        return SparkSession.builder.getOrCreate()
    check_java()
    paths = paths or RuntimePaths.from_env()
    paths.home.mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder
    for key, value in session_conf(paths).items():
        builder = builder.config(key, value)
    spark = builder.enableHiveSupport().getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    # pyspark logs every failed query with its JVM stack trace as JSON; dbt reports the error.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    return spark


def _jvm_running() -> bool:
    from pyspark import SparkContext

    # getActiveSession() is thread-local and empty in dbt's worker threads; the context is global.
    return SparkContext._active_spark_context is not None


def main() -> int:
    """`python -m incremental_joins.runtime`: check Java and cache the jars, without starting Spark."""
    try:
        check_java()
        jars = delta_jars(RuntimePaths.from_env().jars)
    except RuntimeSetupError as exc:
        print(f"incremental_joins runtime: {exc}", file=sys.stderr)
        return 1
    print(f"incremental_joins runtime: Java {java_major_version()}, Spark {pyspark.__version__}, "
          f"Delta {DELTA_VERSION} ({jars[0].parent})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
