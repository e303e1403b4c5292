"""What a table may name, where it may live, and which files it owns: the rules that keep every table inside
what is its own.

Layer: engine (pure rules on names and locations, plus the few file-system questions they need: does a folder
exist, is it empty, where does a symlink lead). Callers are the catalog (create, register, purge), the commit
paths that bring in files (the REST server, ``row_delta``, ``append_data_files``, ``append_files``) and the
garbage collection (expire, orphan removal), which deletes only what :meth:`Ownership.may_delete` allows.

The rules:

- A name part (namespace level or table name) is a single, writable folder name: not empty, not ``.`` or
  ``..``, no path separator, NUL or control character, at most 255 bytes of UTF-8.
- A table's location is never the warehouse root, never holds the catalog's own database files, and is never
  equal to, inside, or a parent of another table's location. An explicit location must also be absent or an
  empty folder. A default location (``<warehouse>/<namespace>/<name>``) that breaks a rule (a folder left by a
  renamed or dropped table, a nested namespace inside a table's folder) moves to a fresh folder beside it.
- A table owns the files under its own location that are not under another table's location, are not the
  catalog's files, and are not the original metadata of a table registered in place (the original writer's).
  Files a table references outside its location (``append_files`` of files in place, tables registered with
  their data elsewhere) are external: never deleted unless the caller asks for it, and even then never another
  table's or the catalog's.
- On an object store, the rules compare the object a path reaches, spelled as FileIO reaches it (the key as
  written, a ``%`` included; leading slashes, ``.`` and ``..`` segments gone, see :func:`normalize_location`). A
  location or a file a table takes in whose spelling is ambiguous (an empty, ``.`` or ``..`` segment, a ``?`` or
  ``#``, see :func:`spelling_problem`) is refused, and never counts as owned.

::

    check_identifier(("db",), "events")                 # raises ValidationError for ("..", "x"), ("db", "a/b"), ...
    owned = Ownership(table_location, others, catalog_files)
    owned.may_delete("/w/db/events/data/a.parquet")     # True
    owned.may_delete("/w/db/other/data/b.parquet")      # False
"""

from __future__ import annotations

import os
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from engine.errors import ValidationError
from storage.errors import ProtectedFileError
from storage.files import DATABASE_SUFFIXES, OPEN_DATABASES, check_not_database

#: the longest file name (one path component) Linux file systems take, in bytes
NAME_MAX_BYTES = 255
#: the longest path the kernel takes, in bytes
PATH_MAX_BYTES = 4096
#: a database file's companions (SQLite's, and icelog's writer lock); all of them belong to the catalog
CATALOG_FILE_SUFFIXES = DATABASE_SUFFIXES
#: table properties that send a writer's files somewhere else than ``<location>/data`` or ``/metadata``
TABLE_PATH_PROPERTIES = ("write.data.path", "write.metadata.path", "write.object-storage.path",
                         "write.folder-storage.path")


# ---------------------------------------------------------------- the catalog's own files


def refuse_nul(path: str, action: str) -> None:
    """Refuse a path holding a NUL character: no file system or object store has such a name (and ``os`` calls
    raise a bare ValueError on it).

    :raises ValidationError: naming the path
    """
    if "\x00" in os.fspath(path):
        raise ValidationError(f"Cannot {action}: the path {path!r} holds a NUL character")


def refuse_catalog_database(path: str, action: str = "read file") -> None:
    """Refuse a path that is a catalog database this process has open (by any name, symlink or hard link), before
    anything opens it: closing a descriptor on it would drop SQLite's locks for the whole process.

    :raises ValidationError: naming the path
    """
    refuse_nul(path, action)
    try:
        check_not_database(path)
    except ProtectedFileError as e:
        raise ValidationError(f"Cannot {action}: {path} is the catalog's own database, never data") from e


# ---------------------------------------------------------------- names


