"""One spelling per file location, for matching the paths a position delete file names with its data files and
for relocating tables: ``file:`` forms, Hadoop name-node authorities, ``s3a``/``s3n``, percent-escapes.

Layer: engine.model (pure).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

#: (pattern, replacement) pairs giving one spelling of a location; RE2 syntax, so Arrow applies them too.
PATH_RULES = (
    (r"^file:(//[^/]*)?/", "/"),  # file:/x, file:///x and file://host/x are /x
    (r"^(hdfs|viewfs)://[^/]*/", "/"),  # a name node authority: hdfs://host:port/x is /x
    (r"^s3[an]://", "s3://"),  # Hadoop's S3 connectors' schemes name the same objects
)
_PATH_PATTERNS = tuple((re.compile(p), r) for p, r in PATH_RULES)


def normalize_path(path: str) -> str:
    """A location in one spelling, for matching a position delete's ``file_path`` with its data file:
    ``file:/x``, ``file:///x`` and ``/x`` all give ``/x``, ``hdfs://host:port/x`` gives ``/x``, ``s3a://``
    or ``s3n://`` give ``s3://``, a URI's percent-escapes are decoded and repeated slashes in its path are one."""
    uri = "://" in path or path.startswith("file:")
    for pattern, replacement in _PATH_PATTERNS:
        path = pattern.sub(replacement, path, count=1)
    if uri:
        path = _SLASHES.sub("/", unquote(path)) if path.startswith("/") else _scheme_slashes(unquote(path))
    return path


_SLASHES = re.compile(r"/{2,}")


def _scheme_slashes(path: str) -> str:
    scheme, sep, rest = path.partition("://")
    return scheme + sep + _SLASHES.sub("/", rest) if sep else path
