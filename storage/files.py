"""File IO for the warehouse: local paths, ``file://`` URIs and S3 objects (``s3://``, ``s3a://``, ``s3n://``),
over ``pyarrow.fs``.

Layer: storage. May touch: the local file system (``os``, ``pyarrow.fs``), an S3 endpoint (``pyarrow.fs``) and
``storage.errors``. Knows nothing of Iceberg. Local reads, listings and deletes go through
``pyarrow.fs.LocalFileSystem`` (the same object the engine hands to ``pyarrow.parquet``); local writes use ``os``
directly because they need what ``pyarrow.fs`` lacks: ``fsync``, an atomic rename over the target, and a no-clobber
publish (``link``). On S3 an object appears whole when its upload completes, so every write is atomic; a
no-clobber write checks that the key is free first (S3's conditional put is not reachable through ``pyarrow.fs``).
"""

from __future__ import annotations

import errno
import os
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from urllib.parse import quote, unquote, urlsplit

import attrs
import pyarrow as pa
import pyarrow.fs as pafs

from storage.errors import FileAlreadyExists, FileError, FileNotFound, ProtectedFileError

_TEMP_SUFFIX = ".tmp"
#: SQLite's companions of a database file
DATABASE_SUFFIXES = ("", "-wal", "-shm", "-journal")


