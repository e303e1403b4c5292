"""Local Spark sessions with the Iceberg Spark runtime, for tests, demos and benchmarks.

Layer: tools (imports pyspark and the standard library; nothing imports tools). May touch the JVM, the
filesystem (a log4j2 file and Spark's scratch folders) and process environment lookups.

Usage::

    from tools.spark import local_session, hadoop_catalog

    spark = local_session("/tmp/wh")                 # catalog `hadoop` on /tmp/wh
    spark.sql("CREATE TABLE hadoop.db.t (id bigint) USING iceberg")
    name = hadoop_catalog(spark, "/tmp/other-wh")    # registers a fresh catalog name at runtime
    spark.sql(f"SELECT * FROM {name}.db.t")

Needs Java 17 (`tools/run` installs it) and the `spark` extra (pyspark 3.5.6 and
snowpark-connect-deps-iceberg 1.0.2, whose wheel carries the Iceberg 1.10.2 runtime jar).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Mapping
from importlib import util as importlib_util
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JAR_ENV = "ICEBERG_SPARK_JAR"
JAR_PACKAGE = "snowpark_connect_deps_iceberg"
JAR_NAME = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
JAR_SHA256 = "c562d482dcd16b666e808b755469fbc4b2604284b41622c9d87e2c02b7cc6c5f"

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
ICEBERG_SPARK_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
DEFAULT_CATALOG = "hadoop"
# Short local runs on few cores: the C1 compiler only and a single-threaded GC start and warm up about
# twice as fast as the default tiered C2 + G1 (measured on 2 busy cores).
QUICK_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

_LOG4J2_TEMPLATE = """\
status = error
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{HH:mm:ss}} %p %c{{1}}: %m%n%ex
logger.hadoop_native.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoop_native.level = error
logger.spark_utils.name = org.apache.spark.util.Utils
logger.spark_utils.level = error
"""

class SparkSetupError(RuntimeError):
    """Java, the runtime jar or the Spark session cannot be set up."""


def iceberg_runtime_jar() -> str:
    """Return the path of the Iceberg Spark runtime jar (Spark 3.5, Scala 2.12, Iceberg 1.10.2).

    The ``ICEBERG_SPARK_JAR`` environment variable wins (used as given, not hashed). Otherwise the jar
    comes from the installed ``snowpark_connect_deps_iceberg`` package and its sha256 is checked once
    per process.

    :raises SparkSetupError: when the package or the jar is missing, or the jar's hash is wrong.
    """
    override = os.environ.get(JAR_ENV)
    if override:
        path = Path(override)
        if not path.is_file():
            raise SparkSetupError(f"Cannot find the Iceberg Spark runtime jar: {JAR_ENV}={override}")
        return str(path.resolve())
    spec = importlib_util.find_spec(JAR_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SparkSetupError(
            f"Cannot find the Iceberg Spark runtime jar: package {JAR_PACKAGE} is not installed "
            "(pip install -e '.[spark]', or tools/run)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "jars" / JAR_NAME
    if not path.is_file():
        raise SparkSetupError(f"Cannot find the Iceberg Spark runtime jar: {path}")
    stat = path.stat()
    _check_sha256(str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    return str(path.resolve())


@functools.cache
def _check_sha256(path: str, size: int, mtime_ns: int) -> None:
    """Hash the jar once per (path, size, mtime) and compare with JAR_SHA256."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != JAR_SHA256:
        raise SparkSetupError(
            f"Cannot use the Iceberg Spark runtime jar: {path} has sha256 {digest.hexdigest()}, "
            f"expected {JAR_SHA256}"
        )


def java_home() -> str:
    """Return the JAVA_HOME Spark will use: $JAVA_HOME if it holds bin/java, else the home of `java` on PATH.

    :raises SparkSetupError: when no Java runtime can be found.
    """
    env_home = os.environ.get("JAVA_HOME")
    if env_home and Path(env_home, "bin", "java").is_file():
        return env_home
    java = shutil.which("java")
    if java is None:
        raise SparkSetupError(
            "Cannot start Spark: no Java runtime found (set JAVA_HOME or install openjdk-17-jre-headless; "
            "tools/run does this)"
        )
    return str(Path(java).resolve().parent.parent)


