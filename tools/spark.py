"""Spark on icelog: local sessions with the Iceberg Spark runtime (Hadoop catalogs, or icelog's REST catalog
server), and DataFrame writes into icelog tables from Spark's executors.

Layer: tools (imports pyspark, the standard library and icelog's engine; nothing imports tools). May touch the
JVM, the filesystem (a log4j2 file, Spark's scratch folders, data files of the tables written), process
environment lookups, a subprocess (the REST server a session starts) and HTTP on the server's port.

Usage::

    from tools.spark import local_session, hadoop_catalog

    spark = local_session("/tmp/wh")                 # catalog `hadoop` on /tmp/wh
    spark.sql("CREATE TABLE hadoop.db.t (id bigint) USING iceberg")
    name = hadoop_catalog(spark, "/tmp/other-wh")    # registers a fresh catalog name at runtime
    spark.sql(f"SELECT * FROM {name}.db.t")

    spark = session("/tmp/wh")                       # catalog `icelog` (type=rest) served by icelog's REST
    spark.table("icelog.db.events")                  # server, started for the session when none answers
    write(df, cat.load_table("db.events"))           # a DataFrame into an icelog table: one snapshot

The Python workers of Spark run :func:`write_task` and so import ``tools.spark`` and ``engine``: sessions made
here put the folder holding them on the workers' PYTHONPATH, and :func:`write` ships them as a zip
(``addPyFile``) to the workers of any other session.

Needs Java 17 (`tools/run` installs it) and the `spark` extra (pyspark 3.5.6 and
snowpark-connect-deps-iceberg 1.0.2, whose wheel carries the Iceberg 1.10.2 runtime jar).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import os
import pickle
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from importlib import util as importlib_util
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from engine.table import Table
    from engine.state.table_state import Snapshot

JAR_ENV = "ICEBERG_SPARK_JAR"
JAR_PACKAGE = "snowpark_connect_deps_iceberg"
JAR_NAME = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
JAR_SHA256 = "c562d482dcd16b666e808b755469fbc4b2604284b41622c9d87e2c02b7cc6c5f"

#: Hadoop's S3A connector and the AWS SDK it needs, for s3a:// (and s3://) tables; taken from the sdist of
#: sagemaker-pyspark 1.4.5 on PyPI (deps/jars/), which carries exactly these two, and cached
S3A_JARS = {
    "hadoop-aws-3.3.1.jar": "6be50ad8a8b445d2802381b085b2a3ede5c29d353450a6a21f16b2fefa962b6e",
    "aws-java-sdk-bundle-1.11.901.jar": "b87175b32a16544cc1b37cf40390eb375833e62bed67f8ce6cde4b7ad6429ead",
}
S3A_SDIST = "sagemaker_pyspark-1.4.5.tar.gz"
S3A_SDIST_SHA256 = "05ca2d5081d7138ce29a8fb0a9cba077f28c825288ed07aed46a82e63c0bf1fb"
S3A_INDEX = "https://pypi.org/simple/sagemaker-pyspark/"
JAR_CACHE_ENV = "ICELOG_JAR_CACHE"
S3A_FILESYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
ICEBERG_SPARK_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
DEFAULT_CATALOG = "hadoop"
REST_CATALOG = "icelog"
# the folder holding the `tools` and `engine` packages: Spark's Python workers must import them
SOURCE_ROOT = str(Path(__file__).resolve().parent.parent)
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


def jar_cache() -> Path:
    """The folder of cached jars: ``$ICELOG_JAR_CACHE``, else ``~/.cache/icelog/jars``."""
    return Path(os.environ.get(JAR_CACHE_ENV) or Path.home() / ".cache" / "icelog" / "jars")


def s3a_jars() -> list[str]:
    """The paths of ``hadoop-aws-3.3.1.jar`` and ``aws-java-sdk-bundle-1.11.901.jar`` (Spark's ``s3a://``),
    from the cache (:func:`jar_cache`), fetched once from PyPI when missing: the sdist of sagemaker-pyspark 1.4.5 is
    streamed, only the two jars are kept, and every sha256 (the sdist's, each jar's) is checked.

    :raises SparkSetupError: the index or the sdist cannot be fetched, or a hash is wrong (a cached jar with a
        wrong hash is named, not replaced silently)
    """
    folder = jar_cache()
    paths = [folder / name for name in S3A_JARS]
    if not all(p.is_file() for p in paths):
        _fetch_s3a_jars(folder)
    for path in paths:
        stat = path.stat()
        _check_jar(str(path), stat.st_size, stat.st_mtime_ns, S3A_JARS[path.name])
    return [str(p) for p in paths]


@functools.cache
def _check_jar(path: str, size: int, mtime_ns: int, expected: str) -> None:
    """Hash a cached jar once per (path, size, mtime) and compare."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        raise SparkSetupError(f"Cannot use {path}: its sha256 is {digest.hexdigest()}, expected {expected} "
                              f"(delete it to fetch it again)")


