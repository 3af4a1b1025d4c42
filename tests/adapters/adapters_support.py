"""Constants shared by the adapter tests (a plain module: conftest is not for importing)."""

from __future__ import annotations

import math
from typing import Any

API_KEY = "sk-test-Zq81-very-secret-key-0042"
WEBHOOK_SECRET = "whsec-test-5b0c-secret"
PRICE_IN = 150_000  # micro-USD per million input tokens
PRICE_OUT = 600_000  # micro-USD per million output tokens


def expected_cost(usage: dict[str, Any], price_in: int = PRICE_IN, price_out: int = PRICE_OUT) -> int:
    """usage x prices in micro-USD, rounded up: computed independently of the adapter."""
    exact = (usage["prompt_tokens"] * price_in + usage["completion_tokens"] * price_out) / 1_000_000
    return math.ceil(exact - 1e-12)
