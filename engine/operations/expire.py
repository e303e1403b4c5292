"""Snapshot expiry and orphan-file removal: the table's garbage collection.

Layer: engine.operations (plans from table state, commits through the table, then deletes files
through the catalog's FileIO; reads the log through the state store and the projector's derived
manifest-list index). ``plan_expiry`` is pure: Iceberg Java's RemoveSnapshots rules on one state.
``expire_snapshots`` commits the plan (SnapshotsRemoved plus RefRemoved, one commit), publishes
the projection, then deletes what no remaining snapshot reaches: data and delete files (known
from the log), the expired snapshots' manifest lists, manifests no remaining manifest list names,
and, with ``write.metadata.delete-after-commit.enabled``, metadata files that left the metadata
log. ``remove_orphan_files`` deletes files under the table location that nothing references.

What is deleted is what the table wrote or took over, and nothing else: orphan removal compares the log's paths
and the listing's in one spelling (``Ownership.normalize``: symlinks resolved), and keeps the files the location
held when the table was registered (``TableCreated.original_files``, ``original_metadata``) and any file another
table's log references in a snapshot it keeps; expiry and purge with ``delete_external_files`` keep an external
file another table references.

The log keeps expired snapshots (their events are never removed), so which files a snapshot
reached is computed on the table's whole lineage, expired ancestors included.

::

    result = expire_snapshots(table, older_than_ms=now_ms() - 3_600_000, retain_last=2)
    result.expired_snapshot_ids, result.deleted_data_files
    remove_orphan_files(table, older_than_ms=now_ms() - 3 * 86_400_000)
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Callable, Iterable, Protocol

import attrs

from engine.errors import ValidationError
from engine.state.events import Event, RefRemoved, SnapshotAdded, SnapshotsRemoved, decode
from engine.model.data_file import DataFile, DataFileContent
from engine.model.types import is_long
from engine.operations.commit import CommitContext, now_ms
from engine.ownership import Ownership
from engine.state.table_state import MAIN_BRANCH, Snapshot, TableState
from projections import layout
from projections.manifest_list_index import ManifestListIndex
from projections.projector import Projector
from storage import Log
from storage.errors import FileError, FileNotFound
from storage.files import FileIO, is_s3

if TYPE_CHECKING:
    from engine.state.store import StateStore

MAX_SNAPSHOT_AGE_MS = "history.expire.max-snapshot-age-ms"
MAX_SNAPSHOT_AGE_MS_DEFAULT = 5 * 24 * 60 * 60 * 1000
MIN_SNAPSHOTS_TO_KEEP = "history.expire.min-snapshots-to-keep"
MIN_SNAPSHOTS_TO_KEEP_DEFAULT = 1
MAX_REF_AGE_MS = "history.expire.max-ref-age-ms"
MAX_REF_AGE_MS_DEFAULT = sys.maxsize
GC_ENABLED = "gc.enabled"
DELETE_AFTER_COMMIT = "write.metadata.delete-after-commit.enabled"
ORPHAN_AGE_MS_DEFAULT = 3 * 24 * 60 * 60 * 1000
_METADATA_FILE = re.compile(r"^v(\d+)\.metadata\.json$")


class CollectingCatalog(Protocol):
    """What garbage collection needs of a catalog (``engine.catalog.Catalog`` is one): its state store and log,
    its projector, its FileIO, and which files a table owns."""

    @property
    def store(self) -> StateStore: ...

    @property
    def log(self) -> Log: ...

    @property
    def projector(self) -> Projector: ...

    @property
    def io(self) -> FileIO: ...

    def ownership(self, table_uuid: str, *, name: str | None = None) -> Ownership: ...


class CollectedTable(Protocol):
    """What garbage collection needs of a table handle (``engine.table.Table`` is one)."""

    @property
    def uuid(self) -> str: ...

    @property
    def catalog(self) -> CollectingCatalog: ...

    @property
    def state(self) -> TableState: ...

    def commit_events(self, build: Callable[[TableState, CommitContext], list[Event]]) -> TableState: ...

    def publish(self) -> str | None: ...

    def original_metadata(self) -> frozenset[str]: ...


@attrs.frozen(kw_only=True)
class ExpireResult:
    """What an expiry removed: snapshots and refs from the metadata, files from storage (sorted paths)."""

    expired_snapshot_ids: tuple[int, ...] = ()
    removed_refs: tuple[str, ...] = ()
    deleted_data_files: tuple[str, ...] = ()
    deleted_delete_files: tuple[str, ...] = ()
    deleted_manifests: tuple[str, ...] = ()
    deleted_manifest_lists: tuple[str, ...] = ()
    deleted_metadata_files: tuple[str, ...] = ()


# ---------------------------------------------------------------- planning (pure)


def plan_expiry(state: TableState, now: int, older_than_ms: int | None = None,
                retain_last: int | None = None) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Snapshot ids to expire and refs to remove at time ``now``, by Iceberg Java's rules.

    Refs other than ``main`` whose head is older than their ``max-ref-age-ms`` (else the table's
    ``history.expire.max-ref-age-ms``) go. Each remaining branch keeps its head and the ancestors that
    are younger than its ``max-snapshot-age-ms`` (else ``older_than_ms``, else now minus
    ``history.expire.max-snapshot-age-ms``) or among its first ``min-snapshots-to-keep`` (else
    ``retain_last``, else ``history.expire.min-snapshots-to-keep``); each tag keeps its snapshot; snapshots
    no ref reaches are kept while younger than the table-wide cutoff.

    :param older_than_ms: the default cutoff: snapshots committed before it may expire
    :param retain_last: the default number of snapshots each branch keeps (at least 1)
    """
    _check_arguments(older_than_ms, retain_last)
    if not state.snapshots:
        return (), ()
    default_cutoff = (older_than_ms if older_than_ms is not None
                      else now - state.int_property(MAX_SNAPSHOT_AGE_MS, MAX_SNAPSHOT_AGE_MS_DEFAULT))
    default_min = (retain_last if retain_last is not None
                   else state.int_property(MIN_SNAPSHOTS_TO_KEEP, MIN_SNAPSHOTS_TO_KEEP_DEFAULT))
    default_max_ref_age = state.int_property(MAX_REF_AGE_MS, MAX_REF_AGE_MS_DEFAULT)
    by_id = {s.snapshot_id: s for s in state.snapshots}

    kept_refs = {}
    for name, ref in state.refs:
        if name == MAIN_BRANCH:
            kept_refs[name] = ref
            continue
        head = by_id.get(ref.snapshot_id)
        max_age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else default_max_ref_age
        if head is not None and now - head.timestamp_ms <= max_age:
            kept_refs[name] = ref

    keep: set[int] = {ref.snapshot_id for ref in kept_refs.values()}
    referenced: set[int] = set()
    for ref in kept_refs.values():
        if ref.type != "branch":
            referenced.add(ref.snapshot_id)
            continue
        cutoff = now - ref.max_snapshot_age_ms if ref.max_snapshot_age_ms is not None else default_cutoff
        min_keep = ref.min_snapshots_to_keep if ref.min_snapshots_to_keep is not None else default_min
        branch_keep: set[int] = set()
        ancestry = state.ancestors(ref.snapshot_id)
        for snap in ancestry:
            if len(branch_keep) < min_keep or snap.timestamp_ms >= cutoff:
                branch_keep.add(snap.snapshot_id)
            else:
                break
        keep |= branch_keep
        referenced.update(s.snapshot_id for s in ancestry)
    keep.update(s.snapshot_id for s in state.snapshots
                if s.snapshot_id not in referenced and s.timestamp_ms >= default_cutoff)

    expired = tuple(s.snapshot_id for s in state.snapshots if s.snapshot_id not in keep)
    removed_refs = tuple(name for name, _ in state.refs if name not in kept_refs)
    return expired, removed_refs