def check_name(part: Any, what: str) -> str:
    """A namespace level or table name that can be a folder name of its own, or ValidationError naming it.

    :param part: the name
    :param what: what it names, for the message ("table name", "namespace")
    """
    if not isinstance(part, str):
        raise ValidationError(f"Cannot use {what} {part!r}: not a string")
    shown = repr(part) if len(part) <= 80 else f"{part[:60]!r}... ({len(part)} characters)"
    if not part:
        raise ValidationError(f"Cannot use {what} {shown}: it is empty")
    if part in (".", ".."):
        raise ValidationError(f"Cannot use {what} {shown}: it names a folder of the path itself")
    for ch in part:
        if ch in "/\\":
            raise ValidationError(f"Cannot use {what} {shown}: it holds the path separator {ch!r}")
        if unicodedata.category(ch) in ("Cc", "Cs"):  # control characters (NUL included) and lone surrogates
            raise ValidationError(f"Cannot use {what} {shown}: it holds the control character {ch!r}")
    size = len(part.encode("utf-8"))
    if size > NAME_MAX_BYTES:
        raise ValidationError(f"Cannot use {what} {shown}: it is {size} bytes long, more than a file name may be "
                              f"({NAME_MAX_BYTES})")
    return part


#: the catalog's pointer tables hold a namespace (its levels joined by dots), a property key and a property value in
#: at most these many characters, as Java's JdbcCatalog's do (PostgreSQL enforces them; SQLite would not)
NAMESPACE_MAX_CHARS, PROPERTY_KEY_MAX_CHARS, PROPERTY_VALUE_MAX_CHARS = 255, 255, 1000


def check_namespace(namespace: Sequence[str]) -> None:
    """Every level of a namespace is a valid name (see :func:`check_name`)."""
    if not namespace:
        raise ValidationError("Cannot use an empty namespace")
    for part in namespace:
        check_name(part, "namespace")


def check_new_namespace(namespace: Sequence[str]) -> None:
    """A namespace to create: valid names (:func:`check_namespace`) without dots whose joined name fits the
    catalog's pointer tables (only new ones: a namespace a catalog made before keeps working)."""
    check_namespace(namespace)
    dotted = next((level for level in namespace if "." in level), None)
    if dotted is not None:  # ('d.e',) and ('d', 'e') would be one namespace in the pointer tables
        raise ValidationError(f"Cannot use namespace {tuple(namespace)!r}: level {dotted!r} holds a dot, and the SQL "
                              f"catalog tables (PyIceberg's SqlCatalog, Java's JdbcCatalog) join levels with dots")
    joined = ".".join(namespace)
    if len(joined) > NAMESPACE_MAX_CHARS:
        raise ValidationError(f"Cannot use namespace {joined[:60]!r}... ({len(joined)} characters): a namespace "
                              f"is at most {NAMESPACE_MAX_CHARS} characters, its levels joined by dots")


def check_namespace_properties(namespace: Sequence[str], properties: Mapping[str, str]) -> None:
    """Namespace properties the catalog's pointer tables can hold: keys of 1 to 255 characters, values of at most
    1000, neither with a NUL (PostgreSQL text cannot hold one)."""
    for key, value in properties.items():
        where = f"Cannot set property {key[:60]!r} of namespace {'.'.join(namespace)}"
        if not key or len(key) > PROPERTY_KEY_MAX_CHARS:
            raise ValidationError(f"{where}: a key is 1 to {PROPERTY_KEY_MAX_CHARS} characters, not {len(key)}")
        if len(value) > PROPERTY_VALUE_MAX_CHARS:
            raise ValidationError(f"{where}: a value is at most {PROPERTY_VALUE_MAX_CHARS} characters, not "
                                  f"{len(value)}")
        if "\x00" in key or "\x00" in value:
            raise ValidationError(f"{where}: it holds a NUL character")


def check_identifier(namespace: Sequence[str], name: str) -> None:
    """A table identifier whose every part is a valid name (see :func:`check_name`)."""
    check_namespace(namespace)
    check_name(name, "table name")


# ---------------------------------------------------------------- locations


def is_local(location: str) -> bool:
    """Whether a location is a local path or a ``file:`` URI (not an object store)."""
    scheme = urlsplit(location).scheme
    return not scheme or len(scheme) == 1 or scheme == "file"


