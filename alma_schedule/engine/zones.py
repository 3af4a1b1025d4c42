"""Seed 000's reconciliation pass for zone data, one page per tick.

The store records the zone data every routine's next fire was derived under
(``Store.reconcile_zone_data``; :func:`alma_schedule.core.zones.zone_data` names what this process
reads, e.g. ``"tzdata 2026f"``). The first tick of a process asks it; when the store records other
zone data (a new ``tzdata`` release, a host that reads the system's copy), that tick and the ones
after it re-derive ``next_due_at`` of the routines, ``claim_limit`` of them per tick in key order,
before claiming, until the walk is done; then the store records the new zone data and this process
never asks again. So no routine keeps a fire computed under old rules for longer than the walk,
and a tick's work stays bounded. A fleet whose workers read different zone data (a rolling upgrade)
walks once per worker start: run one ``tzdata`` across the fleet.
"""

from __future__ import annotations

import logging

from alma_schedule.core.zones import zone_data
from alma_schedule.model import ZoneReconciliation

from .register import rederived_due
from .runtime import Runtime, ZoneCheck

log = logging.getLogger("alma_schedule.engine")

__all__ = ["ZoneCheck", "reconcile_zones"]


def reconcile_zones(rt: Runtime) -> ZoneReconciliation | None:
    """One page of the walk, or None once this process knows the store records its zone data."""
    check = rt.zones
    if check.done:
        return None
    with check.lock:  # one page at a time per process (the store serialises processes)
        if check.done:
            return None
        result = rt.store.reconcile_zone_data(rederived_due, zone_data(), limit=rt.settings.claim_limit)
        if result.previous != result.zone_data and (result.changed or result.done):
            log.warning(
                "zone data %s -> %s: %d routine(s) re-derived%s",
                result.previous or "(none recorded)",
                result.zone_data,
                result.changed,
                "; done" if result.done else "; more on the next tick",
            )
        check.done = result.done
        return result
