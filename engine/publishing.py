"""Publishing a table's projection from its log, and the checks around it: foreign writers, verification.

Layer: engine (uses the state store and the log, the projector, and a FileIO; knows no Table or Catalog).
A ``TablePublisher`` holds what publishing one table needs: the catalog's state store, projector and FileIO, and
the table's stream and name. Writers of one table queue on its publish lock (``log.exclusive``), and the first
publishes every commit waiting; a metadata file that icelog's log does not account for is a foreign writer's,
refused rather than overwritten.

::

    publisher = TablePublisher(catalog.store, catalog.projector, catalog.io, table.uuid, table.namespace, table.name)
    publisher.publish()
    publisher.verify(table.state)        # [] when the published files match the log
"""

from __future__ import annotations

import os
import time
from typing import Callable, Mapping

from engine.errors import (
    ForeignWriterError,
    IcelogError,
    IntegrityError,
    PublishTimeout,
    TableNotFound,
    ValidationError,
    storage_error,
)
from engine.operations.expire import projection_files
from engine.state.store import StateStore
from engine.state.table_state import TableState
from projections import layout
from projections.projector import Projector, render_all
from storage import FileError
from storage.errors import ConnectionLost
from storage.files import FileIO, is_s3


def write_only_new(io: FileIO, files: Mapping[str, bytes], what: str) -> list[str]:
    """Write rendered files into a folder no table owns (a rebuild's or a past state's view); returns their paths.
    Only new files are written: a file already there with the same bytes (an earlier run's) stays, and one with other
    bytes (whoever's: another table's metadata, a user's file) stops everything before anything is written.

    :param files: path -> bytes
    :param what: the action, for the message ("rebuild db.t into /x")
    :raises ValidationError: a file in the way, naming it
    """
    planned = []
    for path, data in sorted(files.items()):
        there = io.exists(path)
        if there and io.read_bytes(path) != data:
            raise ValidationError(f"Cannot {what}: {path} exists with other content (only new files are written)")
        planned.append((path, data, there))
    for path, data, there in planned:
        if not there:
            io.write_new(path, data)
    return [path for path, _, _ in planned]