def normalize_location(location: str) -> str:
    """One spelling per place: a local path or ``file:`` URI becomes its absolute path with symlinks resolved;
    any other URI becomes ``scheme://bucket/key`` with the key FileIO.resolve (storage.files) reaches: as written
    (a ``%`` is a ``%``, as every Iceberg engine takes it), its leading and trailing slashes gone, its ``.`` and
    ``..`` segments resolved as the S3 client resolves them, no ``?query`` or ``#fragment`` (``s3a://`` and
    ``s3n://`` read as ``s3://``)."""
    text = os.fspath(location)
    parts = urlsplit(text)
    if parts.scheme == "file":
        return os.path.realpath(parts.path)  # FileIO hands a file: URI's path to the kernel as written
    if not parts.scheme or len(parts.scheme) == 1:
        # FileIO writes a plain path where os.path.abspath puts it (``..`` taken off as text, before any symlink
        # is followed), so the rules judge that place, not the one the kernel would reach through a symlink
        return os.path.realpath(os.path.abspath(text))
    scheme = "s3" if parts.scheme in ("s3a", "s3n") else parts.scheme
    return f"{scheme}://{parts.netloc}/{_reached_key(parts.path)}".rstrip("/")


def _reached_key(path: str) -> str:
    """The object key a URI's path reaches (as FileIO.resolve and the S3 client under it spell it)."""
    kept: list[str] = []
    for segment in path.lstrip("/").split("/"):
        if segment == ".":
            continue
        if segment == ".." and kept and kept[-1] != "..":
            kept.pop()
        else:
            kept.append(segment)  # a ".." above the bucket stays: the path then matches no table's location
    return "/".join(kept).rstrip("/")


def spelling_problem(location: str) -> str | None:
    """Why a location or file path on an object store names its object ambiguously, or None (always None for a
    local path, which :func:`normalize_location` resolves on the file system itself).

    Ambiguous: no bucket; a ``?`` or ``#`` (FileIO drops what follows, as Java's S3FileIO); an empty, ``.`` or
    ``..`` segment in the key (FileIO strips leading slashes, the S3 client resolves dot segments).

    ::

        spelling_problem("s3://bk/lake/db/a/../b/x.parquet")   # "has a '..' segment in its key"
        spelling_problem("s3://bk/lake/db/t")                   # None
    """
    text = os.fspath(location)
    if is_local(text):
        return None
    parts = urlsplit(text)
    if not parts.netloc:
        return "names no bucket"
    if "?" in text or "#" in text:
        return "holds a '?' or '#', after which the object's key is cut off"
    key = parts.path.rstrip("/")
    for segment in key[1:].split("/") if key else ():
        if segment in ("", ".", ".."):
            shown = "an empty" if not segment else f"a {segment!r}"
            return f"has {shown} segment in its key, which names another object than the one written"
    return None


def _local_spelling_problem(location: str) -> str | None:
    """Why a local table location is refused as written, or None: a relative path (each process would find the
    table under its own working folder), or a ``.`` or ``..`` segment (the place FileIO writes and the one the
    kernel reaches through a symlink before it differ)."""
    if not is_local(location):
        return None
    parts = urlsplit(location)
    if parts.scheme == "file" and parts.netloc not in ("", "localhost"):
        return f"names host {parts.netloc!r} (a file: URI names this machine's files only)"
    path = parts.path if parts.scheme == "file" else location
    if not path.startswith("/"):
        return "is a relative path (a table location is absolute)"
    if any(segment in (".", "..") for segment in path.split("/")):
        return "has a '.' or '..' segment (spell the folder it means)"
    return None


def is_within(path: str, root: str) -> bool:
    """Whether the normalized ``path`` is ``root`` or below it."""
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root.endswith("/") else root + "/")


def catalog_files(database: str) -> tuple[str, ...]:
    """The normalized paths of a catalog database and its SQLite companions."""
    base = normalize_location(database)
    return tuple(base + suffix for suffix in CATALOG_FILE_SUFFIXES)


