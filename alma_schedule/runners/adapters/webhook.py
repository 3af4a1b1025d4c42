"""A webhook sink: one signed ``POST`` of the delivery as JSON, and the receiver's verification helper.

docs/architecture.md, section "The modules, in detail" (runners/adapters/webhook.py).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from alma_schedule import __version__
from alma_schedule.errors import ConfigurationError, SinkError, missing_extra
from alma_schedule.model.time import system_time
from alma_schedule.runners.governed.protocols import Delivery
from alma_schedule.settings import Secret, Settings

try:
    import httpx
except ModuleNotFoundError as exc:  # a bare install: no HTTP client
    raise missing_extra(exc, "openai", "the webhook sink") from None

log = logging.getLogger(__name__)

TIMESTAMP_HEADER = "X-Alma-Timestamp"
SIGNATURE_HEADER = "X-Alma-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"


def _secret_bytes(secret: Secret | str | bytes) -> bytes:
    if isinstance(secret, Secret):
        return secret.reveal().encode("utf-8")
    return secret.encode("utf-8") if isinstance(secret, str) else secret


def _as_bytes(value: str | bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def sign(secret: Secret | str | bytes, timestamp: int | str, body: str | bytes) -> str:
    """``sha256=<hex>``: HMAC-SHA256 with ``secret`` over ``f"{timestamp}.".encode() + body``."""
    message = f"{timestamp}.".encode() + _as_bytes(body)
    return "sha256=" + hmac.new(_secret_bytes(secret), message, hashlib.sha256).hexdigest()


def verify_signature(
    secret: Secret | str | bytes,
    timestamp: str | int | None,
    body: str | bytes,
    signature: str | None,
    *,
    now: datetime | float,
    tolerance: float = 300,
) -> bool:
    """True when ``signature`` signs ``body`` at ``timestamp`` and the timestamp is within
    ``tolerance`` seconds of ``now`` (either side). Compared with :func:`hmac.compare_digest`;
    missing or malformed headers are simply False."""
    if timestamp is None or signature is None:
        return False
    try:
        ts = int(str(timestamp).strip())
    except ValueError:
        return False
    current = now.timestamp() if isinstance(now, datetime) else float(now)
    if abs(current - ts) > tolerance:
        return False
    expected = sign(secret, ts, body)
    return hmac.compare_digest(expected.encode("ascii"), signature.strip().encode("utf-8", "replace"))


class WebhookSink:
    """Delivers each :class:`~alma_schedule.runners.governed.Delivery` as one signed JSON ``POST``.

    ``secret`` None or empty sends no signature headers. ``clock`` gives the signature's timestamp
    (the real wall clock by default: receivers compare it with theirs). ``client`` may be shared
    (never closed here).
    """

    def __init__(
        self,
        url: str,
        secret: Secret | str | None = None,
        timeout: float | timedelta = 10.0,
        client: httpx.Client | None = None,
        *,
        clock: Callable[[], datetime] = system_time,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError("ALMA_WEBHOOK_URL must be an http:// or https:// URL with a host")
        self._url = url
        self.host = parts.hostname
        self._secret = Secret(secret) if isinstance(secret, str) else secret
        self.timeout = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
        self._clock = clock
        self._own_client = client is None
        self._client = client if client is not None else httpx.Client(timeout=self.timeout)

    @classmethod
    def from_settings(cls, settings: Settings, *, client: httpx.Client | None = None) -> WebhookSink:
        if not settings.webhook_url:
            raise ConfigurationError("ALMA_WEBHOOK_URL is required by the webhook sink")
        return cls(settings.webhook_url, settings.webhook_secret, settings.webhook_timeout, client)

    @property
    def identity(self) -> str:
        """What a routine's ``config_revision`` covers: the destination (host and a digest of the
        full URL, which may embed a token), never the URL or the secret themselves."""
        return f"webhook:{self.host}:{hashlib.sha256(self._url.encode()).hexdigest()[:16]}"

    @property
    def signed(self) -> bool:
        return bool(self._secret)

    def __repr__(self) -> str:
        return f"WebhookSink(host={self.host!r}, signed={self.signed})"

    def close(self) -> None:
        if self._own_client:
            self._client.close()

    def __enter__(self) -> WebhookSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def body_of(delivery: Delivery) -> bytes:
        """The exact bytes posted (and signed): compact JSON, keys sorted, UTF-8."""
        text = json.dumps(delivery.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return text.encode("utf-8")

    def deliver(self, delivery: Delivery) -> None:
        """POST once. Returns on 2xx; raises SinkError on anything else (never retried)."""
        body = self.body_of(delivery)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": f"alma-schedule/{__version__}",
            IDEMPOTENCY_HEADER: delivery.idempotency_key,
        }
        if self._secret:
            ts = int(self._clock().timestamp())
            headers[TIMESTAMP_HEADER] = str(ts)
            headers[SIGNATURE_HEADER] = sign(self._secret, ts, body)
        try:
            response = self._client.post(
                self._url, content=body, headers=headers, timeout=self.timeout, follow_redirects=False
            )
        except httpx.TimeoutException as exc:
            log.warning("webhook to %s timed out after %gs", self.host, self.timeout)
            raise SinkError(f"webhook to {self.host} timed out after {self.timeout:g}s") from exc
        except httpx.HTTPError as exc:
            log.warning("webhook to %s failed: %s", self.host, type(exc).__name__)
            raise SinkError(f"webhook to {self.host} failed: {type(exc).__name__}") from None
        if not 200 <= response.status_code < 300:
            log.warning("webhook to %s answered HTTP %d", self.host, response.status_code)
            raise SinkError(f"webhook to {self.host} answered HTTP {response.status_code}")