# ---------------------------------------------------------------- what snapshots reach


def lineage_state(store: StateStore, state: TableState) -> TableState:
    """``state`` with every snapshot the table's log ever added, expired ones included, so ancestry (and with it
    the files live in a snapshot) reaches back past earlier expiries."""
    known = {s.snapshot_id for s in state.snapshots}
    extra: list[Snapshot] = []
    for e in store.log.read_stream(state.table_uuid, up_to_version=state.version):
        if e.type != SnapshotAdded.TYPE:
            continue
        event = decode(e.type, e.type_version, e.payload, position=e.position)
        assert isinstance(event, SnapshotAdded)
        if event.snapshot_id in known:
            continue
        known.add(event.snapshot_id)
        extra.append(Snapshot(snapshot_id=event.snapshot_id, parent_snapshot_id=event.parent_snapshot_id,
                              sequence_number=event.sequence_number, timestamp_ms=event.timestamp_ms,
                              operation=event.operation, summary=event.summary, schema_id=event.schema_id,
                              commit_id=e.commit_id, log_position=e.position, log_version=e.version,
                              first_row_id=event.first_row_id, added_rows=event.added_rows))
    return attrs.evolve(state, snapshots=tuple(extra) + state.snapshots) if extra else state


def reachable_files(store: StateStore, lineage: TableState, snapshot_ids: Iterable[int]) -> dict[str, DataFile]:
    """Data and delete files live in any of ``snapshot_ids`` (path -> file), read from the log.

    The files live in a snapshot are those live in its parent plus those it adds, so a run of snapshots costs one
    live-file walk at its oldest member plus the adds of the others.
    """
    ids = set(snapshot_ids)
    by_id = {s.snapshot_id: s for s in lineage.snapshots}
    files: dict[str, DataFile] = {}
    for sid in sorted(ids):
        snap = by_id.get(sid)
        if snap is None:
            continue
        if snap.parent_snapshot_id is None or snap.parent_snapshot_id not in ids:
            for entry in store.live_entries(lineage, sid):
                files[entry.file.file_path] = entry.file
        else:
            for change in store.file_changes_of(lineage, snap):
                if change.added:
                    files[change.file.file_path] = change.file
    return files