def check_table_location(location: str, *, warehouse: str, catalog_database: str,
                         others: Iterable[tuple[str, str]], must_be_empty: bool, what: str,
                         holds_files: Callable[[str], bool] | None = None) -> str:
    """Check where a table may live; returns the normalized location.

    :param location: the table location asked for
    :param warehouse: the warehouse root
    :param catalog_database: the catalog's database file
    :param others: (normalized location, name) of every other table
    :param must_be_empty: refuse an existing file or non-empty folder (new tables; not registered ones)
    :param what: the action, for the message ("create table db.t")
    :param holds_files: whether an object-store location holds anything (the check of ``must_be_empty`` there)
    :raises ValidationError: naming the location and the rule it breaks
    """
    if not isinstance(location, str) or not location.strip():
        raise ValidationError(f"Cannot {what}: location {location!r} is empty")
    if "\x00" in location:
        raise ValidationError(f"Cannot {what}: location {location!r} holds a NUL character")
    if len(location.encode("utf-8", "surrogatepass")) > PATH_MAX_BYTES:
        raise ValidationError(f"Cannot {what}: location is longer than {PATH_MAX_BYTES} bytes")
    problem = spelling_problem(location) or _local_spelling_problem(location)
    if problem is not None:
        raise ValidationError(f"Cannot {what}: location {location} {problem}")
    norm = normalize_location(location)
    if is_local(location) and any(len(p.encode("utf-8", "surrogatepass")) > NAME_MAX_BYTES
                                  for p in norm.split("/")):
        raise ValidationError(f"Cannot {what}: location {location} has a folder name longer than "
                              f"{NAME_MAX_BYTES} bytes")
    root = normalize_location(warehouse)
    if norm == root or is_within(root, norm):
        raise ValidationError(f"Cannot {what}: location {location} is the warehouse {warehouse} or holds it")
    for path in catalog_files(catalog_database):
        if is_within(path, norm) or is_within(norm, path):
            raise ValidationError(f"Cannot {what}: location {location} is, holds or lies inside the catalog's "
                                  f"database file {path}")
    for other, name in others:
        if norm == other:
            raise ValidationError(f"Cannot {what}: location {location} is the location of table {name}")
        if is_within(norm, other):
            raise ValidationError(f"Cannot {what}: location {location} is inside the location of table {name}")
        if is_within(other, norm):
            raise ValidationError(f"Cannot {what}: location {location} holds the location of table {name}")
    if must_be_empty and is_local(location):
        if os.path.isfile(norm) or os.path.islink(norm):
            raise ValidationError(f"Cannot {what}: location {location} is a file")
        if os.path.isdir(norm) and any(True for _ in os.scandir(norm)):
            raise ValidationError(f"Cannot {what}: location {location} is a folder that is not empty")
    elif must_be_empty and holds_files is not None and holds_files(norm):
        raise ValidationError(f"Cannot {what}: location {location} already holds objects")
    return norm


def choose_default_location(warehouse: str, namespace: Sequence[str], name: str, table_uuid: str, *,
                            catalog_database: str, others: Sequence[tuple[str, str]], what: str,
                            holds_files: Callable[[str], bool] | None = None) -> str:
    """``<warehouse>/<namespace...>/<name>`` when that folder is free (see :func:`check_table_location`), else
    ``<name>-<uuid>`` beside it, else ``<warehouse>/<name>-<uuid>`` (a namespace folder inside a table's)."""
    base = warehouse.rstrip("/")
    suffix = uuid.UUID(table_uuid).hex if _is_uuid(table_uuid) else uuid.uuid4().hex
    candidates = ["/".join([base, *namespace, name]), "/".join([base, *namespace, f"{name}-{suffix}"]),
                  f"{base}/{name}-{suffix}"]
    first_error: ValidationError | None = None
    for candidate in candidates:
        try:
            check_table_location(candidate, warehouse=warehouse, catalog_database=catalog_database, others=others,
                                 must_be_empty=True, what=what, holds_files=holds_files)
        except ValidationError as e:
            first_error = first_error or e
            continue
        return candidate
    assert first_error is not None
    raise first_error


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------- files


