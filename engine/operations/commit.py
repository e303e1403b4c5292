"""The commit loop: build events on a base state, compare-and-swap them into the log, retry on conflict.

Layer: engine.operations (uses storage's log, engine.state.store, engine.state.events). An
operation is a function ``build(base, ctx) -> events``; it must be pure (no I/O), so a
retry simply rebuilds it on the new base. Nothing half-done reaches the log: either all of
a commit's events land in one transaction, or none does.
"""

from __future__ import annotations

import random
import time
import uuid
from typing import Callable, Sequence

import attrs

from engine.errors import CommitConflict, CommitStateUnknown, ValidationError
from engine.state.events import CATALOG_STREAM, Event, SnapshotAdded, encode
from engine.state.table_state import LogPosition, TableState, apply
from engine.state.store import StateStore
from storage import CommitResult, LogBusy, NewEvent, StreamVersionConflict, StreamWrite, TransactionFailed
from storage.errors import TransactionOutcomeUnknown

DEFAULT_RETRIES = 4
DEFAULT_MIN_WAIT_MS = 100
DEFAULT_MAX_WAIT_MS = 60_000
DEFAULT_TOTAL_TIMEOUT_MS = 30 * 60 * 1000


@attrs.frozen(kw_only=True)
class CommitContext:
    """What an operation may stamp into its events: taken once per attempt, stored in the events."""

    commit_id: str
    time_ms: int
    actor: str | None = None
    message: str | None = None
    #: in a transaction, the table version its operations read (see engine.operations.transaction): every
    #: snapshot the log recorded after it is validated by each staged operation, wherever it sits in the lineage
    staged_on_version: int | None = None


def apply_in_commit(event: Event, state: TableState | None, ctx: CommitContext) -> TableState:
    """The state after ``event``, as the next version of the table in the commit ``ctx`` is building (the event is
    not in the log yet, so it has no position)."""
    version = state.version + 1 if state is not None else 1
    return apply(event, state, LogPosition(position=0, version=version, commit_id=ctx.commit_id, time_ms=ctx.time_ms))


@attrs.frozen(kw_only=True)
class RetryPolicy:
    num_retries: int = DEFAULT_RETRIES
    min_wait_ms: int = DEFAULT_MIN_WAIT_MS
    max_wait_ms: int = DEFAULT_MAX_WAIT_MS
    total_timeout_ms: int = DEFAULT_TOTAL_TIMEOUT_MS

    @classmethod
    def of(cls, state: TableState | None) -> RetryPolicy:
        if state is None:
            return cls()
        return cls(num_retries=state.int_property("commit.retry.num-retries", DEFAULT_RETRIES),
                   min_wait_ms=state.int_property("commit.retry.min-wait-ms", DEFAULT_MIN_WAIT_MS),
                   max_wait_ms=state.int_property("commit.retry.max-wait-ms", DEFAULT_MAX_WAIT_MS),
                   total_timeout_ms=state.int_property("commit.retry.total-timeout-ms", DEFAULT_TOTAL_TIMEOUT_MS))

    def wait_ms(self, attempt: int) -> float:
        """Backoff before retry ``attempt`` (1-based): the first retry is immediate, since rebuilding is cheap."""
        if attempt <= 1:
            return 0.0
        base = min(self.max_wait_ms, self.min_wait_ms * 2 ** (attempt - 2))
        return base * (0.5 + random.random() / 2)


def to_new_events(stream: str, events: Sequence[Event]) -> tuple[NewEvent, ...]:
    out = []
    for e in events:
        type_name, type_version, payload, parts = encode(e)
        out.append(NewEvent(stream=stream, type=type_name, type_version=type_version, payload=payload, parts=parts))
    return tuple(out)


def new_commit_id() -> str:
    return str(uuid.uuid4())


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@attrs.frozen(kw_only=True)
class Landed:
    """A commit that reached the log: its result and the events it recorded per stream."""

    result: CommitResult
    events: tuple[tuple[str, tuple[Event, ...]], ...]


