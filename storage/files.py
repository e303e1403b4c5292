"""File IO for the warehouse: local paths, ``file://`` URIs and S3 objects (``s3://``, ``s3a://``, ``s3n://``),
over ``pyarrow.fs``.

Layer: storage. May touch: the local file system (``os``, ``pyarrow.fs``), an S3 endpoint (``pyarrow.fs``,
``storage.s3``) and ``storage.errors``. Knows nothing of Iceberg. Local reads, listings and deletes go through
``pyarrow.fs.LocalFileSystem`` (the same object the engine hands to ``pyarrow.parquet``); local writes use ``os``
directly because they need what ``pyarrow.fs`` lacks: ``fsync``, an atomic rename over the target, and a no-clobber
publish (``link``). On S3 an object appears whole when its upload completes, so every write is atomic; small
objects, existence checks, whole reads and no-clobber writes (a conditional PUT) go through ``storage.s3`` in one
request each when botocore is there, the rest (random-access reads, listings, large uploads) through ``pyarrow.fs``.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from storage.errors import FileAlreadyExists, FileError, FileNotFound, ProtectedFileError
from storage.s3 import S3_SCHEMES, S3Client, S3Settings, is_s3

_TEMP_SUFFIX = ".tmp"
#: the companion file whose ``flock`` icelog's writers of a database take before SQLite's lock (storage.log)
WRITER_LOCK_SUFFIX = "-writer-lock"
#: a database file's companions: SQLite's, and icelog's writer lock
DATABASE_SUFFIXES = ("", "-wal", "-shm", "-journal", WRITER_LOCK_SUFFIX)


class _OpenDatabases:
    """The SQLite databases this process holds open, by real path, with a count per path.

    Process-wide on purpose: SQLite's POSIX locks belong to the process, and closing *any* descriptor on a database
    file (a data reader opening it by another name) drops them all, after which another process may remove the WAL
    under an acknowledged commit. Every read, write and delete of a location checks here first.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._adding = threading.Lock()  # a check and the registration after it, one opening at a time
        self._counts: dict[str, int] = {}
        #: every last name of an open database's files, case folded (the cheap first test of database_of)
        self._names: frozenset[str] = frozenset()

    def _named(self) -> None:
        self._names = frozenset((os.path.basename(db) + suffix).casefold()
                                for db in self._counts for suffix in DATABASE_SUFFIXES)

    def add(self, path: str, check: Callable[[], None] | None = None) -> None:
        """Count one more connection to the database at ``path``, before it connects (and discard it if connecting
        fails). ``check()``, which may read the file itself (a header), runs first, but only while this process has
        no connection to the file (no lock of SQLite's to drop with the descriptor it closes): a file another
        connection holds open is a database already. A check that raises registers nothing."""
        real = os.path.realpath(path)
        with self._adding:
            if check is not None and self.database_of(path) is None:
                check()
            with self._lock:
                self._counts[real] = self._counts.get(real, 0) + 1
                self._named()

    def forget_other_threads(self) -> None:
        """In a forked child: the registry's locks afresh (a thread of the parent holding one at the fork does not
        exist here to release it). The counts stay: the parent's databases are still open files here."""
        self._lock = threading.Lock()
        self._adding = threading.Lock()

    def discard(self, path: str) -> None:
        real = os.path.realpath(path)
        with self._lock:
            left = self._counts.get(real, 0) - 1
            if left > 0:
                self._counts[real] = left
            else:
                self._counts.pop(real, None)
                self._named()

    def database_of(self, local_path: str) -> str | None:
        """The open database ``local_path`` is (or is a companion of), by name after resolving symlinks or by
        inode (hard links); None for any other file."""
        with self._lock:
            databases, names = list(self._counts), self._names
        if not databases:
            return None
        try:
            st: os.stat_result | None = os.lstat(local_path)
        except OSError:
            st = None
        name = os.path.basename(local_path).casefold()  # (a file system may ignore case: CATALOG.DB is catalog.db)
        # resolving a path that is no symlink keeps its last name: only a database's own names (or a symlink, or
        # a name like "..") can resolve to one, and only those pay for resolving every folder on the way
        if (st is not None and stat.S_ISLNK(st.st_mode)) or name in ("", ".", "..") or name in names:
            real = os.path.realpath(local_path)
            for db in databases:
                if real.startswith(db) and real[len(db):] in DATABASE_SUFFIXES:
                    return db
            try:
                st = os.stat(local_path)
            except OSError:
                return None
        elif st is not None and st.st_nlink == 1:
            return None  # its only name is none of a database's: not a database's file, nor a hard link of one
        if st is None:
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
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=OPEN_DATABASES.forget_other_threads)


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
    local = parts.path if parts.scheme == "file" else text
    database = OPEN_DATABASES.database_of(local)
    if database is not None:
        raise ProtectedFileError(f"Cannot use {text!r}: it is the catalog database {database} (or its journal), "
                                 f"never data", path=text)


