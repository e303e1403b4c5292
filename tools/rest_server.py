"""An Iceberg REST catalog server over icelog's log, on Starlette + uvicorn.

Layer: tools (top; nothing imports it). Spark (``type=rest``), PyIceberg's ``RestCatalog`` and any other REST
client talk to it; every commit a client sends lands through the log's compare-and-swap as typed events (see
engine.operations.table_updates), is published before the response, and the response carries the new
``metadata-location`` and metadata.

Routes follow the Iceberg REST OpenAPI spec without a prefix (``/v1/namespaces/...``); a multipart namespace is one
path segment joined by ``%1F``. Every route but ``POST /v1/oauth/tokens`` needs ``Authorization: Bearer <token>``;
the token endpoint hands the token out for OAuth2 client credentials whose secret is the token. Errors use the
spec's ``{"error": {"message", "type", "code"}}``: every bad request is a 4xx (400 for a malformed body, 413 for
one larger than ``max_body_bytes``, read from Content-Length or while streaming and never buffered beyond the
limit), and 5xx means a fault of the server.

Handlers are synchronous: Starlette runs them in a thread pool, and each thread opens its own Catalog (its own
SQLite connection); the log serialises commits, and a failed requirement comes back as 409 so the client reloads
and retries.

::

    from tools.rest_server import app, serve
    serve("warehouse", "127.0.0.1", 8181, token="secret")      # blocking
    asgi = app("warehouse", token="secret", max_body_bytes=4 << 20)   # for any ASGI server
    with running_server("warehouse") as server:                  # a background thread (tests, benchmarks)
        RestCatalog("r", uri=server.uri, token=server.token)
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import secrets
import threading
import time
import uuid
from typing import Any, AsyncIterator, Callable, Iterator, Mapping, Sequence
from urllib.parse import parse_qs

import attrs
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from engine.catalog import Catalog
from engine.table import Table
from engine.errors import (
    AlreadyExists,
    CommitConflict,
    CommitStateUnknown,
    CorruptFileError,
    ForeignWriterError,
    IcelogError,
    IntegrityError,
    NamespaceNotEmpty,
    NamespaceNotFound,
    NotFound,
    StorageError,
    TableNotFound,
    ValidationConflict,
    ValidationError,
    storage_error,
)
from engine.state.events import CATALOG_STREAM, SnapshotAdded, TableCreated, TableRegistered
from engine.model.partitioning import PartitionField, PartitionSpec
from engine.model.schema import Schema, assign_fresh_ids
from engine.model.sort_order import UNSORTED_ORDER, SortOrder
from engine.operations.commit import CommitContext, RetryPolicy, commit_streams, now_ms
from engine.operations.table_updates import (
    ClientSnapshot,
    TableCommit,
    commit_events,
    file_paths,
    load_client_snapshots,
    named_files,
    parse_table_commit,
)
from engine.ownership import Ownership, catalog_files, check_identifier, is_local, is_within, normalize_location
from engine.state.table_state import LogPosition, TableState, apply
from projections import layout
from projections.metadata_json import metadata_dict
from storage.errors import FileError
from storage.postgres_url import is_postgres_url
from storage.files import is_s3

log = logging.getLogger("icelog.rest")

NAMESPACE_SEPARATOR = "\x1f"
#: The default limit on a request body (4 MiB); ``app(max_body_bytes=...)`` / ``icelog serve --max-body-bytes``.
DEFAULT_MAX_BODY_BYTES = 4 << 20
#: The deepest nesting of arrays and objects a JSON body may have (an Iceberg schema nests about four levels
#: per struct, so this allows structs some 60 deep).
MAX_JSON_DEPTH = 256
FORMAT_VERSION_PROPERTY = "format-version"
ENDPOINTS = (
    "GET /v1/{prefix}/namespaces", "POST /v1/{prefix}/namespaces", "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}", "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties", "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables", "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}", "POST /v1/{prefix}/tables/rename",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics", "POST /v1/{prefix}/transactions/commit",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
)
#: the request header by which a client asks for credentials with a table (Iceberg REST spec)
ACCESS_DELEGATION_HEADER = "x-iceberg-access-delegation"


class BadRequest(ValidationError):
    """A request whose body or parameters are malformed (HTTP 400)."""


class PayloadTooLarge(BadRequest):
    """A request body larger than the server's limit (HTTP 413)."""


