"""Deprecated (removed in 0.3.0): 0.1.0's ``alma_schedule.ids`` moved to :mod:`alma_schedule.model`.

Every public name of the new home resolves here with a :class:`DeprecationWarning` naming it.
Nothing is imported until a name is asked for.
"""

from __future__ import annotations

from typing import Any

from alma_schedule.deprecation import resolve_alias

#: The names 0.1.0 had here; each now lives in :mod:`alma_schedule.model`.
NAMES = frozenset({"MAX_ID_LENGTH", "check_id", "check_scope", "governed_key", "manual_run_id", "new_ulid"})


def __getattr__(name: str) -> Any:
    return resolve_alias(__name__, name, {n: ("alma_schedule.model", n) for n in NAMES})
