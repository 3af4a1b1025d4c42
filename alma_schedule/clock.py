"""Clocks outside the library: send one tick message, or keep sending them on a cadence.

docs/architecture.md, section "The modules, in detail" (clock.py).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from alma_schedule.errors import DispatchError, missing_extra
from alma_schedule.model import TICK_TASK
from alma_schedule.settings import Settings, refuse_lost_sends

if TYPE_CHECKING:
    from alma_schedule.policies.wake import Wake
    from alma_schedule.waker import HintReader

log = logging.getLogger(__name__)

#: Publish retries before a send gives up (each send is one message).
RETRY_POLICY = {"max_retries": 3, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 2.0}


def tick_message(
    task_id: str,
    *,
    now: datetime | None,
    expires: datetime,
    origin: str | None = None,
    extra: dict[str, Any] | None = None,
) -> tuple[list[Any], dict[str, Any]]:
    """The body and headers of one Celery protocol-2 ``alma_schedule.tick`` message (JSON-ready).

    ``extra``: more keyword arguments (a following clock's ``woken_for``); such a tick also asks
    for no result (``ignore_result``: a clock sends many, nobody reads their results)."""
    kwargs: dict[str, Any] = {} if now is None else {"now": now.isoformat()}
    kwargs.update(extra or {})
    body: list[Any] = [[], kwargs, {"callbacks": None, "errbacks": None, "chain": None, "chord": None}]
    headers: dict[str, Any] = {
        "lang": "py",
        "task": TICK_TASK,
        "id": task_id,
        "shadow": None,
        "eta": None,
        "expires": expires.isoformat(),
        "group": None,
        "group_index": None,
        "retries": 0,
        "timelimit": [None, None],
        "root_id": task_id,
        "parent_id": None,
        "argsrepr": "()",
        "kwargsrepr": repr(kwargs),
        "origin": origin or f"alma-schedule-clock@{socket.gethostname()}:{os.getpid()}",
        "ignore_result": bool(extra),
    }
    return body, headers


def _kombu() -> Any:
    try:
        import kombu
    except ModuleNotFoundError as exc:
        raise missing_extra(exc, "celery", "sending ticks") from None

    return kombu


def _publish(
    connection: Any,
    settings: Settings,
    now: datetime | None,
    expires_in: timedelta,
    extra: dict[str, Any] | None = None,
) -> str:
    kombu = _kombu()
    task_id = str(uuid.uuid4())
    expires = settings.time_source() + expires_in
    body, headers = tick_message(task_id, now=now, expires=expires, extra=extra)
    name = settings.tick_queue
    queue = kombu.Queue(name, kombu.Exchange(name), routing_key=name)
    producer = kombu.Producer(connection, serializer="json", auto_declare=False)
    producer.publish(
        body,
        exchange="",
        routing_key=settings.tick_queue,
        headers=headers,
        correlation_id=task_id,
        delivery_mode=2,
        declare=[queue],
        retry=True,
        retry_policy=RETRY_POLICY,
    )
    return task_id


def refuse_lost_ticks(settings: Settings, app: Any = None) -> None:
    """:func:`refuse_lost_sends` for the broker a tick would go to (``app``'s, else ``ALMA_BROKER_URL``)."""
    if app is None:
        refuse_lost_sends(settings)
    else:
        broker = f"the broker_url of the Celery app {app.main!r}"
        refuse_lost_sends(settings, str(app.conf.broker_url or ""), broker=broker)


def _send_via(
    app: Any, settings: Settings, now: datetime | None, expires_in: timedelta, extra: dict[str, Any] | None = None
) -> str:
    kwargs: dict[str, Any] = {} if now is None else {"now": now.isoformat()}
    kwargs.update(extra or {})
    options: dict[str, Any] = {"ignore_result": True} if extra else {}
    result = app.send_task(
        TICK_TASK,
        kwargs=kwargs,
        expires=settings.time_source() + expires_in,
        serializer="json",
        add_to_parent=False,
        **options,
    )
    return str(result.id)


def send_tick(
    settings: Settings, now: datetime | None = None, *, expires_in: timedelta | None = None, app: Any = None
) -> str:
    """Publish one tick message to ``settings.tick_queue`` (or through ``app``, a fleet's app that
    called ``install``); return its task id.

    docs/architecture.md, "The modules, in detail" (clock.py, send_tick).
    """
    refuse_lost_ticks(settings, app)
    if app is not None:
        try:
            return _send_via(app, settings, now, expires_in or settings.tick_expires)
        except Exception as exc:
            raise DispatchError(f"could not send a tick to the broker ({type(exc).__name__})") from exc
    kombu = _kombu()  # without the celery extra: ConfigurationError, not a DispatchError
    try:
        with kombu.Connection(settings.broker_url) as connection:
            return _publish(connection, settings, now, expires_in or settings.tick_expires)
    except DispatchError:
        raise
    except Exception as exc:
        raise DispatchError(f"could not send a tick to the broker ({type(exc).__name__})") from exc


def next_boundary(now: datetime, every: timedelta) -> datetime:
    """The first multiple of ``every`` since the epoch strictly after ``now`` (clocks align)."""
    step = every.total_seconds()
    epoch = datetime(1970, 1, 1, tzinfo=now.tzinfo)
    elapsed = (now - epoch).total_seconds()
    return epoch + timedelta(seconds=(int(elapsed // step) + 1) * step)


def run_clock(settings: Settings, every: timedelta, stop_event: threading.Event, *, app: Any = None) -> int:
    """Send a tick now, then one at every multiple of ``every``, until ``stop_event`` is set.

    docs/architecture.md, "The modules, in detail" (clock.py, run_clock).
    """
    if every <= timedelta(0):
        from alma_schedule.errors import ConfigurationError

        raise ConfigurationError(f"--every must be positive, got {every}")
    refuse_lost_ticks(settings, app)
    if app is not None:
        return _run_via(app, settings, every, stop_event)
    kombu = _kombu()  # without the celery extra: refuse at once, not a warning per period
    expires_in = settings.tick_expires if every >= settings.tick_period else min(settings.tick_expires, every * 0.9)
    sent = 0
    connection: Any = None
    at: datetime | None = None  # the first tick uses the worker's clock
    while not stop_event.is_set():
        try:
            if connection is None:
                connection = kombu.Connection(settings.broker_url)
            task_id = _publish(connection, settings, at, expires_in)
            sent += 1
            log.info("tick sent: %s (now=%s)", task_id, at.isoformat() if at else "worker clock")
        except Exception as exc:
            log.warning("tick not sent (%s): the next one is tried on a new connection", type(exc).__name__)
            if connection is not None:
                try:
                    connection.release()
                except Exception:  # an already broken connection
                    pass
            connection = None
        at = next_boundary(settings.time_source(), every)
        stop_event.wait(max(0.0, (at - settings.time_source()).total_seconds()))
    if connection is not None:
        connection.release()
    return sent


def _run_via(app: Any, settings: Settings, every: timedelta, stop_event: threading.Event) -> int:
    """:func:`run_clock` through a fleet's app (its connection pool retries and reconnects)."""
    expires_in = min(settings.tick_expires, every * 0.9)
    sent = 0
    at: datetime | None = None
    while not stop_event.is_set():
        try:
            task_id = _send_via(app, settings, at, expires_in)
            sent += 1
            log.info("tick sent: %s (now=%s)", task_id, at.isoformat() if at else "worker clock")
        except Exception as exc:
            log.warning("tick not sent (%s): the next one is tried at the next period", type(exc).__name__)
        at = next_boundary(settings.time_source(), every)
        stop_event.wait(max(0.0, (at - settings.time_source()).total_seconds()))
    return sent


def follow_hint(settings: Settings, stop_event: threading.Event, *, app: Any = None, hint: HintReader | None) -> int:
    """``clock run`` (the default): tick at the next due instant (:mod:`alma_schedule.waker`), at
    least once per ``tick_period``, until ``stop_event`` is set; each tick carries the instant it
    was woken for (``woken_for``), expires after ``tick_expires`` and asks for no result. Returns
    how many ticks were sent. ``hint`` None: the heartbeat alone (a store-less clock)."""
    from alma_schedule.waker import follow_clock, tick_kwargs

    refuse_lost_ticks(settings, app)
    expires_in = settings.tick_expires
    if app is not None:

        def send_via(wake: Wake) -> object:
            task_id = _send_via(app, settings, None, expires_in, tick_kwargs(wake))
            log.info("tick sent: %s (%s, woken for %s)", task_id, wake.reason, wake.woken_for)
            return task_id

        return follow_clock(settings, stop_event, send_via, hint)
    kombu = _kombu()
    held: dict[str, Any] = {}

    def send(wake: Wake) -> object:
        connection = held.get("c")
        if connection is None:
            connection = held["c"] = kombu.Connection(settings.broker_url)
        try:
            task_id = _publish(connection, settings, None, expires_in, tick_kwargs(wake))
        except Exception:
            held.pop("c", None)
            try:
                connection.release()
            except Exception:  # an already broken connection
                pass
            raise
        log.info("tick sent: %s (%s, woken for %s)", task_id, wake.reason, wake.woken_for)
        return task_id

    try:
        return follow_clock(settings, stop_event, send, hint)
    finally:
        if "c" in held:
            held["c"].release()
