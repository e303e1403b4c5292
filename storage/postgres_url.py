"""Telling a PostgreSQL log's URL from a file path, and showing it without its password.

Layer: storage (the standard library only, so it imports without psycopg).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

#: URL schemes that name a PostgreSQL log
POSTGRES_SCHEMES = ("postgresql", "postgres")


def is_postgres_url(text: object) -> bool:
    """Whether ``text`` names a PostgreSQL log (``postgresql://...`` or ``postgres://...``): judged by its scheme
    alone, so a malformed rest (an unclosed ``[``) still counts, and the log's own checks name what is wrong."""
    return isinstance(text, str) and ":" in text and text.partition(":")[0].lower() in POSTGRES_SCHEMES


#: libpq parameters that hold a secret (in a URL's query string)
SECRET_PARAMETERS = ("password", "sslpassword")


def _password_span(rest: str) -> tuple[int, int] | None:
    """Where the password of the user information lies in ``rest`` (the URL after ``scheme://``), as libpq reads
    it: the user information ends at the first ``@``, and a ``:`` before it followed by a port (digits, then ``/``,
    ``?`` or more hosts) is a host's, not a password's. A password holding ``#``, ``?`` or ``/`` is found whole."""
    at = rest.find("@")
    colon = rest.find(":", 0, at)
    if at == -1 or colon == -1:
        return None
    after = rest[colon + 1:at]
    cut = min((i for i in (after.find("/"), after.find("?")) if i != -1), default=-1)
    if cut != -1 and re.fullmatch(r"\d*(,.*)?", after[:cut]):
        return None  # host:port/database?...@...: an @ in the query, no password
    return colon + 1, at


def _secret_parameter(key: str) -> bool:
    return unquote(key).lower() in SECRET_PARAMETERS  # libpq decodes parameter names too (pass%77ord)


def redacted(url: str) -> str:
    """The URL without its secrets, for messages: the password of its user information and the values of the
    libpq parameters that hold one (``?password=...``). Hosts are kept as written (several ``h1:p1,h2:p2``, IPv6
    in brackets)."""
    scheme, sep, rest = url.partition("://")
    if sep:
        span = _password_span(rest)
        if span is not None:
            rest = rest[:span[0]] + "***" + rest[span[1]:]
        url = scheme + sep + rest
    return re.sub(r"([?&])([^=&]*)=([^&]*)",
                  lambda m: f"{m.group(1)}{m.group(2)}=***" if _secret_parameter(m.group(2)) else m.group(0), url)


def scrubbed(message: str, url: str) -> str:
    """A driver's message about ``url`` without its secrets (libpq quotes a URL, or the token it could not parse):
    the password of the user information and the values of the secret parameters, as written and decoded."""
    _, sep, rest = url.partition("://")
    secrets = []
    span = _password_span(rest) if sep else None
    if span is not None:
        secrets.append(rest[span[0]:span[1]])
    secrets += [m.group(2) for m in re.finditer(r"[?&]([^=&]*)=([^&]*)", url) if _secret_parameter(m.group(1))]
    for secret in sorted({t for s in secrets for t in (s, unquote(s)) if t}, key=len, reverse=True):
        message = message.replace(secret, "***")
    return message
