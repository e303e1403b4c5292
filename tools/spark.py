"""Spark sessions on icelog: local sessions with the Iceberg Spark runtime and SQL extensions, Iceberg Hadoop
catalogs on a warehouse, S3A settings, and icelog's REST catalog server for a session (found or started, and
stopped with it). The jars and Java are found in tools/spark_jars.py; DataFrame writes into icelog tables are
in tools/spark_write.py.

Layer: tools (imports pyspark, the standard library and icelog's storage settings; nothing imports tools). May
touch the JVM, the filesystem (a log4j2 file, Spark's scratch folders), process environment lookups, a
subprocess (the REST server a session starts) and HTTP on the server's port.

Usage::

    from tools.spark import local_session, hadoop_catalog

    spark = local_session("/tmp/wh")                 # catalog `hadoop` on /tmp/wh
    spark.sql("CREATE TABLE hadoop.db.t (id bigint) USING iceberg")
    name = hadoop_catalog(spark, "/tmp/other-wh")    # registers a fresh catalog name at runtime
    spark.sql(f"SELECT * FROM {name}.db.t")

    spark = session("/tmp/wh")                       # catalog `icelog` (type=rest) served by icelog's REST
    spark.table("icelog.db.events")                  # server, started for the session when none answers

The Python workers of Spark run ``tools.spark_write.write_task`` and so import ``tools`` and ``engine``:
sessions made here put the folder holding them on the workers' PYTHONPATH (``tools.spark_write.write`` ships
them as a zip to the workers of any other session).

Needs Java 17 (`tools/run` installs it) and the `spark` extra (pyspark 3.5.6 and
snowpark-connect-deps-iceberg 1.0.2, whose wheel carries the Iceberg 1.10.2 runtime jar).
"""
from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools.ports import free_port
from tools.spark_jars import SparkSetupError, iceberg_runtime_jar, java_home, s3a_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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


def after_stop(spark: SparkSession, cleanup: Callable[[], None]) -> None:
    """Run ``cleanup`` right after ``spark.stop()`` (also when stopping fails); each runs after those added before
    it."""
    stop = spark.stop

    def stop_then_clean_up() -> None:
        try:
            stop()
        finally:
            cleanup()

    spark.stop = stop_then_clean_up  # type: ignore[method-assign]


def remove_when_stopped(spark: SparkSession, folder: str) -> None:
    """Remove ``folder`` (made by :func:`temp_folder` for this session) right after ``spark.stop()``."""
    after_stop(spark, lambda: shutil.rmtree(folder, ignore_errors=True))


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
                 process: subprocess.Popen[bytes] | None = None) -> None:
        self.warehouse = warehouse
        self.host = host
        self.port = port
        self.token = token
        self.process = process
        #: the output file of a server started by :meth:`ensure`, which made it (and deletes it): never a path
        #: given from outside
        self.log_path: str | None = None

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
        server = cls(folder, host, port, token, process)
        server.log_path = log.name
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

    def stop_server() -> None:
        _SERVERS.pop(id(spark), None)
        server.stop()

    after_stop(spark, stop_server)
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
