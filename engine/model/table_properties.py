"""The values a table property may take, checked when the property is set (create, set_properties, a REST
client's set-properties), before any event is written.

Layer: engine.model (pure). icelog reads these properties on later commits, publishes and folds: a value it
cannot read there would fail every later commit or publish of the table (Java fails at use time too, but its
table has no log to fold), so it is refused where it is set, naming the property and the value. Properties icelog
does not read (Spark's, a user's own) keep any value.
"""

from __future__ import annotations

from collections.abc import Mapping

from engine.errors import ValidationError

#: properties read as integers (Java's PropertyUtil.propertyAsInt / propertyAsLong)
INTEGER_PROPERTIES = frozenset({
    "write.metadata.previous-versions-max",
    "commit.retry.num-retries", "commit.retry.min-wait-ms", "commit.retry.max-wait-ms",
    "commit.retry.total-timeout-ms",
    "commit.manifest.target-size-bytes", "commit.manifest.min-count-to-merge",
    "write.target-file-size-bytes", "write.parquet.row-group-size-bytes",
    "write.metadata.metrics.max-inferred-column-defaults",
    "history.expire.min-snapshots-to-keep", "history.expire.max-snapshot-age-ms", "history.expire.max-ref-age-ms",
    "icelog.metadata.max-snapshots",
})

#: properties with a closed set of values (compared case-insensitively, as Java's readers do)
CHOICE_PROPERTIES: Mapping[str, frozenset[str]] = {
    **{f"write.{op}.mode": frozenset({"copy-on-write", "merge-on-read"}) for op in ("delete", "update", "merge")},
    **{f"write.{op}.isolation-level": frozenset({"serializable", "snapshot"}) for op in ("delete", "update", "merge")},
    "write.delete.granularity": frozenset({"file", "partition"}),
}


def check_property_values(updates: Mapping[str, str], table: str) -> None:
    """Refuse a value icelog could not read later.

    :param table: the table's name, for the message
    :raises ValidationError: naming the table, the property and its value
    """
    for key, value in updates.items():
        if key in INTEGER_PROPERTIES:
            try:
                int(value)
            except ValueError:
                raise ValidationError(f"Cannot set property {key} of {table}: {value!r} is not an integer") from None
        choices = CHOICE_PROPERTIES.get(key)
        if choices is not None and value.strip().lower() not in choices:
            raise ValidationError(f"Cannot set property {key} of {table}: {value!r} is not one of "
                                  f"{', '.join(sorted(choices))}")
