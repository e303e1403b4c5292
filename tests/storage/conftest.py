"""Fixtures for the storage tests: a real SQLite log file under tmp_path (WAL needs a file)."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from storage import FileIO, Log


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "warehouse" / "catalog.db"


@pytest.fixture
def log(log_path: Path) -> Iterator[Log]:
    with Log.open(log_path) as opened:
        yield opened


@pytest.fixture
def io() -> FileIO:
    return FileIO()