class Unauthorized(IcelogError):
    """A request without a valid bearer token (HTTP 401)."""


def error_response(code: int, kind: str, message: str) -> JSONResponse:
    """The spec's ErrorModel."""
    return JSONResponse({"error": {"message": message, "type": kind, "code": code}}, status_code=code)


def _error_for(e: Exception) -> JSONResponse:
    if isinstance(e, Unauthorized):
        return error_response(401, "NotAuthorizedException", str(e))
    if isinstance(e, TableNotFound):
        return error_response(404, "NoSuchTableException", str(e))
    if isinstance(e, NamespaceNotFound):
        return error_response(404, "NoSuchNamespaceException", str(e))
    if isinstance(e, NotFound):
        return error_response(404, "NotFoundException", str(e))
    if isinstance(e, AlreadyExists):
        return error_response(409, "AlreadyExistsException", str(e))
    if isinstance(e, NamespaceNotEmpty):
        return error_response(409, "NamespaceNotEmptyException", str(e))
    if isinstance(e, (CommitConflict, ValidationConflict, ForeignWriterError)):
        return error_response(409, "CommitFailedException", str(e))
    if isinstance(e, PayloadTooLarge):
        return error_response(413, "RequestTooLargeException", str(e))
    if isinstance(e, RecursionError):  # only input can nest that deeply
        return error_response(400, "BadRequestException", f"Malformed request: nested too deeply ({e})")
    if isinstance(e, (ValidationError, CorruptFileError)):
        return error_response(400, "BadRequestException", str(e))
    if isinstance(e, IntegrityError):  # a damaged log: a server fault, said plainly (names the position)
        return error_response(500, "IntegrityError", str(e))
    if isinstance(e, CommitStateUnknown):
        return error_response(500, "CommitStateUnknownException", str(e))
    if isinstance(e, StorageError):  # the warehouse's store is down or refuses: retry later (names no secret)
        return error_response(503, "ServiceUnavailableException", str(e))
    if isinstance(e, FileError):
        return error_response(503, "ServiceUnavailableException", str(storage_error(e, e.path)))
    log.exception("unexpected error")
    return error_response(500, "InternalServerError", f"{type(e).__name__}: {e}")


class RestCatalog:
    """The server's state: the warehouse, the token, and one Catalog per worker thread.

    :param warehouse: the warehouse folder
    :param token: the bearer token every request must carry
    :param max_body_bytes: the largest request body accepted (larger ones get 413)
    :param catalog_dir: the folder of ``catalog.db`` when it is not the warehouse (required for an S3 warehouse),
        or a ``postgresql://`` URL: several servers on one PostgreSQL log serve one catalog
    :param properties: FileIO properties (``s3.endpoint``, ``s3.access-key-id``, ...; see ``Catalog.open``)
    """

    def __init__(self, warehouse: str | os.PathLike, token: str, *,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, catalog_dir: str | os.PathLike | None = None,
                 properties: Mapping[str, str] | None = None) -> None:
        if not token:
            raise ValidationError("Cannot start the REST server: a token is required")
        if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1:
            raise ValidationError(f"Cannot start the REST server: max_body_bytes must be a positive integer, got "
                                  f"{max_body_bytes!r}")
        text = os.fspath(warehouse)
        if is_s3(text) and catalog_dir is None:
            raise ValidationError(f"Cannot start the REST server: warehouse {text} is on S3; give catalog_dir "
                                  f"(--catalog-dir), a local folder for catalog.db")
        self.warehouse = text if is_s3(text) else os.path.abspath(text)
        self.properties = dict(properties or {})
        self.token = token
        self.max_body_bytes = max_body_bytes
        self._local = threading.local()
        self._catalogs: list[Catalog] = []
        self._lock = threading.Lock()
        if catalog_dir is None or is_postgres_url(os.fspath(catalog_dir)):
            self.catalog_dir = os.fspath(catalog_dir) if catalog_dir is not None else None
        else:
            self.catalog_dir = os.path.abspath(os.fspath(catalog_dir))
        self._open().close()  # create the warehouse and its log up front

    def _open(self) -> Catalog:
        if self.catalog_dir is None:
            return Catalog.open(self.warehouse, properties=self.properties)
        return Catalog.open(self.catalog_dir, warehouse=self.warehouse, properties=self.properties)

    def client_config(self) -> dict[str, str]:
        """FileIO properties every client needs to reach the warehouse's objects (no credentials)."""
        return self.catalog().io.s3.client_properties() if is_s3(self.warehouse) else {}

    def storage_credentials(self, location: str) -> list[dict[str, Any]]:
        """The credentials vended with a table on S3: the server's own, for the table's prefix (``s3://``,
        and the ``s3a://`` spelling Hadoop clients use)."""
        if not is_s3(location):
            return []
        config = self.catalog().io.s3.client_properties(credentials=True)
        if not any(key in config for key in ("s3.access-key-id", "s3.session-token")):
            return []
        bare = location.split("://", 1)[1].rstrip("/")
        return [{"prefix": f"{scheme}://{bare}", "config": config} for scheme in ("s3", "s3a")]

    def catalog(self) -> Catalog:
        cat = getattr(self._local, "catalog", None)
        if cat is None:
            cat = self._open()
            self._local.catalog = cat
            with self._lock:
                self._catalogs.append(cat)
        return cat

    def close(self) -> None:
        with self._lock:
            for cat in self._catalogs:
                try:
                    cat.close()
                except Exception:  # closing from another thread may be refused by sqlite; the process ends anyway
                    pass
            self._catalogs.clear()

    def check_token(self, request: Request) -> None:
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), self.token.encode()):
            raise Unauthorized("Not authorized: a valid 'Authorization: Bearer <token>' header is required")


