"""The operators' dashboard of ``serve-http``: server-rendered pages over the store, the
engine's levers behind confirmations, HTTP Basic auth with its own user, CSRF on every write."""

from __future__ import annotations

from alma_schedule.dashboard.auth import Access, Credentials, hash_password, verify_password

__all__ = ["Access", "Credentials", "hash_password", "verify_password"]
