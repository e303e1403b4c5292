"""The shape of an Iceberg REST commit and its requirements: :func:`parse_table_commit` checks a client's
``requirements`` + ``updates`` JSON (``ValidationError`` naming the culprit: HTTP 400) into a :class:`TableCommit`,
and :func:`check_requirements` checks the requirements against a base state (``RequirementFailed``: HTTP 409, the
client reloads and retries). The updates become events in engine.operations.table_updates.

Layer: engine.operations (pure: JSON values and table states in, a value or an error out).
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs

from engine.errors import RequirementFailed, ValidationError
from engine.state.table_state import TableState

REQUIREMENTS = ("assert-create", "assert-table-uuid", "assert-ref-snapshot-id", "assert-last-assigned-field-id",
                "assert-current-schema-id", "assert-last-assigned-partition-id", "assert-default-spec-id",
                "assert-default-sort-order-id")
UPDATES = ("assign-uuid", "upgrade-format-version", "add-schema", "set-current-schema", "add-spec",
           "set-default-spec", "add-sort-order", "set-default-sort-order", "set-location", "set-properties",
           "remove-properties", "add-snapshot", "set-snapshot-ref", "remove-snapshot-ref", "remove-snapshots",
           "set-statistics", "remove-statistics", "set-partition-statistics", "remove-partition-statistics",
           "remove-partition-specs", "remove-schemas")


@attrs.frozen(kw_only=True)
class TableCommit:
    """One table's REST commit, its JSON shape checked.

    :param requirements: the requirement objects, each with a known ``type``
    :param updates: the update objects, each with a known ``action``
    """

    requirements: tuple[Mapping[str, Any], ...]
    updates: tuple[Mapping[str, Any], ...]

    @property
    def creates(self) -> bool:
        return any(r["type"] == "assert-create" for r in self.requirements)

    def snapshots(self) -> list[Mapping[str, Any]]:
        return [u["snapshot"] for u in self.updates if u["action"] == "add-snapshot"]

    def requested_location(self) -> str | None:
        """The location the commit's last ``set-location`` asks for (None when it sets none)."""
        found = [u.get("location") for u in self.updates if u.get("action") == "set-location"]
        # spelled as the table will hold it (an empty one too: it is checked, and refused, not taken for none)
        return str(found[-1]).rstrip("/") if found and found[-1] is not None else None

    def assigned_uuid(self) -> str | None:
        for u in self.updates:
            if u["action"] == "assign-uuid":
                return str(u["uuid"])
        return None


