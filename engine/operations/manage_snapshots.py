"""Branches, tags, rollback, current snapshot and cherry-pick: Iceberg's ManageSnapshots as one commit.

Layer: engine.operations (pure apart from reading the log: a cherry-pick reads the file changes
of the snapshot it picks through the table's state store). Requests are collected in order and
replayed on the base in ``events``, so a retry after a conflict re-validates every one of them
against what landed meanwhile. Each request is also checked against the table's current state
when it is made, so a bad request raises at once and the builder stays usable.

::

    with table.manage_snapshots() as ms:
        ms.create_tag(snap.snapshot_id, "v1").create_branch(snap.snapshot_id, "audit")
    table.manage_snapshots().rollback_to_snapshot(older.snapshot_id).commit()
    table.manage_snapshots().cherrypick_snapshot(staged.snapshot_id).commit()

Names follow PyIceberg (``create_branch``, ``create_tag``, ``remove_branch``, ``remove_tag``,
``set_current_snapshot``, ``rollback_to_snapshot``, ``rollback_to_timestamp``,
``cherrypick_snapshot``); the rest follow Iceberg Java's SnapshotManager (``replace_branch``,
``replace_tag``, ``rename_branch``, ``fast_forward``, the retention setters).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import attrs

from engine.errors import NotFound, ValidationError
from engine.state.events import Event, FileChange, RefRemoved, RefSet, SnapshotAdded
from engine.model.data_file import DataFile, DataFileContent
from engine.model.partitioning import partition_key
from engine.model.types import is_long
from engine.operations.commit import CommitContext, apply_in_commit, new_commit_id, now_ms
from engine.operations.pending import PendingUpdate
from engine.operations.snapshot import (new_snapshot_id, row_id_backfill_events, snapshot_events,
                                       snapshot_ids_by_branch, snapshot_summary)
from engine.state.table_state import (
    MAIN_BRANCH,
    UNREFERENCED_BRANCH,
    LogPosition,
    Snapshot,
    SnapshotRef,
    TableState,
    apply,
)

BRANCH = "branch"
TAG = "tag"
APPEND = "append"
OVERWRITE = "overwrite"
SOURCE_SNAPSHOT_ID = "source-snapshot-id"
REPLACE_PARTITIONS = "replace-partitions"
WAP_ID = "wap.id"
PUBLISHED_WAP_ID = "published-wap-id"


def _is_ancestor(state: TableState, ancestor_id: int, of_id: int | None) -> bool:
    return any(s.snapshot_id == ancestor_id for s in state.iter_ancestors(of_id))


def _positive(value: int | None, what: str, action: str) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise ValidationError(f"Cannot {action}: {what} must be a positive integer, got {value!r}")
    return value


def _name(value: Any, what: str, action: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(f"Cannot {action}: {what} must be a non-empty string, got {value!r}")
    if value == UNREFERENCED_BRANCH:  # a REST commit removes a ref of that name
        raise ValidationError(f"Cannot {action}: {value} is a name icelog keeps for itself")
    return value


def _tag_name(value: Any, action: str) -> str:
    """A tag's name: never ``main``, which must be a branch (Java's TableMetadata.Builder.setRef)."""
    _name(value, "the tag name", action)
    if value == MAIN_BRANCH:
        raise ValidationError(f"Cannot {action}: {MAIN_BRANCH} must be a branch, not a tag")
    return value


def _integer(value: Any, what: str, action: str) -> int:
    if not is_long(value):
        raise ValidationError(f"Cannot {action}: {what} must be a 64-bit integer, got {value!r}")
    return value


class _Plan:
    """The requests replayed on one base: the working refs, and the snapshots cherry-picks add.

    ``state`` is the base with the new snapshots folded in (so ancestry checks see them); ``refs``
    is where every request leaves the branches and tags.
    """

    def __init__(self, base: TableState, ctx: CommitContext, changes_of: Callable[[TableState, Snapshot],
                                                                                  Sequence[FileChange]],
                 live_paths: Callable[[TableState, int], set[str]]) -> None:
        self.base = base
        self.ctx = ctx
        self.state = base
        self.refs: dict[str, SnapshotRef] = dict(base.refs)
        self.added: list[SnapshotAdded] = []
        self.pending_changes: dict[int, tuple[FileChange, ...]] = {}
        self._changes_of = changes_of
        self._live_paths = live_paths

    # ------------------------------------------------------------ lookups
    def snapshot(self, snapshot_id: Any, action: str) -> Snapshot:
        if not is_long(snapshot_id):
            raise ValidationError(f"Cannot {action}: a snapshot id is a 64-bit integer, got {snapshot_id!r}")
        snap = self.state.snapshot_by_id(snapshot_id)
        if snap is None:
            raise NotFound(f"Cannot {action}: snapshot {snapshot_id} does not exist")
        return snap

    def ref(self, name: str, kind: str | None, action: str) -> SnapshotRef:
        ref = self.refs.get(name)
        if ref is None:
            raise NotFound(f"Cannot {action}: {kind or 'ref'} {name} does not exist")
        if kind is not None and ref.type != kind:
            raise ValidationError(f"Cannot {action}: {name} is a {ref.type}, not a {kind}")
        return ref

    def main_head(self) -> int | None:
        main = self.refs.get(MAIN_BRANCH)
        return None if main is None else main.snapshot_id

    def changes(self, snap: Snapshot) -> Sequence[FileChange]:
        pending = self.pending_changes.get(snap.snapshot_id)
        return pending if pending is not None else self._changes_of(self.state, snap)

    def live_paths(self, snapshot_id: int | None) -> set[str]:
        """Paths live in a snapshot; snapshots added by this plan are not in the log yet, so their changes are
        replayed on the live files of their newest logged ancestor."""
        pending: list[Snapshot] = []
        logged: int | None = None
        for snap in self.state.ancestors(snapshot_id):
            if snap.snapshot_id in self.pending_changes:
                pending.append(snap)
            else:
                logged = snap.snapshot_id
                break
        paths = self._live_paths(self.state, logged) if logged is not None else set()
        for snap in reversed(pending):
            for c in self.pending_changes[snap.snapshot_id]:
                if c.added:
                    paths.add(c.file.key)
                else:
                    paths.discard(c.file.key)
        return paths

    # ------------------------------------------------------------ changes
    def set_ref(self, name: str, ref: SnapshotRef) -> None:
        self.refs[name] = ref

    def move_main(self, snapshot_id: int) -> None:
        self.move(MAIN_BRANCH, snapshot_id)

    def move(self, branch: str, snapshot_id: int) -> None:
        """Point ``branch`` at ``snapshot_id``, keeping its retention settings (a new branch gets none)."""
        ref = self.refs.get(branch)
        self.refs[branch] = (attrs.evolve(ref, snapshot_id=snapshot_id) if ref is not None
                             else SnapshotRef(snapshot_id=snapshot_id))

    def add_snapshot(self, event: SnapshotAdded) -> None:
        """Fold a new snapshot on its branch into the working state (the fold moves the branch, as the log
        will)."""
        at = LogPosition(position=0, version=self.state.version, commit_id=self.ctx.commit_id,
                         time_ms=self.ctx.time_ms)
        self.state = apply(event, self.state, at)
        self.added.append(event)
        self.pending_changes[event.snapshot_id] = event.changes
        self.move(event.branch, event.snapshot_id)

    def events(self) -> list[Event]:
        """The new snapshots, then the ref changes that differ from where the new snapshots leave the refs."""
        after = dict(self.state.refs)
        out: list[Event] = list(self.added)
        out += [RefRemoved(name=name) for name in sorted(after) if name not in self.refs]
        for name in sorted(self.refs):
            ref = self.refs[name]
            if after.get(name) != ref:
                out.append(RefSet(name=name, snapshot_id=ref.snapshot_id, ref_type=ref.type,
                                  min_snapshots_to_keep=ref.min_snapshots_to_keep,
                                  max_snapshot_age_ms=ref.max_snapshot_age_ms, max_ref_age_ms=ref.max_ref_age_ms))
        return out


Request = Callable[[_Plan], None]


class ManageSnapshots(PendingUpdate):
    """Snapshot management on one table, landed as one commit.

    ::

        ms = table.manage_snapshots()
        ms.create_branch(snap_id, "audit", max_ref_age_ms=86_400_000).create_tag(snap_id, "v1")
        ms.commit()

    Every method returns the builder. A request that is invalid on the table's current state raises
    :class:`~engine.errors.ValidationError` or :class:`~engine.errors.NotFound` naming the culprit, and
    is not kept; the commit re-checks every request on the state it commits on.

    :param table: the table handle the builder came from
    """

    def __init__(self, table: Any) -> None:
        super().__init__(table)
        self._store = table.catalog.store
        self._requests: list[Request] = []
        self._backfill_ids = snapshot_ids_by_branch()

    # ------------------------------------------------------------ the builder protocol
    def events(self, base: TableState, ctx: CommitContext) -> list[Event]:
        plan = self._plan(base, ctx)
        for request in self._requests:
            request(plan)
        events = plan.events()
        if base.format_version < 3 or not events:
            return events
        # a v3 branch this commit moves onto a snapshot from before the upgrade (a rollback, a branch from it): its
        # rows get row ids in the same commit, as the upgrade gave the heads of its time, or they would have none
        # (branches it leaves alone stay as they are: their writers assert their heads)
        moved = [e.name for e in events if isinstance(e, RefSet) and e.ref_type == "branch"]
        if not moved:
            return events
        after = base
        for event in events:
            after = apply_in_commit(event, after, ctx)
        return [*events, *row_id_backfill_events(after, ctx, self._store.live_entries, self._backfill_ids,
                                                 branches=moved)]

    def _plan(self, base: TableState, ctx: CommitContext) -> _Plan:
        store = self._store

        def live_paths(state: TableState, snapshot_id: int) -> set[str]:
            return {e.file.key for e in store.live_entries(state, snapshot_id)}

        return _Plan(base, ctx, store.file_changes_of, live_paths)

    def _add(self, request: Request) -> ManageSnapshots:
        """Keep ``request`` if every request so far still applies to the table's current state."""
        self._requests.append(request)
        try:
            self.events(self._table.state, CommitContext(commit_id=new_commit_id(), time_ms=now_ms()))
        except BaseException:
            self._requests.pop()
            raise
        return self

    # ------------------------------------------------------------ branches and tags
    def create_branch(self, snapshot_id: int | None, branch_name: str, max_ref_age_ms: int | None = None,
                      max_snapshot_age_ms: int | None = None,
                      min_snapshots_to_keep: int | None = None) -> ManageSnapshots:
        """A new branch at ``snapshot_id`` (None: the current snapshot), with its retention settings.

        On a table with no current snapshot, ``snapshot_id=None`` commits an empty ``append`` snapshot with no
        parent to the new branch (Java's SnapshotManager.createBranch(name)); ``main`` stays absent.

        :param snapshot_id: the snapshot the branch starts at
        :param branch_name: the new branch's name (no ref may have it yet)
        :param max_ref_age_ms: how long the branch outlives its head snapshot before expiry removes it
        :param max_snapshot_age_ms: how old snapshots on the branch may get before expiry removes them
        :param min_snapshots_to_keep: how many snapshots of the branch expiry always keeps
        """
        action = f"create branch {branch_name}"
        _name(branch_name, "the branch name", action)
        _positive(max_ref_age_ms, "max_ref_age_ms", action)
        _positive(max_snapshot_age_ms, "max_snapshot_age_ms", action)
        _positive(min_snapshots_to_keep, "min_snapshots_to_keep", action)
        empty_id = new_snapshot_id()

        def request(plan: _Plan) -> None:
            sid = snapshot_id if snapshot_id is not None else plan.main_head()
            if sid is not None:
                plan.snapshot(sid, action)
            if branch_name in plan.refs:
                raise ValidationError(f"Cannot {action}: ref {branch_name} already exists")
            if sid is None:  # no current snapshot: the branch starts at a new empty one
                plan.add_snapshot(_empty_snapshot(plan, empty_id, branch_name))
                sid = empty_id
            plan.set_ref(branch_name, SnapshotRef(snapshot_id=sid, type=BRANCH,
                                                  min_snapshots_to_keep=min_snapshots_to_keep,
                                                  max_snapshot_age_ms=max_snapshot_age_ms,
                                                  max_ref_age_ms=max_ref_age_ms))

        return self._add(request)

    def create_tag(self, snapshot_id: int, tag_name: str, max_ref_age_ms: int | None = None) -> ManageSnapshots:
        """A new tag on ``snapshot_id``.

        :param snapshot_id: the tagged snapshot
        :param tag_name: the new tag's name (no ref may have it yet)
        :param max_ref_age_ms: how long the tag outlives its snapshot before expiry removes it
        """
        action = f"create tag {tag_name}"
        _tag_name(tag_name, action)
        _positive(max_ref_age_ms, "max_ref_age_ms", action)

        def request(plan: _Plan) -> None:
            plan.snapshot(snapshot_id, action)
            if tag_name in plan.refs:
                raise ValidationError(f"Cannot {action}: ref {tag_name} already exists")
            plan.set_ref(tag_name, SnapshotRef(snapshot_id=snapshot_id, type=TAG, max_ref_age_ms=max_ref_age_ms))

        return self._add(request)

    def remove_branch(self, branch_name: str) -> ManageSnapshots:
        """Remove a branch (never ``main``); its snapshots stay until expiry finds them unreferenced."""
        action = f"remove branch {branch_name}"

        def request(plan: _Plan) -> None:
            if branch_name == MAIN_BRANCH:
                raise ValidationError(f"Cannot {action}: the main branch cannot be removed")
            plan.ref(branch_name, BRANCH, action)
            del plan.refs[branch_name]

        return self._add(request)

    def remove_tag(self, tag_name: str) -> ManageSnapshots:
        """Remove a tag."""
        action = f"remove tag {tag_name}"

        def request(plan: _Plan) -> None:
            plan.ref(tag_name, TAG, action)
            del plan.refs[tag_name]

        return self._add(request)

    def replace_branch(self, branch_name: str, snapshot_id: int | None = None, *, to_ref: str | None = None,
                       fast_forward: bool = False) -> ManageSnapshots:
        """Point an existing branch at ``snapshot_id`` or at the snapshot of ref ``to_ref`` (exactly one of them),
        keeping its retention settings (Java's replaceBranch). With ``to_ref``, a branch that does not exist yet
        is created at ``to_ref``'s snapshot, without retention settings (Java since 1.5).

        :param fast_forward: only if the branch's head is an ancestor of the new snapshot
        """
        action = f"replace branch {branch_name}"
        _name(branch_name, "the branch name", action)
        if (snapshot_id is None) == (to_ref is None):
            raise ValidationError(f"Cannot {action}: give exactly one of snapshot_id and to_ref")

        def request(plan: _Plan) -> None:
            if to_ref is not None:
                target = plan.ref(to_ref, None, action).snapshot_id
                target_name = to_ref
                if branch_name not in plan.refs:
                    plan.set_ref(branch_name, SnapshotRef(snapshot_id=target, type=BRANCH))
                    return
                ref = plan.ref(branch_name, BRANCH, action)
            else:
                ref = plan.ref(branch_name, BRANCH, action)
                target = plan.snapshot(snapshot_id, action).snapshot_id
                target_name = f"snapshot {snapshot_id}"
            if target == ref.snapshot_id:
                return
            if fast_forward and not _is_ancestor(plan.state, ref.snapshot_id, target):
                raise ValidationError(f"Cannot fast-forward {branch_name}: its head {ref.snapshot_id} is not an "
                                      f"ancestor of {target_name}")
            plan.set_ref(branch_name, attrs.evolve(ref, snapshot_id=target))

        return self._add(request)

    def fast_forward(self, branch_name: str, to_ref: str) -> ManageSnapshots:
        """Move ``branch_name`` to the head of ``to_ref``, only if its own head is an ancestor of it (Java's
        fastForwardBranch); a branch that does not exist yet is created there."""
        return self.replace_branch(branch_name, to_ref=to_ref, fast_forward=True)

    def replace_tag(self, tag_name: str, snapshot_id: int) -> ManageSnapshots:
        """Point an existing tag at another snapshot, keeping its retention setting."""
        action = f"replace tag {tag_name}"
        _tag_name(tag_name, action)

        def request(plan: _Plan) -> None:
            ref = plan.ref(tag_name, TAG, action)
            plan.snapshot(snapshot_id, action)
            plan.set_ref(tag_name, attrs.evolve(ref, snapshot_id=snapshot_id))

        return self._add(request)

    def rename_branch(self, branch_name: str, new_name: str) -> ManageSnapshots:
        """Rename a branch (never ``main``); it keeps its head and retention settings."""
        action = f"rename branch {branch_name}"
        _name(new_name, "the new branch name", action)

        def request(plan: _Plan) -> None:
            if branch_name == MAIN_BRANCH:
                raise ValidationError(f"Cannot {action}: the main branch cannot be renamed")
            ref = plan.ref(branch_name, BRANCH, action)
            if new_name in plan.refs:
                raise ValidationError(f"Cannot {action}: ref {new_name} already exists")
            del plan.refs[branch_name]
            plan.set_ref(new_name, ref)

        return self._add(request)

    def set_min_snapshots_to_keep(self, branch_name: str, min_snapshots_to_keep: int) -> ManageSnapshots:
        """How many snapshots of a branch expiry always keeps."""
        action = f"set min-snapshots-to-keep of {branch_name}"
        _positive(min_snapshots_to_keep, "min_snapshots_to_keep", action)
        return self._add(lambda plan: plan.set_ref(branch_name, attrs.evolve(
            plan.ref(branch_name, BRANCH, action), min_snapshots_to_keep=min_snapshots_to_keep)))

    def set_max_snapshot_age_ms(self, branch_name: str, max_snapshot_age_ms: int) -> ManageSnapshots:
        """How old a branch's snapshots may get before expiry removes them."""
        action = f"set max-snapshot-age-ms of {branch_name}"
        _positive(max_snapshot_age_ms, "max_snapshot_age_ms", action)
        return self._add(lambda plan: plan.set_ref(branch_name, attrs.evolve(
            plan.ref(branch_name, BRANCH, action), max_snapshot_age_ms=max_snapshot_age_ms)))

    def set_max_ref_age_ms(self, ref_name: str, max_ref_age_ms: int) -> ManageSnapshots:
        """How long a branch or tag outlives its head snapshot before expiry removes it (not for ``main``)."""
        action = f"set max-ref-age-ms of {ref_name}"
        _positive(max_ref_age_ms, "max_ref_age_ms", action)
        return self._add(lambda plan: plan.set_ref(ref_name, attrs.evolve(
            plan.ref(ref_name, None, action), max_ref_age_ms=max_ref_age_ms)))

    # ------------------------------------------------------------ the current snapshot
    def set_current_snapshot(self, snapshot_id: int | None = None, ref_name: str | None = None) -> ManageSnapshots:
        """Make a snapshot, or the snapshot of a ref, the current one (main's head), ancestor or not."""
        if (snapshot_id is None) == (ref_name is None):
            raise ValidationError("Cannot set current snapshot: give exactly one of snapshot_id and ref_name")

        def request(plan: _Plan) -> None:
            action = f"set current snapshot to {ref_name if ref_name is not None else snapshot_id}"
            target = (plan.ref(ref_name, None, action).snapshot_id if ref_name is not None
                      else plan.snapshot(snapshot_id, action).snapshot_id)
            plan.move_main(target)

        return self._add(request)

    def rollback_to_snapshot(self, snapshot_id: int) -> ManageSnapshots:
        """Make an ancestor of the current snapshot the current one."""
        action = f"roll back to snapshot {snapshot_id}"

        def request(plan: _Plan) -> None:
            plan.snapshot(snapshot_id, action)
            head = plan.main_head()
            if not _is_ancestor(plan.state, snapshot_id, head):
                raise ValidationError(f"Cannot {action}: it is not an ancestor of the current snapshot {head}")
            plan.move_main(snapshot_id)

        return self._add(request)

    def rollback_to_timestamp(self, timestamp_ms: int) -> ManageSnapshots:
        """Make the newest ancestor of the current snapshot committed strictly before ``timestamp_ms`` current."""
        action = f"roll back to timestamp {timestamp_ms}"
        _integer(timestamp_ms, "timestamp_ms", action)

        def request(plan: _Plan) -> None:
            older = [s for s in plan.state.ancestors(plan.main_head()) if s.timestamp_ms < timestamp_ms]
            if not older:
                raise ValidationError(f"Cannot {action}: no ancestor of the current snapshot is older")
            plan.move_main(max(older, key=lambda s: s.timestamp_ms).snapshot_id)

        return self._add(request)

    def cherrypick_snapshot(self, snapshot_id: int) -> ManageSnapshots:
        """Apply a snapshot's changes to main, Java's rules: an append adds its data files in a new ``append``
        snapshot; a dynamic overwrite (``replace-partitions``) re-applies its adds and removes if the partitions it
        replaced did not change since its parent; any snapshot whose parent is main's head is fast-forwarded,
        whatever its operation (a ``delete``, a plain overwrite, a compaction can only be fast-forwarded). The new
        snapshot's summary names the source snapshot. An append or dynamic overwrite staged with a ``wap.id`` that
        an ancestor of main already carries (as ``wap.id`` or ``published-wap-id``) is refused, fast-forward or not
        (Java's WapUtil.validateWapPublish).

        Data sequence numbers, as Java's CherryPickOperation: a fast-forward makes the picked snapshot itself the
        head, so its entries keep theirs (a compaction's starting sequence number included; a compaction, a
        ``replace`` snapshot, can only be fast-forwarded). An append or dynamic overwrite that is re-applied adds
        its files to the new snapshot as new files, which take the new snapshot's sequence number even when they
        carried an explicit one in the picked snapshot: deletes committed on main before the pick never saw those
        rows, and an older number would let them delete the picked rows. On a format version 3 table they likewise
        take new row ids from the table's ``next-row-id``.
        """
        action = f"cherry-pick snapshot {snapshot_id}"
        new_id = new_snapshot_id()

        def request(plan: _Plan) -> None:
            picked = plan.snapshot(snapshot_id, action)
            head = plan.main_head()
            dynamic = (picked.operation == OVERWRITE
                       and (picked.summary_value(REPLACE_PARTITIONS) or "").lower() == "true")
            extra = {SOURCE_SNAPSHOT_ID: str(picked.snapshot_id)}
            if picked.operation == APPEND or dynamic:  # as Java, before the fast-forward decision
                if dynamic:
                    _check_based_on_history(plan, picked, head, action)
                wap_id = _check_wap(plan, picked, head, action)
                if wap_id:
                    extra[PUBLISHED_WAP_ID] = wap_id
            if picked.parent_snapshot_id == head:
                plan.move_main(picked.snapshot_id)  # fast-forward
                return
            if picked.operation != APPEND and not dynamic:
                raise ValidationError(f"Cannot {action}: it is a {picked.operation} snapshot whose parent "
                                      f"{picked.parent_snapshot_id} is not the current snapshot {head}, so not an "
                                      f"append, a dynamic overwrite, or a fast-forward")
            _check_not_picked(plan, picked, head, action)
            changes = plan.changes(picked)
            # re-applied files are new files: new sequence number, and new row ids on a v3 table
            added = [attrs.evolve(c.file, first_row_id=None) for c in changes
                     if c.added and c.file.content == DataFileContent.DATA]
            live = plan.live_paths(head) if added else set()
            twice = [f.file_path for f in added if f.key in live]
            if twice:  # whatever history says: a file main holds already would be counted twice by every reader
                raise ValidationError(f"Cannot {action}: its file {twice[0]} is live in the current snapshot "
                                      f"already")
            removed: list[DataFile] = []
            if dynamic:
                removed = [c.file for c in changes if not c.added and c.file.content == DataFileContent.DATA]
                _check_overwrite(plan, picked, head, added, removed, action)
            events = snapshot_events(plan.state, plan.ctx, operation=picked.operation, snapshot_id=new_id,
                                     added=added, removed=removed, parent_snapshot_id=head, summary_extra=extra)
            if not events:
                raise ValidationError(f"Cannot {action}: it changes no data file")
            plan.add_snapshot(events[0])

        return self._add(request)


