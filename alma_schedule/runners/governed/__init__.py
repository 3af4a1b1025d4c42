"""Governed runners: conversation turns (``kind: turn``) and batch jobs (``kind: job``).

docs/architecture.md, section "The modules, in detail" (runners/governed/__init__.py).
"""

from __future__ import annotations

from alma_schedule.runners.governed.batch import GovernedBatchRunner, create_governed_batch_runner
from alma_schedule.runners.governed.config import GovernedConfig
from alma_schedule.runners.governed.conversation import (
    GovernedConversationRunner,
    create_governed_conversation_runner,
)
from alma_schedule.runners.governed.money import Budget, HostCaps, MoneyPlan, Prices, parse_budget
from alma_schedule.runners.governed.protocols import (
    BatchProvider,
    BatchReceipt,
    BatchRequest,
    BatchStatus,
    ConversationProvider,
    Delivery,
    Sink,
    TurnReceipt,
    TurnRequest,
)
from alma_schedule.runners.governed.scripted import ScriptedProvider
from alma_schedule.runners.governed.sinks import FileSink, StdoutSink

__all__ = [
    "BatchProvider",
    "BatchReceipt",
    "BatchRequest",
    "BatchStatus",
    "Budget",
    "ConversationProvider",
    "Delivery",
    "FileSink",
    "GovernedBatchRunner",
    "GovernedConfig",
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
]