def need_field(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str, *,
          optional: bool = False) -> Any:
    if key not in obj or obj[key] is None:
        if optional:
            return None
        raise ValidationError(f"Cannot apply {what}: field '{key}' is missing")
    value = obj[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        raise ValidationError(f"Cannot apply {what}: field '{key}' has the wrong type: {value!r}")
    return value


def _check_values(u: Mapping[str, Any], action: str) -> None:
    """Property values and removals are strings and removed snapshot ids integers, as in Iceberg's parsers."""
    if action == "set-properties":
        for k, v in need_field(u, "updates", dict, action).items():
            if not isinstance(v, str):
                raise ValidationError(f"Cannot apply {action}: the value of {k!r} is not a string: {v!r}")
    elif action == "remove-properties":
        if not all(isinstance(k, str) for k in need_field(u, "removals", list, action)):
            raise ValidationError(f"Cannot apply {action}: 'removals' must be a list of strings")
    elif action == "remove-snapshots":
        ids = need_field(u, "snapshot-ids", list, action)
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise ValidationError(f"Cannot apply {action}: 'snapshot-ids' must be a list of integers")
    elif action in ("remove-statistics", "remove-partition-statistics"):
        need_field(u, "snapshot-id", int, action)


#: the most updates one table commit may carry (a client sends a few; Spark's largest, a create, about ten)
MAX_UPDATES = 1000


def parse_table_commit(requirements: Any, updates: Any) -> TableCommit:
    """Check the shape of a commit's ``requirements`` and ``updates`` lists.

    :raises ValidationError: a list that is not a list, an entry that is not an object, an unknown requirement
        type or update action, a field missing or of the wrong type
    """
    requirements = [] if requirements is None else requirements
    if not isinstance(requirements, list):
        raise ValidationError(f"Cannot commit: 'requirements' is not a list: {requirements!r}")
    if not isinstance(updates, list):
        raise ValidationError(f"Cannot commit: 'updates' is not a list: {updates!r}")
    if len(updates) > MAX_UPDATES:  # each is an event and a version: the table's writers would wait minutes
        raise ValidationError(f"Cannot commit: {len(updates):,} updates, more than {MAX_UPDATES:,} in one commit "
                              f"(set many properties in one set-properties update)")
    for r in requirements:
        if not isinstance(r, dict):
            raise ValidationError(f"Cannot commit: requirement {r!r} is not an object")
        if r.get("type") not in REQUIREMENTS:
            raise ValidationError(f"Cannot commit: unknown requirement type {r.get('type')!r}")
    for u in updates:
        if not isinstance(u, dict):
            raise ValidationError(f"Cannot commit: update {u!r} is not an object")
        action = u.get("action")
        if action not in UPDATES:
            raise ValidationError(f"Cannot commit: unknown update action {action!r}")
        _check_values(u, action)
        if action == "add-snapshot":
            snap = need_field(u, "snapshot", dict, "add-snapshot")
            need_field(snap, "snapshot-id", int, "add-snapshot")
            need_field(snap, "timestamp-ms", int, "add-snapshot")
            need_field(snap, "manifest-list", str, "add-snapshot")
            need_field(snap, "parent-snapshot-id", int, "add-snapshot", optional=True)
            need_field(snap, "sequence-number", int, "add-snapshot", optional=True)
            need_field(snap, "schema-id", int, "add-snapshot", optional=True)
            need_field(snap, "summary", dict, "add-snapshot", optional=True)
    return TableCommit(requirements=tuple(requirements), updates=tuple(updates))


def check_requirements(base: TableState | None, commit: TableCommit, stream: str) -> None:
    """Raise RequirementFailed for the first requirement ``base`` (None: no such table) does not meet."""
    for r in commit.requirements:
        kind = r["type"]
        if kind == "assert-create":
            if base is not None:
                raise RequirementFailed("Requirement failed: table already exists", stream=stream)
            continue
        if base is None:
            raise RequirementFailed(f"Requirement failed: {kind}: the table does not exist", stream=stream)
        if kind == "assert-table-uuid":
            asserted = need_field(r, "uuid", str, kind)
            if asserted != base.table_uuid:
                raise RequirementFailed(f"Requirement failed: UUID does not match: expected {base.table_uuid} "
                                        f"!= {asserted}", stream=stream)
        elif kind == "assert-ref-snapshot-id":
            name = need_field(r, "ref", str, kind)
            expected = need_field(r, "snapshot-id", int, kind, optional=True)
            ref = base.ref(name)
            if expected is None and ref is not None:
                raise RequirementFailed(f"Requirement failed: ref {name!r} was created concurrently "
                                        f"(it points at {ref.snapshot_id})", stream=stream)
            if expected is not None and ref is None:
                raise RequirementFailed(f"Requirement failed: ref {name!r} is missing, expected {expected}",
                                        stream=stream)
            if expected is not None and ref is not None and ref.snapshot_id != expected:
                raise RequirementFailed(f"Requirement failed: {ref.type} {name!r} has changed: expected id "
                                        f"{expected} != {ref.snapshot_id}", stream=stream)
        else:
            key, actual = {
                "assert-last-assigned-field-id": ("last-assigned-field-id", base.last_column_id),
                "assert-current-schema-id": ("current-schema-id", base.current_schema_id),
                "assert-last-assigned-partition-id": ("last-assigned-partition-id", base.last_partition_id),
                "assert-default-spec-id": ("default-spec-id", base.default_spec_id),
                "assert-default-sort-order-id": ("default-sort-order-id", base.default_sort_order_id),
            }[kind]
            expected = need_field(r, key, int, kind)
            if expected != actual:
                raise RequirementFailed(f"Requirement failed: {key} changed: expected {expected} != {actual}",
                                        stream=stream)