def _check_not_picked(plan: _Plan, picked: Snapshot, head: int | None, action: str) -> None:
    """Not an ancestor of main, nor picked into one: expired ancestors count (the log keeps them), where Java's walk
    stops at the first expired one and appends the snapshot's files a second time."""
    for ancestor in plan.state.iter_ancestors(head, through_expired=True):
        if ancestor.snapshot_id == picked.snapshot_id:
            raise ValidationError(f"Cannot {action}: it is already an ancestor of the current snapshot")
        if ancestor.summary_value(SOURCE_SNAPSHOT_ID) == str(picked.snapshot_id):
            raise ValidationError(f"Cannot {action}: it was already picked to create ancestor "
                                  f"{ancestor.snapshot_id}")


def _check_wap(plan: _Plan, picked: Snapshot, head: int | None, action: str) -> str | None:
    """The write-audit-publish id the picked snapshot stages, if not published already: no ancestor of the current
    snapshot carries it, staged (a fast-forwarded snapshot) or published (Java's WapUtil.isWapIdPublished)."""
    wap_id = picked.summary_value(WAP_ID)
    if not wap_id:
        return None
    for ancestor in plan.state.ancestors(head):
        if wap_id in (ancestor.summary_value(WAP_ID), ancestor.summary_value(PUBLISHED_WAP_ID)):
            raise ValidationError(f"Cannot {action}: write-audit-publish id {wap_id} was already published by "
                                  f"snapshot {ancestor.snapshot_id}")
    return wap_id