def projection_files(projector: Projector, state: TableState) -> set[str] | None:
    """The projection files the table's current metadata needs: the snapshots' manifest lists and manifests, the
    metadata files of the metadata log, the current and published ones, and the version hint (None when a
    snapshot's manifest list was never projected, so its manifests are unknown).

    :param projector: the catalog's projector (what it published, and its manifest-list index)
    """
    location = state.location
    paths = {layout.version_hint_file(location), layout.metadata_file_of(state)}
    published = projector.published_version(state.table_uuid)
    if published:
        paths.add(layout.metadata_file_of(state, published))
    paths.update(layout.metadata_file_of(state, v) for _, v in state.metadata_log)
    paths.update(layout.manifest_list_file(location, s.snapshot_id, s.commit_id) for s in state.snapshots)
    manifests, complete = _manifest_paths(projector.index, state.table_uuid,
                                          [s.snapshot_id for s in state.snapshots])
    return paths | manifests if complete else None


# ---------------------------------------------------------------- expiry


def expire_snapshots(table: CollectedTable, older_than_ms: int | None = None, retain_last: int | None = None, *,
                     delete_external_files: bool = False,
                     progress: Callable[[int, int], None] | None = None) -> ExpireResult:
    """Expire snapshots per the table's retention settings and delete the files only they reached.

    One commit removes the expired snapshots and the aged-out refs (nothing is committed when nothing expires);
    the projection is then published, and only then are files deleted, so readers of the new metadata never
    miss one.

    :param table: the table (an ``engine.table.Table``)
    :param older_than_ms: snapshots committed before this time may expire (default: now minus
        ``history.expire.max-snapshot-age-ms``, 5 days); a ref's own ``max-snapshot-age-ms`` takes precedence
    :param retain_last: how many snapshots each branch keeps at least (default
        ``history.expire.min-snapshots-to-keep``, 1); a branch's own ``min-snapshots-to-keep`` takes precedence
    :param delete_external_files: also delete unreachable files outside the table location (``append_files``
        in place); without it they stay, and files under another table's location always stay
    :param progress: called with (data and delete files checked, files the expired snapshots reached) as it
        deletes the unreachable ones
    :raises ValidationError: ``gc.enabled`` is false, ``older_than_ms`` is not an integer, or ``retain_last`` is
        not an integer of at least 1
    """
    _check_arguments(older_than_ms, retain_last)
    _check_gc(table.state)
    attempts: list[_Attempt] = []

    def build(base: TableState, ctx: CommitContext) -> list[Event]:
        _check_gc(base)
        expired, removed_refs = plan_expiry(base, ctx.time_ms, older_than_ms, retain_last)
        attempts.append(_Attempt(base=base, expired=expired, removed_refs=removed_refs))
        events: list[Event] = [RefRemoved(name=name) for name in removed_refs]
        if expired:
            events.append(SnapshotsRemoved(snapshot_ids=expired))
        return events

    table.commit_events(build)
    table.publish()
    landed = attempts[-1]  # the last attempt is the one that committed (or found nothing to commit)
    catalog = table.catalog
    store, io, index = catalog.store, catalog.io, catalog.projector.index
    state = table.state
    expired = landed.expired
    owned = catalog.ownership(table.uuid)
    elsewhere = ReferencedElsewhere(catalog, table.uuid, owned)

    deleted_data: list[str] = []
    deleted_deletes: list[str] = []
    deleted_manifests: list[str] = []
    deleted_lists: list[str] = []
    if expired:
        lineage = lineage_state(store, state)
        current = {s.snapshot_id for s in state.snapshots}
        reachable = reachable_files(store, lineage, current)
        candidates = sorted(reachable_files(store, lineage, expired).items())
        for checked, (path, f) in enumerate(candidates):
            if progress is not None:
                progress(checked, len(candidates))
            # a file another table's log references too (taken over in place by both) is never deleted
            if path not in reachable and owned.may_delete(path, external=delete_external_files) and \
                    not elsewhere.references(path) and _delete(io, path):
                (deleted_data if f.content == DataFileContent.DATA else deleted_deletes).append(path)
        if progress is not None:
            progress(len(candidates), len(candidates))

        kept, complete = _manifest_paths(index, state.table_uuid, current)
        if complete:  # else a snapshot was never projected: its manifests are unknown, so keep them all
            gone, _ = _manifest_paths(index, state.table_uuid, expired)
            deleted_manifests = [p for p in sorted(gone - kept) if owned.owns(p) and _delete(io, p)]

        for sid in expired:
            snap = landed.base.snapshot_by_id(sid)
            if snap is not None and sid not in current:
                path = layout.manifest_list_file(landed.base.location, sid, snap.commit_id)
                if owned.owns(path) and _delete(io, path):
                    deleted_lists.append(path)

    return ExpireResult(expired_snapshot_ids=tuple(sorted(expired)), removed_refs=tuple(sorted(landed.removed_refs)),
                        deleted_data_files=tuple(deleted_data), deleted_delete_files=tuple(deleted_deletes),
                        deleted_manifests=tuple(deleted_manifests), deleted_manifest_lists=tuple(sorted(deleted_lists)),
                        deleted_metadata_files=tuple(_delete_old_metadata(table, state, owned)))