# ---------------------------------------------------------------- request parsing


def namespace_of(segment: str) -> tuple[str, ...]:
    parts = tuple(segment.split(NAMESPACE_SEPARATOR))
    if not parts or any(not p for p in parts):
        raise BadRequest(f"Invalid namespace {segment!r}")
    return parts


def _identifier(obj: Any, what: str) -> tuple[tuple[str, ...], str]:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not isinstance(obj.get("namespace"),
                                                                                            list):
        raise BadRequest(f"Invalid {what}: expected {{'namespace': [...], 'name': ...}}, got {_short(obj)}")
    ns = obj["namespace"]
    if not ns or not obj["name"] or not all(isinstance(p, str) and p for p in ns):
        raise BadRequest(f"Invalid {what}: {_short(obj)}")
    return tuple(ns), obj["name"]


def _short(value: Any, limit: int = 200) -> str:
    """A value for an error message, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def _string_map(value: Any, what: str) -> dict[str, str]:
    """A JSON object of string values (absent or null: empty), as Iceberg's properties are."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRequest(f"Invalid {what}: expected an object of strings, got {_short(value)}")
    for k, v in value.items():
        if not isinstance(v, str):
            raise BadRequest(f"Invalid {what}: the value of {_short(k)} is not a string: {_short(v)}")
    return dict(value)


def _string_list(value: Any, what: str) -> list[str]:
    """A JSON array of strings (absent or null: empty)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRequest(f"Invalid {what}: expected a list of strings, got {_short(value)}")
    return list(value)


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with :class:`PayloadTooLarge` as soon as it is known to exceed ``limit`` bytes:
    from its Content-Length before reading anything, else while streaming it (a chunked body). Never holds more
    than ``limit`` bytes; what the client still sends is discarded by the server."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError as e:
            raise BadRequest(f"Malformed request: Content-Length {declared!r} is not a number") from e
        if size > limit:
            raise PayloadTooLarge(f"Request body too large: {size} bytes, more than the limit of {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        if len(body) + len(chunk) > limit:
            raise PayloadTooLarge(f"Request body too large: more than the limit of {limit} bytes")
        body += chunk
    return bytes(body)


def _json_depth(value: Any) -> int:
    """How deeply arrays and objects nest in a decoded JSON value (no recursion)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            deepest = max(deepest, d)
            stack += [(x, d + 1) for x in v.values()]
        elif isinstance(v, list):
            deepest = max(deepest, d)
            stack += [(x, d + 1) for x in v]
    return deepest


