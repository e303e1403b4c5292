"""Table property values icelog reads on later commits, publishes and folds are checked where they are set: a value
it could not read (an integer property that is none, a mode or isolation level outside its choices) is refused
with a typed error naming the table, the property and the value, before any event; a table whose log already holds
one (from a registered table's metadata, or an older icelog) keeps committing, folding and publishing, reading the
default as if the property were unset.

Layer: tests (real SQLite log, Parquet files and published metadata).
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import ValidationError
from engine.model.table_properties import CHOICE_PROPERTIES, INTEGER_PROPERTIES
from engine.state.events import PropertiesSet

ROWS = pa.table({"id": pa.array([1], pa.int64())})


@pytest.fixture
def cat(tmp_path):
    with Catalog.open(tmp_path / "wh") as catalog:
        catalog.create_namespace("db")
        yield catalog


@pytest.mark.parametrize("key, value", [*((k, "abc") for k in sorted(INTEGER_PROPERTIES)),
                                        *((k, "bogus") for k in sorted(CHOICE_PROPERTIES))])
def test_a_value_icelog_could_not_read_is_refused_where_it_is_set(cat, key: str, value: str) -> None:
    t = cat.create_table("db.t", ROWS.schema)
    t.append(ROWS)
    version = t.state.version
    with pytest.raises(ValidationError, match=f"Cannot set property {key} of db.t: '{value}'"):
        t.set_properties({key: value})
    assert t.state.version == version and t.state.prop(key) is None
    with pytest.raises(ValidationError, match=f"Cannot set property {key} of db.u"):
        cat.create_table("db.u", ROWS.schema, properties={key: value})
    assert "u" not in [name for _, name in cat.list_tables("db")]


def test_valid_values_still_set_case_insensitively_as_java_reads_them(cat) -> None:
    t = cat.create_table("db.t", ROWS.schema, properties={"write.delete.mode": "Merge-On-Read"})
    t.set_properties({"write.update.isolation-level": "SNAPSHOT", "commit.retry.num-retries": "7",
                      "my.own.property": "anything"})
    assert t.properties["commit.retry.num-retries"] == "7" and t.properties["my.own.property"] == "anything"


def test_a_table_whose_log_holds_an_unreadable_value_keeps_committing_and_publishing(cat) -> None:
    """As a table registered from another writer's metadata may: every integer property icelog reads falls back
    to its default (the fold of each later commit, the retry policy, the publish), and the property can be
    removed."""
    t = cat.create_table("db.t", ROWS.schema)
    bad = {key: "abc" for key in INTEGER_PROPERTIES}
    t.commit_events(lambda base, ctx: [PropertiesSet(updates=bad)])  # past every check, as another writer's
    for _ in range(3):
        t.append(ROWS)
    assert t.scan().to_arrow().num_rows == 3 and len(t.snapshots()) == 3
    assert cat.verify("db.t") == []
    t.remove_properties(*bad)
    t.append(ROWS)
    assert t.scan().to_arrow().num_rows == 4 and cat.verify("db.t") == []


def test_a_compression_codec_icelog_cannot_write_is_a_typed_error_and_nothing_lands(cat) -> None:
    """``write.parquet.compression-codec`` is Spark's as well (its lzo is not icelog's): set freely, refused when
    icelog writes, before any file."""
    t = cat.create_table("db.t", ROWS.schema, properties={"write.parquet.compression-codec": "lzo"})
    data_dir = os.path.join(t.location, "data")
    with pytest.raises(ValidationError, match="write.parquet.compression-codec is 'lzo'"):
        t.append(ROWS)
    assert t.snapshots() == [] and not (os.path.isdir(data_dir) and os.listdir(data_dir))
    t.set_properties({"write.parquet.compression-codec": "snappy"})
    t.append(ROWS)
    assert t.scan().to_arrow().num_rows == 1
