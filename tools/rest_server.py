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

This module holds the routes, one handler per resource and endpoint, and the server's lifecycle (``app``,
``serve``, ``running_server``); what the handlers share (the served catalog, errors, request parsing) is in
tools/rest_requests.py, and table creation and commits in tools/rest_commits.py.

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
import os
import secrets
import threading
import time
from typing import Any, AsyncIterator, Callable, Iterator, Mapping
from urllib.parse import parse_qs, unquote_plus

import attrs
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from engine.errors import IcelogError, NamespaceNotFound, NotFound, TableNotFound
from storage.errors import FileError
from tools.rest_commits import commit_table, commit_transaction, create_table, retries_by_itself
from tools.rest_requests import (
    DEFAULT_MAX_BODY_BYTES,
    BadRequest,
    RestCatalog,
    UnprocessableEntity,
    error_for,
    error_response,
    json_body,
    namespace_of,
    parse_identifier,
    read_body,
    shortened,
    string_list,
    string_map,
    json_response,
    table_result,
    with_storage,
)

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


def _route(rc: RestCatalog, handler: Callable[..., Any], *, auth: bool = True, body: bool = False) -> Callable:
    async def endpoint(request: Request) -> Response:
        from starlette.concurrency import run_in_threadpool

        try:
            if auth:
                rc.check_token(request)
            payload = await json_body(request, rc.max_body_bytes) if body else None
            result = await run_in_threadpool(handler, rc, request, payload)
        except Exception as e:  # every error becomes the spec's error model
            return error_for(e)
        if isinstance(result, Response):
            return result
        if result is None:
            return Response(status_code=204)
        return json_response(result)

    return endpoint


def _ns(request: Request) -> tuple[str, ...]:
    return namespace_of(_path_param(request, "namespace"))


def _table(request: Request) -> str:
    return _path_param(request, "table")


def _path_param(request: Request, name: str) -> str:
    """A path parameter as Iceberg clients encode it: Iceberg Java with ``URLEncoder`` (a space is ``+``, a ``+`` is
    ``%2B``), PyIceberg and DuckDB with percent-escapes (``%20``, ``%2B``); so decoded from the path as sent, a
    ``+`` read as a space, as Java's own REST server decodes it (the path the router matched has lost the
    difference between ``+`` and ``%2B``)."""
    raw, route = request.scope.get("raw_path"), request.scope.get("route")
    if raw is not None and route is not None:
        match = route.path_regex.match(raw.decode("utf-8", "surrogateescape"))
        if match is None:  # the router matched the decoded path: an escaped / (%2F) made a name look like a route
            raise BadRequest(f"Cannot read the request path {shortened(raw.decode('utf-8', 'replace'))}: a name "
                             f"holds an escaped '/', which no namespace or table name may")
        if name in match.groupdict():
            try:
                return unquote_plus(match.group(name), errors="strict")
            except UnicodeDecodeError:
                raise BadRequest(f"Cannot read the request path: the {name} {shortened(match.group(name))} has "
                                 f"percent-escapes that are not UTF-8") from None
    return request.path_params[name]


def h_config(rc: RestCatalog, request: Request, _: Any) -> dict[str, Any]:
    return {"defaults": rc.client_config(), "overrides": {}, "endpoints": list(ENDPOINTS)}


