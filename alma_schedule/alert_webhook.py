"""The "did not run" alarm's post: one signed JSON ``POST`` of an overdue fire to ``alert_webhook``
(``ALMA_ALERT_WEBHOOK``), signed as the webhook sink signs (``ALMA_WEBHOOK_SECRET``, the same
``X-Alma-Timestamp`` / ``X-Alma-Signature`` headers), with the fire's ``Idempotency-Key``. Called by
the ``alma_schedule.alert`` task (collect queue), never by the tick; a fire whose alert was answered
2xx is never posted again (``Store.alert_delivered``).

docs/architecture.md, section "The modules, in detail" (alert_webhook.py).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from alma_schedule import __version__
from alma_schedule.errors import ConfigurationError
from alma_schedule.model.overdue import FireKey, alert_key
from alma_schedule.model.time import system_time
from alma_schedule.runners.adapters.webhook import IDEMPOTENCY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign

if TYPE_CHECKING:
    import httpx

    from alma_schedule.settings import Settings
    from alma_schedule.stores.base import Store

log = logging.getLogger("alma_schedule.alert")

__all__ = ["Outcome", "alert_body", "post_alert"]

#: ``delivered``: answered 2xx now; ``failed``: not 2xx (or no answer), retry; ``done``: nothing to post
#: (already delivered, or no alert row).
Outcome = Literal["delivered", "failed", "done"]


def alert_body(key: FireKey) -> bytes:
    """The exact bytes posted (and signed): compact JSON, keys sorted, UTF-8."""
    org, uid, routine_id, fire_at = key
    doc = {
        "alert": "did_not_run",
        "org": org,
        "uid": uid,
        "routine_id": routine_id,
        "fire_at": fire_at.isoformat(),
        "idempotency_key": alert_key(*key),
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _url(settings: Settings) -> str:
    url = settings.alert_webhook
    parts = urlsplit(url or "")
    if not url or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError("ALMA_ALERT_WEBHOOK must be an http:// or https:// URL with a host")
    return url


def post_alert(
    store: Store, settings: Settings, key: FireKey, *, now: datetime, client: httpx.Client | None = None
) -> Outcome:
    """Post the fire's alert once, unless it was delivered: on 2xx record the delivery (``now``)."""
    import httpx

    state = store.alert_state(key)
    if state is None or state.delivered_at is not None:
        return "done"
    url = _url(settings)
    body = alert_body(key)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": f"alma-schedule/{__version__}",
        IDEMPOTENCY_HEADER: alert_key(*key),
    }
    secret = settings.webhook_secret
    if secret:
        ts = int(system_time().timestamp())
        headers[TIMESTAMP_HEADER] = str(ts)
        headers[SIGNATURE_HEADER] = sign(secret, ts, body)
    timeout = settings.webhook_timeout.total_seconds()
    host = urlsplit(url).hostname
    try:
        if client is None:
            with httpx.Client(timeout=timeout) as own:
                response = own.post(url, content=body, headers=headers, follow_redirects=False)
        else:
            response = client.post(url, content=body, headers=headers, timeout=timeout, follow_redirects=False)
    except httpx.HTTPError as exc:
        log.warning("alert %s to %s failed: %s", alert_key(*key), host, type(exc).__name__)
        return "failed"
    if not 200 <= response.status_code < 300:
        log.warning("alert %s to %s answered HTTP %d", alert_key(*key), host, response.status_code)
        return "failed"
    store.alert_delivered(key, now=now)
    return "delivered"
