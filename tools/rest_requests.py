"""What every handler of icelog's Iceberg REST catalog server shares: the served catalog (:class:`RestCatalog`:
its token, one Catalog per thread, the credentials it vends), errors as the spec's error responses, and request
parsing (bodies read within a size limit, JSON of bounded depth, identifiers, string maps and lists).

Layer: tools (Starlette's request and response types, icelog's engine; nothing imports tools). Touches the log and
the warehouse only through the Catalog it opens.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import threading
from typing import Any, Mapping

import attrs
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

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
from engine.state.table_state import TableState
from projections import layout
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
#: the request header by which a client asks for credentials with a table (Iceberg REST spec)
ACCESS_DELEGATION_HEADER = "x-iceberg-access-delegation"

class BadRequest(ValidationError):
    """A request whose body or parameters are malformed (HTTP 400)."""


class PayloadTooLarge(BadRequest):
    """A request body larger than the server's limit (HTTP 413)."""


class UnprocessableEntity(BadRequest):
    """A well-formed request the spec answers 422 (a namespace property both set and removed)."""


class Unauthorized(IcelogError):
    """A request without a valid bearer token (HTTP 401)."""


def error_response(code: int, kind: str, message: str) -> JSONResponse:
    """The spec's ErrorModel."""
    return JSONResponse({"error": {"message": message, "type": kind, "code": code}}, status_code=code)


def error_for(e: Exception) -> JSONResponse:
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
    if isinstance(e, UnprocessableEntity):
        return error_response(422, "UnprocessableEntityException", str(e))
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


def parse_identifier(obj: Any, what: str) -> tuple[tuple[str, ...], str]:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not isinstance(obj.get("namespace"),
                                                                                            list):
        raise BadRequest(f"Invalid {what}: expected {{'namespace': [...], 'name': ...}}, got {shortened(obj)}")
    ns = obj["namespace"]
    if not ns or not obj["name"] or not all(isinstance(p, str) and p for p in ns):
        raise BadRequest(f"Invalid {what}: {shortened(obj)}")
    return tuple(ns), obj["name"]

def shortened(value: Any, limit: int = 200) -> str:
    """A value for an error message, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def string_map(value: Any, what: str) -> dict[str, str]:
    """A JSON object of string values (absent or null: empty), as Iceberg's properties are."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRequest(f"Invalid {what}: expected an object of strings, got {shortened(value)}")
    for k, v in value.items():
        if not isinstance(v, str):
            raise BadRequest(f"Invalid {what}: the value of {shortened(k)} is not a string: {shortened(v)}")
    return dict(value)

def string_list(value: Any, what: str) -> list[str]:
    """A JSON array of strings (absent or null: empty)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRequest(f"Invalid {what}: expected a list of strings, got {shortened(value)}")
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


async def json_body(request: Request, limit: int) -> dict[str, Any]:
    return parse_json_body(await read_body(request, limit))


@attrs.frozen
class RenderedMetadata:
    """A table's metadata as the projection renders it (the bytes of its ``metadata.json``), placed in a response
    as they are (:func:`json_response`) rather than decoded and encoded again.

    :param table_location: the table's location (where vended credentials reach)
    """

    data: bytes
    table_location: str


def json_response(result: Mapping[str, Any]) -> Response:
    """The JSON response of a handler's result; a :class:`RenderedMetadata` value goes in as its bytes."""
    if not any(isinstance(value, RenderedMetadata) for value in result.values()):
        return JSONResponse(result)
    return Response(b"{" + b",".join(
        json.dumps(key).encode() + b":" + (value.data if isinstance(value, RenderedMetadata) else
                                           json.dumps(value, separators=(",", ":")).encode())
        for key, value in result.items()) + b"}", media_type="application/json")


def with_storage(rc: RestCatalog, request: Request, result: dict[str, Any]) -> dict[str, Any]:
    """A LoadTableResult with the FileIO properties clients need, and the server's credentials when the client
    asked for them (``X-Iceberg-Access-Delegation: vended-credentials``)."""
    metadata = result.get("metadata", {})
    location = metadata.table_location if isinstance(metadata, RenderedMetadata) else \
        str(metadata.get("location") or "")
    config = {**result.get("config", {}), **rc.client_config()}
    if "vended-credentials" in request.headers.get(ACCESS_DELEGATION_HEADER, ""):
        credentials = rc.storage_credentials(location)
        if credentials:
            result["storage-credentials"] = credentials
            config.update(credentials[0]["config"])
    result["config"] = config
    return result


def table_result(cat: Catalog, table: Table, state: TableState | None = None) -> dict[str, Any]:
    """LoadTableResult of the table's newest published version (published first when behind); its metadata is the
    published file's bytes, as the renderer (which extends its last render) gives them."""
    if state is None:
        table.publish()
        version = cat.projector.published_version(table.uuid) or cat.store.log.head(table.uuid)
        state = cat.store.table(table.uuid, version)
    return {"metadata-location": layout.metadata_file_of(state),
            "metadata": RenderedMetadata(cat.projector.metadata.render(state), state.location), "config": {}}

