"""Governed runners: conversation turns (``kind: turn``) and batch jobs (``kind: job``).

Money caps narrowed per routine, atomic daily ceilings, at-most-once delivery, text suppression
and closed reason codes, over the engine's run handle.
"""

from __future__ import annotations

from alma_schedule.governed.protocols import (
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

__all__ = [
    "BatchProvider",
    "BatchReceipt",
    "BatchRequest",
    "BatchStatus",
    "ConversationProvider",
    "Delivery",
    "Sink",
    "TurnReceipt",
    "TurnRequest",
]
