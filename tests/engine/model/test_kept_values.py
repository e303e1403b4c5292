"""KeptValues and KeptForObjects: the bounded, thread-safe maps behind the process-wide caches."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from engine.model.kept_values import KeptForObjects, KeptValues


def test_a_value_is_made_once_and_kept():
    kept: KeptValues[str] = KeptValues(4)
    made = []
    for _ in range(3):
        assert kept.get_or_make("a", lambda: made.append("a") or "value of a") == "value of a"
    assert made == ["a"]


def test_the_oldest_made_goes_first_once_full():
    kept: KeptValues[int] = KeptValues(3)
    made = []

    def make(n):
        return lambda: made.append(n) or n * 10

    for n in (1, 2, 3):
        kept.get_or_make(n, make(n))
    kept.get_or_make(1, make(1))  # a hit: nothing made, and the order of making stands
    kept.get_or_make(4, make(4))  # full: 1, the oldest made, goes
    assert made == [1, 2, 3, 4]
    assert kept.get_or_make(2, make(2)) == 20 and made == [1, 2, 3, 4]
    assert kept.get_or_make(1, make(1)) == 10 and made == [1, 2, 3, 4, 1]  # made again
    assert len(kept._values) == 3


def test_threads_share_it_without_errors_and_within_its_bound():
    kept: KeptValues[tuple[int, int]] = KeptValues(64)

    def work(offset: int) -> None:
        for i in range(5000):
            key = (i * 7 + offset) % 200
            assert kept.get_or_make(key, lambda: (key, key)) == (key, key)

    with ThreadPoolExecutor(4) as pool:
        for done in [pool.submit(work, n) for n in range(4)]:
            done.result()  # a thread's error is raised here
    assert len(kept._values) <= 64


def test_objects_that_are_equal_keep_values_of_their_own():
    kept: KeptForObjects[str] = KeptForObjects(2)
    a, b, c = [0.0], [-0.0], [1.0]  # a == b, but their JSON differs
    assert kept.get_or_make(a, lambda: "0.0") == "0.0"
    assert kept.get_or_make(b, lambda: "-0.0") == "-0.0"
    assert kept.get_or_make(a, lambda: "made again") == "0.0"
    kept.get_or_make(c, lambda: "1.0")  # full: a, the oldest made, goes
    assert kept.get_or_make(a, lambda: "made again") == "made again"


def test_a_value_kept_while_its_object_lives_goes_with_it() -> None:
    """KeptWhileAlive keeps nothing alive: once the object is gone its value is too (a new object that takes its
    id finds nothing), a value is found only under the tag it was made for, and the oldest go beyond the bound."""
    import gc

    from engine.model.kept_values import KeptWhileAlive

    class Thing:
        pass

    kept: KeptWhileAlive[str] = KeptWhileAlive(3)
    tag, other_tag = object(), object()
    a = Thing()
    kept.put(a, tag, "a")
    assert kept.get(a, tag) == "a" and kept.get(a, other_tag) is None
    del a
    gc.collect()
    assert len(kept) == 0
    things = [Thing() for _ in range(5)]
    for i, t in enumerate(things):
        kept.put(t, tag, str(i))
    assert len(kept) == 3 and kept.get(things[0], tag) is None and kept.get(things[4], tag) == "4"