def local_session(
    warehouse: str | os.PathLike[str] | None = None,
    app_name: str = "icelog",
    *,
    scratch_dir: str | os.PathLike[str] | None = None,
    log_level: str = "WARN",
    driver_memory: str = "1g",
    shuffle_partitions: int = 2,
    java_options: str = QUICK_JVM_OPTIONS,
    extra_conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Start a local Spark session (``local[2]``) with the Iceberg runtime and SQL extensions.

    Usage::

        spark = local_session("/tmp/wh")
        spark.sql("SELECT * FROM hadoop.db.events").show()

    :param warehouse: when given, a Hadoop catalog named ``hadoop`` is configured on this folder.
    :param app_name: the Spark application name.
    :param scratch_dir: folder for Spark's default SQL warehouse and the log4j2 file;
        a fresh temporary folder when None.
    :param log_level: root log level of the JVM (``WARN`` or ``ERROR`` in practice).
    :param driver_memory: ``spark.driver.memory``.
    :param shuffle_partitions: ``spark.sql.shuffle.partitions`` (and ``spark.default.parallelism``).
    :param java_options: more JVM flags of the driver (after the log4j2 setting); "" for the JVM's defaults.
    :param extra_conf: more Spark settings, applied last (they win over the ones above).
    :raises SparkSetupError: when Java or the jar is missing, or a SparkContext already runs in this process.
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None:
        raise SparkSetupError(
            "Cannot start Spark: a SparkContext is already running in this process (stop it or reuse it)"
        )
    jar = iceberg_runtime_jar()
    home = java_home()
    scratch = Path(scratch_dir) if scratch_dir is not None else Path(tempfile.mkdtemp(prefix="icelog-spark-"))
    scratch.mkdir(parents=True, exist_ok=True)
    log4j2 = scratch / "log4j2.properties"
    log4j2.write_text(_LOG4J2_TEMPLATE.format(level=log_level.lower()))

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.jars", jar)
        .config("spark.sql.extensions", ICEBERG_EXTENSIONS)
        .config("spark.driver.memory", driver_memory)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j2.as_uri()} {java_options}")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", (scratch / "spark-warehouse").as_uri())
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
    )
    if warehouse is not None:
        for key, value in _hadoop_catalog_conf(DEFAULT_CATALOG, warehouse).items():
            builder = builder.config(key, value)
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)

    previous_home = os.environ.get("JAVA_HOME")
    os.environ["JAVA_HOME"] = home
    try:
        session = builder.getOrCreate()
    finally:
        if previous_home is None:
            os.environ.pop("JAVA_HOME", None)
        else:
            os.environ["JAVA_HOME"] = previous_home
    session.sparkContext.setLogLevel(log_level.upper())
    return session


def _hadoop_catalog_conf(name: str, warehouse: str | os.PathLike[str]) -> dict[str, str]:
    """The spark.sql.catalog.<name>.* settings of an Iceberg Hadoop catalog on a local folder."""
    prefix = f"spark.sql.catalog.{name}"
    return {
        prefix: ICEBERG_SPARK_CATALOG,
        f"{prefix}.type": "hadoop",
        f"{prefix}.warehouse": Path(warehouse).resolve().as_uri(),
        # icelog rewrites metadata behind Spark's back: never serve a cached table.
        f"{prefix}.cache-enabled": "false",
    }


def hadoop_catalog(spark: SparkSession, warehouse: str | os.PathLike[str], *, name: str | None = None) -> str:
    """Register an Iceberg Hadoop catalog on ``warehouse`` in a running session and return its name.

    Spark builds a catalog the first time its name is used and keeps it for the session, so each call
    registers a fresh random name (``icelog_wh_<12 hex digits>``) unless ``name`` is given; a given name
    must not have been used in this session yet. The catalog does not cache tables, so metadata written
    by icelog after a query is seen by the next query.

    :param spark: a session started by :func:`local_session` (any session with the Iceberg runtime).
    :param warehouse: the warehouse folder (created by Iceberg on first write if missing).
    :param name: the catalog name to register; a fresh one when None.
    :raises SparkSetupError: when ``name`` is already configured in this session.
    """
    if name is None:
        name = f"icelog_wh_{uuid.uuid4().hex[:12]}"
    if spark.conf.get(f"spark.sql.catalog.{name}", None) is not None:
        raise SparkSetupError(f"Cannot register Spark catalog: {name} is already configured")
    for key, value in _hadoop_catalog_conf(name, warehouse).items():
        spark.conf.set(key, value)
    return name
