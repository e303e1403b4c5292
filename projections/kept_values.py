"""A bounded map of values made once and kept, least recently used first out, safe to share between threads: the
process-wide caches of the projection (encoded manifest-list records, their JSON in the index, records decoded
from it) are each one of these.

Layer: projections (pure; imports nothing of ours).

::

    texts = KeptValues(8192)
    text = texts.get_or_make(record, lambda: json.dumps(...))
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class KeptValues(Generic[V]):
    """Up to ``kept`` values by key; the least recently used goes first. ``make`` runs outside the lock (two
    threads may make the same value at once; either is kept, as both are the same)."""

    def __init__(self, kept: int) -> None:
        self.kept = kept
        self._values: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_make(self, key: Hashable, make: Callable[[], V]) -> V:
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
                return value
        value = make()
        with self._lock:
            self._values[key] = value
            if len(self._values) > self.kept:
                self._values.popitem(last=False)
        return value
