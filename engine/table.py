"""A light handle on one table: its writes, table metadata, transactions, builders, time travel and reads.

Layer: engine (top of the engine, beside engine.catalog: uses the log, the state store, operations, the
projector through engine.publishing). A ``Table`` holds only its catalog and the table's identity, and reads
state fresh from the log on every call; ``Catalog.load_table`` hands them out.

::

    t = catalog.load_table("db.events")
    t.append(arrow_table)
    with t.update_schema() as update:
        update.add_column("note", "string")
    t.scan(where="id > 10").to_arrow()
"""

from __future__ import annotations

import contextlib
import os
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

import pyarrow as pa

from engine.errors import MissingFileError, PublishFailed, ValidationError, storage_error
from engine.formats.parquet_files import carries_field_ids, read_data_file
from engine.model.data_file import DataFile, DataFileContent
from engine.model.metrics_evaluation import metrics_must_match
from engine.model.name_mapping import NAME_MAPPING_PROPERTY, name_mapping_json
from engine.model.partitioning import partition_key
from engine.model.table_properties import check_property_values
from engine.operations.append import append_events
from engine.operations.commit import CommitContext, Landed, RetryPolicy, commit_streams, now_ms
from engine.operations.expire import ExpireResult, expire_snapshots, remove_orphan_files
from engine.operations.manage_snapshots import ManageSnapshots
from engine.operations.rewrite import rewrite_data_files, rewrite_manifests
from engine.operations.row_delete import (COPY_ON_WRITE, REPLACE_PARTITIONS_SUMMARY, RowChanges, bind_filter,
                                          delete_mode, plan_dynamic_overwrite, plan_row_delete, row_change_events)
from engine.operations.row_delta import RowDelta, delete_by_key, upsert
from engine.operations.snapshot import new_snapshot_id, snapshot_events, snapshot_ids_by_branch, vectors_of_removed
from engine.operations.table_updates import FORMAT_VERSION_PROPERTY, format_version_of, upgrade_events
from engine.operations.transaction import run_staged
from engine.operations.update_schema import UpdateSchema
from engine.operations.update_sort_order import ReplaceSortOrder
from engine.operations.update_spec import UpdateSpec
from engine.ownership import refuse_catalog_database
from engine.publishing import TablePublisher
from engine.read.metadata_tables import InspectTable
from engine.read.scan import Scan
from engine.state.events import Event, PropertiesRemoved, PropertiesSet
from engine.state.table_state import MAIN_BRANCH, Snapshot, TableState, TableStateReads
from engine.state.time_travel import Changes, HistoricalTable, LogEntry, table_as_of, table_changes, table_log
from engine import written_files
from engine.write.data_writer import partition_of_file, write_data_files
from engine.write.file_columns import check_data_files, check_file_columns, refuse_live_files
from projections import layout
from storage import FileError, LogError
from storage.files import is_s3

if TYPE_CHECKING:  # the catalog hands out tables: it imports this module
    from engine.catalog import Catalog