def _check_based_on_history(plan: _Plan, picked: Snapshot, head: int | None, action: str) -> None:
    """A dynamic overwrite is picked only if it was based on the current history: its parent is an ancestor of the
    current snapshot, or it has none."""
    parent = picked.parent_snapshot_id
    if parent is not None and not _is_ancestor(plan.state, parent, head):
        raise ValidationError(f"Cannot {action}: the overwrite is based on snapshot {parent}, not an ancestor of "
                              f"the current snapshot {head}")


def _check_overwrite(plan: _Plan, picked: Snapshot, head: int | None, added: Sequence[DataFile],
                     removed: Sequence[DataFile], action: str) -> None:
    """A dynamic overwrite based on the current history re-applies only where its partitions are unchanged since its
    parent: the files it removes are still live, and no data file landed in the partitions it replaces (Java's
    validateReplacedPartitions reads the added data files only; a delete file there does not conflict)."""
    parent = picked.parent_snapshot_id
    live = plan.live_paths(head)
    gone = [f.file_path for f in removed if f.key not in live]
    if gone:
        raise ValidationError(f"Cannot {action}: {gone[0]}, which it removes, is no longer in the table")
    replaced = {(f.spec_id, partition_key(f.partition)) for f in added}
    for snap in plan.state.ancestors(head):
        if snap.snapshot_id == parent:
            break
        for c in plan.changes(snap):
            if c.added and c.file.content == DataFileContent.DATA and \
                    (c.file.spec_id, partition_key(c.file.partition)) in replaced:
                raise ValidationError(f"Cannot {action}: partition {c.file.partition} it replaces changed in "
                                      f"snapshot {snap.snapshot_id}")


def _empty_snapshot(plan: _Plan, snapshot_id: int, branch: str) -> SnapshotAdded:
    """An ``append`` snapshot with no parent and no file changes on ``branch``: what Java's createBranch(name) commits
    (an empty fast append) when the table has no current snapshot."""
    state = plan.state
    v3 = state.format_version >= 3
    return SnapshotAdded(
        snapshot_id=snapshot_id, parent_snapshot_id=None,
        sequence_number=state.last_sequence_number + 1 if state.format_version >= 2 else 0,
        timestamp_ms=max(plan.ctx.time_ms, state.last_updated_ms), operation=APPEND,
        summary=snapshot_summary((), (), None), schema_id=state.current_schema_id, branch=branch,
        partition_types={s.spec_id: state.partition_type_of(s) for s in state.specs},
        first_row_id=(state.next_row_id or 0) if v3 else None, added_rows=0 if v3 else None)
