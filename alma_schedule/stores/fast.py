"""The optional capability of a store that claims fast: :class:`FastClaims`.
docs/architecture.md, section "The modules, in detail" (stores/fast.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol, runtime_checkable

from alma_schedule.model import ClaimBatch, ClaimScan, RunRecord, TickEndAsk, TickEndParts
from alma_schedule.settings import Timers
from alma_schedule.stores.base import Decide, Store

__all__ = ["FastClaims", "FastStore", "Staging", "fast_claims", "takes_staging"]

Staging = Callable[[Sequence[RunRecord]], object]  # claim_due's (see FastClaims.claim_due)


@runtime_checkable
class FastClaims(Protocol):
    """What a store offers the tick for speed (PostgreSQL); a store without it is claimed one
    batch at a time, its end of tick asked after the sends."""

    #: How many ``claim_due`` calls may usefully run at once (each its own transaction, locking
    #: routines the others skip): PostgreSQL its pool size; 1 where writers serialize anyway.
    claim_concurrency: int

    def claim_due(
        self,
        now: datetime,
        limit: int,
        decide: Decide,
        timers: Timers,
        scan: ClaimScan | None = None,
        staging: Staging | None = None,
    ) -> ClaimBatch:
        """:meth:`Store.claim_due`, plus two hints that change nothing of what is claimed.
        docs/architecture.md, section "The modules, in detail" (stores/fast.py).
        """
        ...

    def begin_tick_end(self, ask: TickEndAsk) -> AbstractContextManager[Callable[[], TickEndParts]]:
        """START the end of a tick (:meth:`~alma_schedule.stores.system.SystemStore.begin_tick_end`)."""
        ...


class FastStore(FastClaims, Store, Protocol):
    """A :class:`Store` that also offers :class:`FastClaims` (every backend of this package)."""


def fast_claims(store: object) -> FastClaims | None:
    """``store`` when it declares :class:`FastClaims`, else None."""
    return store if isinstance(store, FastClaims) else None


def takes_staging(store: object) -> bool:
    """Whether ``store.claim_due`` accepts ``staging`` (a store written before it existed does not:
    its batches are sent after their commits)."""
    try:
        params = inspect.signature(store.claim_due).parameters  # type: ignore[attr-defined]
    except (AttributeError, TypeError, ValueError):
        return False
    return "staging" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