class Ownership:
    """Which files one table owns, and may therefore delete or bring in as its own.

    ::

        owned = Ownership("/w/db/t", others=[("/w/db/u", "db.u")], catalog_files=catalog_files("/w/catalog.db"))
        owned.owns("/w/db/t/data/a.parquet")        # True
        owned.owner_elsewhere("/w/db/u/data/b.parquet")   # "db.u"

    :param location: the table's location
    :param others: (normalized location, name) of every other table of the catalog
    :param catalog_files: the normalized paths of the catalog's database files
    :param name: the table's name, for messages
    :param original_metadata: names of the files a table registered in place found in its metadata folder: the
        original writer's, under the location but never the table's (but ``version-hint.text``, which icelog moves
        to its own version)
    """

    def __init__(self, location: str, *, others: Iterable[tuple[str, str]], catalog_files: Iterable[str],
                 name: str = "the table", original_metadata: Iterable[str] = ()) -> None:
        self.location = location
        self.root = normalize_location(location)
        self.name = name
        # a table nested in this one's folder (a catalog from before these rules) keeps what is under it
        self.others = tuple((root, other) for root, other in others if root != self.root)
        self.catalog_files = frozenset(catalog_files)
        self._folders: dict[str, str] = {}
        # by name, checked only for a path in the metadata folder: a registration may have found thousands
        self.originals = (original_metadata if isinstance(original_metadata, frozenset)
                          else frozenset(original_metadata))
        self._metadata = self.normalize(f"{location.rstrip('/')}/metadata") if self.originals else ""

    def normalize(self, path: str) -> str:
        """``path`` as :func:`normalize_location` spells it, resolving each folder once."""
        text = os.fspath(path)
        if not is_local(text):
            return normalize_location(text)
        parts = urlsplit(text)
        local = parts.path if parts.scheme == "file" else os.path.abspath(text)
        folder, base = os.path.split(local)
        real = self._folders.get(folder)
        if real is None:
            real = self._folders[folder] = os.path.realpath(folder)
        full = os.path.join(real, base)
        return os.path.realpath(full) if os.path.islink(full) else full

    def owner_elsewhere(self, path: str) -> str | None:
        """The name of the other table whose location holds ``path``, "the catalog" for its database files, the
        original writer for a registered table's original metadata, or None."""
        norm = self.normalize(path)
        if norm in self.catalog_files or (is_local(path) and OPEN_DATABASES.database_of(norm) is not None):
            return "the catalog"
        name = norm.rsplit("/", 1)[-1]
        if name in self.originals and name != "version-hint.text" and os.path.dirname(norm) == self._metadata:
            return f"the writer of {self.name} before its registration (its original metadata)"
        # the deepest location holding the path decides (tables nested in each other before these rules)
        deepest, owner = (self.root, None) if is_within(norm, self.root) else ("", None)
        for root, name in self.others:
            if len(root) > len(deepest) and is_within(norm, root):
                deepest, owner = root, name
        return owner

    def owns(self, path: str) -> bool:
        """Whether ``path`` is under the table's location and belongs to nothing else (never a path spelled
        ambiguously, see :func:`spelling_problem`)."""
        if spelling_problem(path) is not None:
            return False
        return is_within(self.normalize(path), self.root) and self.owner_elsewhere(path) is None

    def may_delete(self, path: str, *, external: bool = False) -> bool:
        """Whether garbage collection may delete ``path``: an owned file, or (with ``external``) a file outside
        every table's location that is not the catalog's."""
        if self.owns(path):
            return True
        if spelling_problem(path) is not None:
            return False
        return external and not is_within(self.normalize(path), self.root) and self.owner_elsewhere(path) is None

    def check_new_file(self, path: str, action: str) -> None:
        """Refuse a file a commit brings in as the table's own unless the table owns it.

        :raises ValidationError: naming the file and where it belongs
        """
        self.check_spelling(path, action)
        owner = self.owner_elsewhere(path)
        if owner is not None:
            raise ValidationError(f"Cannot {action}: {path} belongs to {owner}, not to {self.name}")
        if not is_within(self.normalize(path), self.root):
            raise ValidationError(f"Cannot {action}: {path} is not under the table location {self.location} of "
                                  f"{self.name}")

    def check_external_file(self, path: str, action: str) -> None:
        """Refuse a file brought in from outside (``append_files``) when it is another table's or the catalog's.

        :raises ValidationError: naming the file and its owner
        """
        self.check_spelling(path, action)
        owner = self.owner_elsewhere(path)
        if owner is not None:
            raise ValidationError(f"Cannot {action}: {path} belongs to {owner}, not to {self.name}")

    def check_spelling(self, path: str, action: str) -> None:
        """Refuse a file on an object store whose path names its object ambiguously (see
        :func:`spelling_problem`): what the rules compare would not be the object the path reaches.

        :raises ValidationError: naming the file, the problem and the object it reaches
        """
        refuse_nul(path, action)
        problem = spelling_problem(path)
        if problem is None and not is_local(path) and path.endswith("/"):
            problem = "ends with '/' (icelog reads the key without it, other readers with it)"
        if problem is not None:
            owner = self.owner_elsewhere(path) or ("no table" if not is_within(self.normalize(path), self.root)
                                                   else self.name)
            raise ValidationError(f"Cannot {action}: {path} {problem} (it reaches {self.normalize(path)}, of "
                                  f"{owner}); {self.name} takes in only plainly spelled paths")