class Table(TableStateReads):
    """A handle on one table: the catalog and the table's identity, nothing cached.

    :param catalog: the owning catalog
    :param namespace: the namespace
    :param name: the table name
    :param table_uuid: the table's stream id
    """

    def __init__(self, catalog: Catalog, namespace: tuple[str, ...], name: str, table_uuid: str, *,
                 staged: list[Any] | None = None) -> None:
        self.catalog = catalog
        self.namespace = namespace
        self.name = name
        self.uuid = table_uuid
        self._staged = staged
        #: the files a transaction handle's operations wrote: removed when the transaction does not land
        self._written_in_transaction: list[str] = []
        #: a transaction reads the table at this log version (plus what it staged), as Java's transaction keeps
        #: the metadata it started from; the commit validates everything recorded after it
        self._staged_on_version = catalog.log.head(table_uuid) if staged is not None else None

    def __repr__(self) -> str:
        return f"Table({'.'.join(self.identifier)!r})"

    @property
    def identifier(self) -> tuple[str, ...]:
        return self.namespace + (self.name,)

    # ------------------------------------------------------------ state
    @property  # read fresh on every call (TableStateReads names it as the attribute a historical view holds)
    def state(self) -> TableState:  # type: ignore[override]
        if self._staged is None:
            return self.catalog.store.table(self.uuid)
        state = self.catalog.store.table(self.uuid, self._staged_on_version)
        if self._staged:
            ctx = CommitContext(commit_id="staged", time_ms=now_ms())
            state = run_staged(state, self._staged, ctx, staged_on_version=self._staged_on_version)[1]
        return state

    @property
    def metadata_location(self) -> str:
        state = self.state
        published = self.catalog.projector.published_version(self.uuid)
        return layout.metadata_file_of(state, published or state.version)

    # ------------------------------------------------------------ writes
    def append(self, data: pa.Table, *, branch: str = MAIN_BRANCH) -> Snapshot | None:
        """Write ``data`` as Parquet data files (one or more per partition) and commit them as one snapshot."""
        with self._staging() as staged:
            files = write_data_files(self.state, data, stage=staged.append, io=self.catalog.io)
            return self._commit_append(files, branch=branch, staged=staged)

    @contextlib.contextmanager
    def tracking_written(self, written: list[str]) -> Iterator[list[str]]:
        """Add to ``written`` every file this thread stages for the table (:meth:`stage_file`) inside the block."""
        with written_files.collecting(self.uuid, written):
            yield written

    @contextlib.contextmanager
    def removing_written_on_failure(self) -> Iterator[list[str]]:
        """Files the block writes for the table are removed when it fails before its commit lands: a refused
        operation leaves nothing behind. Not when the commit landed (``PublishFailed``) or may have
        (``CommitStateUnknown``): then the log may name them."""
        written: list[str] = []
        try:
            with self.tracking_written(written):
                yield written
        except BaseException as e:
            self._after_failure(written, e)
            raise

    def _after_failure(self, paths: Sequence[str], error: BaseException) -> None:
        """The files an operation wrote, when it failed: kept and recorded as staged when its commit landed or may
        have (see ``written_files.may_have_landed``), removed otherwise."""
        if not paths:
            return
        if written_files.may_have_landed(error):
            self.catalog.log.record_staged_many(self.uuid, paths, now_ms())
        else:
            self.remove_written(paths)

    def remove_written(self, paths: Sequence[str]) -> None:
        """Delete files an operation wrote for this table whose commit did not land, and forget their staging
        records; a file that cannot be deleted now stays staged, for remove_orphan_files. Only files the table
        owns are ever deleted: any other path is left alone."""
        gone = written_files.remove_unlanded(self.catalog.io, self.catalog.ownership(self.uuid), paths)
        if gone:
            with contextlib.suppress(LogError):
                self.catalog.log.forget_staged(self.uuid, gone)

    def append_files(self, paths: Iterable[str], *, branch: str = MAIN_BRANCH) -> Snapshot | None:
        """Register existing Parquet files in place (unpartitioned tables, or files whose partition is given by
        their values) as one append; metrics come from their footers. Files outside the table location stay the
        caller's: expire and purge never delete them unless asked to (``delete_external_files``).

        :raises ValidationError: a file listed twice, one already live in the branch (as PyIceberg's ``add_files``
            refuses: every reader would count its rows twice), or one that belongs to another table or is the
            catalog's
        """
        state = self.state
        owned = self.catalog.ownership(self.uuid)
        files: list[DataFile] = []
        seen: set[str] = set()
        without_ids = False
        io = self.catalog.io
        live = self._live_paths(state, branch)
        for p in paths:
            refuse_catalog_database(os.fspath(p), "append file")
            path = os.fspath(p) if is_s3(p) else io.fs_path(p)
            key = io.canonical(path)
            if key in seen:
                raise ValidationError(f"Cannot append files: {path} is listed twice")
            refuse_live_files([path], live, io.canonical, ".".join(self.identifier), branch, "append files")
            seen.add(key)
            owned.check_external_file(path, "append file")
            try:
                found = io.exists(path)
            except FileError as e:
                raise storage_error(e, path) from e
            if not found:
                raise MissingFileError(f"Cannot append file: {path} does not exist", path=path)
            check_file_columns(path, state.schema, state.prop(NAME_MAPPING_PROPERTY), io=io)
            files.append(self._describe_file(state, path))
            without_ids = without_ids or not carries_field_ids(path, io=io)
        mapping = None
        if without_ids and state.prop(NAME_MAPPING_PROPERTY) is None:
            mapping = name_mapping_json(state.schema)
        return self._commit_append(files, name_mapping=mapping, branch=branch,
                                   check=self._refuse_landed_since(state, files, branch, "append files"))

    def _live_paths(self, at: TableState, branch: str) -> set[str]:
        """The canonical paths of the data and delete files live in ``branch`` at ``at``."""
        head, io = at.branch_head(branch), self.catalog.io
        return {io.canonical(e.file.file_path)
                for e in self.catalog.store.live_entries(at, head)} if head is not None else set()

    def _refuse_landed_since(self, state: TableState, files: Sequence[DataFile], branch: str, action: str
                             ) -> Callable[[TableState], None]:
        """The check an append of files written elsewhere runs inside its commit: a file that a writer
        committing meanwhile made live is refused (two writers appending the same file at once: one lands it)."""
        def check(base: TableState) -> None:
            if base.version != state.version:
                refuse_live_files([f.file_path for f in files], self._live_paths(base, branch),
                                  self.catalog.io.canonical, ".".join(self.identifier), branch, action,
                                  meanwhile=True)
        return check

    def delete(self, where: str, *, branch: str = MAIN_BRANCH) -> Snapshot | None:
        """Delete the rows matching ``where``. Files the filter covers entirely (by their metrics) are dropped
        unread; partly matched files are rewritten (``write.delete.mode=copy-on-write``, the default) or get
        position delete files (``merge-on-read``). Returns the new snapshot, or None when no row matched.

        :raises ValidationConflict: a concurrent commit conflicts under ``write.delete.isolation-level``
        """
        state = self.state
        bound = bind_filter(state, where)
        start = state.branch_head(branch)
        with self.removing_written_on_failure():
            changes = plan_row_delete(self.catalog.store, state, bound, start, mode=delete_mode(state),
                                      stage=self.stage_file, io=self.catalog.io)
            if not changes.removed and not changes.added:
                return None
            return self._commit_rows(changes, "delete", branch, isolation_for="delete")

    def overwrite(self, data: pa.Table, where: str | None = None, *, branch: str = MAIN_BRANCH) -> Snapshot | None:
        """Replace the rows matching ``where`` (all rows when None) with ``data``, as one ``overwrite`` snapshot
        (rows to keep in partly matched files are rewritten)."""
        state = self.state
        start = state.branch_head(branch)
        bound = bind_filter(state, where) if where is not None else None  # a bad filter before any file is written
        with self.removing_written_on_failure():
            new_files = write_data_files(state, data, stage=self.stage_file, io=self.catalog.io, action="overwrite")
            if bound is None:
                live = [e.file for e in self.catalog.store.live_entries(state, start)
                        if e.file.content == DataFileContent.DATA]
                changes = RowChanges(start_snapshot_id=start, removed=tuple(live), touched=tuple(live))
            else:
                changes = plan_row_delete(self.catalog.store, state, bound, start, mode=COPY_ON_WRITE,
                                          stage=self.stage_file, io=self.catalog.io)
            return self._commit_rows(changes, "overwrite", branch, isolation_for="update", new_rows=new_files,
                                     whole_table=where is None)

    def dynamic_overwrite(self, data: pa.Table, *, branch: str = MAIN_BRANCH) -> Snapshot | None:
        """Replace exactly the partitions present in ``data`` (Iceberg's ReplacePartitions)."""
        state = self.state
        with self.removing_written_on_failure():
            changes, new_files = plan_dynamic_overwrite(self.catalog.store, state, data, state.branch_head(branch),
                                                        stage=self.stage_file, io=self.catalog.io)
            if not new_files:
                return None  # no partition is written, so none is replaced
            return self._commit_rows(changes, "overwrite", branch, isolation_for="update", new_rows=new_files,
                                     summary_extra=REPLACE_PARTITIONS_SUMMARY)

    @contextlib.contextmanager
    def _staging(self) -> Iterator[list[str]]:
        """Collects the files an operation is about to write; its commit records them as staged in its own
        transaction (no flush of their own). When the operation fails before its commit lands they are removed;
        when it landed or may have, recorded in a transaction of their own (after a crash, remove_orphan_files'
        listing finds them: they are under the table's location)."""
        paths: list[str] = []
        try:
            yield paths
        except BaseException as e:
            self._after_failure(paths, e)
            raise

    def stage_file(self, path: str) -> None:
        """Record a file about to be written for this table, before it is written (see remove_orphan_files)."""
        self.catalog.log.record_staged(self.uuid, path, now_ms())
        if self._staged is not None:
            self._written_in_transaction.append(path)
        written_files.note(self.uuid, path)

    def stage_folder(self, folder: str) -> None:
        """Record a folder whose files a job is about to write for this table (every file under it counts as
        staged): a distributed writer stages its job folder once instead of each file (see remove_orphan_files).

        :raises ValidationError: the folder is not under the table's data folder
        """
        text = os.fspath(folder)
        prefix = (text if is_s3(text) else os.path.abspath(text)).rstrip("/") + "/"
        if ".." in prefix.split("/") or not prefix.startswith(layout.data_dir(self.location).rstrip("/") + "/"):
            raise ValidationError(f"Cannot stage folder {folder}: not under {layout.data_dir(self.location)}")
        self.catalog.log.record_staged(self.uuid, prefix, now_ms())

    def append_data_files(self, files: Sequence[DataFile], *, branch: str = MAIN_BRANCH) -> Snapshot | None:
        """Commit data files written elsewhere (described with their partition and metrics, e.g. by
        ``tools.spark_write.write``) as one append.

        :param files: DataFile values of the table's current spec, under the table location
        :raises ValidationError: a file outside the table location, of another spec, with a partition tuple or
            metrics that do not fit the table's spec and schema, listed twice, or already live in the branch (every
            reader would count its rows twice); nothing is committed
        """
        state = self.state
        files = check_data_files(state, files, self.catalog.ownership(self.uuid), "append")
        refuse_live_files([f.file_path for f in files], self._live_paths(state, branch), self.catalog.io.canonical,
                          ".".join(self.identifier), branch, "append")
        return self._commit_append(files, branch=branch,
                                   check=self._refuse_landed_since(state, files, branch, "append"))

    def overwrite_data_files(self, files: Sequence[DataFile], where: str | None = None, *,
                             branch: str = MAIN_BRANCH) -> Snapshot | None:
        """Replace the rows matching ``where`` (all rows when None) with data files written elsewhere, as one
        ``overwrite`` snapshot (rows to keep in partly matched files are rewritten).

        :raises ValidationError: bad files (see :meth:`append_data_files`), or a file whose rows are not all
            matched by ``where`` by its metrics (it would escape the overwrite)
        """
        files = check_data_files(self.state, files, self.catalog.ownership(self.uuid), "overwrite")
        state = self.state
        start = state.branch_head(branch)
        if where is None:
            live = [e.file for e in self.catalog.store.live_entries(state, start)
                    if e.file.content == DataFileContent.DATA]
            changes = RowChanges(start_snapshot_id=start, removed=tuple(live), touched=tuple(live))
            return self._commit_rows(changes, "overwrite", branch, isolation_for="update", new_rows=files,
                                     whole_table=True)
        bound = bind_filter(state, where)
        outside = [f.file_path for f in files if not metrics_must_match(bound, f, state.schema)]
        if outside:
            raise ValidationError(f"Cannot overwrite where {where!r}: file {outside[0]} has rows the filter may "
                                  f"not match ({len(outside)} such file(s))")
        # the rows kept from partly matched files are written here: removed again when the commit is refused (the
        # caller's files stay the caller's)
        with self.removing_written_on_failure():
            changes = plan_row_delete(self.catalog.store, state, bound, start, mode=COPY_ON_WRITE,
                                      stage=self.stage_file, io=self.catalog.io)
            return self._commit_rows(changes, "overwrite", branch, isolation_for="update", new_rows=files)

    def replace_partitions(self, files: Sequence[DataFile], *, branch: str = MAIN_BRANCH) -> Snapshot | None:
        """Replace exactly the partitions the given data files belong to (Iceberg's ReplacePartitions; the
        whole table when it is unpartitioned), as one ``overwrite`` snapshot.

        :raises ValidationError: bad files (see :meth:`append_data_files`)
        """
        files = check_data_files(self.state, files, self.catalog.ownership(self.uuid), "replace partitions")
        if not files:
            return None  # no partition is written, so none is replaced (Java's ReplacePartitions agrees)
        state = self.state
        spec = state.spec
        start = state.branch_head(branch)
        partitions = {partition_key(f.partition) for f in files}  # as Java's PartitionSet: NaN is one partition
        live = [e.file for e in self.catalog.store.live_entries(state, start)
                if e.file.content == DataFileContent.DATA]
        if spec.is_partitioned:
            removed = [f for f in live if f.spec_id == spec.spec_id and partition_key(f.partition) in partitions]
            replaced: frozenset[tuple[int, tuple]] | None = frozenset((spec.spec_id, p) for p in partitions)
        else:  # the whole table, validated against data added anywhere (Java's ReplacePartitions: alwaysTrue)
            removed, replaced = live, None
        changes = RowChanges(start_snapshot_id=start, removed=tuple(removed), touched=tuple(removed),
                             partitions=replaced)
        return self._commit_rows(changes, "overwrite", branch, isolation_for="update", new_rows=files,
                                 summary_extra=REPLACE_PARTITIONS_SUMMARY)

    def _commit_rows(self, changes: RowChanges, operation: str, branch: str, *, isolation_for: str,
                     new_rows: Sequence[DataFile] = (), whole_table: bool = False,
                     summary_extra: Mapping[str, str] | None = None) -> Snapshot | None:
        snapshot_id = new_snapshot_id()
        store = self.catalog.store
        state = self.commit_events(lambda base, ctx: row_change_events(
            store, base, ctx, changes, operation=operation, snapshot_id=snapshot_id, branch=branch,
            isolation_for=isolation_for, new_rows=new_rows, whole_table=whole_table, summary_extra=summary_extra))
        return state.snapshot_by_id(snapshot_id)

    def delete_files(self, paths: Iterable[str], *, branch: str = MAIN_BRANCH) -> Snapshot | None:
        """Remove whole data or delete files by path, as one ``delete`` snapshot (Java's DeleteFiles).

        :raises ValidationError: a path that is not live in the branch's head; nothing is committed
        """
        wanted = dict.fromkeys(os.fspath(p) for p in paths)  # a Puffin file's path: each vector it holds
        snapshot_id = new_snapshot_id()

        def build(base: TableState, ctx: CommitContext) -> list:
            live = [e.file for e in self.catalog.store.live_entries(base, base.branch_head(branch))]
            missing = sorted(wanted.keys() - {f.file_path for f in live})
            if missing:
                raise ValidationError(f"Cannot delete files: {', '.join(missing[:3])} not in the table")
            removed = [f for f in live if f.file_path in wanted]
            return snapshot_events(base, ctx, operation="delete", snapshot_id=snapshot_id,
                                   removed=removed + vectors_of_removed(live, removed), branch=branch)

        state = self.commit_events(build)
        return state.snapshot_by_id(snapshot_id)

    def _describe_file(self, state: TableState, path: str) -> DataFile:
        spec = state.spec
        io = self.catalog.io
        partition = partition_of_file(path, state.schema, spec, io=io) if not spec.is_unpartitioned else ()
        return read_data_file(path, state.schema, spec_id=spec.spec_id, partition=partition,
                              properties=dict(state.properties), io=io)

    def _commit_append(self, files: list[DataFile], name_mapping: str | None = None,
                       branch: str = MAIN_BRANCH, staged: Sequence[str] = (),
                       check: Callable[[TableState], None] | None = None) -> Snapshot | None:
        """Commit ``files`` as one append; with ``name_mapping``, also set the table's default name mapping (for
        files written without field ids) in the same commit; ``check(base)`` validates against the head inside the
        commit."""
        if not files:
            return None
        snapshot_id = new_snapshot_id()

        def build(base: TableState, ctx: CommitContext) -> list:
            if check is not None:
                check(base)
            events: list = []
            if name_mapping is not None and base.prop(NAME_MAPPING_PROPERTY) is None:
                events.append(PropertiesSet(updates={NAME_MAPPING_PROPERTY: name_mapping}))
            return events + append_events(base, files, ctx, snapshot_id=snapshot_id, branch=branch)

        return self.commit_events(build, staged=staged).snapshot_by_id(snapshot_id)

    # ------------------------------------------------------------ table metadata
    def set_properties(self, properties: Mapping[str, str] | None = None, **kwargs: str) -> TableState:
        """Set table properties (one commit; values are strings). ``format-version`` upgrades the table's format
        (:meth:`upgrade_format_version`) in the same commit, as Java and Spark take it."""
        updates = {str(k): str(v) for k, v in {**(properties or {}), **kwargs}.items()}
        check_property_values(updates, ".".join(self.identifier))
        fmt_text = updates.pop(FORMAT_VERSION_PROPERTY, None)
        fmt = None if fmt_text is None else format_version_of(fmt_text)
        ids = snapshot_ids_by_branch()

        def build(base: TableState, ctx: CommitContext) -> list:
            events: list = [] if fmt is None else upgrade_events(base, fmt, ctx,  # type: ignore[arg-type]
                                                                 self.catalog.store.live_entries, ids)
            changed = {k: v for k, v in updates.items() if base.prop(k) != v}
            return events + ([PropertiesSet(updates=changed)] if changed else [])

        return self.commit_events(build)

    def remove_properties(self, *keys: str) -> TableState:
        """Remove table properties (absent keys are ignored)."""
        def build(base: TableState, ctx: CommitContext) -> list:
            present = [k for k in keys if base.prop(k) is not None]
            return [PropertiesRemoved(removals=present)] if present else []

        return self.commit_events(build)

    def upgrade_format_version(self, format_version: int) -> TableState:
        """Upgrade the table to a newer format version (2 or 3); downgrades raise ValidationError. An upgrade to 3
        gives the rows live in each branch row ids, in one ``replace`` snapshot per branch."""
        ids = snapshot_ids_by_branch()

        def build(base: TableState, ctx: CommitContext) -> list:
            return upgrade_events(base, format_version, ctx, self.catalog.store.live_entries, ids)

        return self.commit_events(build)

    # ------------------------------------------------------------ transactions
    def transaction(self) -> Table:
        """A handle whose changes are staged and land as one commit when its ``with`` block ends (or on
        ``commit_transaction()``); nothing lands if the block raises."""
        return Table(self.catalog, self.namespace, self.name, self.uuid, staged=[])

    def commit_transaction(self) -> TableState:
        if self._staged is None:
            raise ValidationError("Cannot commit: this table handle is not a transaction")
        builds, self._staged = list(self._staged), []
        since = self._staged_on_version
        try:
            return Table(self.catalog, self.namespace, self.name, self.uuid).commit_events(
                lambda base, ctx: run_staged(base, builds, ctx, staged_on_version=since)[0])
        except BaseException as e:
            self._end_transaction(e)
            raise
        else:
            self._written_in_transaction = []
        finally:
            self._staged_on_version = self.catalog.log.head(self.uuid)  # a next transaction on this handle

    def _end_transaction(self, error: BaseException) -> None:
        """A transaction that did not land: the files its operations wrote are removed (kept and staged when it
        landed or may have, see :meth:`_after_failure`)."""
        written, self._written_in_transaction = self._written_in_transaction, []
        self._after_failure(written, error)

    def __enter__(self) -> Table:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._staged is None:
            return
        if exc_type is None:
            self.commit_transaction()
        else:  # the block failed: nothing of it lands
            self._staged = []
            self._end_transaction(exc)

    def commit_events(self, build: Callable[[TableState, CommitContext], Sequence[Event]], *,
                      staged: Sequence[str] = ()) -> TableState:
        """Commit the events ``build(base, ctx)`` makes on the current state, rebuilt on a fresh base after a
        conflict (up to the table's ``commit.retry.*`` settings); returns the state after the commit. ``staged``:
        the files written for it, recorded as staged in the commit's own transaction.

        In a transaction the build is staged instead, and the state it would lead to comes back."""
        if self._staged is not None:
            if staged:
                self.catalog.log.record_staged_many(self.uuid, staged, now_ms())
                self._written_in_transaction += staged
            self._staged.append(build)
            try:
                return self.state  # validates the staged change now; it is validated again at commit
            except BaseException:
                self._staged.pop()
                raise
        self.check_foreign_writers()

        def commit_build(ctx: CommitContext) -> list:
            self.catalog.store.check_registered(self.uuid, ".".join(self.identifier))
            base = self.catalog.store.table(self.uuid)
            return [(self.uuid, base.version, list(build(base, ctx)))]

        landed = commit_streams(self.catalog.store, commit_build,
                                policy=RetryPolicy.of(self.catalog.store.recent_table(self.uuid)),
                                staged=[(self.uuid, staged)] if staged else ())
        return self._after_commit(landed)

    def _after_commit(self, landed: Landed | None, progress: Callable[[int, int], None] | None = None) -> TableState:
        store = self.catalog.store
        if landed is None:
            return store.table(self.uuid)
        state = store.table(self.uuid)
        if self.catalog.project:
            try:
                # the commit has just checked for foreign metadata, and the publish writes metadata.json only where
                # no file is (a foreign one that slipped in since is refused, never replaced)
                self._publish(check_foreign=False, version=dict(landed.result.heads).get(self.uuid, state.version),
                              progress=progress)
            except Exception as e:  # landed: whatever went wrong is the publish's, and the log names the files
                raise PublishFailed(f"Committed {'.'.join(self.identifier)} at version {state.version}, but could "
                                    f"not publish it ({e}); readers see the previous version until publish() "
                                    f"succeeds", path=getattr(e, "path", None) or "", table=".".join(self.identifier),
                                    version=state.version) from e
        return state

    # ------------------------------------------------------------ time travel on the log (issue 4)
    def as_of(self, *, version: int | None = None, time: float | datetime | None = None) -> HistoricalTable:
        """A read-only table exactly as it was right after log version ``version``, or at ``time`` (ms or datetime)."""

        return table_as_of(self, version=version, time=time)

    def log(self) -> list[LogEntry]:
        """This table's event-log entries (position, version, type, time, actor, message, commit id, payload)."""

        return table_log(self)

    def changes(self, from_version: int, to_version: int | None = None) -> Changes:
        """Data and delete files added and removed between two log versions."""

        return table_changes(self, from_version, to_version)

    @property
    def inspect(self) -> InspectTable:
        """Metadata tables as Arrow, with Iceberg Java's column names: ``t.inspect.snapshots()``, ``.files()``..."""

        return InspectTable(self.state, self.catalog.store, self.catalog.io)

    # ------------------------------------------------------------ builders (PyIceberg's names)
    def update_schema(self, allow_incompatible_changes: bool = False, case_sensitive: bool = True) -> UpdateSchema:
        """Schema evolution: ``add_column``, ``delete_column``, ``rename_column``, ``update_column``, ``move_*``,
        ``set_identifier_fields``; commit with ``.commit()`` or a ``with`` block."""

        return UpdateSchema(self, allow_incompatible_changes=allow_incompatible_changes,
                            case_sensitive=case_sensitive)

    def update_spec(self, case_sensitive: bool = True) -> UpdateSpec:
        """Partition evolution: ``add_field``, ``remove_field``, ``rename_field``."""

        return UpdateSpec(self, case_sensitive=case_sensitive)

    def replace_sort_order(self, case_sensitive: bool = True) -> ReplaceSortOrder:
        """A new default sort order: ``asc(column, transform=None, null_order=None)``, ``desc(...)``."""

        return ReplaceSortOrder(self, case_sensitive=case_sensitive)

    def expire_snapshots(self, older_than_ms: int | None = None, retain_last: int | None = None, *,
                         delete_external_files: bool = False,
                         progress: Callable[[int, int], None] | None = None) -> ExpireResult:
        """Expire snapshots (``history.expire.*`` and per-ref retention) and delete the files only they reached
        that the table owns (under its location); ``delete_external_files`` also deletes those outside it (files
        registered in place with ``append_files``), never another table's. ``progress`` is called with (files
        checked, files to check) as it deletes."""

        return expire_snapshots(self, older_than_ms=older_than_ms, retain_last=retain_last,
                                delete_external_files=delete_external_files, progress=progress)

    def remove_orphan_files(self, older_than_ms: int | None = None) -> list[str]:
        """Delete files under the table location that nothing references, older than ``older_than_ms``."""

        return remove_orphan_files(self, older_than_ms=older_than_ms)

    def manage_snapshots(self) -> ManageSnapshots:
        """Branches, tags, rollback, set current snapshot, cherry-pick."""

        return ManageSnapshots(self)

    def row_delta(self, *, branch: str = MAIN_BRANCH) -> RowDelta:
        """A builder adding data files, position delete files and equality delete files in one commit."""

        return RowDelta(self, branch=branch)

    def delete_by_key(self, keys: pa.Table, key_columns: Sequence[str], *, branch: str = MAIN_BRANCH) -> Snapshot | None:
        """Delete the rows whose ``key_columns`` equal a row of ``keys``, with an equality delete file."""

        return delete_by_key(self, keys, key_columns, branch=branch)

    def upsert(self, data: pa.Table, key_columns: Sequence[str], *, branch: str = MAIN_BRANCH) -> Snapshot | None:
        """Insert ``data``, replacing the rows with the same ``key_columns`` (equality deletes + new data files)."""

        return upsert(self, data, key_columns, branch=branch)

    def rewrite_data_files(self, where: str | None = None, strategy: str = "binpack", sort_order: Any = None,
                           zorder_columns: Sequence[str] | None = None,
                           target_file_size_bytes: int | None = None, *, branch: str = MAIN_BRANCH,
                           options: Mapping[str, Any] | None = None,
                           progress: Callable[[int, int], None] | None = None) -> Snapshot | None:
        """Compaction (operation ``replace``): bin-pack, sort, or Z-order the live data files matching ``where``,
        applying and dropping the delete files they cover. ``options`` takes Java's
        ``use-starting-sequence-number`` (default true: the new files keep the starting snapshot's data sequence
        number, so equality deletes committed meanwhile still apply to them). ``progress`` is called with (files
        rewritten, files to rewrite) as it goes."""

        return rewrite_data_files(self, where=where, strategy=strategy, sort_order=sort_order,
                                  zorder_columns=zorder_columns, target_file_size_bytes=target_file_size_bytes,
                                  branch=branch, options=options, progress=progress)

    def rewrite_manifests(self) -> Snapshot | None:
        """Rewrite the current snapshot's manifests into as few as the target size allows (``replace``)."""

        return rewrite_manifests(self)

    # ------------------------------------------------------------ projections (engine.publishing)
    @property
    def publisher(self) -> TablePublisher:
        """What publishes, renders and verifies this table's projection."""
        catalog = self.catalog
        return TablePublisher(catalog.store, catalog.projector, catalog.io, self.uuid, self.namespace, self.name)

    def publish(self, *, version: int | None = None, progress: Callable[[int, int], None] | None = None) -> str | None:
        """Publish every commit since the last published version (manifests, lists, metadata, hint, pointer).

        :param version: a commit just made: when another writer has published it meanwhile, nothing is done
            (writers of one table queue for its publish lock, and the first publishes what the others wait for)
        :param progress: called with (snapshots published, snapshots to publish) as their files are written
        """
        return self.publisher.publish(version=version, progress=progress)

    def _publish(self, *, check_foreign: bool, version: int | None = None,
                 progress: Callable[[int, int], None] | None = None) -> str | None:
        return self.publisher.publish(check_foreign=check_foreign, version=version, progress=progress)

    def check_foreign_writers(self, action: str = "commit to") -> None:
        """Refuse to commit (or publish) over metadata another writer committed behind the log's back (see
        :meth:`engine.publishing.TablePublisher.check_foreign_writers`).

        :param action: what is refused, for the message ("commit to", "publish")
        :raises ForeignWriterError: naming the file; nothing is committed, nothing is overwritten
        """
        self.publisher.check_foreign_writers(action)

    def wait_published(self, version: int, timeout_s: float = 30.0, *, poll_s: float = 0.05) -> int:
        """Block until this table's published projection (metadata file, hint, pointer row) has caught up with
        log version ``version`` (read-your-writes for readers of the metadata, such as Spark after a commit made
        by a catalog opened with ``project=False``); returns the published version.

        :param version: the log version to wait for (``table.state.version`` after a commit)
        :param timeout_s: how long to wait
        :param poll_s: how often to look
        :raises PublishTimeout: the projection is still behind after ``timeout_s`` (names the table)
        """
        return self.publisher.wait_published(version, timeout_s, poll_s=poll_s)

    def render(self) -> dict[str, bytes]:
        """Every projected file of this table, rendered from the log alone (path -> bytes)."""
        return self.publisher.render()

    def rebuild(self, into: str) -> list[str]:
        """Render the projection into a folder of no table, adding only new files (see Catalog.check_rebuild)."""
        self.catalog.check_rebuild(into, ".".join(self.identifier))
        return self.publisher.rebuild(into, self.state)

    def verify_projection(self) -> list[str]:
        """Published files that differ from a fresh rendering, are missing, or were not written by icelog."""
        return self.publisher.verify(self.state)

    def original_metadata(self) -> frozenset[str]:
        """Names of the files the table's metadata folder held when it was registered in place (the original
        writer's): never overwritten, never deleted, never called foreign."""
        return self.publisher.original_metadata()

    # ------------------------------------------------------------ reads
    def scan(self, where: str | None = None, columns: Sequence[str] | None = None, snapshot_id: int | None = None,
             as_of_timestamp_ms: int | None = None, ref: str | None = None) -> Scan:
        return Scan(self.catalog.store, self.state, where=where, columns=columns, snapshot_id=snapshot_id,
                    as_of_timestamp_ms=as_of_timestamp_ms, ref=ref, io=self.catalog.io)
