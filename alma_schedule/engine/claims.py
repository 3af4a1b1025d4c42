"""Step 1 of the tick: the live claims, ``claim_due`` in batches of ``claim_limit`` until a short batch or
``tick_max_batches``; each batch is ONE store transaction whose claims are sent after its commit.
A store error stops the batches and is raised.
docs/architecture.md, section "The modules, in detail" (engine/claims.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime

from alma_schedule.model import ClaimBatch, ClaimScan, Decision, Routine, RunKey, RunRecord, TickError
from alma_schedule.stores.fast import fast_claims, takes_staging

from . import collector
from .dispatch import SpreadsContext, Staged, StagesRuns
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
            batch.fires_missed,
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
    # sends are serialized (a broker connection is not thread-safe); two concurrent batches' messages
    # may leave in either order (one routine's fires are never in two open batches: its row lock)
    sending = threading.Lock()
    scan = ClaimScan()  # this tick's batches: one scan of the due routines (the store may use it)

    def last(short: bool) -> bool:  # short, or the store saw nothing else due
        return short or scan.exhausted

    fast = fast_claims(store)  # the store's speed capability, if it declares it (stores/fast.py)
    dispatcher = rt.dispatcher
    # builds a batch's messages during its INSERT, where the store takes a ``staging`` (a fleet's own
    # store written before it existed does not: its batches are sent after their commits, as before)
    stage: Callable[[Sequence[RunRecord]], Staged | None] | None = None
    if fast is not None and isinstance(dispatcher, StagesRuns) and takes_staging(fast):
        stage = dispatcher.stage_runs
    tick_thread = threading.current_thread()  # the one that flushes the outbox
    refused: list[BaseException] = []  # a staging the broker refused: no other in this tick

    def one() -> Tally:
        staged: list[Staged] = []
        staging = _staging(stage, sending, staged, refused) if stage is not None and not refused else None
        try:
            if fast is None:
                batch = store.claim_due(at, s.claim_limit, decide, rt.timers)
            elif staging is None:
                batch = fast.claim_due(at, s.claim_limit, decide, rt.timers, scan)
            else:
                batch = fast.claim_due(at, s.claim_limit, decide, rt.timers, scan, staging=staging)
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
    workers = min(s.tick_claim_workers, fast.claim_concurrency if fast is not None else 1, left)
    if left <= 0 or last(first.short):
        return out
    if workers <= 1:
        for _ in range(left):
            batch = one()
            out.batches.append(batch)
            if last(batch.short):
                break
        return out
    # the tick's sends' context, into the threads
    context = dispatcher.caller_context() if isinstance(dispatcher, SpreadsContext) else nullcontext
    out.batches.extend(_concurrently(one, left, workers, lambda t: last(t.short), context))
    return out


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
