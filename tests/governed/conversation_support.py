"""What the governed conversation runner's tests share: prices that make the bound easy to read, and
a harness over a real store with the package's ScriptedProvider and a ListSink."""

from __future__ import annotations

from typing import Any

from governed_support import Harness, Interrupting, ListSink

from alma_schedule.model import RunKey
from alma_schedule.model.time import SettableTime
from alma_schedule.runners.governed import (
    HostCaps,
    Prices,
    ScriptedProvider,
    TurnReceipt,
    create_governed_conversation_runner,
)

#: One micro-USD per token both ways: the goal "Brief me" (8 bytes + 64 framing tokens) bounds the
#: input at 72 micro-USD; max_output_tokens 100 makes the hard bound 172.
PRICES = Prices(1_000_000, 1_000_000)
GOAL = "Brief me"
BOUND = 172
BUDGET = {"max_output_tokens": 100}


def ok(text: str = "hello", cost: int = 50, n: int = 1) -> TurnReceipt:
    return TurnReceipt("ok", text, cost, f"s{n}", f"t{n}")


def make(
    store: Any,
    clock: SettableTime,
    turns: list[Any],
    *,
    sink: ListSink | None = None,
    host: HostCaps | None = None,
    **kw: Any,
) -> tuple[Harness, ScriptedProvider, ListSink, Interrupting, list[Any]]:
    provider = ScriptedProvider(turns=turns)
    sink = sink or ListSink()
    errors: list[Any] = []
    runner = create_governed_conversation_runner(
        provider=provider,
        sinks=sink,
        prices=PRICES,
        host=host or HostCaps(routine_daily_micros=10_000),
        on_background_error=lambda exc, key: errors.append((type(exc).__name__, str(exc), key)),
        **kw,
    )
    wrapped = Interrupting(runner)
    return Harness(store, wrapped, clock), provider, sink, wrapped, errors


def ledger_text(h: Harness, key: RunKey) -> str:
    return repr(h.get(key).to_dict())
