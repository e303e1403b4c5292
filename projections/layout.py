"""Where projected files live, as pure functions of log data (Hadoop table layout).

Layer: projections (pure). Every name derives from the table location and event data
(stream version, snapshot id, commit id), so a rebuild from the log names every file the
same way, and Avro sync markers derive from the file's path.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

METADATA_DIR = "metadata"
DATA_DIR = "data"
VERSION_HINT = "version-hint.text"


def metadata_dir(location: str) -> str:
    return f"{location.rstrip('/')}/{METADATA_DIR}"


def metadata_file_of(state: Any, version: int | None = None, location: str | None = None) -> str:
    """The metadata file of a table state's stream version (default: the state's own), named with the state's
    ``metadata_base`` shift, under ``location`` (default: the table's)."""
    return metadata_file(location or state.location, state.metadata_number(version))


def metadata_file(location: str, version: int) -> str:
    """``<location>/metadata/v<N>.metadata.json``: N is the stream version of the commit's last event."""
    return f"{metadata_dir(location)}/v{version}.metadata.json"


def version_hint_file(location: str) -> str:
    return f"{metadata_dir(location)}/{VERSION_HINT}"


def manifest_list_file(location: str, snapshot_id: int, commit_id: str) -> str:
    return f"{metadata_dir(location)}/snap-{snapshot_id}-1-{commit_id}.avro"


def manifest_file(location: str, commit_id: str, snapshot_id: int, ordinal: int) -> str:
    """``<location>/metadata/<uuid>-m<N>.avro``: the uuid derives from the commit and the snapshot, since one commit
    (a transaction) may hold several snapshots, each with its own manifests."""
    name = uuid.uuid5(uuid.NAMESPACE_URL, f"icelog:{commit_id}/{snapshot_id}")
    return f"{metadata_dir(location)}/{name}-m{ordinal}.avro"


def data_dir(location: str) -> str:
    return f"{location.rstrip('/')}/{DATA_DIR}"


def sync_marker(path: str) -> bytes:
    """A 16-byte Avro sync marker fixed by the file's path, so rendering is deterministic."""
    return hashlib.sha256(path.encode("utf-8")).digest()[:16]
