"""What both governed runners share: recording receipts, host alerts, and the single delivery attempt.

docs/architecture.md, section "The modules, in detail" (runners/governed/delivery.py).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from alma_schedule.errors import ConfigurationError, OutcomeUncertain, ProviderError, RegistrationRefused
from alma_schedule.model import Reason, RunHandle, RunKey, RunRecord, RunResult
from alma_schedule.runners.governed.money import MoneyPlan
from alma_schedule.runners.governed.outcome import request_never_left
from alma_schedule.runners.governed.protocols import Delivery, Sink

log = logging.getLogger("alma_schedule.runners.governed")

BackgroundErrorHook = Callable[[BaseException, RunKey], None]
#: ``on_cap_crossed(key, cap, cost_micros, limit_micros)``; called once per (scope, run, cap).
CapCrossedHook = Callable[[RunKey, str, int, int | None], None]

PROVIDER_REASONS = frozenset({"provider_error", "provider_timeout", "provider_gone"})
DEFAULT_SINK = "default"


def text_hash(text: str) -> str:
    """The delivery hash: sha256 (hex) of the UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def provider_reason(exc: BaseException) -> str:
    """The closed reason code of a provider exception (anything foreign is ``provider_error``)."""
    if isinstance(exc, ProviderError) and exc.reason in PROVIDER_REASONS:
        return exc.reason
    if isinstance(exc, TimeoutError):
        return "provider_timeout"
    return "provider_error"


@dataclass
class Hooks:
    """The host's hooks: background errors, and cap-crossing alerts deduplicated by (scope, run, cap).

    docs/architecture.md, "The modules, in detail" (runners/governed/delivery.py, Hooks).
    """

    on_background_error: BackgroundErrorHook | None = None
    on_cap_crossed: CapCrossedHook | None = None
    memory: int = 10_000
    _seen: OrderedDict[tuple[str, str, str, str, str], None] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def background_error(self, exc: BaseException, key: RunKey, what: str) -> None:
        log.warning("%s of run %s failed: %s: %s", what, key, type(exc).__name__, exc, exc_info=exc)
        if self.on_background_error is not None:
            try:
                self.on_background_error(exc, key)
            except Exception as hook_exc:  # the hook must never change the run's outcome
                log.error("on_background_error raised %s", type(hook_exc).__name__, exc_info=hook_exc)

    def cap_crossed(self, key: RunKey, cap: str, cost_micros: int, limit_micros: int | None) -> None:
        triple = (key.org, key.uid, key.routine_id, key.run_id, cap)
        with self._lock:
            if triple in self._seen:
                return
            self._seen[triple] = None
            while len(self._seen) > self.memory:
                self._seen.popitem(last=False)
        log.warning("run %s crossed %s: cost %s micro-USD (limit %s)", key, cap, cost_micros, limit_micros)
        if self.on_cap_crossed is not None:
            try:
                self.on_cap_crossed(key, cap, cost_micros, limit_micros)
            except Exception as hook_exc:
                log.error("on_cap_crossed raised %s", type(hook_exc).__name__, exc_info=hook_exc)


def uncertain_or_unsent(exc: Exception, handle: RunHandle, hooks: Hooks, what: str) -> RunResult:
    """A failed provider call: ``failed(<provider reason>)`` at cost 0 when the request provably
    never left (:func:`~alma_schedule.runners.governed.outcome.request_never_left`); otherwise
    raise :class:`OutcomeUncertain` from ``exc``: the engine leaves the run ``running`` at the bound
    written before the call, blocked at once (``uncertain_outcome``)."""
    hooks.background_error(exc, handle.key, what)
    if request_never_left(exc):
        return RunResult.failed(provider_reason(exc), 0, type(exc).__name__)
    raise OutcomeUncertain(
        f"run {handle.key}: the outcome of the {what} is uncertain ({type(exc).__name__}): it may have been billed"
    ) from exc