def parse_json_body(raw: bytes) -> dict[str, Any]:
    """A request body as a JSON object.

    :raises BadRequest: for a body that is not UTF-8 JSON, not an object, or nested deeper than MAX_JSON_DEPTH
    """
    try:
        body = json.loads(raw.decode("utf-8")) if raw else None
    except RecursionError as e:
        raise BadRequest(f"Malformed request body: JSON nested more than {MAX_JSON_DEPTH} levels deep") from e
    except (UnicodeDecodeError, ValueError) as e:
        raise BadRequest(f"Malformed request body: not JSON: {e}") from e
    if not isinstance(body, dict):
        raise BadRequest(f"Malformed request body: expected a JSON object, got {type(body).__name__}")
    if _json_depth(body) > MAX_JSON_DEPTH:
        raise BadRequest(f"Malformed request body: JSON nested more than {MAX_JSON_DEPTH} levels deep")
    return body


async def _json_body(request: Request, limit: int) -> dict[str, Any]:
    return parse_json_body(await read_body(request, limit))


def _with_storage(rc: RestCatalog, request: Request, result: dict[str, Any]) -> dict[str, Any]:
    """A LoadTableResult with the FileIO properties clients need, and the server's credentials when the client
    asked for them (``X-Iceberg-Access-Delegation: vended-credentials``)."""
    location = str(result.get("metadata", {}).get("location") or "")
    config = {**result.get("config", {}), **rc.client_config()}
    if "vended-credentials" in request.headers.get(ACCESS_DELEGATION_HEADER, ""):
        credentials = rc.storage_credentials(location)
        if credentials:
            result["storage-credentials"] = credentials
            config.update(credentials[0]["config"])
    result["config"] = config
    return result


def _table_result(cat: Catalog, table: Table, state: TableState | None = None) -> dict[str, Any]:
    """LoadTableResult of the table's newest published version (published first when behind)."""
    if state is None:
        table.publish()
        version = cat.projector.published_version(table.uuid) or cat.store.log.head(table.uuid)
        state = cat.store.table(table.uuid, version)
    return {"metadata-location": layout.metadata_file_of(state),
            "metadata": metadata_dict(state), "config": {}}


# ---------------------------------------------------------------- tables: create


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
        raise BadRequest(f"Invalid create table request: the schema cannot be read: {_short(body['schema'])}")
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
            raise BadRequest(f"Invalid create table request: 'partition-spec' is not an object: {_short(spec_json)}")
        obj = dict(spec_json) if isinstance(spec_json, dict) else {"fields": spec_json}
        fields = obj.get("fields") or []
        if not isinstance(fields, list) or not all(isinstance(f, dict) for f in fields):
            raise BadRequest(f"Invalid create table request: the partition fields are not a list of objects: "
                             f"{_short(fields)}")
        obj["spec-id"] = 0
        obj["fields"] = [{k: v for k, v in f.items() if k != "field-id"} for f in fields]
        parsed = _from_json(PartitionSpec.from_json, obj, "partition spec")
        spec = PartitionSpec(spec_id=0, fields=tuple(
            PartitionField(source_id=moved(f.source_id), field_id=1000 + i, transform=f.transform, name=f.name)
            for i, f in enumerate(parsed.fields)))
        spec.partition_type(schema)
        for f in spec.fields:
            source_type = schema.find_field(f.source_id).field_type
            if not f.transform.can_transform(source_type):
                raise BadRequest(f"Invalid create table request: partition field {f.name!r}: {f.transform} cannot "
                                 f"apply to column {schema.find_column_name(f.source_id)!r} of type {source_type}")
    order = UNSORTED_ORDER
    order_json = body.get("write-order")
    if order_json is not None and not isinstance(order_json, dict):
        raise BadRequest(f"Invalid create table request: 'write-order' is not an object: {_short(order_json)}")
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
        raise BadRequest(f"Invalid create table request: 'location' is not a string: {_short(requested)}")
    schema, spec, order = _fresh_definition(body)
    props = _string_map(body.get("properties"), "create table request: 'properties'")
    try:
        fmt = int(props.pop(FORMAT_VERSION_PROPERTY, "2"))
    except ValueError as e:
        raise BadRequest(f"Invalid create table request: format-version {e}") from e
    if fmt not in (1, 2):
        raise BadRequest(f"Invalid create table request: format version {fmt} is not supported (1 or 2)")
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
    return _table_result(cat, Table(cat, ns, name, table_uuid))


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