class TablePublisher:
    """Publishes, renders and verifies one table's projection.

    :param store: the catalog's state store (and through it, the log)
    :param projector: the catalog's projector
    :param io: the catalog's FileIO
    :param table_uuid: the table's stream
    :param namespace: the table's namespace (the pointer row names it)
    :param name: the table's name
    """

    def __init__(self, store: StateStore, projector: Projector, io: FileIO, table_uuid: str,
                 namespace: tuple[str, ...], name: str) -> None:
        self.store = store
        self.projector = projector
        self.io = io
        self.uuid = table_uuid
        self.namespace = namespace
        self.name = name

    @property
    def identifier(self) -> tuple[str, ...]:
        return self.namespace + (self.name,)

    def check_foreign_writers(self, action: str = "commit to") -> None:
        """Refuse to commit (or publish) over metadata another writer committed behind the log's back.

        A Hadoop-catalog writer (Spark, PyIceberg) reads ``version-hint.text``, writes the next
        ``v<N+1>.metadata.json`` and moves the hint. So two stats and one small read per commit suffice: the
        metadata file after the published version, and the version the hint names. A file there that icelog's
        log does not account for is foreign (an interrupted publish of icelog's own leaves its own rendering).

        :param action: what is refused, for the message ("commit to", "publish")
        :raises ForeignWriterError: naming the file; nothing is committed, nothing is overwritten
        """
        projector, io = self.projector, self.io
        published = projector.published_version(self.uuid)
        if published == 0:
            return
        current = self.store.table(self.uuid)
        location, base = current.location, current.metadata_base
        candidates = [published + 1]
        if not is_s3(location):  # on S3 one HEAD: a Hadoop writer's first file is v<published+1> anyway
            hint_path = layout.version_hint_file(location)
            try:
                hinted = int(io.read_bytes(hint_path).strip() or b"0") - base  # the hint holds file numbers
            except (FileError, OSError, ValueError):
                hinted = published
            if hinted > published + 1:
                candidates.append(hinted)
        for version in candidates:
            path = layout.metadata_file_of(current, version)
            try:
                if not io.is_file(path):
                    continue
            except FileError as e:
                raise storage_error(e, path) from e
            if self._is_own_metadata(path, version, publishing=action == "publish"):
                continue
            raise ForeignWriterError(
                f"Cannot {action} {'.'.join(self.identifier)}: {path} was not published by icelog (another writer "
                f"committed behind the log's back, e.g. through a Hadoop catalog); register or remove it first",
                path=path)

    def _is_own_metadata(self, path: str, version: int, *, publishing: bool) -> bool:
        """Whether the metadata file of ``version`` is icelog's (a publish running now, or one interrupted).

        :param publishing: the caller holds the table's publish lock (no other publish can be running)
        """
        store, projector = self.store, self.projector
        if projector.published_version(self.uuid) >= version:
            return True  # a concurrent publish finished meanwhile
        if version > store.log.head(self.uuid):
            return False
        if self._renders_as(path, version):
            # most likely another writer's publish is running (its file appears whole, linked or put at once): the
            # commit goes on instead of waiting for that publish to end
            return True
        if not publishing:
            # not the log's rendering: foreign, unless a publish running now (of another icelog release) lands it,
            # as the pointer tells once that publish ends (without queueing for the lock)
            with store.log.exclusive(f"publish {self.uuid}", until=self._published_through(version)):
                if projector.published_version(self.uuid) >= version:
                    return True
        return False

    def _renders_as(self, path: str, version: int) -> bool:
        """Whether the file at ``path`` holds icelog's rendering of the table's metadata at ``version``."""
        try:
            state = self.store.table(self.uuid, version)
        except IcelogError:
            return False
        return state.version == version and self.io.read_bytes(path) == self.projector.metadata.render(state)

    def wait_published(self, version: int, timeout_s: float = 30.0, *, poll_s: float = 0.05) -> int:
        """Block until this table's published projection (metadata file, hint, pointer row) has caught up with
        log version ``version`` (read-your-writes for readers of the metadata, such as Spark after a commit made
        by a catalog opened with ``project=False``); returns the published version.

        :param version: the log version to wait for (``table.state.version`` after a commit)
        :param timeout_s: how long to wait
        :param poll_s: how often to look
        :raises PublishTimeout: the projection is still behind after ``timeout_s`` (names the table)
        """
        deadline = time.monotonic() + timeout_s
        projector = self.projector
        while True:
            published = projector.published_version(self.uuid)
            if published >= version:
                return published
            if time.monotonic() >= deadline:
                name = ".".join(self.identifier)
                raise PublishTimeout(f"Cannot wait for {name}: its projection is at version {published}, not "
                                     f"{version}, after {timeout_s:g}s (is a publisher running?)",
                                     table=name, version=version, published=published)
            time.sleep(poll_s)

    # ------------------------------------------------------------ publishing
    def publish(self, *, check_foreign: bool = True, version: int | None = None,
                progress: Callable[[int, int], None] | None = None) -> str | None:
        """Publish every commit since the last published version (manifests, lists, metadata, hint, pointer), up to
        the log's head; returns the newest metadata location, or None when there was nothing to publish.

        :param check_foreign: first refuse metadata another writer committed behind the log's back (a commit that
            has just checked for it passes False)
        :param version: a commit just made: when another writer has published it meanwhile, nothing is done
            (writers of one table queue for its publish lock, and the first publishes what the others wait for)
        :param progress: called with (snapshots published, snapshots to publish) as their files are written
        """
        store = self.store
        for attempt in (1, 2):
            try:
                with store.log.exclusive(f"publish {self.uuid}", until=self._published_through(version)):
                    published = self.projector.published_version(self.uuid)
                    if version is not None and published >= version:
                        return None
                    return self._publish_after(published, store.log.head(self.uuid), check_foreign=check_foreign,
                                               progress=progress)
            except ConnectionLost:
                if attempt == 2:  # a log server that went away under the derived rows: publishing again is safe
                    raise
        return None

    def _published_through(self, version: int | None) -> Callable[[], bool] | None:
        """Whether ``version`` is published yet, as a question a waiter for the publish lock asks: a writer whose
        commit another's publish covers leaves as soon as it shows, instead of queueing for the lock for nothing."""
        if version is None:
            return None
        target = version
        return lambda: self.projector.published_version(self.uuid) >= target

    def _publish_after(self, published: int, head: int, *, check_foreign: bool,
                       progress: Callable[[int, int], None] | None = None) -> str | None:
        store = self.store
        projector = self.projector
        if published >= head:
            return None
        namespace, name = self._registered_name()
        try:
            if check_foreign:  # the commits stay in the log; their files wait for a publish
                self.check_foreign_writers("publish")
            states = store.commits_between(self.uuid, published, head)
            try:
                return projector.publish(namespace, name, states, store.file_changes_of, progress=progress,
                                         name_now=self._name_now)
            except ForeignWriterError:
                raise  # another writer's metadata in the way: never re-project the whole history over it
            except IntegrityError:
                # the derived index lost a parent: re-project from the first commit (same bytes)
                states = store.commits_between(self.uuid, 0, head)
                return projector.publish(namespace, name, states, store.file_changes_of, progress=progress,
                                         name_now=self._name_now)
        except FileError as e:
            raise storage_error(e, e.path) from e

    def _name_now(self) -> tuple[tuple[str, ...], str] | None:
        """The name the catalog gives this table now; None when it names it no more (dropped)."""
        try:
            return self._registered_name()
        except TableNotFound:
            return None

    def _registered_name(self) -> tuple[tuple[str, ...], str]:
        """The name the catalog gives this table now (the pointer row goes under it, not under the name a handle
        was loaded by: the table may have been renamed since, or dropped and its name given to a new table).

        :raises TableNotFound: the catalog no longer names the table (dropped): nothing is published
        """
        entry = self.store.catalog().entry_of(self.uuid)
        if entry is not None:
            return entry.namespace, entry.name
        raise TableNotFound(f"Cannot publish {'.'.join(self.identifier)}: the table was dropped (this handle is "
                            f"stale); nothing is published for it")

    def render(self) -> dict[str, bytes]:
        """Every projected file of this table, rendered from the log alone (path -> bytes)."""
        store = self.store
        states = store.commits_between(self.uuid, 0, store.log.head(self.uuid))
        return render_all(states, store.file_changes_of)

    def rebuild(self, into: str, state: TableState) -> list[str]:
        """Render the projection from the log into another folder (same relative layout); returns the paths. Only
        new files are written (see :func:`write_only_new`).

        :param state: the table's state (its location is the root of the relative layout)
        :raises ValidationError: a file in the way, naming it
        """
        location = state.location.rstrip("/")
        files = {}
        for path, data in self.render().items():
            if not path.startswith(location + "/"):  # every rendered file is under the location: never write elsewhere
                raise IntegrityError(f"Cannot rebuild {path}: it is not under the table location {location}")
            files[f"{os.fspath(into).rstrip('/')}/{path[len(location) + 1:]}"] = data
        return write_only_new(self.io, files, f"rebuild {'.'.join(self.identifier)} into {into}")

    def verify(self, state: TableState) -> list[str]:
        """Published files that differ from a fresh rendering, are missing, or were not written by icelog.

        :param state: the table's state, whose metadata says which files must be there
        """
        problems = []

        published = self.projector.published_version(self.uuid)
        head = self.store.log.head(self.uuid)
        if published < head:  # a crash between commit and publish (or project=False): files may not match yet
            return [f"{'.'.join(self.identifier)}: projection behind the log at version {published} (log head "
                    f"{head}); run publish"]
        rendered = self.render()
        io = self.io
        needed = projection_files(self.projector, state)  # None: some snapshot never projected
        for path, data in sorted(rendered.items()):
            if path.endswith(layout.VERSION_HINT):
                continue
            if path.endswith(".metadata.json"):
                version = int(os.path.basename(path)[1:].split(".")[0]) - state.metadata_base
                if version > published:
                    continue
            if not io.exists(path):
                if needed is None or path in needed:  # expired or cleaned up files may be gone
                    problems.append(f"{path}: missing")
            elif io.read_bytes(path) != data:
                problems.append(f"{path}: differs from the log's rendering")
        metadata_dir = layout.metadata_dir(state.location)
        # files a client of the REST server wrote for a commit (its manifests) are staged, not foreign
        staged = {io.canonical(p) for p, _ in self.store.log.staged_files(self.uuid)}
        originals = self.original_metadata()  # the original writer's, known at registration
        if io.exists(metadata_dir):
            for path in io.list_dir(metadata_dir):
                # a commit is a metadata.json: another file no metadata names is an orphan (a failed job's
                # manifest, a refused statistics file), for remove_orphan_files, not a foreign writer's commit
                if path not in rendered and path.endswith(".metadata.json") and ".tmp" not in path \
                        and io.canonical(path) not in staged and path.rsplit("/", 1)[-1] not in originals:
                    problems.append(f"{path}: not written by icelog (a foreign writer?)")
        return problems

    def original_metadata(self) -> frozenset[str]:
        """Names of the files the table's metadata folder held when it was registered in place (the original
        writer's): never overwritten, never deleted, never called foreign."""
        return self.store.original_metadata(self.uuid)
