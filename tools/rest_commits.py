"""Table creation and commits of icelog's Iceberg REST catalog server: a client's create-table request and its
table and transaction commits (requirements and updates, parsed and translated into events by
engine.operations.table_updates) checked against what the client may touch, committed through the log's
compare-and-swap and published before the response.

Layer: tools (icelog's engine; nothing imports tools). Touches the log, and the warehouse through the Catalog
(the metadata a client wrote is read, and the files of a refused commit are recorded as staged).
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any, Callable, Mapping, Sequence

import attrs
from starlette.responses import Response

from engine.catalog import Catalog
from engine.table import Table
from engine.errors import (AlreadyExists, CommitConflict, CommitStateUnknown, IcelogError, NamespaceNotFound,
                           TableNotFound, ValidationError)
from engine.state.events import CATALOG_STREAM, SnapshotAdded, TableCreated, TableRegistered
from engine.model.partitioning import PartitionField, PartitionSpec, check_spec_binds
from engine.model.schema import Schema, assign_fresh_ids, check_schema_for_format
from engine.model.sort_order import UNSORTED_ORDER, SortOrder
from engine.operations.commit import CommitContext, RetryPolicy, commit_streams, now_ms
from engine.operations.client_files import ClientSnapshot, file_paths, load_client_snapshots, named_files
from engine.operations.table_commit import TableCommit, parse_table_commit
from engine.operations.table_updates import SUPPORTED_FORMAT_VERSIONS, commit_events
from engine.ownership import Ownership, catalog_files, check_identifier, is_local, is_within, normalize_location
from engine.state.table_state import LogPosition, apply
from projections import layout
from projections.metadata_json import metadata_dict
from tools.rest_requests import BadRequest, RestCatalog, parse_identifier, shortened, string_map, table_result

FORMAT_VERSION_PROPERTY = "format-version"


def _fresh_definition(body: Mapping[str, Any]) -> tuple[Schema, PartitionSpec, SortOrder]:
    """The request's schema with fresh field ids (as Iceberg Java's catalogs assign them), and its spec and write
    order moved onto those ids by column name."""
    try:
        given = Schema.from_json(body["schema"])
    except KeyError as e:
        raise BadRequest("Invalid create table request: 'schema' is missing") from e
    except (TypeError, ValueError, AttributeError) as e:
        raise BadRequest(f"Invalid create table request: the schema cannot be read: {e}") from e
    if not isinstance(given, Schema):
        raise BadRequest(f"Invalid create table request: the schema cannot be read: {shortened(body['schema'])}")
    schema = assign_fresh_ids(given, schema_id=0)

    def moved(source_id: int) -> int:
        try:
            return schema.find_field(given.find_column_name(source_id)).field_id
        except (ValidationError, KeyError) as e:
            raise BadRequest(f"Invalid create table request: source column {source_id} is not in the schema") from e

    spec_json = body.get("partition-spec")
    spec = PartitionSpec()
    if spec_json:
        if not isinstance(spec_json, (dict, list)):
            raise BadRequest(f"Invalid create table request: 'partition-spec' is not an object: {shortened(spec_json)}")
        obj = dict(spec_json) if isinstance(spec_json, dict) else {"fields": spec_json}
        fields = obj.get("fields") or []
        if not isinstance(fields, list) or not all(isinstance(f, dict) for f in fields):
            raise BadRequest(f"Invalid create table request: the partition fields are not a list of objects: "
                             f"{shortened(fields)}")
        obj["spec-id"] = 0
        obj["fields"] = [{k: v for k, v in f.items() if k != "field-id"} for f in fields]
        parsed = _from_json(PartitionSpec.from_json, obj, "partition spec")
        spec = PartitionSpec(spec_id=0, fields=tuple(
            PartitionField(source_id=moved(f.source_id), field_id=1000 + i, transform=f.transform, name=f.name)
            for i, f in enumerate(parsed.fields)))
        try:
            check_spec_binds(spec, schema)
        except ValidationError as e:
            raise BadRequest(f"Invalid create table request: {e}") from e
    order = UNSORTED_ORDER
    order_json = body.get("write-order")
    if order_json is not None and not isinstance(order_json, dict):
        raise BadRequest(f"Invalid create table request: 'write-order' is not an object: {shortened(order_json)}")
    if order_json and order_json.get("fields"):
        parsed_order = _from_json(SortOrder.from_json, {"order-id": 1, "fields": order_json["fields"]}, "write order")
        order = SortOrder(order_id=1, fields=tuple(attrs.evolve(f, source_id=moved(f.source_id))
                                                   for f in parsed_order.fields))
    return schema, spec, order


def _from_json(parse: Callable[[Any], Any], obj: Any, what: str) -> Any:
    """``parse(obj)`` with any failure to read the JSON as a 400 naming ``what``."""
    try:
        return parse(obj)
    except ValidationError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError) as e:
        raise BadRequest(f"Invalid create table request: the {what} cannot be read: {e}") from e

def create_table(rc: RestCatalog, ns: tuple[str, ...], body: Mapping[str, Any]) -> dict[str, Any]:
    cat = rc.catalog()
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise BadRequest("Invalid create table request: 'name' is missing")
    check_identifier(ns, name)
    requested = body.get("location")
    if requested is not None and not isinstance(requested, str):
        raise BadRequest(f"Invalid create table request: 'location' is not a string: {shortened(requested)}")
    schema, spec, order = _fresh_definition(body)
    props = string_map(body.get("properties"), "create table request: 'properties'")
    try:
        fmt = int(props.pop(FORMAT_VERSION_PROPERTY, "2"))
    except ValueError as e:
        raise BadRequest(f"Invalid create table request: format-version {e}") from e
    if fmt not in SUPPORTED_FORMAT_VERSIONS:
        raise BadRequest(f"Invalid create table request: format version {fmt} is not supported (1, 2 or 3)")
    try:
        check_schema_for_format(schema, fmt, "create table request")
    except ValidationError as e:
        raise BadRequest(str(e)) from e
    table_uuid = str(uuid.uuid4())

    def created_at(location: str) -> TableCreated:
        return TableCreated(table_uuid=table_uuid, location=location, format_version=fmt, schema=schema, spec=spec,
                            sort_order=order, properties=props)

    def check(state: Any) -> None:
        if not state.has_namespace(ns):
            raise NamespaceNotFound(f"Cannot create table {'.'.join(ns + (name,))}: namespace {'.'.join(ns)} "
                                    f"does not exist")
        if state.table(ns, name) is not None:
            raise AlreadyExists(f"Cannot create table {'.'.join(ns + (name,))}: it already exists")

    if body.get("stage-create"):
        check(cat.store.catalog())
        created = created_at(cat.place_table(ns, name, table_uuid, requested or None))
        folder = normalize_location(created.location) if is_local(created.location) else None
        if folder is not None and is_within(folder, normalize_location(cat.warehouse)):
            # the client writes its files before the create commits (CTAS), and DuckDB makes no folders for its
            # manifests: the table's (fresh, empty) folder and its metadata folder must exist. Only inside the
            # warehouse: an uncommitted table owns nothing, so a location a client names elsewhere stays untouched
            os.makedirs(layout.metadata_dir(folder), exist_ok=True)
        state = apply(created, None, LogPosition(position=0, version=0, commit_id="staged", time_ms=0))
        return {"metadata-location": None, "metadata": metadata_dict(state), "config": {}}

    def build(ctx: CommitContext) -> list:
        state = cat.store.catalog()
        check(state)
        created = created_at(cat.place_table(ns, name, table_uuid, requested or None))
        return [(CATALOG_STREAM, state.version, [TableRegistered(namespace=ns, name=name, table_uuid=table_uuid)]),
                (table_uuid, 0, [created])]

    commit_streams(cat.store, build, policy=RetryPolicy(), actor="rest")
    return table_result(cat, Table(cat, ns, name, table_uuid))

# ---------------------------------------------------------------- tables: commit

@attrs.frozen(kw_only=True)
class _PreparedCommit:
    namespace: tuple[str, ...]
    name: str
    table_uuid: str
    creates: bool
    commit: TableCommit
    client: Mapping[int, ClientSnapshot]
    owned: Ownership
    #: whether an append built on a moved head may be rebased (not for clients that retry by themselves)
    rebase_appends: bool

def _prepare(cat: Catalog, ns: tuple[str, ...], name: str, body: Mapping[str, Any], *,
             may_create: bool, rebase_appends: bool = True) -> _PreparedCommit:
    """Parse a CommitTableRequest and read the client's files (outside the log's write transaction)."""
    commit = parse_table_commit(body.get("requirements"), body.get("updates"))
    check_identifier(ns, name)
    entry = cat.store.catalog().table(ns, name)
    if entry is None and not (commit.creates and may_create):
        raise TableNotFound(f"Cannot commit to table {'.'.join(ns + (name,))}: it does not exist")
    if entry is not None and commit.creates:
        raise CommitConflict(f"Cannot create table {'.'.join(ns + (name,))}: it already exists (assert-create "
                             f"failed)", stream=CATALOG_STREAM, expected_version=-1, actual_version=-1)
    base = cat.store.table(entry.table_uuid) if entry is not None else None
    table_uuid = entry.table_uuid if entry is not None else (commit.assigned_uuid() or str(uuid.uuid4()))
    label = ".".join(ns + (name,))
    if entry is not None:
        owned = cat.ownership(table_uuid, name=label)
    else:  # a create: a uuid of its own, and the files under the location the table will have
        _check_new_table_uuid(cat, table_uuid, label)
        location = cat.place_table(ns, name, table_uuid, commit.requested_location(), must_be_empty=False)
        owned = Ownership(location, others=cat.table_locations(excluding=table_uuid),
                          catalog_files=catalog_files(cat.database), name=label)
    try:
        client = load_client_snapshots(cat.io, commit, base,
                                       check_path=lambda path: owned.check_new_file(path, f"commit to {label}"),
                                       projected=cat.projector.index.get)
    except Exception:
        if entry is not None:  # the refused commit's files are the table's orphans: verify knows them, and
            _stage_refused(cat, table_uuid, commit, owned)  # remove_orphan_files deletes them
        raise
    if entry is None:
        _check_fresh_location(cat, owned, client, f"create table {label}")
    return _PreparedCommit(namespace=ns, name=name, table_uuid=table_uuid, creates=entry is None, commit=commit,
                           client=client, owned=owned, rebase_appends=rebase_appends)


def _check_new_table_uuid(cat: Catalog, table_uuid: str, label: str) -> None:
    """A create's ``assign-uuid`` must be a uuid no table's log holds yet: one that names another table (or the
    catalog's own stream) would stage the client's files under that table and retry a commit that can never land."""
    try:
        uuid.UUID(table_uuid)
    except ValueError:
        raise ValidationError(f"Cannot create table {label}: assign-uuid {table_uuid!r} is no uuid") from None
    if cat.store.log.head(table_uuid) > 0:
        raise ValidationError(f"Cannot create table {label}: assign-uuid {table_uuid} is the uuid of a table the "
                              f"catalog's log holds already")


def _stage_refused(cat: Catalog, table_uuid: str, commit: TableCommit, owned: Ownership) -> None:
    """Record the files a refused commit named (those the table owns) as staged, as a failed job's."""
    paths = named_files(cat.io, commit, owned.owns)
    if paths:
        cat.log.record_staged_many(table_uuid, paths, now_ms())

def _commit(cat: Catalog, prepared: Sequence[_PreparedCommit]) -> dict[str, int]:
    """Land the prepared table commits as one log commit; returns each table's stream version after it."""
    for p in prepared:  # never over metadata another writer committed behind the log's back
        if not p.creates:
            Table(cat, p.namespace, p.name, p.table_uuid).check_foreign_writers()
    # the client's manifests are staged files of the table: verify knows them, and orphan removal deletes them
    # (icelog publishes its own manifests for the commit); recorded in the commit's own transaction, or in one of
    # their own when nothing lands
    staged = [(p.table_uuid, paths) for p in prepared if (paths := file_paths(p.commit, p.client))]

    def build(ctx: CommitContext) -> list:
        catalog_state = cat.store.catalog()
        out = []
        registered = []
        placed: list[tuple[str, str]] = []  # the tables this commit creates: no two in one folder, or one in another
        for p in prepared:
            entry = catalog_state.table(p.namespace, p.name)
            label = ".".join(p.namespace + (p.name,))
            if p.creates:
                if entry is not None:
                    raise CommitConflict(f"Cannot create table {label}: it already exists (assert-create failed)",
                                         stream=CATALOG_STREAM, expected_version=-1, actual_version=-1)
                if not catalog_state.has_namespace(p.namespace):
                    raise NamespaceNotFound(f"Cannot create table {label}: namespace {'.'.join(p.namespace)} does "
                                            f"not exist")
                location = cat.place_table(p.namespace, p.name, p.table_uuid, p.owned.location, must_be_empty=False,
                                           placed=placed)
                placed.append((location, label))
                events = commit_events(None, p.commit, ctx, client_snapshots=p.client,
                                       live_entries=cat.store.live_entries, live_files=cat.store.live_files_by_key,
                                       stream=p.table_uuid, default_location=location)
                _check_added_files(p, events)
                registered.append(TableRegistered(namespace=p.namespace, name=p.name, table_uuid=p.table_uuid))
                out.append((p.table_uuid, 0, events))
                continue
            if entry is None or entry.table_uuid != p.table_uuid:
                raise TableNotFound(f"Cannot commit to table {label}: it was dropped or replaced")
            base = cat.store.table(p.table_uuid)
            events = commit_events(base, p.commit, ctx, client_snapshots=p.client,
                                   live_entries=cat.store.live_entries, live_files=cat.store.live_files_by_key,
                                   stream=p.table_uuid, rebase_appends=p.rebase_appends)
            _check_added_files(p, events)
            out.append((p.table_uuid, base.version, events))
        if registered:
            out.insert(0, (CATALOG_STREAM, catalog_state.version, registered))
        return out

    try:
        landed = commit_streams(cat.store, build, policy=RetryPolicy(), actor="rest", staged=staged)
    except BaseException:
        _record_staged(cat, staged)
        raise
    if landed is None:
        _record_staged(cat, staged)
    versions = {p.table_uuid: cat.store.log.head(p.table_uuid) for p in prepared}
    if landed is not None:
        versions.update({s: v for s, v in landed.result.heads if s != CATALOG_STREAM})
    return versions


def _record_staged(cat: Catalog, staged: Sequence[tuple[str, Sequence[str]]]) -> None:
    """Record the files of a commit that did not land as staged (the table's orphans); a log that cannot take
    them now leaves them to the listing of remove_orphan_files (they are under the table's location)."""
    try:
        for table_uuid, paths in staged:
            cat.log.record_staged_many(table_uuid, paths, now_ms())
    except IcelogError:
        pass

def _check_fresh_location(cat: Catalog, owned: Ownership, client: Mapping[int, ClientSnapshot], what: str) -> None:
    """A table created by a commit (Spark's CTAS writes its files before it) starts in a folder that holds only
    what the commit itself wrote: its manifest lists, manifests and the files they add."""
    named = set()
    for c in client.values():
        named.add(owned.normalize(c.manifest_list))
        named.update(owned.normalize(m.manifest_path) for m in c.manifests)
        named.update(owned.normalize(e.data_file.file_path) for entries in c.entries.values() for e in entries)
    for path, _ in cat.io.list_files(owned.root):
        folder, base = path.rsplit("/", 1)
        if owned.normalize(path) in named or (base.startswith(".") and base.endswith(".crc")
                                               and f"{folder}/{base[1:-4]}" in named):
            continue
        raise ValidationError(f"Cannot {what}: location {owned.location} already holds {path}, which this "
                              f"commit does not write")

def _check_added_files(prepared: _PreparedCommit, events: Sequence[Any]) -> None:
    """Refuse a commit that adds a data or delete file the table does not own (another table's, the catalog's,
    or one outside its location): its expire and purge would delete it."""
    label = ".".join(prepared.namespace + (prepared.name,))
    for event in events:
        if isinstance(event, SnapshotAdded):
            for change in event.changes:
                if change.added:
                    prepared.owned.check_new_file(change.file.file_path, f"commit to {label}")

def retries_by_itself(client_version: str) -> bool:
    """Whether the client (its ``X-Client-Version`` header) retries a refused commit on a refreshed base with the
    validations of its own operation: Iceberg Java's does (a MERGE that inserted rows only sends an append that its
    retry validates against what landed meanwhile), so its commits are never rebased by the server."""
    return client_version.startswith("Apache Iceberg")


def commit_table(rc: RestCatalog, ns: tuple[str, ...], name: str, body: Mapping[str, Any], *,
                 rebase_appends: bool = True) -> Response:
    cat = rc.catalog()
    if "identifier" in body and body["identifier"] is not None:
        ident = parse_identifier(body["identifier"], "identifier")
        if ident != (ns, name):
            raise BadRequest(f"Invalid commit: identifier {'.'.join(ident[0] + (ident[1],))} does not match the "
                             f"path {'.'.join(ns + (name,))}")
    prepared = _prepare(cat, ns, name, body, may_create=True, rebase_appends=rebase_appends)
    versions = _commit(cat, [prepared])
    version = versions[prepared.table_uuid]
    # _commit has just checked for foreign metadata, and the publish writes metadata.json only where no file is
    _publish_landed(cat, ns, name, prepared.table_uuid, version)
    state = cat.store.table(prepared.table_uuid, version)
    # the metadata as published (the renderer extends the bytes it just wrote), not re-encoded from a dict
    metadata = cat.projector.metadata.render(state)
    return Response(b'{"metadata-location":%s,"metadata":%s}' % (
        json.dumps(layout.metadata_file_of(state)).encode(), metadata), media_type="application/json")


def commit_transaction(rc: RestCatalog, body: Mapping[str, Any], *, rebase_appends: bool = True) -> None:
    cat = rc.catalog()
    changes = body.get("table-changes")
    if not isinstance(changes, list) or not changes:
        raise BadRequest("Invalid transaction: 'table-changes' must be a non-empty list")
    prepared = []
    seen = set()
    for change in changes:
        if not isinstance(change, dict):
            raise BadRequest(f"Invalid transaction: table change {shortened(change)} is not an object")
        ns, name = parse_identifier(change.get("identifier"), "table change identifier")
        if (ns, name) in seen:
            raise BadRequest(f"Invalid transaction: table {'.'.join(ns + (name,))} is changed twice")
        seen.add((ns, name))
        prepared.append(_prepare(cat, ns, name, change, may_create=True, rebase_appends=rebase_appends))
    versions = _commit(cat, prepared)
    for p in prepared:  # checked for foreign metadata by _commit
        _publish_landed(cat, p.namespace, p.name, p.table_uuid, versions[p.table_uuid])


def _publish_landed(cat: Catalog, ns: tuple[str, ...], name: str, table_uuid: str, version: int) -> None:
    """Publish a commit that landed. Whatever fails now must not read as a refused commit (a 4xx makes a client
    delete the files it wrote for it): the client hears the spec's CommitStateUnknown, keeps its files and reloads
    the table; the next commit or ``publish`` completes the projection from the log."""
    try:
        Table(cat, ns, name, table_uuid).publisher.publish(check_foreign=False, version=version)
    except Exception as e:
        raise CommitStateUnknown(f"Cannot publish {'.'.join(ns + (name,))}: the commit landed as version {version}, "
                                 f"but its metadata was not published ({type(e).__name__}: {e})") from e