@attrs.frozen(kw_only=True)
class _Attempt:
    """What one commit attempt of an expiry planned, on which base."""

    base: TableState
    expired: tuple[int, ...]
    removed_refs: tuple[str, ...]


def _manifest_paths(index: ManifestListIndex, table_uuid: str,
                    snapshot_ids: Iterable[int]) -> tuple[set[str], bool]:
    """The manifests the snapshots' manifest lists name, from the projector's index, and whether every snapshot
    had its list there."""
    paths: set[str] = set()
    complete = True
    for sid in snapshot_ids:
        manifests = index.get(table_uuid, sid)
        if manifests is None:
            complete = False
        else:
            paths.update(m.manifest_path for m in manifests)
    return paths, complete


def _check_arguments(older_than_ms: object, retain_last: object) -> None:
    """Expiry's arguments, checked before anything is planned or committed."""
    if older_than_ms is not None and not is_long(older_than_ms):
        raise ValidationError(f"Cannot expire snapshots: older_than_ms must be a 64-bit integer (milliseconds since "
                              f"the epoch), got {older_than_ms!r}")
    if retain_last is None:
        return
    if not is_long(retain_last):
        raise ValidationError(f"Cannot expire snapshots: retain_last must be a 64-bit integer, got {retain_last!r}")
    if retain_last < 1:
        raise ValidationError(f"Cannot expire snapshots: retain_last must be at least 1, got {retain_last}")