def commit_streams(store: StateStore, build: Callable[[CommitContext], Sequence[tuple[str, int, Sequence[Event]]]],
                   *, policy: RetryPolicy, commit_id: str | None = None, actor: str | None = None,
                   message: str | None = None, staged: Sequence[tuple[str, Sequence[str]]] = ()) -> Landed | None:
    """Build and CAS a commit over one or more streams, retrying per ``policy``.

    The build runs inside the log's write transaction (``BEGIN IMMEDIATE``), so it must be quick and pure: read
    state, validate, return events. Files are written before, never inside. The transaction may be shared with
    other writers of this process waiting at the same moment (``Log.run_in_transaction``): the build then runs on
    the thread that leads it, reading through ``store`` (which answers on the shared connection).

    ``build(ctx)`` reads whatever base state it needs from ``store`` and returns
    ``[(stream, expected_version, events), ...]``; no events at all means nothing to commit
    (returns None). ``staged`` (``[(stream, paths), ...]``): files written for the commit, recorded as staged in
    its own transaction (see ``Log.record_staged``) rather than in one of their own before.
    """
    commit_id = commit_id or new_commit_id()
    started = time.monotonic()
    attempt = 0
    writes_spec: list[tuple[str, int, tuple[Event, ...]]] = []
    unsettled: TransactionOutcomeUnknown | None = None  # an earlier attempt may still land (see _settle)

    def build_and_append() -> CommitResult | None:
        # Build inside the write transaction: the heads cannot move between reading the base and appending,
        # so a commit from this catalog never loses a race; validation still covers everything that landed
        # since the operation read its snapshot. The CAS check stays for writers that build outside.
        nonlocal writes_spec, unsettled
        if unsettled is not None:
            # holding the writer lock, the earlier attempt's transaction has ended (committed late, or rolled
            # back): the log now tells for good whether it landed; its events are those of writes_spec
            try:
                earlier = store.log.commit_of(commit_id)
            except Exception as e:
                raise CommitStateUnknown(f"Cannot commit {commit_id}: {unsettled}, and its outcome cannot be "
                                         f"read ({e}); re-send with the same commit id to learn it") from e
            if earlier is not None:
                return earlier
            unsettled = None
        ctx = CommitContext(commit_id=commit_id, time_ms=now_ms(), actor=actor, message=message)
        writes_spec = [(s, v, tuple(evs)) for s, v, evs in build(ctx) if evs]
        if not writes_spec:
            return None
        _fold_before_writing(store, writes_spec, ctx)
        writes = tuple(StreamWrite(stream=s, expected_version=v, events=to_new_events(s, evs))
                       for s, v, evs in writes_spec)
        result = store.log.commit(commit_id, writes, time_ms=ctx.time_ms, actor=actor, message=message)
        if not result.duplicate:
            _record_file_blocks(store, result.positions, writes, writes_spec)
        for stream, paths in staged:
            store.log.record_staged_many(stream, paths, ctx.time_ms)
        return result

    while True:
        try:
            # other writers of this process waiting at the same moment may share the transaction (group commit)
            result = store.log.run_in_transaction(build_and_append)
            if result is None:
                return None
        except TransactionFailed:
            # the build may have read other writers' work from the same transaction, which did not land either
            store.forget_cached()
            raise
        except TransactionOutcomeUnknown as e:
            # a log server that went away, or the interrupted leader of a shared transaction: the commit landed or
            # it did not, and its id tells; what the build read inside the transaction is void either way
            store.forget_cached()
            landed = _settle(store, commit_id, writes_spec, e)
            if landed is not None:
                return landed
            unsettled = e  # not landed as far as a read outside the writer lock can tell: the next attempt asks again
            attempt += 1
            if (time.monotonic() - started) * 1000 > policy.total_timeout_ms:
                raise CommitStateUnknown(f"Cannot commit {commit_id}: {e}; re-send with the same commit id to "
                                         f"learn its outcome") from e
            continue
        except StreamVersionConflict as e:
            attempt += 1
            elapsed_ms = (time.monotonic() - started) * 1000
            if attempt > policy.num_retries or elapsed_ms > policy.total_timeout_ms:
                raise CommitConflict(
                    f"Cannot commit {commit_id}: {e.stream} is at version {e.actual_version}, not "
                    f"{e.expected_version}; commit {e.winner_commit_id} landed first",
                    stream=e.stream, expected_version=e.expected_version, actual_version=e.actual_version,
                    winner=e.winner_commit_id) from e
            time.sleep(policy.wait_ms(attempt) / 1000)
            continue
        except LogBusy as e:
            raise CommitStateUnknown(f"Cannot commit {commit_id}: the log stayed locked ({e}); "
                                     f"re-send with the same commit id to learn its outcome") from e
        except BaseException:
            # an interrupt, or the build's own error, inside a transaction that may have been shared and may not
            # land: states read in it may hold other writers' work that never lands
            store.forget_cached()
            raise
        return Landed(result=result, events=tuple((s, evs) for s, _, evs in writes_spec))


def _fold_before_writing(store: StateStore, writes_spec: Sequence[tuple[str, int, Sequence[Event]]],
                         ctx: CommitContext) -> None:
    """Fold every table event onto its stream's head before it is written: an event the fold refuses would stop
    every later read of the table once in the log, so it is refused now, with nothing written."""
    for stream, expected, events in writes_spec:
        if stream == CATALOG_STREAM:
            continue
        state = store.table(stream, expected) if expected else None  # the state the build read: no query
        for event in events:
            state = apply_in_commit(event, state, ctx)


def _settle(store: StateStore, commit_id: str, writes_spec: Sequence[tuple[str, int, Sequence[Event]]],
            error: Exception) -> Landed | None:
    """After a transaction whose outcome is unknown (a lost connection, an interrupted leader): the commit as it
    landed (looked up by its id, on a new connection for a log server), or None when it did not land and may be sent
    again."""
    try:
        result = store.log.commit_of(commit_id)
    except Exception as e:  # busy, unreachable, or a driver's error: whatever stops the reading, nothing is known
        raise CommitStateUnknown(f"Cannot commit {commit_id}: {error}, and the log cannot tell its outcome ({e}); "
                                 f"re-send with the same commit id to learn it") from e
    if result is None:
        return None
    return Landed(result=result, events=tuple((s, tuple(evs)) for s, _, evs in writes_spec))


def _record_file_blocks(store: StateStore, positions: Sequence[int], writes: Sequence[StreamWrite],
                        writes_spec: Sequence[tuple[str, int, Sequence[Event]]]) -> None:
    """Store the file block (engine.read.file_blocks) of every snapshot event just appended, in the commit's own
    transaction: derived rows that let the first plan after opening the catalog skip the log's JSON."""
    events = [(new, event) for write, (_, _, evs) in zip(writes, writes_spec) for new, event in zip(write.events, evs)]
    store.file_index.record_commit(positions, [
        (position, event.changes, event.partition_types) for position, (new, event) in zip(positions, events)
        if isinstance(event, SnapshotAdded) and new.parts])


def require(condition: bool, message: str) -> None:
    if not condition:
        raise ValidationError(message)
