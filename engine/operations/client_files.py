"""The files a REST client wrote for a commit, read before it: :func:`load_client_snapshots` reads each
``add-snapshot``'s manifest list and the manifests that are not icelog's own (icelog's are in the parent's published
list), so a commit reads only the manifests that changed; :func:`rebase_append` moves a pure append whose branch
head moved on onto the new head; and a snapshot's file changes come from comparing the client's snapshot with its
parent as the log has it (files of the client's new manifests that the parent does not have are added, ADDED
entries keeping an explicit data sequence number when it differs from the snapshot's, as ``rewrite_data_files``
writes; files of the parent that the client's snapshot no longer has, DELETED entries or gone with a manifest
icelog published, are removed).

Layer: engine.operations (reads the client's manifest lists and manifests through projections.manifests and
storage.files before the commit; comparing and rebasing are pure and run inside the log's write transaction).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Sequence

import attrs

from engine.errors import CorruptFileError, RequirementFailed, ValidationError
from engine.state.events import FileChange
from engine.model.data_file import (
    DataFile,
    DataFileContent,
    EntryStatus,
    ManifestContent,
    ManifestEntry,
    ManifestFile,
    deletion_vector_problem,
)
from engine.operations.table_commit import TableCommit, check_requirements
from engine.state.table_state import TableState
from projections import layout
from engine.registration.metadata_import import read_file_bytes
from projections.manifest_reader import inherit_first_row_ids, read_manifest, read_manifest_list
from storage.errors import LogError
from storage.files import FileIO


@attrs.frozen(kw_only=True)
class ClientSnapshot:
    """What the client wrote for one new snapshot, read before the commit.

    :param snapshot_id: the client's snapshot id
    :param manifest_list: the client's manifest list path
    :param manifests: the manifests the list names
    :param entries: entries of the manifests read (those not in ``parent_manifests``), by manifest path, spec ids
        taken from the list
    :param parent_manifests: the manifest paths of the parent's published manifest list, or None when that list
        could not be read (then every manifest was read, and the client's live set is complete)
    :param gone_entries: entries of the parent's manifests the client's list dropped
    """

    snapshot_id: int
    manifest_list: str
    manifests: tuple[ManifestFile, ...]
    entries: Mapping[str, tuple[ManifestEntry, ...]]
    parent_manifests: frozenset[str] | None
    gone_entries: tuple[ManifestEntry, ...] = ()

    def written_files(self) -> list[str]:
        """The client's files icelog records as staged: the manifest list and the manifests it wrote for this
        snapshot (a list also names older manifests, icelog's own among them)."""
        return [self.manifest_list] + [m.manifest_path for m in self.manifests
                                       if m.added_snapshot_id == self.snapshot_id]


def _entries(io: FileIO, m: ManifestFile, what: str) -> tuple[ManifestEntry, ...]:
    """The manifest's entries with the list's spec id (the spec's authority); a manifest whose own header names
    another spec is refused: its partition tuples are laid out for that one."""
    header, entries = read_manifest(read_file_bytes(io, m.manifest_path, what), m.manifest_path)
    own = header.get("partition-spec-id")
    if own is not None and own.strip().lstrip("-").isdigit() and int(own) != m.partition_spec_id:
        raise ValidationError(f"Cannot read {what} {m.manifest_path}: the manifest list gives it partition spec "
                              f"{m.partition_spec_id}, its own header spec {own}")
    return tuple(e if e.data_file.spec_id == m.partition_spec_id else
                 attrs.evolve(e, data_file=attrs.evolve(e.data_file, spec_id=m.partition_spec_id)) for e in entries)


def load_client_snapshots(io: FileIO, commit: TableCommit, base: TableState | None,
                          check_path: Callable[[str], None] | None = None,
                          projected: Callable[[str, int], Sequence[ManifestFile] | None] | None = None
                          ) -> dict[int, ClientSnapshot]:
    """Read the manifest list of each snapshot the commit adds and the manifests in it that are not the parent's.

    :param check_path: called with each manifest list and manifest path before it is read; raises to refuse it
        (a file the table does not own)
    :param projected: ``projected(table_uuid, snapshot_id)``: the manifests of a snapshot's list as the projection
        wrote it, or None when unknown (the projector's index: then the published list is not read back)
    :raises CorruptFileError: a manifest list or manifest that is missing or unreadable
    """
    check = check_path or (lambda path: None)
    out: dict[int, ClientSnapshot] = {}
    for snap in commit.snapshots():
        list_path = snap["manifest-list"]
        check(list_path)
        parent_id = snap.get("parent-snapshot-id")
        parent_manifests: dict[str, ManifestFile] | None = None
        if base is not None and parent_id is not None:
            parent = base.snapshot_by_id(parent_id)
            if parent is not None:
                parent_manifests = _published_manifests(io, base, parent.snapshot_id, parent.commit_id, projected)
        # the parent's manifests, which the client's list repeats, are the records icelog published for them
        manifests = tuple(read_manifest_list(read_file_bytes(io, list_path, "the client's manifest list"), list_path,
                                             known=parent_manifests))
        for m in manifests:  # the parent's manifests are the table's already: only the others are checked
            if parent_manifests is None or m.manifest_path not in parent_manifests:
                check(m.manifest_path)
        listed = {m.manifest_path for m in manifests}
        entries = {m.manifest_path: _entries(io, m, "the client's manifest") for m in manifests
                   if parent_manifests is None or m.manifest_path not in parent_manifests}
        gone: list[ManifestEntry] = []
        if parent_manifests is not None:
            for path, m in parent_manifests.items():
                if path not in listed:
                    gone.extend(_entries(io, m, "parent manifest"))
        out[snap["snapshot-id"]] = ClientSnapshot(
            snapshot_id=snap["snapshot-id"], manifest_list=list_path, manifests=manifests, entries=entries,
            parent_manifests=None if parent_manifests is None else frozenset(parent_manifests),
            gone_entries=tuple(gone))
    return out


def _published_manifests(io: FileIO, base: TableState, snapshot_id: int, commit_id: str,
                         projected: Callable[[str, int], Sequence[ManifestFile] | None] | None
                         ) -> dict[str, ManifestFile] | None:
    """The manifests of a snapshot's published list by path: from the projector's index when it knows them, else
    read from the list; None when it was never published (then every manifest of the client's list is read)."""
    known = projected(base.table_uuid, snapshot_id) if projected is not None else None
    if known is not None:
        return {m.manifest_path: m for m in known}
    published = layout.manifest_list_file(base.location, snapshot_id, commit_id)
    try:
        return {m.manifest_path: m for m in read_manifest_list(io.read_bytes(published), published)}
    except (LogError, CorruptFileError):
        return None


@attrs.frozen
class RebasedSnapshot:
    """A client's append moved onto the branch head: its id and the files it adds (found against the snapshot the
    client built on; they inherit the new sequence number)."""

    snapshot_id: int
    changes: tuple[FileChange, ...]


#: the files live in a snapshot of a state by ``DataFile.key`` (``StateStore.live_files_by_key``)
LiveFilesOf = Callable[[TableState, int | None], Mapping[str, DataFile]]


def rebase_append(base: TableState | None, commit: TableCommit, client_snapshots: Mapping[int, ClientSnapshot],
                  live_files: LiveFilesOf, stream: str, *, time_ms: int) -> tuple[TableCommit, RebasedSnapshot] | None:
    """A commit whose only failed requirement is its branch's ``assert-ref-snapshot-id``, and which only appends
    data files on that branch, rebased onto the branch's head, as Iceberg Java's own append retries on a refreshed
    base (an append reads nothing, so what landed meanwhile cannot conflict with it). Returns the rebased commit
    and its moved snapshot; None when the commit is not such an append (the requirement's failure stands: 409).

    The rebased snapshot keeps the client's id, files and summary of what it added; it gets the head as parent, the
    next sequence number (its files inherit it), totals recounted from the head's, and, as Java's retry gives it,
    the table's current schema id and the time of the commit (``time_ms``, never before the head's: a snapshot log
    going back in time is one Java refuses to load). In format v3 its row ids move
    too: its ``first-row-id`` becomes the head's ``next-row-id``, and the first row ids of the manifests it wrote
    move by as much (its files inherit them), as Java's manifest list writer assigns them on a retry.
    """
    if base is None or commit.creates:
        return None
    snapshots = [u for u in commit.updates if u["action"] == "add-snapshot"]
    refs = [u for u in commit.updates if u["action"] == "set-snapshot-ref"]
    if len(snapshots) != 1 or len(refs) != 1 or len(commit.updates) != 2:
        return None
    snap, ref = dict(snapshots[0]["snapshot"]), refs[0]
    sid, branch = snap.get("snapshot-id"), ref.get("ref-name")
    if ref.get("snapshot-id") != sid or ref.get("type") != "branch" or not isinstance(branch, str):
        return None
    summary = {str(k): str(v) for k, v in (snap.get("summary") or {}).items()}
    if summary.get("operation", "append") != "append" or sid not in client_snapshots:
        return None
    asserted = [r for r in commit.requirements if r["type"] == "assert-ref-snapshot-id" and r.get("ref") == branch]
    if len(asserted) != 1 or asserted[0].get("snapshot-id") != snap.get("parent-snapshot-id"):
        return None
    built_on = snap.get("parent-snapshot-id")
    head_ref = base.ref(branch)
    if head_ref is None or head_ref.type != "branch" or (built_on is not None and not any(
            s.snapshot_id == built_on for s in base.iter_ancestors(head_ref.snapshot_id))):
        return None  # the branch is gone (a tag of its name cannot be committed to), or left what the client read
    rest = TableCommit(requirements=tuple(r for r in commit.requirements if r is not asserted[0]),
                       updates=commit.updates)
    try:
        check_requirements(base, rest, stream)
    except RequirementFailed:
        return None
    client = client_snapshots[sid]
    row_id_shift = 0
    if base.format_version >= 3:
        shift = _row_id_shift(base, snap, client)
        if shift is None:
            return None
        row_id_shift = shift
    # an added entry may spell out the client's own sequence number (DuckDB does), which is inheriting it; any other
    # sequence number of its own cannot move with the snapshot
    client_seq = snap.get("sequence-number")
    moved_entries: dict[str, tuple[ManifestEntry, ...]] = {}
    for path, entries in client.entries.items():
        moved = []
        for e in entries:
            if e.status == EntryStatus.ADDED and (e.data_sequence_number is not None
                                                  or e.file_sequence_number is not None):
                if {e.data_sequence_number, e.file_sequence_number} - {None, client_seq}:
                    return None
                e = attrs.evolve(e, data_sequence_number=None, file_sequence_number=None)
            moved.append(e)
        moved_entries[path] = tuple(moved)
    head = base.snapshot_by_id(head_ref.snapshot_id)
    sequence_number = base.last_sequence_number + 1
    # the client's new manifests move with the snapshot: their entries inherit the new sequence number
    client = attrs.evolve(client, entries=moved_entries, manifests=tuple(
        attrs.evolve(m, sequence_number=sequence_number, min_sequence_number=sequence_number,
                     first_row_id=None if m.first_row_id is None else m.first_row_id + row_id_shift)
        if m.added_snapshot_id == sid else m for m in client.manifests))
    before = {} if built_on is None else live_files(base, built_on)
    try:
        changes = client_file_changes(base, client, before, sequence_number)
    except ValidationError:
        return None
    if not changes or any(not c.added or c.file.content != DataFileContent.DATA for c in changes):
        return None
    now_live = live_files(base, head_ref.snapshot_id)
    if any(c.file.key in now_live for c in changes):
        return None  # a commit since the client's base added the same file: adding it twice is no append of its own
    snap["parent-snapshot-id"] = head.snapshot_id
    snap["sequence-number"] = sequence_number
    snap["schema-id"] = base.current_schema_id
    snap["timestamp-ms"] = max(time_ms, head.timestamp_ms)
    snap["summary"] = _totals_from(head, summary)
    if base.format_version >= 3:
        snap["first-row-id"] += row_id_shift
    requirement = {"type": "assert-ref-snapshot-id", "ref": branch, "snapshot-id": head.snapshot_id}
    updates = tuple({"action": "add-snapshot", "snapshot": snap} if u is snapshots[0] else u for u in commit.updates)
    return (TableCommit(requirements=rest.requirements + (requirement,), updates=updates),
            RebasedSnapshot(snapshot_id=sid, changes=changes))


def _row_id_shift(base: TableState, snap: Mapping[str, Any], client: ClientSnapshot) -> int | None:
    """How far a v3 append's row ids move onto the head: the head's ``next-row-id`` less the client's
    ``first-row-id`` (0 when the client's ids start at or above it); None when they cannot move (no first-row-id,
    a data manifest of its own without a first row id, or an added file that spells out its own)."""
    first = snap.get("first-row-id")
    if not isinstance(first, int) or isinstance(first, bool) or first < 0:
        return None
    sid = snap.get("snapshot-id")
    if any(m.added_snapshot_id == sid and m.content == ManifestContent.DATA and m.first_row_id is None
           for m in client.manifests):
        return None
    if any(e.status == EntryStatus.ADDED and e.data_file.first_row_id is not None
           for entries in client.entries.values() for e in entries):
        return None
    return max(0, (base.next_row_id or 0) - first)


_TOTALS = {"total-records": "added-records", "total-files-size": "added-files-size",
           "total-data-files": "added-data-files"}


def _totals_from(head: Any, summary: Mapping[str, str]) -> dict[str, str]:
    """An append's summary with its totals recounted on a new parent: the parent's totals plus what it adds; totals
    the client did not write or the parent does not have are left out (as Java's updateTotal leaves out what it
    cannot count)."""
    parent = dict(head.summary) if head is not None else {}
    out = {k: v for k, v in summary.items() if not k.startswith("total-")}
    for total, added in _TOTALS.items():
        if total not in summary:
            continue  # the client wrote no such total (DuckDB writes none): none to recount
        try:
            out[total] = str(int(parent[total]) + int(summary.get(added, "0")))  # Java writes no count of 0
        except (KeyError, ValueError):
            continue
    for total in ("total-delete-files", "total-position-deletes", "total-equality-deletes"):
        if total in summary and total in parent:  # an append adds no deletes
            out[total] = parent[total]
    return out


def client_file_changes(state: TableState, client: ClientSnapshot, before: Mapping[str, DataFile],
                  seq: int) -> tuple[FileChange, ...]:
    """Files the client's snapshot adds and removes relative to its parent's live files ``before`` (both keyed by
    ``DataFile.key``); in v3, data files take their first row id by the spec's inheritance."""
    new_live: dict[str, tuple[ManifestEntry, int]] = {}
    deleted: set[str] = set()
    by_path = {m.manifest_path: m for m in client.manifests}
    v3 = state.format_version >= 3
    for path, entries in client.entries.items():
        manifest_seq = by_path[path].sequence_number
        for e in inherit_first_row_ids(entries, by_path[path].first_row_id) if v3 else entries:
            f = e.data_file
            if e.status == EntryStatus.DELETED:
                deleted.add(f.key)
                continue
            data_seq = e.data_sequence_number
            if data_seq is None:
                data_seq = manifest_seq if e.status == EntryStatus.ADDED else seq
            problem = "a Puffin file before format version 3" if not v3 and f.file_format.upper() == "PUFFIN" \
                else deletion_vector_problem(f)
            if problem is not None:
                raise ValidationError(f"Cannot add {f.file_path}: it is {problem}")
            new_live[f.key] = (e, data_seq)
    if client.parent_manifests is None:
        removed = [f for p, f in before.items() if p not in new_live]
    else:
        gone = {e.data_file.key for e in client.gone_entries if e.status != EntryStatus.DELETED}
        # an append removes nothing; a commit that does decodes only the parent files it removes (in their order)
        removed = [before[p] for p in before if (p in gone or p in deleted) and p not in new_live] \
            if gone or deleted else []
    if v3:
        added_vectors = [e.data_file for p, (e, _) in new_live.items()
                         if p not in before and e.data_file.is_deletion_vector]
        if added_vectors:
            gone_keys = {f.key for f in removed}
            kept = [f for p, f in before.items() if f.is_deletion_vector and p not in gone_keys]
            _one_vector_per_data_file(added_vectors, kept)
    changes: list[FileChange] = []
    for p, (e, data_seq) in sorted(new_live.items()):
        if p in before:
            if not (v3 and before[p].first_row_id is None and e.data_file.first_row_id is not None):
                continue
            # a file that first gets a row id after an upgrade to v3 is replaced by itself with the id
            changes.append(FileChange(added=False, file=before[p]))
        if v3 and e.data_file.content == DataFileContent.POSITION_DELETES and not e.data_file.is_deletion_vector:
            raise ValidationError(f"Cannot add position delete file {e.data_file.file_path} to a format version 3 "
                                  f"table: v3 tables take deletion vectors instead")
        if v3 and e.data_file.content == DataFileContent.DATA and e.data_file.first_row_id is None:
            raise ValidationError(f"Cannot add {e.data_file.file_path} to a format version 3 table: neither the file "
                                  f"nor its manifest has a first_row_id")
        if state.format_version >= 2 and data_seq not in (None, 0, seq):
            changes.append(FileChange(added=True, file=e.data_file, data_sequence_number=data_seq))
        else:
            changes.append(FileChange(added=True, file=e.data_file))
    changes += [FileChange(added=False, file=f) for f in removed]
    return tuple(changes)


def _one_vector_per_data_file(added: Sequence[DataFile], kept: Sequence[DataFile] = ()) -> None:
    """A snapshot holds at most one deletion vector per data file (the v3 spec): a client's snapshot adding two for
    one file, or one for a file whose vector from the parent it keeps, is refused (readers fail on it, or apply one
    and bring rows back). Java's writers merge the old vector into the new one and remove the old.

    :param kept: the parent's live vectors the snapshot leaves in place
    :raises ValidationError: naming the data file and both vectors
    """
    seen: dict[str, str] = {f.referenced_data_file: f"{f.file_path}@{f.content_offset}" for f in kept
                            if f.referenced_data_file is not None}
    from_parent = set(seen)
    for f in added:
        if f.is_deletion_vector and f.referenced_data_file is not None:
            other = seen.setdefault(f.referenced_data_file, f"{f.file_path}@{f.content_offset}")
            if other != f"{f.file_path}@{f.content_offset}":
                where = "keeps one from its parent" if f.referenced_data_file in from_parent \
                    else "gets another one in the same snapshot"
                raise ValidationError(f"Cannot add deletion vector {f.file_path}@{f.content_offset}: data file "
                                      f"{f.referenced_data_file} {where} ({other}); a snapshot holds at most one "
                                      f"per data file (merge the old vector into the new one and remove it)")


def named_files(io: FileIO, commit: TableCommit, owns: Callable[[str], bool]) -> list[str]:
    """The files a commit names that the table owns, as far as they can be read: each added snapshot's manifest list
    and the manifests it lists (for a refused commit, whose files become orphans to record). A manifest list the
    table does not own is never opened (it was refused for naming it: another table's, or a device or pipe)."""
    out: list[str] = []
    for snap in commit.snapshots():
        list_path = snap.get("manifest-list")
        if not isinstance(list_path, str) or not owns(list_path):
            continue
        out.append(list_path)
        try:
            out += [m.manifest_path for m in read_manifest_list(io.read_bytes(list_path), list_path)
                    if owns(m.manifest_path)]
        except (LogError, CorruptFileError, ValueError):
            continue
    return out


def file_paths(commit: TableCommit, client_snapshots: Mapping[int, ClientSnapshot]) -> list[str]:
    """Every file the client wrote for the commit (manifest lists, manifests), to record as staged."""
    out: list[str] = []
    for c in client_snapshots.values():
        out += c.written_files()
    return [os.fspath(p) for p in out]