def _check_gc(state: TableState, action: str = "expire snapshots") -> None:
    if not state.bool_property(GC_ENABLED, True):
        raise ValidationError(f"Cannot {action}: {GC_ENABLED} is false (deleting files may corrupt other tables)")


def _delete(io: FileIO, path: str) -> bool:
    """Delete a file; False when it is already gone."""
    try:
        io.delete(path)
    except FileNotFound:
        return False
    return True


def _delete_old_metadata(table: CollectedTable, state: TableState, owned: Ownership) -> list[str]:
    """With ``write.metadata.delete-after-commit.enabled``, the metadata files older than the current one that
    left the metadata log (``write.metadata.previous-versions-max`` bounds it)."""
    if not state.bool_property(DELETE_AFTER_COMMIT, False):
        return []
    catalog = table.catalog
    io = catalog.io
    directory = layout.metadata_dir(state.location)
    if not io.exists(directory):
        return []
    keep = {state.version, catalog.projector.published_version(state.table_uuid)}
    keep.update(v for _, v in state.metadata_log)
    originals = table.original_metadata()  # a table registered in place: the original writer's stay
    deleted = []
    for path in io.list_dir(directory):
        match = _METADATA_FILE.match(os.path.basename(path))
        if match is None or os.path.basename(path) in originals:
            continue
        version = int(match.group(1)) - state.metadata_base  # the stream version it was published for
        if version < state.version and version not in keep and owned.owns(path) and _delete(io, path):
            deleted.append(path)
    return deleted


# ---------------------------------------------------------------- orphans


def remove_orphan_files(table: CollectedTable, older_than_ms: int | None = None) -> list[str]:
    """Delete files under the table location that no snapshot of the table and no current projection file
    references, last modified before ``older_than_ms`` (default: 3 days ago, as Iceberg Java); returns their
    paths, sorted.

    The cutoff protects files that writers have staged but not committed yet. The projection is published first,
    so the files of the latest commits count as referenced.
    """
    if older_than_ms is not None and not is_long(older_than_ms):
        raise ValidationError(f"Cannot remove orphan files: older_than_ms must be a 64-bit integer (milliseconds "
                              f"since the epoch), got {older_than_ms!r}")
    _check_gc(table.state, "remove orphan files")  # as Java's DeleteOrphanFiles
    table.publish()
    catalog = table.catalog
    store, io = catalog.store, catalog.io
    state: TableState = table.state
    cutoff = older_than_ms if older_than_ms is not None else now_ms() - ORPHAN_AGE_MS_DEFAULT
    root = io.canonical(state.location)
    if not io.exists(root):
        return []

    owned = catalog.ownership(table.uuid)
    spell = spelling(io, owned)  # one spelling for the log's paths and the listing's (symlinks resolved)
    lineage = lineage_state(store, state)
    referenced = {spell(p) for p in reachable_files(store, lineage, [s.snapshot_id for s in state.snapshots])}
    projection = projection_files(catalog.projector, state)
    metadata = layout.metadata_dir(state.location)
    # a snapshot whose manifests are unknown (never projected): leave the metadata folder alone
    protected: tuple[str, ...] = ()
    if projection is None:
        protected = (spell(metadata) + "/",)
    else:
        referenced.update(spell(p) for p in projection)
    # what the location held when the table was registered was never the table's: the original writer's metadata
    # files, and any other file (a user's, one another table took over in place)
    referenced.update(spell(f"{metadata}/{name}") for name in table.original_metadata())
    referenced.update(spell(f"{state.location.rstrip('/')}/{rel}") for rel in original_files(store, table.uuid))
    elsewhere = ReferencedElsewhere(catalog, table.uuid, owned)

    def keep(path: str) -> bool:
        norm = spell(path)
        return norm in referenced or norm.startswith(protected) or not owned.owns(path) or \
            elsewhere.references(path)

    deleted: list[str] = []
    # icelog's own orphans first, from its staging records (no listing needed): files it staged before the
    # cutoff that no kept snapshot references were left by jobs that failed before their commit
    staged = catalog.log.staged_files(table.uuid, before_ms=cutoff)
    settled: list[str] = []
    for path, _ in staged:
        young = False
        if path.endswith("/"):  # a staged job folder (Table.stage_folder): every file under it was staged, when
            # the job wrote it: a file written since the cutoff may be a running job's, and stays, as the folder's
            # record does (a later run deletes what the job leaves)
            listed_here = io.list_files(path.rstrip("/"))
            young = any(mtime is None or mtime >= cutoff for _, mtime in listed_here)
            locals_ = [p for p, mtime in listed_here if mtime is not None and mtime < cutoff]
        else:
            locals_ = [io.canonical(path)]
        for local in locals_:
            if not keep(local) and io.exists(local) and _delete(io, local):
                deleted.append(local)
        if not young:
            settled.append(path)
    catalog.log.forget_staged(table.uuid, settled)
    # then files other writers left under the table folder, by listing it
    listed = io.list_files(root)
    gone = set(deleted)
    for path, mtime_ms in listed:
        if mtime_ms is None or mtime_ms >= cutoff or path in gone or keep(path):
            continue
        if _delete(io, path):
            deleted.append(path)
    return sorted(deleted)