async def oauth_tokens(request: Request, rc: RestCatalog) -> Response:
    try:
        raw = await read_body(request, rc.max_body_bytes)
    except BadRequest as e:
        return error_for(e)
    form = {k: v[-1] for k, v in parse_qs(raw.decode("utf-8", "replace")).items()}
    grant = form.get("grant_type")
    secret = form.get("client_secret") if grant == "client_credentials" else form.get("subject_token")
    if grant not in ("client_credentials", "urn:ietf:params:oauth:grant-type:token-exchange"):
        return JSONResponse({"error": "unsupported_grant_type",
                             "error_description": f"grant_type {shortened(grant)} is not supported"}, status_code=400)
    if not secret or not hmac.compare_digest(secret.encode(), rc.token.encode()):
        return JSONResponse({"error": "invalid_client", "error_description": "Invalid client credentials"},
                            status_code=401)
    return JSONResponse({"access_token": rc.token, "token_type": "bearer",
                         "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})


def h_list_namespaces(rc: RestCatalog, request: Request, _: Any) -> dict[str, Any]:
    parent_text = request.query_params.get("parent")
    parent = namespace_of(parent_text) if parent_text else ()
    return {"namespaces": [list(ns) for ns in rc.catalog().list_namespaces(parent)]}


def h_create_namespace(rc: RestCatalog, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    ns_json = body.get("namespace")
    if not isinstance(ns_json, list) or not ns_json or not all(isinstance(p, str) and p for p in ns_json):
        raise BadRequest(f"Invalid create namespace request: 'namespace' must be a list of names, got "
                         f"{shortened(ns_json)}")
    props = string_map(body.get("properties"), "create namespace request: 'properties'")
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
    updates = string_map(body.get("updates"), "namespace properties request: 'updates'")
    removals = string_list(body.get("removals"), "namespace properties request: 'removals'")
    both = sorted(set(updates) & set(removals))
    if both:  # the spec's 422 (UnprocessableEntityDuplicateKey)
        raise UnprocessableEntity(f"Cannot update namespace {'.'.join(_ns(request))}: {', '.join(both)} both set "
                                  f"and removed")
    updated, removed, missing = rc.catalog().update_namespace_properties(_ns(request), updates, removals)
    return {"updated": updated, "removed": removed, "missing": missing}


def h_list_tables(rc: RestCatalog, request: Request, _: Any) -> dict[str, Any]:
    ns = _ns(request)
    tables = rc.catalog().list_tables(ns)
    return {"identifiers": [{"namespace": list(t[:-1]), "name": t[-1]} for t in sorted(tables)]}


def h_create_table(rc: RestCatalog, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    return with_storage(rc, request, create_table(rc, _ns(request), body))


def h_load_table(rc: RestCatalog, request: Request, _: Any) -> dict[str, Any]:
    cat = rc.catalog()
    ns = _ns(request)
    table = cat.load_table(ns + (_table(request),))
    return with_storage(rc, request, table_result(cat, table))


def h_load_credentials(rc: RestCatalog, request: Request, _: Any) -> dict[str, Any]:
    """loadCredentials: the credentials of the table's storage, for its prefix."""
    ns = _ns(request)
    table = rc.catalog().load_table(ns + (_table(request),))
    return {"storage-credentials": rc.storage_credentials(table.state.location)}


def h_table_exists(rc: RestCatalog, request: Request, _: Any) -> Response:
    ns = _ns(request)
    exists = rc.catalog().store.catalog().table(ns, _table(request)) is not None
    return Response(status_code=204 if exists else 404)


def h_commit_table(rc: RestCatalog, request: Request, body: dict[str, Any]) -> Response:
    return commit_table(rc, _ns(request), _table(request), body,
                        rebase_appends=not retries_by_itself(request.headers.get("x-client-version", "")))


def h_drop_table(rc: RestCatalog, request: Request, _: Any) -> None:
    purge = request.query_params.get("purgeRequested", "false").lower() == "true"
    rc.catalog().drop_table(_ns(request) + (_table(request),), purge=purge)


def h_rename_table(rc: RestCatalog, request: Request, body: dict[str, Any]) -> None:
    src = parse_identifier(body.get("source"), "source")
    dst = parse_identifier(body.get("destination"), "destination")
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
    except (NamespaceNotFound, TableNotFound):
        raise
    except (FileError, NotFound) as e:  # the client's metadata cannot be read: a bad request, not a missing table
        raise BadRequest(f"Cannot register table {'.'.join(ns + (name,))}: {e}") from e
    return with_storage(rc, request, table_result(cat, table))


def h_report_metrics(rc: RestCatalog, request: Request, body: dict[str, Any]) -> None:
    """reportMetrics: accepted and dropped (icelog keeps no client metrics); a table that does not exist is 404, as
    the spec's NoSuchTableException answer says."""
    ns, name = _ns(request), _table(request)
    if rc.catalog().store.catalog().table(ns, name) is None:
        raise TableNotFound(f"Cannot report metrics: table {'.'.join(ns + (name,))} does not exist")
    return None


def h_commit_transaction(rc: RestCatalog, request: Request, body: dict[str, Any]) -> None:
    commit_transaction(rc, body, rebase_appends=not retries_by_itself(request.headers.get("x-client-version", "")))


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


def server_config(application: Any, host: str, port: int) -> Any:
    """uvicorn's settings for serving ``application`` (an ASGI app) on ``host:port``: the protocol that acknowledges
    a request's headers at once (:func:`tools.rest_http.server_protocol`: httptools' when installed), and uvloop's
    event loop when installed."""
    import uvicorn

    from tools.rest_http import server_protocol

    return uvicorn.Config(application, host=host, port=port, log_level="warning", http=server_protocol(),
                          loop="auto")


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
    uvicorn.Server(server_config(application, host, port)).run()


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
    from tools.ports import free_port

    port = port or free_port(host)
    server = uvicorn.Server(server_config(app(warehouse, token, max_body_bytes=max_body_bytes,
                                              catalog_dir=catalog_dir, properties=properties), host, port))
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
