"""Seed 000's reconciliation pass for zone data, one page per tick.

docs/architecture.md, section "The modules, in detail" (engine/zones.py).
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