def original_files(store: StateStore, table_uuid: str) -> tuple[str, ...]:
    """The files the table's location held when it was registered, other than its original metadata and the files
    its history took over (paths relative to the location; none for a table icelog created)."""
    created = store.table_created(table_uuid)
    return created.original_files if created is not None else ()


def spelling(io: FileIO, owned: Ownership) -> Callable[[str], str]:
    """One spelling per file, for comparing the log's paths with a listing's: FileIO's canonical form (one
    scheme for S3), then ``owned.normalize`` (symlinks resolved); a path FileIO cannot place keeps its text."""
    def spell(path: str) -> str:
        try:
            path = io.canonical(path)
        except FileError:
            pass
        return owned.normalize(path)
    return spell


class ReferencedElsewhere:
    """The data and delete files other tables' logs reference in a snapshot they keep (read once, when first
    asked): garbage collection of one table never deletes them.

    :param catalog: the catalog
    :param table_uuid: the table collecting (its own references do not count)
    :param owned: its ownership (for the spelling of paths)
    """

    def __init__(self, catalog: CollectingCatalog, table_uuid: str, owned: Ownership) -> None:
        self.catalog, self.table_uuid = catalog, table_uuid
        self.spell = spelling(catalog.io, owned)
        self._paths: set[str] | None = None

    def references(self, path: str) -> bool:
        """Whether another table's log references ``path`` (in any spelling of it)."""
        if self._paths is None:
            store = self.catalog.store
            paths: set[str] = set()
            for entry in store.catalog().tables:
                if entry.table_uuid == self.table_uuid:
                    continue
                other = store.table(entry.table_uuid)
                lineage = lineage_state(store, other)
                paths.update(self.spell(p) for p in
                             reachable_files(store, lineage, [s.snapshot_id for s in other.snapshots]))
            self._paths = paths
        return self.spell(path) in self._paths


# ---------------------------------------------------------------- purge