def _prepare(cat: Catalog, ns: tuple[str, ...], name: str, body: Mapping[str, Any], *,
             may_create: bool) -> _PreparedCommit:
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
    else:  # a create: the files must be under the location the table will have
        location = cat.place_table(ns, name, table_uuid, commit.requested_location(), must_be_empty=False)
        owned = Ownership(location, others=cat.table_locations(excluding=table_uuid),
                          catalog_files=catalog_files(cat.database), name=label)
    try:
        client = load_client_snapshots(cat.io, commit, base,
                                       check_path=lambda path: owned.check_new_file(path, f"commit to {label}"))
    except Exception:
        if entry is not None:  # the refused commit's files are the table's orphans: verify knows them, and
            _stage_refused(cat, table_uuid, commit, owned)  # remove_orphan_files deletes them
        raise
    if entry is None:
        _check_fresh_location(cat, owned, client, f"create table {label}")
    return _PreparedCommit(namespace=ns, name=name, table_uuid=table_uuid, creates=entry is None, commit=commit,
                           client=client, owned=owned)


def _stage_refused(cat: Catalog, table_uuid: str, commit: TableCommit, owned: Ownership) -> None:
    """Record the files a refused commit named (those the table owns) as staged, as a failed job's."""
    paths = [p for p in named_files(cat.io, commit) if owned.owns(p)]
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
                location = cat.place_table(p.namespace, p.name, p.table_uuid, p.owned.location, must_be_empty=False)
                events = commit_events(None, p.commit, ctx, client_snapshots=p.client,
                                       live_entries=cat.store.live_entries, stream=p.table_uuid,
                                       default_location=location)
                _check_added_files(p, events)
                registered.append(TableRegistered(namespace=p.namespace, name=p.name, table_uuid=p.table_uuid))
                out.append((p.table_uuid, 0, events))
                continue
            if entry is None or entry.table_uuid != p.table_uuid:
                raise TableNotFound(f"Cannot commit to table {label}: it was dropped or replaced")
            base = cat.store.table(p.table_uuid)
            events = commit_events(base, p.commit, ctx, client_snapshots=p.client,
                                   live_entries=cat.store.live_entries, stream=p.table_uuid)
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


def commit_table(rc: RestCatalog, ns: tuple[str, ...], name: str, body: Mapping[str, Any]) -> Response:
    cat = rc.catalog()
    if "identifier" in body and body["identifier"] is not None:
        ident = _identifier(body["identifier"], "identifier")
        if ident != (ns, name):
            raise BadRequest(f"Invalid commit: identifier {'.'.join(ident[0] + (ident[1],))} does not match the "
                             f"path {'.'.join(ns + (name,))}")
    prepared = _prepare(cat, ns, name, body, may_create=True)
    versions = _commit(cat, [prepared])
    version = versions[prepared.table_uuid]
    Table(cat, ns, name, prepared.table_uuid).publish(version=version)
    state = cat.store.table(prepared.table_uuid, version)
    # the metadata as published (the renderer extends the bytes it just wrote), not re-encoded from a dict
    metadata = cat.projector.metadata.render(state)
    return Response(b'{"metadata-location":%s,"metadata":%s}' % (
        json.dumps(layout.metadata_file_of(state)).encode(), metadata), media_type="application/json")


def commit_transaction(rc: RestCatalog, body: Mapping[str, Any]) -> None:
    cat = rc.catalog()
    changes = body.get("table-changes")
    if not isinstance(changes, list) or not changes:
        raise BadRequest("Invalid transaction: 'table-changes' must be a non-empty list")
    prepared = []
    seen = set()
    for change in changes:
        if not isinstance(change, dict):
            raise BadRequest(f"Invalid transaction: table change {_short(change)} is not an object")
        ns, name = _identifier(change.get("identifier"), "table change identifier")
        if (ns, name) in seen:
            raise BadRequest(f"Invalid transaction: table {'.'.join(ns + (name,))} is changed twice")
        seen.add((ns, name))
        prepared.append(_prepare(cat, ns, name, change, may_create=True))
    versions = _commit(cat, prepared)
    for p in prepared:
        Table(cat, p.namespace, p.name, p.table_uuid).publish(version=versions[p.table_uuid])


# ---------------------------------------------------------------- routes


