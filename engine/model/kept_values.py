"""Bounded maps of values made once and kept, oldest first out, safe to share between threads: the process-wide
caches of values derived from immutable objects (encoded manifest-list records, their JSON in the index, records
decoded from it, the JSON text of snapshots, schemas and specs) are each one of these.

Layer: engine.model (pure; imports nothing of ours), so that the fold and the projections can both use it.

::

    texts = KeptValues(8192)
    text = texts.get_or_make(record, lambda: json.dumps(...))     # by equality of the key
    schema_texts = KeptForObjects(64)
    text = schema_texts.get_or_make(schema, lambda: json.dumps(schema.to_json()))   # for this very object
    encoded = KeptWhileAlive(50_000)
    encoded.put(data_file, schema, data); encoded.get(data_file, schema)         # gone when data_file is
    per_log = SharedPerLog(make_caches)
    kept = per_log.of(log)          # the same object for every handle of that log's database in this process
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class KeptValues(Generic[V]):
    """Up to ``kept`` values by key; once full, the oldest made goes first. ``make`` runs outside the lock (two
    threads may make the same value at once; either is kept, as both are the same).

    A hit is one dictionary lookup, without the lock and without reordering: these caches are asked for every
    record of every manifest list a commit renders, so a hit must cost next to nothing. An entry still in use when
    it is the oldest is made once more (one record's encoding), which costs less than keeping recency on each hit.
    """

    def __init__(self, kept: int) -> None:
        self.kept = kept
        self._values: dict[Hashable, V] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        return self._values.get(key)  # one lookup; atomic, so no lock needed to read

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            values = self._values
            values[key] = value
            while len(values) > self.kept:
                del values[next(iter(values))]

    def get_or_make(self, key: Hashable, make: Callable[[], V]) -> V:
        value = self.get(key)
        if value is None:
            value = make()
            self.put(key, value)
        return value


class KeptForObjects(Generic[V]):
    """Up to ``kept`` values, each made for one object and kept with it (by identity, so the object's id stays its
    own): for objects that are equal yet must not share a value (two schemas whose defaults 0.0 and -0.0 are equal
    but write different JSON), or whose equality costs more than making the value again."""

    def __init__(self, kept: int) -> None:
        self._kept: KeptValues[tuple[object, V]] = KeptValues(kept)

    def get_or_make(self, obj: object, make: Callable[[], V]) -> V:
        found = self._kept.get(id(obj))
        if found is not None and found[0] is obj:
            return found[1]
        value = make()
        self._kept.put(id(obj), (obj, value))
        return value


class KeptWhileAlive(Generic[V]):
    """Up to ``kept`` values, each made for one object under one tag and kept only while that object lives (the
    cache holds a weak reference to it, so it keeps nothing alive): for values derived from objects that other
    structures hold for a while, such as the encoding of a data file that a manifest merge writes again. Once full,
    the oldest goes first."""

    def __init__(self, kept: int) -> None:
        self.kept = kept
        self._values: dict[int, tuple[weakref.ref[Any], object, V]] = {}
        #: reentrant: an object may die (and its entry go) while this thread is inside put
        self._lock = threading.RLock()

    def get(self, obj: object, tag: object) -> V | None:
        """The value made for ``obj`` under ``tag`` (compared by identity), or None."""
        found = self._values.get(id(obj))  # one lookup; atomic, so no lock needed to read
        if found is not None and found[0]() is obj and found[1] is tag:
            return found[2]
        return None

    def put(self, obj: object, tag: object, value: V) -> None:
        key = id(obj)
        ref = weakref.ref(obj, lambda dead, key=key: self._forget(key, dead))
        with self._lock:
            values = self._values
            values.pop(key, None)
            values[key] = (ref, tag, value)
            while len(values) > self.kept:
                del values[next(iter(values))]

    def _forget(self, key: int, dead: weakref.ref[Any]) -> None:
        """Drop the value of an object that has just died (its id may be taken by a new object next); runs in
        whatever thread freed it."""
        with self._lock:
            found = self._values.get(key)
            if found is not None and found[0] is dead:
                del self._values[key]

    def __len__(self) -> int:
        return len(self._values)


class SharedPerLog(Generic[V]):
    """One value per log database in this process, made on the first ask and shared by every handle of that
    database (each thread that opens the catalog has its own), kept while one of them holds it: what the handles
    derive from the log and would otherwise each derive again from one another's commits. A log that names no
    ``path`` gets a value of its own."""

    def __init__(self, make: Callable[[], V]) -> None:
        self._make = make
        self._values: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()

    def of(self, log: object) -> V:
        path = getattr(log, "path", None)
        if path is None:
            return self._make()
        key = f"{type(log).__name__}:{path}"
        with self._lock:
            value = self._values.get(key)
            if value is None:
                value = self._values[key] = self._make()
            return value  # type: ignore[no-any-return]
