"""Telling a PostgreSQL log's URL from a file path, and showing it without its password.

Layer: storage (the standard library only, so it imports without psycopg).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

#: URL schemes that name a PostgreSQL log
POSTGRES_SCHEMES = ("postgresql", "postgres")


def is_postgres_url(text: object) -> bool:
    """Whether ``text`` names a PostgreSQL log (``postgresql://...`` or ``postgres://...``)."""
    return isinstance(text, str) and urlsplit(text).scheme.lower() in POSTGRES_SCHEMES


#: libpq parameters that hold a secret (in a URL's query string)
SECRET_PARAMETERS = ("password", "sslpassword")


def redacted(url: str) -> str:
    """The URL without its secrets, for messages: the password of its user information and the values of the
    libpq parameters that hold one (``?password=...``). Hosts are kept as written (several ``h1:p1,h2:p2``, IPv6
    in brackets)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, hosts = netloc.rsplit("@", 1)
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        netloc = f"{userinfo}@{hosts}"
    names = "|".join(SECRET_PARAMETERS)
    query = re.sub(rf"(?i)(^|&)({names})=[^&]*", r"\1\2=***", parts.query)
    return urlunsplit(parts._replace(netloc=netloc, query=query))