def _route(rc: RestCatalog, handler: Callable[..., Any], *, auth: bool = True, body: bool = False) -> Callable:
    async def endpoint(request: Request) -> Response:
        from starlette.concurrency import run_in_threadpool

        try:
            if auth:
                rc.check_token(request)
            payload = await _json_body(request, rc.max_body_bytes) if body else None
            result = await run_in_threadpool(handler, rc, request, payload)
        except Exception as e:  # every error becomes the spec's error model
            return _error_for(e)
        if isinstance(result, Response):
            return result
        if result is None:
            return Response(status_code=204)
        return JSONResponse(result)

    return endpoint


def _ns(request: Request) -> tuple[str, ...]:
    return namespace_of(request.path_params["namespace"])


def h_config(rc: RestCatalog, request: Request, _: Any) -> dict[str, Any]:
    return {"defaults": rc.client_config(), "overrides": {}, "endpoints": list(ENDPOINTS)}


async def oauth_tokens(request: Request, rc: RestCatalog) -> Response:
    try:
        raw = await read_body(request, rc.max_body_bytes)
    except BadRequest as e:
        return _error_for(e)
    form = {k: v[-1] for k, v in parse_qs(raw.decode("utf-8", "replace")).items()}
    grant = form.get("grant_type")
    secret = form.get("client_secret") if grant == "client_credentials" else form.get("subject_token")
    if grant not in ("client_credentials", "urn:ietf:params:oauth:grant-type:token-exchange"):
        return JSONResponse({"error": "unsupported_grant_type",
                             "error_description": f"grant_type {_short(grant)} is not supported"}, status_code=400)
    if not secret or not hmac.compare_digest(secret.encode(), rc.token.encode()):
        return JSONResponse({"error": "invalid_client", "error_description": "Invalid client credentials"},
                            status_code=401)
    return JSONResponse({"access_token": rc.token, "token_type": "bearer",
                         "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})


def h_list_namespaces(rc: RestCatalog, request: Request, _: Any) -> dict[str, Any]:
    cat = rc.catalog()
    parent_text = request.query_params.get("parent")
    parent = namespace_of(parent_text) if parent_text else ()
    state = cat.store.catalog()
    if parent and not state.has_namespace(parent):
        raise NamespaceNotFound(f"Cannot list namespaces: parent {'.'.join(parent)} does not exist")
    found = sorted({ns[:len(parent) + 1] for ns, _ in state.namespaces
                    if len(ns) > len(parent) and ns[:len(parent)] == parent})
    return {"namespaces": [list(ns) for ns in found]}


def h_create_namespace(rc: RestCatalog, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    ns_json = body.get("namespace")
    if not isinstance(ns_json, list) or not ns_json or not all(isinstance(p, str) and p for p in ns_json):
        raise BadRequest(f"Invalid create namespace request: 'namespace' must be a list of names, got "
                         f"{_short(ns_json)}")
    props = _string_map(body.get("properties"), "create namespace request: 'properties'")
    rc.catalog().create_namespace(tuple(ns_json), props)
    return {"namespace": ns_json, "properties": props}


def h_load_namespace(rc: RestCatalog, request: Request, _: Any) -> dict[str, Any]:
    ns = _ns(request)
    return {"namespace": list(ns), "properties": rc.catalog().namespace_properties(ns)}


def h_namespace_exists(rc: RestCatalog, request: Request, _: Any) -> Response:
    ns = _ns(request)
    return Response(status_code=204 if rc.catalog().store.catalog().has_namespace(ns) else 404)


def h_drop_namespace(rc: RestCatalog, request: Request, _: Any) -> None:
    rc.catalog().drop_namespace(_ns(request))


def h_update_namespace(rc: RestCatalog, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    updates = _string_map(body.get("updates"), "namespace properties request: 'updates'")
    removals = _string_list(body.get("removals"), "namespace properties request: 'removals'")
    updated, removed, missing = rc.catalog().update_namespace_properties(_ns(request), updates, removals)
    return {"updated": updated, "removed": removed, "missing": missing}


def h_list_tables(rc: RestCatalog, request: Request, _: Any) -> dict[str, Any]:
    ns = _ns(request)
    tables = rc.catalog().list_tables(ns)
    return {"identifiers": [{"namespace": list(t[:-1]), "name": t[-1]} for t in sorted(tables)]}


def h_create_table(rc: RestCatalog, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    return _with_storage(rc, request, create_table(rc, _ns(request), body))


def h_load_table(rc: RestCatalog, request: Request, _: Any) -> dict[str, Any]:
    cat = rc.catalog()
    ns = _ns(request)
    table = cat.load_table(ns + (request.path_params["table"],))
    return _with_storage(rc, request, _table_result(cat, table))


def h_load_credentials(rc: RestCatalog, request: Request, _: Any) -> dict[str, Any]:
    """loadCredentials: the credentials of the table's storage, for its prefix."""
    ns = _ns(request)
    table = rc.catalog().load_table(ns + (request.path_params["table"],))
    return {"storage-credentials": rc.storage_credentials(table.state.location)}


def h_table_exists(rc: RestCatalog, request: Request, _: Any) -> Response:
    ns = _ns(request)
    exists = rc.catalog().store.catalog().table(ns, request.path_params["table"]) is not None
    return Response(status_code=204 if exists else 404)


def h_commit_table(rc: RestCatalog, request: Request, body: dict[str, Any]) -> Response:
    return commit_table(rc, _ns(request), request.path_params["table"], body)


def h_drop_table(rc: RestCatalog, request: Request, _: Any) -> None:
    purge = request.query_params.get("purgeRequested", "false").lower() == "true"
    rc.catalog().drop_table(_ns(request) + (request.path_params["table"],), purge=purge)


def h_rename_table(rc: RestCatalog, request: Request, body: dict[str, Any]) -> None:
    src = _identifier(body.get("source"), "source")
    dst = _identifier(body.get("destination"), "destination")
    rc.catalog().rename_table(src[0] + (src[1],), dst[0] + (dst[1],))


def h_register_table(rc: RestCatalog, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    ns = _ns(request)
    name, location = body.get("name"), body.get("metadata-location")
    if not isinstance(name, str) or not name or not isinstance(location, str) or not location:
        raise BadRequest("Invalid register table request: 'name' and 'metadata-location' are required")
    if body.get("overwrite"):
        raise BadRequest("Invalid register table request: overwrite is not supported (drop the table first)")
    cat = rc.catalog()
    if not cat.store.catalog().has_namespace(ns):
        raise NamespaceNotFound(f"Cannot register table: namespace {'.'.join(ns)} does not exist")
    try:
        table = cat.register_table(ns + (name,), location)
    except FileError as e:  # the client's metadata location cannot be read: a bad request, not a server fault
        raise BadRequest(f"Cannot register table {'.'.join(ns + (name,))}: {e}") from e
    return _with_storage(rc, request, _table_result(cat, table))


def h_report_metrics(rc: RestCatalog, request: Request, body: dict[str, Any]) -> None:
    return None


def h_commit_transaction(rc: RestCatalog, request: Request, body: dict[str, Any]) -> None:
    commit_transaction(rc, body)


def app(warehouse: str | os.PathLike, token: str, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        catalog_dir: str | os.PathLike | None = None, properties: Mapping[str, str] | None = None) -> Starlette:
    """The ASGI application serving ``warehouse``; every request but the token endpoint must carry ``token``.

    :param max_body_bytes: the largest request body accepted; a larger one gets 413 without being buffered
    :param catalog_dir: the folder of ``catalog.db`` when it is not the warehouse
    :param properties: FileIO properties of an S3 warehouse (see ``Catalog.open``)
    """
    rc = RestCatalog(warehouse, token, max_body_bytes=max_body_bytes, catalog_dir=catalog_dir,
                     properties=properties)
    ns = "/v1/namespaces/{namespace}"
    tbl = ns + "/tables/{table}"

    async def tokens(request: Request) -> Response:
        return await oauth_tokens(request, rc)

    routes = [
        Route("/v1/config", _route(rc, h_config), methods=["GET"]),
        Route("/v1/oauth/tokens", tokens, methods=["POST"]),
        Route("/v1/namespaces", _route(rc, h_list_namespaces), methods=["GET"]),
        Route("/v1/namespaces", _route(rc, h_create_namespace, body=True), methods=["POST"]),
        Route(ns, _route(rc, h_namespace_exists), methods=["HEAD"]),
        Route(ns, _route(rc, h_load_namespace), methods=["GET"]),
        Route(ns, _route(rc, h_drop_namespace), methods=["DELETE"]),
        Route(ns + "/properties", _route(rc, h_update_namespace, body=True), methods=["POST"]),
        Route(ns + "/tables", _route(rc, h_list_tables), methods=["GET"]),
        Route(ns + "/tables", _route(rc, h_create_table, body=True), methods=["POST"]),
        Route(ns + "/register", _route(rc, h_register_table, body=True), methods=["POST"]),
        Route(tbl, _route(rc, h_table_exists), methods=["HEAD"]),
        Route(tbl, _route(rc, h_load_table), methods=["GET"]),
        Route(tbl, _route(rc, h_commit_table, body=True), methods=["POST"]),
        Route(tbl, _route(rc, h_drop_table), methods=["DELETE"]),
        Route(tbl + "/metrics", _route(rc, h_report_metrics, body=True), methods=["POST"]),
        Route(tbl + "/credentials", _route(rc, h_load_credentials), methods=["GET"]),
        Route("/v1/tables/rename", _route(rc, h_rename_table, body=True), methods=["POST"]),
        Route("/v1/transactions/commit", _route(rc, h_commit_transaction, body=True), methods=["POST"]),
    ]
    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        rc.close()

    async def not_found(request: Request, exc: Exception) -> Response:
        code = getattr(exc, "status_code", 404)
        return error_response(code, "NotFoundException" if code == 404 else "BadRequestException",
                              f"{request.method} {request.url.path}: no such route in the Iceberg REST API")

    application = Starlette(routes=routes, lifespan=lifespan,
                            exception_handlers={404: not_found, 405: not_found})
    application.state.rest_catalog = rc
    return application


def serve(warehouse: str | os.PathLike, host: str = "127.0.0.1", port: int = 8181, token: str = "", *,
          max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, catalog_dir: str | os.PathLike | None = None,
          properties: Mapping[str, str] | None = None, ready: Callable[[], None] | None = None) -> None:
    """Run the server until interrupted (blocking).

    :param ready: called once the catalog is open and the server is about to listen (the CLI prints its banner)
    """
    import uvicorn

    application = app(warehouse, token, max_body_bytes=max_body_bytes, catalog_dir=catalog_dir,
                      properties=properties)
    if ready is not None:
        ready()
    uvicorn.run(application, host=host, port=port, log_level="warning")


def connection_settings(uri: str, token: str, warehouse: str) -> list[str]:
    """Ready-to-paste settings for Spark, PyIceberg and DuckDB clients of the server at ``uri``."""
    name = "icelog"
    return [
        f"Spark:     --conf spark.sql.catalog.{name}=org.apache.iceberg.spark.SparkCatalog "
        f"--conf spark.sql.catalog.{name}.type=rest --conf spark.sql.catalog.{name}.uri={uri} "
        f"--conf spark.sql.catalog.{name}.token={token}",
        f"PyIceberg: RestCatalog({name!r}, uri={uri!r}, token={token!r})",
        f"DuckDB:    ATTACH '{warehouse}' AS {name} (TYPE iceberg, ENDPOINT '{uri}', AUTHORIZATION_TYPE 'oauth2', "
        f"TOKEN '{token}')",
    ]


@attrs.frozen(kw_only=True)
class RunningServer:
    """A server started by :func:`running_server`: its base URL and the token clients must send."""

    uri: str
    token: str


@contextlib.contextmanager
def running_server(warehouse: str | os.PathLike, token: str | None = None, *, host: str = "127.0.0.1",
                   port: int | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                   catalog_dir: str | os.PathLike | None = None,
                   properties: Mapping[str, str] | None = None) -> Iterator[RunningServer]:
    """Serve ``warehouse`` from a background thread of this process until the block ends (tests, benchmarks).

    :param token: the bearer token (a random one when None)
    :param port: the port (a free one when None)
    :param max_body_bytes: the largest request body accepted
    :param catalog_dir: the folder of ``catalog.db`` when it is not the warehouse
    :param properties: FileIO properties of an S3 warehouse (see ``Catalog.open``)
    """
    import uvicorn

    token = token or secrets.token_urlsafe(24)
    from tools.spark import free_port

    port = port or free_port(host)
    server = uvicorn.Server(uvicorn.Config(app(warehouse, token, max_body_bytes=max_body_bytes,
                                               catalog_dir=catalog_dir, properties=properties),
                                           host=host, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name=f"icelog-rest-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise IcelogError(f"Cannot start the REST server on {host}:{port}")
        time.sleep(0.02)
    try:
        yield RunningServer(uri=f"http://{host}:{port}", token=token)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
