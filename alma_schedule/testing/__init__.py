"""Reusable pytest suites for alma-schedule backends: point them at your own :class:`Store`.
docs/architecture.md, section "The modules, in detail" (testing/__init__.py).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

_SUITES = ("builders", "dump", "hostile", "store_contract", "store_races")
_PARTS = (
    "backfills",
    "backoff",
    "claims",
    "hostile",
    "input",
    "money",
    "reads",
    "routines",
    "runs",
    "settlement",
    "streak",
)

if "pytest" in sys.modules:  # under pytest: give the suites' plain asserts pytest's rich messages
    sys.modules["pytest"].register_assert_rewrite(
        *(f"alma_schedule.testing.{name}" for name in _SUITES),
        *(f"alma_schedule.testing.contract_{name}" for name in _PARTS),
    )

_EXPORTS = {
    "SettableTime": "alma_schedule.model.time",
    "SimClock": "alma_schedule.model.time",  # 0.1.0's name of SettableTime (deprecated alias, one release)
    "StoreContract": "alma_schedule.testing.store_contract",
    "StoreRaceContract": "alma_schedule.testing.store_races",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'alma_schedule.testing' has no attribute {name!r}")
    if name == "SimClock":
        import warnings

        warnings.warn(
            "alma_schedule.testing.SimClock is deprecated (removed in 0.3.0): use alma_schedule.model.SettableTime",
            DeprecationWarning,
            stacklevel=2,
        )
        name = "SettableTime"
    return getattr(importlib.import_module(module), name)