def resolve_sink(sinks: Mapping[str, Sink], definition: Mapping[str, Any]) -> Sink:
    """The sink a routine names (``definition["sink"]``, default ``"default"``)."""
    name = definition.get("sink", DEFAULT_SINK)
    if not isinstance(name, str) or name not in sinks:
        known = ", ".join(sorted(sinks)) or "none configured"
        raise RegistrationRefused(f"sink {name!r} is not configured (known: {known})")
    return sinks[name]


def check_sinks(sinks: Mapping[str, Sink]) -> dict[str, Sink]:
    if not sinks:
        raise ConfigurationError("a governed runner needs at least one sink (ALMA_SINK)")
    for name, sink in sinks.items():
        if not callable(getattr(sink, "deliver", None)):
            raise ConfigurationError(f"sink {name!r} has no deliver(delivery) method")
    return dict(sinks)


def record_cost(
    handle: RunHandle,
    plan: MoneyPlan,
    cost_micros: int,
    hooks: Hooks,
    *,
    previous: Sequence[str] = (),
    **metadata: Any,
) -> RunRecord:
    """Persist a governed receipt: cost, caps crossed (merged with ``previous``) and metadata, in one
    ``annotate``; then alert for each cap newly crossed. A terminal row is left unchanged."""
    crossed = tuple(dict.fromkeys([*previous, *plan.crossed(cost_micros)]))
    record = handle.annotate(cost_micros=cost_micros, caps_crossed=crossed, **metadata)
    limits = {c.name: c.limit_micros for c in plan.caps}
    for cap in record.caps_crossed:
        if cap not in previous:
            hooks.cap_crossed(handle.key, cap, cost_micros, limits.get(cap, plan.bound_micros))
    return record


def deliver_once(
    handle: RunHandle,
    *,
    text: str,
    sink: Sink,
    owner_state: str,
    hooks: Hooks,
    result_retention: timedelta | None,
    kind: str = "",
) -> RunResult:
    """Write text + hash, re-read, suppress a duplicate, attempt the sink once. See the module doc."""
    digest = text_hash(text)
    values: dict[str, Any] = {"result_text": text, "delivery_hash": digest}
    if result_retention is not None:
        values["erase_at"] = handle.now + result_retention
    handle.annotate(**values)
    current = handle.result()
    if current.state != owner_state:
        log.info("run %s is %s, no longer %s: not delivered", handle.key, current.state, owner_state)
        return RunResult.failed(Reason.RECONCILED.value, current.cost_micros)
    cost = current.cost_micros
    if current.result_text is None or current.delivery_hash != digest:
        log.info("run %s: result erased before delivery: not delivered", handle.key)
        return RunResult.completed(Reason.ERASED.value, cost)
    if handle.last_delivery_hash() == digest:
        return RunResult.completed(Reason.SUPPRESSED_DUPLICATE.value, cost)
    delivery = Delivery.for_run(handle.key, current.result_text, cost, tuple(current.caps_crossed), kind)
    try:
        sink.deliver(delivery)
    except Exception as exc:
        hooks.background_error(exc, handle.key, "delivery")
        return RunResult.failed(Reason.SINK_ERROR.value, cost, type(exc).__name__)
    return RunResult.completed(Reason.DELIVERED.value, cost)


def already_started(record: RunRecord) -> bool:
    """True when the row already carries effects of an earlier attempt (a replay must not redo them)."""
    return bool(
        record.session_id
        or record.turn_id
        or record.batch_id
        or record.delivery_hash
        or record.reserved_micros
        or record.cost_micros
    )


def replayed(handle: RunHandle, record: RunRecord) -> RunResult:
    """A replay of a run that already has effects: no call, charge or delivery; its metadata stays."""
    log.error("run %s was handed to its runner again with recorded effects: nothing redone", handle.key)
    return RunResult.failed(Reason.RUNNER_ERROR.value, None, "ReplayedRun")
