"""Telling a PostgreSQL log's URL from a file path, and showing it without its password.

Layer: storage (the standard library only, so it imports without psycopg).
"""

from __future__ import annotations

import re

#: URL schemes that name a PostgreSQL log
POSTGRES_SCHEMES = ("postgresql", "postgres")


def is_postgres_url(text: object) -> bool:
    """Whether ``text`` names a PostgreSQL log (``postgresql://...`` or ``postgres://...``): judged by its scheme
    alone, so a malformed rest (an unclosed ``[``) still counts, and the log's own checks name what is wrong."""
    return isinstance(text, str) and ":" in text and text.partition(":")[0].lower() in POSTGRES_SCHEMES


#: libpq parameters that hold a secret (in a URL's query string)
SECRET_PARAMETERS = ("password", "sslpassword")


def redacted(url: str) -> str:
    """The URL without its secrets, for messages: the password of its user information and the values of the
    libpq parameters that hold one (``?password=...``). Hosts are kept as written (several ``h1:p1,h2:p2``, IPv6
    in brackets). The user information is found as libpq finds it, up to the last ``@``, so a password holding
    ``#``, ``?`` or ``/`` is hidden whole (rather too much than too little: no URL parser is trusted with it)."""
    scheme, sep, rest = url.partition("://")
    if sep:
        at = rest.rfind("@")
        if at != -1 and ":" in rest[:at]:
            rest = rest[:at].split(":", 1)[0] + ":***" + rest[at:]
        url = scheme + sep + rest
    names = "|".join(SECRET_PARAMETERS)
    return re.sub(rf"(?i)([?&])({names})=[^&]*", r"\1\2=***", url)


def scrubbed(message: str, url: str) -> str:
    """A driver's message about ``url`` without its secrets (libpq quotes a URL, or the token it could not parse):
    the password of the user information as written, and the values of the secret parameters."""
    _, sep, rest = url.partition("://")
    at = rest.rfind("@")
    if sep and at != -1 and ":" in rest[:at] and rest[:at].split(":", 1)[1]:
        message = message.replace(rest[:at].split(":", 1)[1], "***")
    names = "|".join(SECRET_PARAMETERS)
    return re.sub(rf"(?i)\b({names})=[^&\s\"']*", r"\1=***", message)
