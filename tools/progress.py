"""Progress bars for the command line's long steps (compaction, expiry, register, publish, Spark's start), on
standard error.

Layer: tools (the edge: the engine never draws; its long operations take a ``progress(done, total)`` callback and
this module turns the calls into a tqdm bar). A bar is drawn only when standard error is a terminal, and only for
a step still running after ``ICELOG_PROGRESS_DELAY_S`` seconds (default 0.5), so pipes, logs and quick steps stay
quiet; the bar is erased when its step ends.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import Callable, Iterator

#: seconds a step runs before its bar appears (tqdm's ``delay``)
DEFAULT_DELAY_S = 0.5


def _delay_s() -> float:
    try:
        return max(0.0, float(os.environ.get("ICELOG_PROGRESS_DELAY_S", DEFAULT_DELAY_S)))
    except ValueError:
        return DEFAULT_DELAY_S


def _on_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def _size() -> dict[str, int]:
    """tqdm's ``ncols`` and ``nrows`` from the terminal, 80 by 24 when it does not say (a fresh pseudo-terminal
    reports 0 by 0, which would make tqdm draw nothing)."""
    try:
        size = os.get_terminal_size(sys.stderr.fileno())
        return {"ncols": size.columns or 80, "nrows": size.lines or 24}
    except (OSError, ValueError):
        return {"ncols": 80, "nrows": 24}


@contextlib.contextmanager
def progress_bar(description: str, unit: str = "file") -> Iterator[Callable[[int, int], None] | None]:
    """A ``progress(done, total)`` callback drawing a bar on stderr, or None when stderr is not a terminal.

    :param description: what the step does, shown before the bar ("compact db.t")
    :param unit: what ``done`` and ``total`` count
    """
    if not _on_terminal():
        yield None
        return
    from tqdm import tqdm

    bar = tqdm(desc=description, unit=unit, file=sys.stderr, delay=_delay_s(), leave=False, **_size())

    def progress(done: int, total: int) -> None:
        if bar.total != total:
            bar.total = total
        bar.update(done - bar.n)

    try:
        yield progress
    finally:
        bar.close()


@contextlib.contextmanager
def phase_bars(description: str, unit: str = "file") -> Iterator[Callable[[str, int, int], None] | None]:
    """A ``progress(phase, done, total)`` callback for a step made of phases (register: "read", then "publish"):
    one bar per phase, each replacing the last; None when stderr is not a terminal."""
    if not _on_terminal():
        yield None
        return
    with contextlib.ExitStack() as stack:
        current: dict[str, Callable[[int, int], None] | None] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in current:
                stack.close()
                current.clear()
                current[phase] = stack.enter_context(progress_bar(f"{description}: {phase}", unit))
            bar = current[phase]
            if bar is not None:
                bar(done, total)

        yield progress


@contextlib.contextmanager
def waiting(description: str) -> Iterator[None]:
    """A bar with no total for a step that cannot count its work (Spark's start): the seconds it has taken so far,
    redrawn twice a second while the ``with`` block runs; nothing when stderr is not a terminal."""
    if not _on_terminal():
        yield
        return
    from tqdm import tqdm

    delay = _delay_s()
    bar = tqdm(desc=description, file=sys.stderr, delay=delay, leave=False, bar_format="{desc}: {elapsed}",
               **_size())
    started = time.monotonic()
    done = threading.Event()

    def tick() -> None:
        while not done.wait(0.5):
            if time.monotonic() - started >= delay:
                bar.refresh()

    ticker = threading.Thread(target=tick, name="icelog-progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
        bar.close()