class _OpenDatabases:
    """The SQLite databases this process holds open, by real path, with a count per path.

    Process-wide on purpose: SQLite's POSIX locks belong to the process, and closing *any* descriptor on a database
    file (a data reader opening it by another name) drops them all, after which another process may remove the WAL
    under an acknowledged commit. Every read, write and delete of a location checks here first.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def add(self, path: str) -> None:
        real = os.path.realpath(path)
        with self._lock:
            self._counts[real] = self._counts.get(real, 0) + 1

    def discard(self, path: str) -> None:
        real = os.path.realpath(path)
        with self._lock:
            left = self._counts.get(real, 0) - 1
            if left > 0:
                self._counts[real] = left
            else:
                self._counts.pop(real, None)

    def database_of(self, local_path: str) -> str | None:
        """The open database ``local_path`` is (or is a companion of), by name after resolving symlinks or by
        inode (hard links); None for any other file."""
        with self._lock:
            databases = list(self._counts)
        if not databases:
            return None
        real = os.path.realpath(local_path)
        for db in databases:
            if real.startswith(db) and real[len(db):] in DATABASE_SUFFIXES:
                return db
        try:
            st = os.stat(local_path)
        except OSError:
            return None
        for db in databases:
            for suffix in DATABASE_SUFFIXES:
                try:
                    other = os.stat(db + suffix)
                except OSError:
                    continue
                if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
                    return db
        return None


#: the catalog databases this process has open (``storage.log.Log`` registers them)
OPEN_DATABASES = _OpenDatabases()


def check_not_database(location: str | os.PathLike[str]) -> None:
    """Refuse a location that is a catalog database this process has open, before anything opens it.

    Code that opens files itself (``pyarrow.parquet``, ``fastavro``, ``open``) calls this first; FileIO does on
    every operation.

    :raises ProtectedFileError: naming the location and the database
    """
    text = os.fspath(location)
    parts = urlsplit(text)
    if parts.scheme and len(parts.scheme) > 1 and parts.scheme != "file":
        return  # not a local file: cannot be a local database
    local = unquote(parts.path) if parts.scheme == "file" else text
    database = OPEN_DATABASES.database_of(local)
    if database is not None:
        raise ProtectedFileError(f"Cannot use {text!r}: it is the catalog database {database} (or its journal), "
                                 f"never data", path=text)


#: the URI schemes that name S3 objects; all three name the same bucket and key
S3_SCHEMES = ("s3", "s3a", "s3n")


@attrs.frozen(kw_only=True)
class S3Settings:
    """How to reach an S3 endpoint. Unset values fall back to the AWS SDK's own (environment variables, profile).

    :param endpoint: e.g. ``http://127.0.0.1:9000``; None for AWS itself
    :param region: the bucket region
    :param access_key_id: the access key
    :param secret_access_key: the secret key (never printed: ``repr`` hides it)
    :param session_token: a session token for temporary credentials
    :param path_style: address buckets by path (``endpoint/bucket/key``) instead of by host name
    """

    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = attrs.field(default=None, repr=False)
    session_token: str | None = attrs.field(default=None, repr=False)
    path_style: bool | None = None

    @classmethod
    def from_properties(cls, properties: Mapping[str, str] | None = None,
                        environ: Mapping[str, str] | None = None) -> S3Settings:
        """Settings from Iceberg's FileIO property names (``s3.endpoint``, ``s3.region``, ``s3.access-key-id``,
        ``s3.secret-access-key``, ``s3.session-token``, ``s3.path-style-access``; ``client.region`` too), each
        falling back to the standard AWS environment variable (``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``,
        ``AWS_REGION``, ``AWS_DEFAULT_REGION``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
        ``AWS_SESSION_TOKEN``).

        :raises ValueError: ``s3.path-style-access`` that is not true or false (the message names the property)
        """
        props = dict(properties or {})
        env = os.environ if environ is None else environ

        def pick(names: tuple[str, ...], env_names: tuple[str, ...]) -> str | None:
            for name in names:
                if props.get(name):
                    return str(props[name])
            for name in env_names:
                if env.get(name):
                    return env[name]
            return None

        path_style_text = pick(("s3.path-style-access",), ())
        path_style: bool | None = None
        if path_style_text is not None:
            lowered = path_style_text.strip().lower()
            if lowered not in ("true", "false"):
                raise ValueError(f"s3.path-style-access must be true or false, not {path_style_text!r}")
            path_style = lowered == "true"
        return cls(endpoint=pick(("s3.endpoint",), ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")),
                   region=pick(("s3.region", "client.region"), ("AWS_REGION", "AWS_DEFAULT_REGION")),
                   access_key_id=pick(("s3.access-key-id",), ("AWS_ACCESS_KEY_ID",)),
                   secret_access_key=pick(("s3.secret-access-key",), ("AWS_SECRET_ACCESS_KEY",)),
                   session_token=pick(("s3.session-token",), ("AWS_SESSION_TOKEN",)),
                   path_style=path_style)

    def client_properties(self, *, credentials: bool = False) -> dict[str, str]:
        """The Iceberg FileIO properties a client needs to reach the same objects; the keys only with
        ``credentials``."""
        out: dict[str, str] = {}
        if self.endpoint:
            out["s3.endpoint"] = self.endpoint
        if self.region:
            out["s3.region"] = self.region
        if self.path_style is not None:
            out["s3.path-style-access"] = "true" if self.path_style else "false"
        if credentials:
            if self.access_key_id:
                out["s3.access-key-id"] = self.access_key_id
            if self.secret_access_key:
                out["s3.secret-access-key"] = self.secret_access_key
            if self.session_token:
                out["s3.session-token"] = self.session_token
        return out

    @property
    def configured(self) -> bool:
        """Whether S3 was asked for: an endpoint or keys given, or AWS keys in the environment. Without that, S3
        locations are refused instead of letting the SDK go looking for credentials on the network."""
        return bool(self.endpoint or self.access_key_id or os.environ.get("AWS_ACCESS_KEY_ID"))

    def filesystem(self) -> pafs.S3FileSystem:
        options: dict = {}
        if self.endpoint:
            parts = urlsplit(self.endpoint)
            options["endpoint_override"] = parts.netloc or parts.path
            options["scheme"] = parts.scheme or "https"
        if self.region:
            options["region"] = self.region
        if self.access_key_id or self.secret_access_key:
            options["access_key"] = self.access_key_id
            options["secret_key"] = self.secret_access_key
            if self.session_token:
                options["session_token"] = self.session_token
        if self.path_style is not None:
            options["force_virtual_addressing"] = not self.path_style
        return pafs.S3FileSystem(**options)


def is_s3(location: str | os.PathLike[str]) -> bool:
    """Whether a location names an S3 object (``s3://``, ``s3a://`` or ``s3n://``)."""
    return urlsplit(os.fspath(location)).scheme in S3_SCHEMES


class FileIO:
    """Reads and writes whole files by local path or ``file://`` URI.

    ::

        io = FileIO()
        io.write_bytes("/warehouse/db/t/metadata/version-hint.text", b"3", fsync=True)   # atomic replace
        io.write_new("file:///warehouse/db/t/metadata/v3.metadata.json", data)        # fails if it exists
        io.read_bytes("/warehouse/db/t/metadata/version-hint.text")                   # b"3"

    Writes create missing parent directories and never leave a half-written file at the target: the bytes go to
    a temporary file beside it (``.<name>.<uuid>.tmp``), which is then renamed or linked into place.
    Errors are :class:`FileNotFound`, :class:`FileAlreadyExists` or :class:`FileError`, each naming the location.
    """

    def __init__(self, s3: S3Settings | None = None) -> None:
        #: the ``pyarrow.fs`` file system that :meth:`fs_path` results belong to (for ``pyarrow.parquet`` & co)
        self.filesystem: pafs.FileSystem = pafs.LocalFileSystem()
        self.s3 = s3 or S3Settings()
        self._s3_filesystem: pafs.S3FileSystem | None = None

    def resolve(self, location: str | os.PathLike[str]) -> tuple[pafs.FileSystem, str]:
        """The ``pyarrow.fs`` file system holding a location and the path it takes there: an absolute local path,
        or ``bucket/key`` on S3 (whichever of ``s3``, ``s3a``, ``s3n`` names it).

        :raises FileError: for a scheme that is neither local nor S3, or an S3 location without a bucket
        """
        text = os.fspath(location)
        parts = urlsplit(text)
        if parts.scheme in S3_SCHEMES:
            if not parts.netloc:
                raise FileError(f"Cannot use location: {text!r} names no bucket", path=text)
            if not self.s3.configured:
                raise FileError(f"Cannot use location: {text!r} is on S3, and no S3 endpoint or credentials are "
                                f"configured", path=text)
            if self._s3_filesystem is None:
                try:
                    self._s3_filesystem = self.s3.filesystem()
                except (OSError, ValueError, TypeError) as e:
                    raise FileError(f"Cannot use location: {text!r}: the S3 settings are not usable "
                                    f"({type(e).__name__})", path=text) from e
            return self._s3_filesystem, f"{parts.netloc}/{unquote(parts.path).lstrip('/')}".rstrip("/")
        return self.filesystem, self.fs_path(text)

    def fs_path(self, location: str | os.PathLike[str]) -> str:
        """The absolute local path of a location, as :attr:`filesystem` expects it.

        :param location: a local path or a ``file://`` URI (``file:///abs/path`` or ``file://localhost/abs/path``)
        :raises FileError: for any other scheme
        :raises ProtectedFileError: the location is an open catalog database (see :func:`check_not_database`)
        """
        text = os.fspath(location)
        parts = urlsplit(text)
        if parts.scheme == "file":
            if parts.netloc not in ("", "localhost"):
                raise FileError(f"Cannot use location: {text!r} names host {parts.netloc!r}", path=text)
            path = unquote(parts.path)
        elif parts.scheme and len(parts.scheme) > 1:  # one letter: a Windows drive, not a scheme
            raise FileError(f"Cannot use location: {text!r} (not a local path; local paths, file:// URIs "
                            f"and, through resolve(), s3:// URIs)", path=text)
        else:
            path = os.path.abspath(text)
        check_not_database(path)
        return path

    def read_bytes(self, location: str | os.PathLike[str]) -> bytes:
        """The whole content of a file.

        :param location: path or ``file://`` URI
        """
        fs, path = self.resolve(location)
        with self._errors("read", location):
            with fs.open_input_stream(path, compression=None) as stream:
                return stream.read()

    def write_bytes(self, location: str | os.PathLike[str], data: bytes, *, fsync: bool = False) -> None:
        """Write a file atomically, replacing it if it exists (readers see the old or the new bytes, never a mix).

        :param location: path or ``file://`` URI
        :param data: the content
        :param fsync: flush the file and its directory to disk before returning
        """
        if is_s3(location):
            self._put(location, data)
            return
        path = self.fs_path(location)
        with self._errors("write", location):
            temp = self._write_temp(path, data, fsync)
            try:
                os.replace(temp, path)
            except BaseException:
                _unlink_quietly(temp)
                raise
            if fsync:
                _fsync_dir(os.path.dirname(path))

    def write_new(self, location: str | os.PathLike[str], data: bytes, *, fsync: bool = False) -> None:
        """Write a file that must not exist yet, atomically: two writers racing for one name cannot both win.

        :param location: path or ``file://`` URI
        :param data: the content
        :param fsync: flush the file and its directory to disk before returning
        :raises FileAlreadyExists: something is already there (it is left untouched)
        """
        if is_s3(location):
            if self.exists(location):
                text = os.fspath(location)
                raise FileAlreadyExists(f"Cannot write file: {text!r} already exists", path=text)
            self._put(location, data)
            return
        path = self.fs_path(location)
        with self._errors("write", location):
            temp = self._write_temp(path, data, fsync)
            try:
                os.link(temp, path)
            except FileExistsError:
                raise
            except OSError as e:
                if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                    raise
                with open(path, "xb") as out:  # no hard links here: exclusive create, still no clobber
                    out.write(data)
                    if fsync:
                        out.flush()
                        os.fsync(out.fileno())
            finally:
                _unlink_quietly(temp)
            if fsync:
                _fsync_dir(os.path.dirname(path))

    def exists(self, location: str | os.PathLike[str]) -> bool:
        """Whether a file or directory exists.

        :param location: path or ``file://`` URI
        """
        fs, path = self.resolve(location)
        with self._errors("inspect", location):
            return fs.get_file_info(path).type != pafs.FileType.NotFound

    def size(self, location: str | os.PathLike[str]) -> int:
        """A file's size in bytes.

        :param location: path or ``file://`` URI
        """
        fs, path = self.resolve(location)
        with self._errors("inspect", location):
            info = fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFound(f"Cannot inspect file: {os.fspath(location)!r} does not exist",
                               path=os.fspath(location))
        if info.type != pafs.FileType.File:
            raise FileError(f"Cannot inspect file: {os.fspath(location)!r} is not a file", path=os.fspath(location))
        return info.size

    def delete(self, location: str | os.PathLike[str]) -> None:
        """Delete a file.

        :param location: path or ``file://`` URI
        :raises FileNotFound: it does not exist
        """
        fs, path = self.resolve(location)
        with self._errors("delete", location):
            if fs is not self.filesystem and fs.get_file_info(path).type == pafs.FileType.NotFound:
                raise FileNotFoundError(path)  # S3 deletes of absent keys succeed silently
            fs.delete_file(path)

    def list_dir(self, location: str | os.PathLike[str]) -> list[str]:
        """The locations of a directory's entries (files and directories, not recursive), sorted.

        Each entry is the given location joined with the entry's name, in the same form: a path for a path, a
        ``file://`` URI (name percent-encoded) for a URI. ``io.list_dir("/w/t/metadata")`` gives
        ``["/w/t/metadata/v1.metadata.json", ...]``.

        :param location: path or ``file://`` URI of the directory
        """
        fs, path = self.resolve(location)
        with self._errors("list", location):
            infos = fs.get_file_info(pafs.FileSelector(path))
        text = os.fspath(location)
        if urlsplit(text).scheme in ("file", *S3_SCHEMES):
            base = text.rstrip("/")
            return sorted(f"{base}/{quote(info.base_name)}" for info in infos)
        return sorted(os.path.join(text, info.base_name) for info in infos)

    def canonical(self, location: str | os.PathLike[str]) -> str:
        """One spelling per file: the absolute local path, or ``s3://bucket/key`` whichever of ``s3``, ``s3a``,
        ``s3n`` names it. Listings (:meth:`list_files`) spell files this way."""
        if is_s3(location):
            _, path = self.resolve(location)
            return f"s3://{path}"
        return self.fs_path(location)

    def list_files(self, location: str | os.PathLike[str]) -> list[tuple[str, int | None]]:
        """Every file under a folder (an S3 prefix), recursively, as (canonical location, modification time in
        ms or None), sorted; nothing for a folder that does not exist.

        :param location: path, ``file://`` or ``s3://`` URI of the folder
        """
        fs, path = self.resolve(location)
        prefix = "s3://" if is_s3(location) else ""
        with self._errors("list", location):
            infos = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
        out = [(prefix + info.path, None if info.mtime_ns is None else info.mtime_ns // 1_000_000)
               for info in infos if info.type == pafs.FileType.File]
        return sorted(out)

    def holds_files(self, location: str | os.PathLike[str]) -> bool:
        """Whether a location is a file, or a folder (an S3 prefix) holding anything.

        :param location: path, ``file://`` or ``s3://`` URI
        """
        fs, path = self.resolve(location)
        with self._errors("list", location):
            info = fs.get_file_info(path)
            if info.type == pafs.FileType.File:
                return True
            if info.type == pafs.FileType.NotFound:
                return False
            return bool(fs.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=False)))

    def makedirs(self, location: str | os.PathLike[str]) -> None:
        """Create a directory and its missing parents (nothing happens if it exists).

        :param location: path or ``file://`` URI
        """
        if is_s3(location):
            return  # S3 has no folders: keys with the prefix are enough
        path = self.fs_path(location)
        with self._errors("create directory", location):
            self.filesystem.create_dir(path, recursive=True)

    def open_input(self, location: str | os.PathLike[str]) -> pa.NativeFile:
        """A random-access reader of a file, for ``pyarrow.parquet``, ``pyarrow.orc`` and ``fastavro``.

        :param location: path, ``file://`` or ``s3://`` URI
        :raises FileNotFound: it does not exist
        """
        fs, path = self.resolve(location)
        with self._errors("read", location):
            return fs.open_input_file(path)

    def open_output(self, location: str | os.PathLike[str]) -> pa.NativeFile:
        """A writer of a new file (for ``pyarrow.parquet``). Locally the file exists from the start and grows; on
        S3 the object appears whole when the stream is closed, or not at all. Missing local folders are created.

        :param location: path, ``file://`` or ``s3://`` URI
        """
        fs, path = self.resolve(location)
        with self._errors("write", location):
            if fs is self.filesystem:
                os.makedirs(os.path.dirname(path), exist_ok=True)
            return fs.open_output_stream(path, compression=None)

    def _put(self, location: str | os.PathLike[str], data: bytes) -> None:
        """Upload one S3 object; it becomes visible whole, when the upload completes, or not at all."""
        fs, path = self.resolve(location)
        with self._errors("write", location):
            with fs.open_output_stream(path, compression=None) as out:
                out.write(data)

    def _write_temp(self, path: str, data: bytes, fsync: bool) -> str:
        directory, name = os.path.split(path)
        os.makedirs(directory, exist_ok=True)
        temp = os.path.join(directory, f".{name}.{uuid.uuid4().hex}{_TEMP_SUFFIX}")
        try:
            with open(temp, "xb") as out:
                out.write(data)
                if fsync:
                    out.flush()
                    os.fsync(out.fileno())
        except BaseException:
            _unlink_quietly(temp)
            raise
        return temp

    @staticmethod
    @contextmanager
    def _errors(action: str, location: str | os.PathLike[str]) -> Iterator[None]:
        """Translate ``OSError`` into the storage error for that case, naming the location."""
        text = os.fspath(location)
        try:
            yield
        except FileNotFoundError as e:
            raise FileNotFound(f"Cannot {action} file: {text!r} does not exist", path=text) from e
        except FileExistsError as e:
            raise FileAlreadyExists(f"Cannot {action} file: {text!r} already exists", path=text) from e
        except OSError as e:
            raise FileError(f"Cannot {action} file: {text!r} ({e})", path=text) from e


#: the FileIO of code that is handed no other: local paths and ``file://`` URIs only (S3 is not configured)
LOCAL_FILES = FileIO()


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_quietly(path: str) -> None:
    """Remove a temporary file during cleanup, where the error being handled is the one to report."""
    try:
        os.unlink(path)
    except OSError:
        pass
