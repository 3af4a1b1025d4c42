"""Deprecated (removed in 0.3.0): 0.1.0's ``alma_schedule.governed`` moved to :mod:`alma_schedule.runners.governed`.

Every public name of the new home resolves here with a :class:`DeprecationWarning` naming it.
Nothing is imported until a name is asked for.
"""

from __future__ import annotations

from typing import Any

from alma_schedule.deprecation import resolve_alias

#: The names 0.1.0 had here; each now lives in :mod:`alma_schedule.runners.governed`.
NAMES = frozenset(
    {
        "BatchProvider",
        "BatchReceipt",
        "BatchRequest",
        "BatchStatus",
        "Budget",
        "ConversationProvider",
        "Delivery",
        "FileSink",
        "GovernedBatchRunner",
        "GovernedConversationRunner",
        "HostCaps",
        "MoneyPlan",
        "Prices",
        "ScriptedProvider",
        "Sink",
        "StdoutSink",
        "TurnReceipt",
        "TurnRequest",
        "create_governed_batch_runner",
        "create_governed_conversation_runner",
        "parse_budget",
    }
)


def __getattr__(name: str) -> Any:
    return resolve_alias(__name__, name, {n: ("alma_schedule.runners.governed", n) for n in NAMES})
