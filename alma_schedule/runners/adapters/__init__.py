"""Real adapters of the governed runners' doors: an OpenAI-compatible provider and a signed webhook sink.

Both speak HTTP through httpx; they are tested against local servers speaking the real wire format
(:mod:`alma_schedule.testing.fake_openai`).
"""

from __future__ import annotations

from alma_schedule.runners.adapters.openai import OpenAICompatibleProvider, TokenPrices
from alma_schedule.runners.adapters.webhook import WebhookSink, sign, verify_signature

__all__ = ["OpenAICompatibleProvider", "TokenPrices", "WebhookSink", "sign", "verify_signature"]