def purge_files(catalog: CollectingCatalog, table_uuid: str, owned: Ownership, *,
                delete_external: bool = False) -> list[str]:
    """Delete the files a (dropped) table owns; returns their paths, sorted.

    What the log says the table wrote or took over: the data and delete files of every snapshot it ever had,
    icelog's metadata files, manifest lists and manifests (names derived from its commits), and the files staged
    for it (icelog's writers, REST clients' manifests). Each goes only when ``owned`` allows it; then the folders
    under the location that are left empty go too. Nothing else is touched: a stray file in the folder, the
    original metadata of a registered table, another table's files. With ``gc.enabled=false`` the data and delete
    files stay (and what was staged outside the metadata folder), as Java's ``CatalogUtil.dropTableData`` keeps
    them: they may be other tables' too.

    :param catalog: the catalog (an ``engine.catalog.Catalog``)
    :param table_uuid: the table's stream
    :param owned: what the table owns (``catalog.ownership(table_uuid)``)
    :param delete_external: also delete referenced files outside the location (see ``Ownership.may_delete``)
    """
    store, io = catalog.store, catalog.io
    state = store.table(table_uuid)
    location = state.location
    lineage = lineage_state(store, state)
    gc = state.bool_property(GC_ENABLED, True)
    candidates = set(reachable_files(store, lineage, [s.snapshot_id for s in lineage.snapshots])) if gc else set()
    candidates.add(layout.version_hint_file(location))
    # icelog's metadata files: one per commit, named by the commit's last stream version (a registered table's
    # original metadata files, named like them, were not written by icelog and stay)
    last_versions: dict[str, int] = {}
    for event in store.log.read_stream(table_uuid):
        last_versions[event.commit_id] = event.version
    candidates.update(layout.metadata_file_of(state, v) for v in last_versions.values())
    manifest_names = set()
    for snap in lineage.snapshots:
        if snap.commit_id:
            candidates.add(layout.manifest_list_file(location, snap.snapshot_id, snap.commit_id))
            manifest_names.add(os.path.basename(layout.manifest_file(location, snap.commit_id, snap.snapshot_id, 0))
                               .rsplit("-m", 1)[0])
    staged = catalog.log.staged_files(table_uuid)
    metadata = layout.metadata_dir(location)
    for path, _ in staged:
        if not gc and not io.canonical(path).startswith(io.canonical(metadata).rstrip("/") + "/"):
            continue
        if path.endswith("/"):
            candidates.update(_files_under(io, path.rstrip("/")))
        else:
            candidates.add(path)
    if io.exists(metadata):  # icelog's manifests by name, and what interrupted writes of its files left
        named = {os.path.basename(io.canonical(p)) for p in candidates}
        for path in io.list_dir(metadata):
            base = os.path.basename(path)
            if base.rsplit("-m", 1)[0] in manifest_names or _temp_of(base) in named or \
                    _temp_of(base).rsplit("-m", 1)[0] in manifest_names:
                candidates.add(path)
    elsewhere = ReferencedElsewhere(catalog, table_uuid, owned)
    deleted = []
    for path in sorted(candidates):
        if not owned.may_delete(path, external=delete_external):
            continue
        if elsewhere.references(path):  # taken over in place by another table too (under this location or not)
            continue
        local = io.canonical(path)
        if _delete(io, path):
            deleted.append(local)
        crc = os.path.join(os.path.dirname(local), f".{os.path.basename(local)}.crc")  # Hadoop's checksum file
        if owned.owns(crc) and _delete(io, crc):
            deleted.append(crc)
    catalog.log.forget_staged(table_uuid, [p for p, _ in staged])
    if not is_s3(location):  # S3 has no folders to leave behind
        _remove_empty_folders(io.fs_path(location), owned)
    return sorted(deleted)


def _files_under(io: FileIO, folder: str) -> list[str]:
    return [path for path, _ in io.list_files(folder)]


def _temp_of(name: str) -> str:
    """The file an interrupted atomic write of FileIO was writing (``.<name>.<hex>.tmp`` -> ``<name>``)."""
    if name.startswith(".") and name.endswith(".tmp"):
        return name[1:-4].rsplit(".", 1)[0]
    return ""


def _remove_empty_folders(root: str, owned: Ownership) -> None:
    """Remove the folders under ``root`` (and ``root``) that are empty, deepest first; never another table's."""
    if not os.path.isdir(root) or os.path.islink(root):
        return
    for folder, _, _ in sorted(os.walk(root), key=lambda w: -len(w[0])):
        if owned.owner_elsewhere(folder) is not None:
            continue
        try:
            os.rmdir(folder)  # fails on a folder that still holds something: it stays
        except OSError:
            pass
