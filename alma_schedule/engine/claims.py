"""Step 1 of the tick (:mod:`.tick`): the live claims, ``claim_due`` in batches of ``claim_limit``,
each batch's claimed fires sent right after its commit.

The first batch runs alone. When it comes back full (more may be due) and the store can claim
concurrently (``store.claim_concurrency`` above 1: PostgreSQL, whose ``FOR UPDATE SKIP LOCKED`` hands
concurrent batches disjoint routines), the remaining batches run on up to ``tick_claim_workers``
threads at once, each batch still ONE store transaction on its own pooled connection: while one
batch's statements execute in the database, the next batch's rows are decided in Python. Nothing
of the protocol moves: a batch is the same transaction as when batches run one after another, a
fire is sent only after the commit of the batch that claimed it, every due fire is claimed by one
batch (the row locks decide, exactly as between two tick workers), and the whole step stops at
the first short batch (or the first batch after which the store saw nothing else due:
``ClaimScan.exhaust``, PostgreSQL's full first batch asks in its INSERT) or after
``tick_max_batches`` batches in all. The batches of one tick share
one :class:`~alma_schedule.model.ClaimScan`: on PostgreSQL a batch starts past the rows the
batches before it locked (never walking them again) and a short batch's check for held rows leaves
the rows the tick's other open batches hold to them. The one difference is order:
two batches' messages may leave in either order (nothing downstream relies on the order of fires
of different routines; one routine's fires are never in two batches of one tick at once, as its
row is locked by one of them). SQLite and the memory store have one writer: their batches run one
after another (``claim_concurrency`` 1), as with ``tick_claim_workers = 1``.

Sends are serialized (one lock: a broker connection is not thread-safe). The claims of a LAST batch
(short, or exhausted) are held in the tick's outbox instead: they leave once the end of the tick has
started (:mod:`.outbox`), still after their commit and before any other store step. A failing send is one
``<dispatcher>`` entry in the tick's errors (the claimed rows stay claimed; re-sends recover
them). An exception from the store (it is down) stops the other batches after their current one
and is raised by :func:`claim_live`, as from the loop it replaces. Python's cyclic garbage
collector is paused for the whole step (:mod:`.collector`: the batches' objects die by reference
counting before any collection walks them).
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from alma_schedule.model import ClaimBatch, ClaimScan, Decision, Routine, RunKey, RunRecord, TickError

from . import collector
from .outbox import Outbox, send_logged
from .runtime import Runtime

log = logging.getLogger("alma_schedule.engine")

__all__ = ["Claims", "claim_live"]


@dataclass(frozen=True, slots=True)
class Tally:
    """What the tick keeps of one batch once its claims are sent (or held): the keys and lags its
    report needs, not the run records (a tick over a million routines would otherwise hold every
    batch's records, about 300 bytes each, until it returns). ``lags``: claim instant minus each
    claimed fire's instant, in seconds; ``short``: fewer rows than ``claim_limit`` were due;
    ``missed``: the fires its claims collapsed, by routine kind (``ClaimBatch.fires_missed``)."""

    claimed: tuple[RunKey, ...]
    lags: tuple[float, ...]
    skipped: tuple[RunKey, ...]
    buffered: tuple[RunKey, ...]
    deferred: bool
    short: bool
    missed: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, batch: ClaimBatch, at: datetime, short: bool) -> Tally:
        return cls(
            tuple(r.key for r in batch.claimed),
            tuple((at - r.fire_at).total_seconds() for r in batch.claimed),
            tuple(r.key for r in batch.skipped),
            tuple(r.key for r in batch.buffered),
            bool(batch.deferred),
            short,
            getattr(batch, "fires_missed", ()),  # a fleet's own store may answer an older ClaimBatch
        )


@dataclass
class Claims:
    """The batches of one tick's live claims (their :class:`Tally`), in the order they were
    started, and the send errors."""

    batches: list[Tally] = field(default_factory=list)
    errors: list[TickError] = field(default_factory=list)

    @property
    def deferred(self) -> bool:
        return any(b.deferred for b in self.batches)


def _short(batch: ClaimBatch, limit: int) -> bool:
    """Fewer rows than ``limit`` were due: the last batch."""
    return len(batch.claimed) + len(batch.skipped) + len(batch.deferred) + len(batch.buffered) < limit


def claim_live(
    rt: Runtime, at: datetime, decide: Callable[[Routine], Decision], outbox: Outbox | None = None
) -> Claims:
    """``claim_due`` batches until one comes back short (at most ``tick_max_batches``), each batch's
    claims sent after its commit; concurrently past the first batch where the store allows it. The
    cyclic garbage collector is paused meanwhile (``tick_gc_pause``, :mod:`.collector`). With an
    ``outbox``, the claims of a LAST batch (short, or after which the store saw nothing else due)
    are held in it instead (the tick sends them once the end of the tick has started: :mod:`.outbox`)."""
    with collector.paused(rt.settings.tick_gc_pause):
        return _claim_live(rt, at, decide, outbox)


def _claim_live(rt: Runtime, at: datetime, decide: Callable[[Routine], Decision], outbox: Outbox | None) -> Claims:
    store, s = rt.store, rt.settings
    out = Claims()
    sending = threading.Lock()
    scan = ClaimScan()  # this tick's batches: one scan of the due routines (the store may use it)

    def last(short: bool) -> bool:  # short, or the store saw nothing else due
        return short or scan.exhausted

    # builds a batch's messages during its INSERT, where the store takes a ``staging`` (a fleet's own
    # store written before it existed does not: its batches are sent after their commits, as before)
    stage = getattr(rt.dispatcher, "stage_runs", None) if _takes_staging(store) else None
    tick_thread = threading.current_thread()  # the one that flushes the outbox
    refused: list[BaseException] = []  # a staging the broker refused: no other in this tick

    def one() -> Tally:
        staged: list[Staged] = []
        staging = _staging(stage, sending, staged, refused) if stage is not None and not refused else None
        try:
            if staging is None:
                batch = store.claim_due(at, s.claim_limit, decide, rt.timers, scan)
            else:
                batch = store.claim_due(at, s.claim_limit, decide, rt.timers, scan, staging=staging)
        except BaseException:
            for made in staged:
                made.discard()
            raise
        send, discard = _sender(rt.dispatcher.send_runs, staged, batch)
        short = _short(batch, s.claim_limit)
        with sending:  # a staged batch is sent by the thread that staged it (kombu's batch is per thread)
            if outbox is not None and last(short) and (discard is None or threading.current_thread() is tick_thread):
                outbox.hold("run", send, batch.claimed, discard)
            else:
                err = send_logged("run", send, batch.claimed)
                if err:
                    out.errors.append(err)
        return Tally.of(batch, at, short)  # after the send: its keys and lags are not on the send's path

    first = one()
    out.batches.append(first)
    left = s.tick_max_batches - 1
    workers = min(s.tick_claim_workers, store.claim_concurrency, left)
    if left <= 0 or last(first.short):
        return out
    if workers <= 1:
        for _ in range(left):
            batch = one()
            out.batches.append(batch)
            if last(batch.short):
                break
        return out
    capture = getattr(rt.dispatcher, "caller_context", None)  # the tick's sends' context, into the threads
    context = capture() if capture is not None else nullcontext
    out.batches.extend(_concurrently(one, left, workers, lambda t: last(t.short), context))
    return out


def _takes_staging(store: object) -> bool:
    """``store.claim_due`` accepts ``staging`` (the :class:`~alma_schedule.stores.base.Store` protocol's
    since it was added; a store written before it keeps working without)."""
    try:
        params = inspect.signature(store.claim_due).parameters  # type: ignore[attr-defined]
    except (AttributeError, TypeError, ValueError):
        return False
    return "staging" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


class Staged(Protocol):
    """What a dispatcher's ``stage_runs`` returns (:class:`~alma_schedule.tasks.staged.StagedSend`)."""

    def matches(self, runs: Sequence[RunRecord]) -> bool: ...
    def send(self, runs: Sequence[RunRecord]) -> None: ...
    def discard(self) -> None: ...


def _staging(
    stage: Callable[[Sequence[RunRecord]], Staged | None],
    sending: threading.Lock,
    staged: list[Staged],
    refused: list[BaseException],
) -> Callable[[Sequence[RunRecord]], None]:
    """``claim_due``'s ``staging`` for one batch: the dispatcher's ``stage_runs`` (its messages built
    while the batch's INSERT runs, published only when sent), kept in ``staged``; never raises (a
    staging that failed is logged and kept in ``refused``: the batch's runs are then sent as usual,
    after the commit, and the tick's later batches stage nothing: a broker that is down is waited
    for once a batch, after its commit, never again while a claim holds its rows)."""

    def staging(runs: Sequence[RunRecord]) -> None:
        if refused:
            return
        with sending:
            try:
                made = stage(runs)
            except Exception as exc:
                refused.append(exc)
                log.warning("the batch's messages were not built ahead: %s", type(exc).__name__, exc_info=exc)
                return
        if made is not None:
            staged.append(made)

    return staging


def _sender(
    send_runs: Callable[[Sequence[RunRecord]], None], staged: list[Staged], batch: ClaimBatch
) -> tuple[Callable[[Sequence[RunRecord]], None], Callable[[], None] | None]:
    """How the batch's claims are sent, and how that send is dropped if it never happens: the staged
    messages when they are the batch's claims (the same records), else (discarded) ``send_runs``."""
    chosen: Staged | None = None
    for made in staged:
        if chosen is None and made.matches(batch.claimed):
            chosen = made
        else:
            made.discard()
    return (send_runs, None) if chosen is None else (chosen.send, chosen.discard)


def _concurrently(
    one: Callable[[], Tally],
    left: int,
    workers: int,
    last: Callable[[Tally], bool],
    context: Callable[[], AbstractContextManager[None]] = nullcontext,
) -> list[Tally]:
    """Up to ``left`` batches on ``workers`` threads; no batch starts after the ``last`` one returned
    or a batch raised. The batches in the order they were started; the first exception raised."""
    state = threading.Lock()
    started: list[Tally | None] = []
    failures: list[BaseException] = []
    done = False

    def work() -> None:
        nonlocal done
        while True:
            with state:
                if done or len(started) >= left:
                    return
                slot = len(started)
                started.append(None)
            try:
                batch = one()
            except BaseException as exc:
                with state:
                    failures.append(exc)
                    done = True
                return
            with state:
                started[slot] = batch
                done = done or last(batch)

    def run() -> None:
        with context():
            work()

    threads = [threading.Thread(target=run, name=f"alma-claim-{i}", daemon=True) for i in range(workers)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except BaseException:  # the task's soft time limit, in this thread: no batch starts after it
        with state:
            done = True
        raise
    if failures:
        raise failures[0]
    return [b for b in started if b is not None]