def _fetch_s3a_jars(folder: Path) -> None:
    import re as re_
    import tarfile

    folder.mkdir(parents=True, exist_ok=True)
    try:
        request = urllib.request.Request(S3A_INDEX, headers={"Accept": "text/html"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            index = answer.read().decode("utf-8", "replace")
        found = re_.search(r'href="([^"#]*/' + re_.escape(S3A_SDIST) + r')[#"]', index)
        if found is None:
            raise SparkSetupError(f"Cannot fetch the S3A jars: {S3A_SDIST} is not listed at {S3A_INDEX}")
        with tempfile.TemporaryDirectory(dir=folder) as scratch:
            sdist = Path(scratch) / S3A_SDIST
            digest = hashlib.sha256()
            with urllib.request.urlopen(found.group(1).replace("&amp;", "&"), timeout=300) as answer, \
                    open(sdist, "wb") as out:
                for block in iter(lambda: answer.read(1 << 20), b""):
                    digest.update(block)
                    out.write(block)
            if digest.hexdigest() != S3A_SDIST_SHA256:
                raise SparkSetupError(f"Cannot fetch the S3A jars: {S3A_SDIST} has sha256 {digest.hexdigest()}, "
                                      f"expected {S3A_SDIST_SHA256}")
            with tarfile.open(sdist, "r|gz") as archive:
                for member in archive:
                    name = member.name.rsplit("/", 1)[-1]
                    if name not in S3A_JARS or "/deps/jars/" not in member.name or not member.isfile():
                        continue
                    source = archive.extractfile(member)
                    assert source is not None
                    temp = Path(scratch) / name
                    with open(temp, "wb") as out:
                        shutil.copyfileobj(source, out, 1 << 20)
                    os.replace(temp, folder / name)  # atomic: concurrent fetches never see half a jar
    except (OSError, urllib.error.URLError) as e:
        raise SparkSetupError(f"Cannot fetch the S3A jars from {S3A_INDEX}: {e}") from e
    missing = [name for name in S3A_JARS if not (folder / name).is_file()]
    if missing:
        raise SparkSetupError(f"Cannot fetch the S3A jars: {', '.join(missing)} not in {S3A_SDIST}")


def s3a_hadoop_conf(settings: Any, bucket: str | None = None) -> dict[str, str]:
    """Hadoop settings through which S3A reaches the objects ``settings`` (a ``storage.files.S3Settings``)
    reach: for every bucket, or only for ``bucket`` (``fs.s3a.bucket.<bucket>.*``, so one session can use
    several endpoints). Keys are ``fs.s3a.*``; put ``spark.hadoop.`` before them for a session's conf."""
    prefix = f"fs.s3a.bucket.{bucket}." if bucket else "fs.s3a."
    out: dict[str, str] = {}
    if settings.endpoint:
        parts = urllib.parse.urlsplit(settings.endpoint)
        out[prefix + "endpoint"] = parts.netloc or parts.path
        out[prefix + "connection.ssl.enabled"] = "false" if parts.scheme == "http" else "true"
    if settings.region:
        out[prefix + "endpoint.region"] = settings.region
    if settings.path_style is not None:
        out[prefix + "path.style.access"] = "true" if settings.path_style else "false"
    if settings.access_key_id and settings.secret_access_key:
        out[prefix + "access.key"] = settings.access_key_id
        out[prefix + "secret.key"] = settings.secret_access_key
        if settings.session_token:
            out[prefix + "session.token"] = settings.session_token
            out[prefix + "aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        else:
            out[prefix + "aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
    return out


def configure_s3a(spark: SparkSession, settings: Any, bucket: str | None = None) -> None:
    """Let a running session reach S3 objects as ``settings`` say (see :func:`s3a_hadoop_conf`): Spark's
    executors and Iceberg's HadoopFileIO read and write ``s3a://`` and ``s3://`` through S3A. Set before the
    bucket is first used in the session (S3A keeps one client per bucket)."""
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in s3a_hadoop_conf(settings, bucket).items():
        conf.set(key, value)


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
    jar = ",".join([iceberg_runtime_jar(), *s3a_jars()])
    home = java_home()
    scratch = Path(scratch_dir) if scratch_dir is not None else Path(temp_folder("icelog-spark-"))
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
        .config("spark.executorEnv.PYTHONPATH", _python_path())
        # s3:// and s3n:// locations (other engines write them) through S3A, as s3a:// ones
        .config("spark.hadoop.fs.s3.impl", S3A_FILESYSTEM)
        .config("spark.hadoop.fs.s3n.impl", S3A_FILESYSTEM)
    )
    if warehouse is not None:
        for key, value in _hadoop_catalog_conf(DEFAULT_CATALOG, warehouse).items():
            builder = builder.config(key, value)
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)

    previous = {key: os.environ.get(key) for key in ("JAVA_HOME", "PYTHONPATH", "PYSPARK_PYTHON")}
    os.environ["JAVA_HOME"] = home
    os.environ["PYTHONPATH"] = _python_path()  # local mode: the workers inherit the JVM's environment
    # PySpark takes the workers' interpreter from this variable when the context starts (not from the conf)
    os.environ["PYSPARK_PYTHON"] = previous["PYSPARK_PYTHON"] or sys.executable
    from tools.progress import waiting

    try:
        with waiting("starting Spark"):  # a bar on stderr only when it is a terminal and the start is slow
            session = builder.getOrCreate()
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    session.sparkContext.setLogLevel(log_level.upper())
    if scratch_dir is None:
        remove_when_stopped(session, str(scratch))
    return session


def temp_folder(prefix: str) -> str:
    """A new folder in the temporary folder (``$TMPDIR``) for this process's Spark helpers, removed when the
    process exits at the latest (:func:`remove_when_stopped` removes it sooner). Cached jars never live here."""
    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, True)
    return folder


def remove_when_stopped(spark: SparkSession, folder: str) -> None:
    """Remove ``folder`` (made by :func:`temp_folder` for this session) right after ``spark.stop()``."""
    stop = spark.stop

    def stop_and_remove() -> None:
        try:
            stop()
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    spark.stop = stop_and_remove  # type: ignore[method-assign]


def _hadoop_catalog_conf(name: str, warehouse: str | os.PathLike[str]) -> dict[str, str]:
    """The spark.sql.catalog.<name>.* settings of an Iceberg Hadoop catalog on a local folder or an S3 URI (kept
    as given: ``s3a://bucket/prefix``)."""
    prefix = f"spark.sql.catalog.{name}"
    text = os.fspath(warehouse)
    uri = text.rstrip("/") if urllib.parse.urlsplit(text).scheme in ("s3", "s3a", "s3n") else \
        Path(warehouse).resolve().as_uri()
    return {
        prefix: ICEBERG_SPARK_CATALOG,
        f"{prefix}.type": "hadoop",
        f"{prefix}.warehouse": uri,
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


def _python_path() -> str:
    """PYTHONPATH for Spark's Python workers: icelog's source folder first, then whatever was set."""
    current = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != SOURCE_ROOT]
    return os.pathsep.join([SOURCE_ROOT] + current)


# ---------------------------------------------------------------- the REST catalog server of a session


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def rest_config_status(url: str, token: str, timeout_s: float = 2.0) -> int | None:
    """The HTTP status of ``GET <url>/v1/config`` with the bearer token, or None when nothing answers."""
    request = urllib.request.Request(f"{url.rstrip('/')}/v1/config", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except (urllib.error.URLError, OSError):
        return None


class RestServer:
    """icelog's Iceberg REST catalog server for a Spark session: one already answering, or a subprocess
    (``python -m tools.cli --warehouse W serve --host H --port P --token T``) started and stopped here.

    ::

        server = RestServer.ensure("/tmp/wh")            # a free port and a random token
        server.url, server.token                         # http://127.0.0.1:<port>, the bearer token
        server.stop()                                    # stops the subprocess (if it was started here)

    :param warehouse: the warehouse folder served
    :param host: the interface it listens on
    :param port: its port
    :param token: the bearer token clients send
    :param process: the subprocess, when this handle started it
    """

    def __init__(self, warehouse: str, host: str, port: int, token: str,
                 process: subprocess.Popen[bytes] | None = None, log_path: str | None = None) -> None:
        self.warehouse = warehouse
        self.host = host
        self.port = port
        self.token = token
        self.process = process
        self.log_path = log_path

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def started_here(self) -> bool:
        return self.process is not None

    @classmethod
    def ensure(cls, warehouse: str | os.PathLike[str], *, host: str = "127.0.0.1", port: int | None = None,
               token: str | None = None, timeout_s: float = 60.0,
               command: list[str] | None = None, catalog_dir: str | os.PathLike[str] | None = None,
               properties: Mapping[str, str] | None = None) -> RestServer:
        """Use the server answering ``GET /v1/config`` with 200 on ``host:port``, or start one there.

        :param port: the port; a free one when None (then a server is always started)
        :param token: the bearer token; a random one when None
        :param timeout_s: how long to wait for a started server to answer
        :param command: the command line to start (default: icelog's ``serve``; tests pass others)
        :param catalog_dir: the folder of ``catalog.db`` when it is not the warehouse (an S3 warehouse)
        :param properties: FileIO properties of an S3 warehouse; the keys reach the server through its
            environment (``AWS_*``), never its command line
        :raises SparkSetupError: something else answers on the port (another status than 200), or the started
            server exits or does not answer within ``timeout_s`` (its output is quoted)
        """
        text = os.fspath(warehouse)
        folder = text if urllib.parse.urlsplit(text).scheme in ("s3", "s3a", "s3n") else str(Path(text).resolve())
        token = token if token is not None else secrets.token_urlsafe(24)
        if port is not None:
            status = rest_config_status(f"http://{host}:{port}", token)
            if status == 200:
                return cls(folder, host, port, token)
            if status is not None:
                raise SparkSetupError(f"Cannot use the REST catalog at http://{host}:{port}: GET /v1/config "
                                      f"answered {status} (another server, or another token)")
        else:
            port = free_port(host)
        options, secret_env = _serve_options(catalog_dir, properties)
        argv = command if command is not None else [
            sys.executable, "-m", "tools.cli", "--warehouse", folder, *options, "serve", "--host", host,
            "--port", str(port), f"--token={token}"]  # one word: a random token may start with "-"
        log = tempfile.NamedTemporaryFile(prefix="icelog-serve-", suffix=".log", delete=False)
        env = dict(os.environ, PYTHONPATH=_python_path(), **secret_env)
        process = subprocess.Popen(argv, cwd=SOURCE_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT)
        log.close()
        server = cls(folder, host, port, token, process, log.name)
        atexit.register(server.stop)
        deadline = time.monotonic() + timeout_s
        while True:
            status = rest_config_status(server.url, token, timeout_s=1.0)
            if status == 200:
                return server
            exited = process.poll()
            if exited is not None or time.monotonic() >= deadline:
                server.stop(keep_output=True)  # first: a server that never answered may print as it stops
                output = server.output(keep=False)
                why = f"exited with code {exited}" if exited is not None else \
                    f"did not answer GET /v1/config with 200 within {timeout_s:g}s (last status: {status})"
                raise SparkSetupError(f"Cannot start icelog's REST catalog server on {server.url}: it {why}; "
                                      f"command: {' '.join(argv[:3])} ...; output:\n{output[-2000:]}")
            time.sleep(0.1)

    def output(self, *, keep: bool = True) -> str:
        """What the started server printed so far ("" when it was not started here).

        :param keep: False deletes the server's output file after reading it (once the server has stopped)
        """
        if self.log_path is None or not os.path.exists(self.log_path):
            return ""
        with open(self.log_path, encoding="utf-8", errors="replace") as stream:
            text = stream.read()
        if not keep:
            with contextlib.suppress(OSError):
                os.unlink(self.log_path)
            self.log_path = None
        return text

    def stop(self, timeout_s: float = 10.0, *, keep_output: bool = False) -> None:
        """Stop the subprocess started here (nothing for a server that was already running).

        :param keep_output: keep its output file for :meth:`output` (deleted otherwise)
        """
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process is not None and not keep_output:
            self.output(keep=False)

    def catalog_conf(self, name: str = REST_CATALOG) -> dict[str, str]:
        """The spark.sql.catalog.<name>.* settings of an Iceberg REST catalog on this server."""
        prefix = f"spark.sql.catalog.{name}"
        return {
            prefix: ICEBERG_SPARK_CATALOG,
            f"{prefix}.type": "rest",
            f"{prefix}.uri": self.url,
            f"{prefix}.token": self.token,
            f"{prefix}.rest.auth.type": "oauth2",  # a bearer token; said outright, so Iceberg need not infer it
            f"{prefix}.oauth2-server-uri": f"{self.url}/v1/oauth/tokens",
            # Hadoop's file systems for every scheme (s3:// through S3A): the runtime jar has no AWS SDK v2, so
            # the default ResolvingFileIO would fail to load S3FileIO for s3:// tables
            f"{prefix}.io-impl": "org.apache.iceberg.hadoop.HadoopFileIO",
            # icelog commits behind Spark's back too (Python writers): never serve a cached table
            f"{prefix}.cache-enabled": "false",
        }


#: FileIO properties that are secrets: passed to a server through its environment, as the AWS SDK names them
_SECRET_PROPERTIES = {"s3.access-key-id": "AWS_ACCESS_KEY_ID", "s3.secret-access-key": "AWS_SECRET_ACCESS_KEY",
                      "s3.session-token": "AWS_SESSION_TOKEN"}


def _serve_options(catalog_dir: str | os.PathLike[str] | None,
                   properties: Mapping[str, str] | None) -> tuple[list[str], dict[str, str]]:
    """The ``icelog`` options (``--catalog-dir``, ``--property``) and the environment of a server subprocess."""
    options: list[str] = []
    if catalog_dir is not None:
        options += ["--catalog-dir", str(Path(catalog_dir).resolve())]
    env: dict[str, str] = {}
    for key, value in (properties or {}).items():
        if key in _SECRET_PROPERTIES:
            env[_SECRET_PROPERTIES[key]] = value
        else:
            options.append(f"--property={key}={value}")
    return options, env


_SESSION_OPTIONS = ("app_name", "scratch_dir", "log_level", "driver_memory", "shuffle_partitions", "java_options")


def session(warehouse: str | os.PathLike[str], *, host: str = "127.0.0.1", port: int | None = None,
            token: str | None = None, server_timeout_s: float = 60.0,
            catalog_dir: str | os.PathLike[str] | None = None, properties: Mapping[str, str] | None = None,
            **conf: Any) -> SparkSession:
    """A local Spark session whose catalog ``icelog`` (``type=rest``) is icelog's REST server on ``warehouse``,
    with the Iceberg runtime jar (found as :func:`iceberg_runtime_jar` does) and SQL extensions.

    ::

        spark = session("warehouse")
        spark.table("icelog.db.events").show()
        spark.sql("SELECT * FROM icelog.db.events VERSION AS OF 'audit'")
        spark.stop()                                   # also stops the server if it was started here

    A server already answering ``GET /v1/config`` with 200 on ``host:port`` (with ``token``) is used; otherwise
    one is started as a subprocess (a free port and a random token unless given) and stopped when the session
    stops (or the process exits). The handle is ``rest_server(spark)``.

    :param warehouse: the warehouse folder icelog serves
    :param host: the server's interface
    :param port: the server's port (a free one when None)
    :param token: the bearer token (a random one when None)
    :param server_timeout_s: how long to wait for a started server
    :param catalog_dir: the folder of ``catalog.db`` when it is not the warehouse (required for S3)
    :param properties: FileIO properties of an S3 warehouse (``s3.endpoint``, keys, ...): the server gets them,
        and the session's S3A connector too (Iceberg's HadoopFileIO reads and writes the objects through it)
    :param conf: Spark settings (``**{"spark.sql.shuffle.partitions": "4"}``), or :func:`local_session`'s
        options by name (``app_name``, ``driver_memory``, ``shuffle_partitions``, ``log_level``, ``scratch_dir``,
        ``java_options``)
    :raises SparkSetupError: Java, the jar or the server cannot be set up (a server that never answers is named
        with its output)
    """
    options = {k: conf.pop(k) for k in _SESSION_OPTIONS if k in conf}
    server = RestServer.ensure(warehouse, host=host, port=port, token=token, timeout_s=server_timeout_s,
                               catalog_dir=catalog_dir, properties=properties)
    try:
        s3a = {}
        if properties:
            from storage.files import S3Settings

            s3a = {f"spark.hadoop.{k}": v for k, v in s3a_hadoop_conf(S3Settings.from_properties(properties)).items()}
        extra = {**server.catalog_conf(), **s3a, **{k: str(v) for k, v in conf.items()}}
        spark = local_session(None, extra_conf=extra, **options)
    except BaseException:
        server.stop()
        raise
    _SERVERS[id(spark)] = server
    stop = spark.stop

    def stop_with_server() -> None:
        try:
            stop()
        finally:
            _SERVERS.pop(id(spark), None)
            server.stop()

    spark.stop = stop_with_server  # type: ignore[method-assign]
    return spark


_SERVERS: dict[int, RestServer] = {}


def rest_catalog(spark: SparkSession, warehouse: str | os.PathLike[str], *, name: str | None = None,
                 host: str = "127.0.0.1", port: int | None = None, token: str | None = None,
                 server_timeout_s: float = 60.0, catalog_dir: str | os.PathLike[str] | None = None,
                 properties: Mapping[str, str] | None = None) -> tuple[str, RestServer]:
    """Register an Iceberg REST catalog on icelog's server for ``warehouse`` in a running session (the server
    found or started as :func:`session` does); returns the catalog name and the server handle (stop it when
    done).

    :param name: the catalog name; a fresh ``icelog_rest_<12 hex digits>`` when None (Spark keeps a catalog for
        the session once used, so a name is good for one server)
    :raises SparkSetupError: the name is taken, or the server cannot be set up
    """
    if name is None:
        name = f"icelog_rest_{uuid.uuid4().hex[:12]}"
    if spark.conf.get(f"spark.sql.catalog.{name}", None) is not None:
        raise SparkSetupError(f"Cannot register Spark catalog: {name} is already configured")
    server = RestServer.ensure(warehouse, host=host, port=port, token=token, timeout_s=server_timeout_s,
                               catalog_dir=catalog_dir, properties=properties)
    if properties:
        from storage.files import S3Settings

        settings = S3Settings.from_properties(properties)
        bucket = urllib.parse.urlsplit(os.fspath(warehouse)).netloc or None
        configure_s3a(spark, settings, bucket)
    for key, value in server.catalog_conf(name).items():
        spark.conf.set(key, value)
    return name, server


def rest_server(spark: SparkSession) -> RestServer | None:
    """The REST server handle of a session made by :func:`session` (None for other sessions)."""
    return _SERVERS.get(id(spark))


# ---------------------------------------------------------------- DataFrame writes

WRITE_MODES = ("append", "overwrite", "dynamic_overwrite")
FUNCTION_CATALOG = "icelog_functions"
_KEY_PREFIX = "__icelog_p"
_FILE_COLUMN = "data_file"


def _quote(name: str) -> str:
    return ".".join(f"`{part.replace('`', '``')}`" for part in name.split("."))


def _function_catalog(spark: SparkSession) -> str:
    """An Iceberg catalog of the session whose ``system`` functions compute Iceberg's transforms: ``icelog`` when
    it is one, else a Hadoop catalog registered once on an empty scratch folder (functions need no table)."""
    for name in (REST_CATALOG, FUNCTION_CATALOG):
        if spark.conf.get(f"spark.sql.catalog.{name}", None) == ICEBERG_SPARK_CATALOG:
            return name
    folder = temp_folder("icelog-functions-")
    hadoop_catalog(spark, folder, name=FUNCTION_CATALOG)
    remove_when_stopped(spark, folder)
    return FUNCTION_CATALOG


def partition_expressions(spark: SparkSession, table_state: Any) -> list[str]:
    """Spark SQL expressions computing each partition field of the table's current spec with Iceberg's own
    functions (``<catalog>.system.bucket(n, col)``, ``truncate``, ``years``, ``months``, ``days``, ``hours``;
    identity is the column; void is null), in the spec's order."""
    from engine.errors import ValidationError
    from engine.model import transforms as tr

    catalog = _function_catalog(spark)
    out = []
    schema = table_state.schema
    for pf in table_state.spec.fields:
        column = _quote(schema.find_column_name(pf.source_id))
        t = pf.transform
        if isinstance(t, tr.Identity):
            out.append(column)
        elif isinstance(t, tr.Bucket):
            out.append(f"{catalog}.system.bucket({t.num_buckets}, {column})")
        elif isinstance(t, tr.Truncate):
            out.append(f"{catalog}.system.truncate({t.width}, {column})")
        elif isinstance(t, (tr.Year, tr.Month, tr.Day, tr.Hour)):
            name = {tr.Year: "years", tr.Month: "months", tr.Day: "days", tr.Hour: "hours"}[type(t)]
            out.append(f"{catalog}.system.{name}({column})")
        elif isinstance(t, tr.Void):
            out.append("CAST(NULL AS INT)")
        else:
            raise ValidationError(f"Cannot write with Spark: partition transform {t} of field {pf.name!r} has no "
                                  f"Spark function")
    return out


def write(df: DataFrame, table: Table, mode: str = "append", where: str | None = None, *,
          branch: str = "main") -> Snapshot | None:
    """Write a DataFrame into an icelog table from Spark's executors, committed as ONE snapshot through icelog.

    ::

        write(df, cat.load_table("db.events"))                               # append
        write(df, t, mode="overwrite", where="category = 'a'")               # or the whole table
        write(df, t, mode="dynamic_overwrite")                               # the partitions in df

    Spark computes each row's partition values with Iceberg's own transform functions (so bucket is Iceberg's
    Murmur3 exactly), shuffles rows by them and sorts each task by them; each task writes Parquet files with the
    table's field ids into a per-job folder under the table's data folder (icelog's writer: metrics follow the
    table's metrics modes, files follow its sort order and target file size) and returns their descriptions; the
    driver commits them (``append_data_files``, ``overwrite_data_files`` or ``replace_partitions``). The job
    folder is staged before the job starts: files of a failed job are never committed and
    ``remove_orphan_files`` finds them; the files of a job whose commit is refused are removed.

    :param df: the rows; columns by name, a subset of the table's (missing optional columns are null)
    :param table: the icelog table (``engine.table.Table``)
    :param mode: ``append``, ``overwrite`` (the rows matching ``where``, or all rows) or ``dynamic_overwrite``
    :param where: the overwrite filter (icelog's filter syntax), only with ``mode="overwrite"``
    :param branch: the branch to commit to
    :returns: the new snapshot (None when ``df`` is empty and the mode is append)
    :raises ValidationError: a bad mode, a column not in the table, rows that do not fit the schema (raised by
        the failed job), files that do not fit the table; nothing is committed
    """
    from pyspark.sql import functions as F

    from engine.errors import ValidationError
    from engine.state.events import decode_file_change
    from projections import layout

    if mode not in WRITE_MODES:
        raise ValidationError(f"Cannot write with Spark: mode {mode!r} is not one of {', '.join(WRITE_MODES)}")
    if where is not None and mode != "overwrite":
        raise ValidationError(f"Cannot write with Spark: where= is only for mode='overwrite', not {mode!r}")
    state = table.state
    schema, spec = state.schema, state.spec
    known = {f.name for f in schema.columns}
    unknown = [c for c in df.columns if c not in known]
    if unknown:
        raise ValidationError(f"Cannot write with Spark: column(s) {', '.join(map(repr, unknown))} are not in "
                              f"{'.'.join(table.identifier)} ({', '.join(sorted(known))})")
    if where is not None:
        from engine.operations.row_delete import bind_filter

        bind_filter(state, where)  # a bad filter fails before the job, not after it
    spark = df.sparkSession
    ship_sources(spark)
    keys = [F.expr(e).alias(f"{_KEY_PREFIX}{i}") for i, e in enumerate(partition_expressions(spark, state))]
    keyed = df.select(*[F.col(_quote(c)) for c in df.columns], *keys)
    if keys:
        key_names = [f"{_KEY_PREFIX}{i}" for i in range(len(keys))]
        keyed = keyed.repartition(*key_names).sortWithinPartitions(*key_names)
    job_folder = f"{layout.data_dir(state.location)}/spark-{uuid.uuid4().hex}"
    table.stage_folder(job_folder)
    slim = _writer_state(state)
    task = functools.partial(write_task, state_blob=pickle.dumps(slim), job_folder=job_folder, keys=len(keys),
                             s3_blob=pickle.dumps(table.catalog.io.s3))
    rows = _collect(keyed.mapInArrow(task, f"{_FILE_COLUMN} string"))
    ptype = spec.partition_type(schema)
    files = [decode_file_change(r[_FILE_COLUMN], {spec.spec_id: ptype}).file for r in rows]
    # the job is done: when the commit is refused, its files are removed (a failed job's are left to
    # remove_orphan_files, as its killed tasks may still be writing when the job's error arrives)
    with table.removing_written_on_failure() as written:
        written += [f.file_path for f in files]
        if mode == "append":
            return table.append_data_files(files, branch=branch)
        if mode == "overwrite":
            return table.overwrite_data_files(files, where, branch=branch)
        return table.replace_partitions(files, branch=branch)


_SHIPPED: dict[int, str] = {}
SOURCE_PACKAGES = ("storage", "engine", "projections", "tools")


def ship_sources(spark: SparkSession) -> str:
    """Make icelog importable by the Python workers of any session (``SparkContext.addPyFile`` of a zip of its
    packages, once per context), for sessions not started here, whose workers lack icelog's PYTHONPATH.
    Returns the zip's path."""
    context = spark.sparkContext
    key = id(context._jsc) if context._jsc is not None else id(context)
    shipped = _SHIPPED.get(key)
    if shipped is not None:
        return shipped
    import zipfile

    folder = temp_folder("icelog-pyfiles-")
    archive = os.path.join(folder, "icelog_sources.zip")
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        for package in SOURCE_PACKAGES:
            for path in sorted(Path(SOURCE_ROOT, package).rglob("*.py")):
                out.write(path, path.relative_to(SOURCE_ROOT).as_posix())
    context.addPyFile(archive)
    _SHIPPED[key] = archive
    stop = spark.stop

    def stop_and_forget() -> None:
        try:
            stop()
        finally:
            _SHIPPED.pop(key, None)
            shutil.rmtree(folder, ignore_errors=True)

    spark.stop = stop_and_forget  # type: ignore[method-assign]
    return archive


_TASK_ERROR = re.compile(r"engine\.errors\.(ValidationError|CorruptFileError): (.+)")


def _collect(files: DataFrame) -> list[Any]:
    """Run the write job; a task that refused the rows (icelog's ValidationError in a worker) fails it with a
    ValidationError here, naming what the task said."""
    from pyspark.errors import PythonException

    from engine.errors import ValidationError

    try:
        return files.collect()
    except PythonException as e:
        found = _TASK_ERROR.findall(str(e))
        if not found:
            raise
        raise ValidationError(f"Cannot write with Spark: a task failed: {found[-1][1].strip()} (nothing was "
                              f"committed; remove_orphan_files deletes the files the job wrote)") from e


def _writer_state(state: Any) -> Any:
    """The table state without its history: what a task needs to write files (schema, spec, properties, sort
    order, location), small enough to ship to every task."""
    import attrs

    return attrs.evolve(state, snapshots=(), expired_snapshots=(), refs=(), snapshot_log=(), metadata_log=())


def write_task(batches: Iterator[pa.RecordBatch], *, state_blob: bytes, job_folder: str,
               keys: int, s3_blob: bytes | None = None) -> Iterator[pa.RecordBatch]:
    """One Spark task of :func:`write` (runs in a Python worker): the rows of this task arrive sorted by their
    partition key columns (the last ``keys`` columns); each run of one key is written as one or more Parquet files
    of that partition; yields one row per file, its DataFile as icelog's file-change JSON."""
    import pyarrow as pa

    from engine.write.data_writer import conform, write_partition_files
    from engine.state.events import FileChange
    from engine.write.sort_rows import sort_table
    from storage.files import FileIO

    state = pickle.loads(state_blob)
    io = FileIO(pickle.loads(s3_blob)) if s3_blob is not None else FileIO()  # the table's S3 settings
    schema, spec = state.schema, state.spec
    ptype = spec.partition_type(schema)
    target = state.int_property("write.target-file-size-bytes", 512 * 1024 * 1024)
    pending: list[pa.RecordBatch] = []
    pending_bytes = 0
    current: tuple[Any, ...] | None = None

    def flush() -> Iterator[pa.RecordBatch]:
        nonlocal pending, pending_bytes
        if not pending:
            return
        rows = pa.Table.from_batches(pending)
        pending, pending_bytes = [], 0
        if keys:
            rows = rows.drop_columns(rows.column_names[-keys:])
        rows = conform(rows, schema)
        if not state.sort_order.is_unsorted:
            rows = sort_table(rows, state.sort_order, schema)
        written = write_partition_files(state, rows, spec=spec, partition=current or (), data_folder=job_folder,
                                        io=io)
        yield pa.record_batch([pa.array([FileChange(added=True, file=f).encode(ptype) for f in written],
                                        pa.string())], names=[_FILE_COLUMN])

    for batch in batches:
        if batch.num_rows == 0:
            continue
        if not keys:
            pending.append(batch)
            pending_bytes += batch.nbytes
            if pending_bytes >= target:
                yield from flush()
            continue
        for start, stop, values in _key_runs(batch, keys, ptype):
            if values != current:
                yield from flush()
                current = values
            piece = batch.slice(start, stop - start)
            pending.append(piece)
            pending_bytes += piece.nbytes
            if pending_bytes >= target:
                yield from flush()
    yield from flush()


def _key_runs(batch: pa.RecordBatch, keys: int, ptype: Any) -> Iterator[tuple[int, int, tuple[Any, ...]]]:
    """(start, stop, partition values) of each run of equal partition keys in a batch sorted by them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from engine.model.values import value_from_python

    columns = []
    for i in range(batch.num_columns - keys, batch.num_columns):
        column = batch.column(i)
        if pa.types.is_date32(column.type):
            column = column.cast(pa.int32())  # Iceberg's day number, also past Python's year 9999
        elif pa.types.is_timestamp(column.type):
            column = column.cast(pa.timestamp("us", tz=column.type.tz)).cast(pa.int64())
        columns.append(column)
    n = batch.num_rows
    changed = pa.array([False] * (n - 1)) if n > 1 else pa.array([], pa.bool_())
    for column in columns:
        if n <= 1:
            break
        a, b = column.slice(1), column.slice(0, n - 1)
        differs = pc.fill_null(pc.not_equal(a, b), False)
        differs = pc.or_(differs, pc.xor(pc.is_null(a), pc.is_null(b)))
        changed = pc.or_(changed, differs)
    starts = [0] + [i + 1 for i in pc.indices_nonzero(changed).to_pylist()] if n > 1 else [0]
    for j, start in enumerate(starts):
        stop = starts[j + 1] if j + 1 < len(starts) else n
        values = tuple(value_from_python(f.field_type, column[start].as_py())
                       for f, column in zip(ptype.fields, columns))
        yield start, stop, values
