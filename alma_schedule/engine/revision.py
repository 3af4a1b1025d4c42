"""``config_revision``: the content hash of a routine's configuration.

docs/architecture.md, section "The modules, in detail" (engine/revision.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from alma_schedule.errors import InvalidInput

__all__ = ["MAX_CANONICAL_DEPTH", "canonical_json", "config_revision", "nesting_depth"]

#: The deepest value :func:`canonical_json` encodes (the stores keep at most 64 levels).
MAX_CANONICAL_DEPTH = 64


def nesting_depth(value: Any, stop: int) -> int:
    """How many containers (mappings, lists, tuples) deep ``value`` is (a scalar: 0; ``{}``: 1),
    walked with an explicit stack; the walk stops as soon as the depth passes ``stop`` (then the
    answer is ``stop + 1``), so a hostile value costs at most its size and never recurses."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        depth += 1
        if depth > stop:
            return stop + 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children)
    return deepest


def canonical_json(value: Any) -> str:
    """Canonical JSON text of ``value`` (sorted keys, compact, finite numbers only, at most
    :data:`MAX_CANONICAL_DEPTH` levels deep)."""
    if nesting_depth(value, MAX_CANONICAL_DEPTH) > MAX_CANONICAL_DEPTH:
        raise InvalidInput(f"nested deeper than {MAX_CANONICAL_DEPTH} levels")
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
