"""Telling a PostgreSQL log's URL from a file path, and showing it without its password.

Layer: storage (the standard library only, so it imports without psycopg).
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

#: URL schemes that name a PostgreSQL log
POSTGRES_SCHEMES = ("postgresql", "postgres")


def is_postgres_url(text: object) -> bool:
    """Whether ``text`` names a PostgreSQL log (``postgresql://...`` or ``postgres://...``)."""
    return isinstance(text, str) and urlsplit(text).scheme.lower() in POSTGRES_SCHEMES


def redacted(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
