"""``config_revision``: the content hash of a routine's configuration.

The hash covers (kind, schedule, definition, runner inputs): re-registering an unchanged routine
produces the same revision (a no-op), and any change to what a run would do produces a new one.
The schedule is hashed in its canonical form (``parse_schedule(...).to_json()``) so ``{"every":
"900"}`` and ``{"every": "15m"}`` are the same routine. JSON is canonical: sorted keys, no
whitespace, UTF-8. Values that are not JSON (a datetime, a set) are refused, never stringified.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from alma_schedule.errors import InvalidInput

__all__ = ["canonical_json", "config_revision"]


def canonical_json(value: Any) -> str:
    """Canonical JSON text of ``value`` (sorted keys, compact, finite numbers only)."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"not JSON-serializable: {exc}") from None


def config_revision(
    kind: str,
    schedule: Mapping[str, Any],
    definition: Mapping[str, Any],
    runner_inputs: Mapping[str, Any] | None = None,
) -> str:
    """``sha256`` (hex) of the canonical JSON of the routine's configuration.

    ``schedule`` must already be canonical (the core's ``to_json()``); ``runner_inputs`` is the
    runner's optional ``config_revision_inputs(routine)`` mapping (provider account, prompts,
    prices, sink mapping: whatever a run depends on that the definition does not say).
    """
    body = {
        "kind": kind,
        "schedule": dict(schedule),
        "definition": dict(definition),
        "runner": dict(runner_inputs or {}),
    }
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()