class FileIO:
    """Reads and writes files by local path, ``file://`` URI or ``s3://`` (``s3a://``, ``s3n://``) URI.

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
        #: the botocore client of S3 requests; None until first needed, False when not available
        self._client: S3Client | bool | None = None

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
            # the key as written (a '%' is a '%'), as Java's S3FileIO, Hadoop's S3A, PyIceberg and DuckDB take it
            return self._s3_filesystem, f"{parts.netloc}/{parts.path.lstrip('/')}".rstrip("/")
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
            path = parts.path  # as written, as Hadoop's local file system and PyIceberg take it
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
        if fs is not self.filesystem and (client := self._s3_client()) is not None:
            return client.get(path, location=os.fspath(location))  # one GET (pyarrow: a HEAD first)
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
            temp = self._write_temp(path, data, fsync, preallocate=True)
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
            self._put_if_absent(location, data)
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

    def write_fresh(self, location: str | os.PathLike[str], data: bytes) -> None:
        """Write a file under a name nothing else ever takes (a manifest named by its commit), where readers only
        find it through a file written after it: locally straight into place, without a temporary file and a
        rename; a file already there (the same write repeated after a crash) is replaced atomically. Never follows
        a symbolic link at the name.

        :param location: path, ``file://`` or ``s3://`` URI
        """
        if is_s3(location):
            self._put(location, data)
            return
        path = self.fs_path(location)
        with self._errors("write", location):
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
            try:
                fd = os.open(path, flags, 0o666)
            except FileNotFoundError:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                fd = os.open(path, flags, 0o666)
            except FileExistsError:
                fd = -1
            if fd < 0:
                self.write_bytes(location, data)
                return
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            except BaseException:
                os.close(fd)
                _unlink_quietly(path)
                raise
            os.close(fd)

    def write_once(self, location: str | os.PathLike[str], data: bytes, *, fsync: bool = False) -> None:
        """Write a file that is written once and never replaced: when it exists already with exactly these bytes
        (a publish repeated after a crash, or by another process), nothing happens.

        On S3 the write is a conditional PUT (``If-None-Match: *``) when botocore is installed and the server
        supports it, so two writers racing for the name cannot both win; otherwise the key is checked first.

        :raises FileAlreadyExists: the file exists with other bytes (it is left untouched)
        """
        try:
            if is_s3(location):
                self._put_if_absent(location, data)
            else:
                self.write_new(location, data, fsync=fsync)
        except FileAlreadyExists:
            if self.read_bytes(location) != data:
                raise

    def exists(self, location: str | os.PathLike[str]) -> bool:
        """Whether a file or directory exists.

        :param location: path or ``file://`` URI
        """
        fs, path = self.resolve(location)
        with self._errors("inspect", location):
            return fs.get_file_info(path).type != pafs.FileType.NotFound

    def is_file(self, location: str | os.PathLike[str]) -> bool:
        """Whether a file is there (on S3: one HEAD; a prefix with objects under it is no file).

        :param location: path, ``file://`` or ``s3://`` URI
        """
        fs, path = self.resolve(location)
        if fs is not self.filesystem and (client := self._s3_client()) is not None:
            return client.exists(path, location=os.fspath(location))
        with self._errors("inspect", location):
            return fs.get_file_info(path).type == pafs.FileType.File

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
        if fs is not self.filesystem and (client := self._s3_client()) is not None:
            client.delete(path, location=os.fspath(location))
            return
        with self._errors("delete", location):
            if fs is not self.filesystem and fs.get_file_info(path).type == pafs.FileType.NotFound:
                raise FileNotFoundError(path)  # S3 deletes of absent keys succeed silently
            fs.delete_file(path)

    def list_dir(self, location: str | os.PathLike[str]) -> list[str]:
        """The locations of a directory's entries (files and directories, not recursive), sorted.

        Each entry is the given location joined with the entry's name, in the same form: a path for a path, a
        ``file://`` URI for a URI. ``io.list_dir("/w/t/metadata")`` gives
        ``["/w/t/metadata/v1.metadata.json", ...]``.

        :param location: path or ``file://`` URI of the directory
        """
        fs, path = self.resolve(location)
        with self._errors("list", location):
            infos = fs.get_file_info(pafs.FileSelector(path))
        text = os.fspath(location)
        if urlsplit(text).scheme in ("file", *S3_SCHEMES):
            base = text.rstrip("/")
            return sorted(f"{base}/{info.base_name}" for info in infos)
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

    def bucket_exists(self, location: str | os.PathLike[str]) -> bool:
        """Whether the S3 bucket of a location exists (one request); True for a local location.

        :raises FileError: the bucket cannot be asked (an unreachable endpoint, refused credentials)
        """
        if not is_s3(location):
            return True
        fs, path = self.resolve(location)
        with self._errors("inspect", location):
            return fs.get_file_info(path.split("/", 1)[0]).type != pafs.FileType.NotFound

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

    def open_output(self, location: str | os.PathLike[str]) -> Any:
        """A writer of a new file (for ``pyarrow.parquet``). Locally the file exists from the start and grows; on
        S3 the object appears whole when the stream is closed, or not at all. Missing local folders are created.

        :param location: path, ``file://`` or ``s3://`` URI
        """
        fs, path = self.resolve(location)
        if fs is not self.filesystem and self._s3_client() is not None:
            def stream() -> pa.NativeFile:
                with self._errors("write", location):
                    return fs.open_output_stream(path, compression=None)

            return _ObjectUpload(lambda data: self._put(location, data), stream)
        with self._errors("write", location):
            try:
                return fs.open_output_stream(path, compression=None)
            except FileNotFoundError:
                if fs is not self.filesystem:
                    raise
            os.makedirs(os.path.dirname(path), exist_ok=True)  # the first file of a folder
            return fs.open_output_stream(path, compression=None)

    def _put(self, location: str | os.PathLike[str], data: bytes) -> None:
        """Upload one S3 object in one request; it becomes visible whole, or not at all."""
        client = self._s3_client()
        if client is not None:
            client.put(self.resolve(location)[1], data, location=os.fspath(location))
            return
        fs, path = self.resolve(location)
        with self._errors("write", location):
            with fs.open_output_stream(path, compression=None) as out:
                out.write(data)

    def _put_if_absent(self, location: str | os.PathLike[str], data: bytes) -> None:
        """Upload one S3 object unless its key is taken (:class:`FileAlreadyExists`): a conditional PUT where the
        server supports it, else a check and a PUT."""
        client = self._s3_client()
        text = os.fspath(location)
        if client is not None and client.put_if_absent(self.resolve(location)[1], data, location=text):
            return
        if self.exists(location):
            raise FileAlreadyExists(f"Cannot write file: {text!r} already exists", path=text)
        self._put(location, data)

    def _s3_client(self) -> S3Client | None:
        """The botocore client of single-request S3 operations, or None (botocore missing, or no explicit
        keys: then ``pyarrow.fs`` and the SDK's own credential chain serve)."""
        if self._client is None:
            self._client = S3Client.create(self.s3) or False
        return self._client or None

    def _write_temp(self, path: str, data: bytes, fsync: bool, *, preallocate: bool = False) -> str:
        """:param preallocate: allocate the file's blocks before writing (a file renamed over another: ext4 would
            otherwise flush its delayed allocation at the rename, which costs the small version hint more than the
            write; a file system without ``fallocate`` writes as usual)"""
        directory, name = os.path.split(path)
        temp = os.path.join(directory, f".{name}.{uuid.uuid4().hex}{_TEMP_SUFFIX}")
        try:
            try:
                out = open(temp, "xb")
            except FileNotFoundError:
                os.makedirs(directory, exist_ok=True)  # the first file of a folder
                out = open(temp, "xb")
            with out:
                if preallocate and data and hasattr(os, "posix_fallocate"):
                    with contextlib.suppress(OSError):
                        os.posix_fallocate(out.fileno(), 0, len(data))
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


class _ObjectUpload(io.RawIOBase):
    """A new S3 object: written in memory and uploaded with one PUT when closed, or, once it outgrows
    ``SINGLE_PUT_BYTES``, streamed as a multipart upload. A ``with`` block that raises uploads nothing (a
    multipart upload already started is aborted by the SDK when its stream is dropped unclosed)."""

    SINGLE_PUT_BYTES = 32 << 20

    def __init__(self, upload: Callable[[bytes], None], stream: Callable[[], pa.NativeFile]) -> None:
        super().__init__()
        self._buffer: io.BytesIO | None = io.BytesIO()
        self._upload: Callable[[bytes], None] | None = upload
        self._open_stream = stream
        self._stream: pa.NativeFile | None = None
        self._written = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        if self._stream is not None:
            self._stream.write(view)
        else:
            assert self._buffer is not None
            self._buffer.write(view)
            if self._buffer.tell() > self.SINGLE_PUT_BYTES:
                self._stream = self._open_stream()
                self._stream.write(self._buffer.getbuffer())
                self._buffer = None
        self._written += len(view)
        return len(view)

    def tell(self) -> int:
        return self._written

    def close(self) -> None:
        if self.closed:
            return
        upload, self._upload = self._upload, None
        try:
            if self._stream is not None:
                if upload is not None:
                    self._stream.close()
            elif upload is not None and self._buffer is not None:
                upload(self._buffer.getvalue())
        finally:
            self._buffer = None
            super().close()

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is not None:
            self._upload = None
        self.close()


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
