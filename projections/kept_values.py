"""A bounded map of values made once and kept, oldest first out, safe to share between threads: the process-wide
caches of the projection (encoded manifest-list records, their JSON in the index, records decoded from it) are each
one of these.

Layer: projections (pure; imports nothing of ours).

::

    texts = KeptValues(8192)
    text = texts.get_or_make(record, lambda: json.dumps(...))
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

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

    def get_or_make(self, key: Hashable, make: Callable[[], V]) -> V:
        value = self._values.get(key)  # one lookup; atomic, so no lock needed to read
        if value is not None:
            return value
        value = make()
        with self._lock:
            values = self._values
            values[key] = value
            while len(values) > self.kept:
                del values[next(iter(values))]
        return value
