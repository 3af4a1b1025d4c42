"""Policy, written once: pure functions the stores (and the engine) apply.

docs/architecture.md, section "The modules, in detail" (policies/__init__.py).
"""

from __future__ import annotations
