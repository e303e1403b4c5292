"""The jars and the Java runtime a local Spark session needs: the Iceberg Spark runtime jar (from its wheel, hash
checked), Hadoop's S3A connector jars (fetched once from PyPI, cached, hash checked) and JAVA_HOME.

Layer: tools (the standard library only; nothing imports tools). May touch the filesystem (the jar cache,
``$ICELOG_JAR_CACHE`` or ``~/.cache/icelog/jars``), process environment lookups and HTTPS to PyPI. Sessions are
made in tools/spark.py.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from importlib import util as importlib_util
from pathlib import Path

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
