"""The worker bootstep: what a worker that serves one of our queues checks before it starts, and the
queues a plain worker (no ``-Q``) of a fleet's app adds at its start.

docs/architecture.md, section "The modules, in detail" (tasks/bootstep.py).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from alma_schedule.compat.celery import selected_queues
from alma_schedule.errors import ConfigurationError, ProcessRefused, missing_extra

try:
    from celery import bootsteps
    from celery.signals import celeryd_after_setup, worker_init
except ModuleNotFoundError as exc:  # a bare install: no Celery
    raise missing_extra(exc, "celery", "the Celery face") from None

from alma_schedule.settings import peek
from alma_schedule.tasks.composition import composition_of, our_queue_names
from alma_schedule.tasks.definitions import apply_limits
from alma_schedule.tasks.loss_reports import connect_loss_reports

if TYPE_CHECKING:
    from celery import Celery

    from alma_schedule.tasks.composition import Composition

log = logging.getLogger(__name__)

#: The ``accept_content`` names of JSON.
JSON_CONTENT = frozenset({"json", "application/json"})


def consumed_queues(worker: Any) -> set[str] | None:
    """The queue names a starting worker will consume (None: every queue the app declares)."""
    queues = worker.app.amqp.queues
    selected = getattr(queues, "consume_from", None)
    names = selected if selected else queues
    return {str(name) for name in names}


def accept_problem(app: Celery, served: list[str]) -> str | None:
    """Why ``app`` must not serve our queues ``served`` (it accepts more than JSON), or None."""
    accepted = app.conf.accept_content
    names = [accepted] if isinstance(accepted, str) else [str(n) for n in (accepted or ())]
    if names and all(n.lower() in JSON_CONTENT for n in names):
        return None
    return (
        f"the Celery app {app.main!r} has accept_content={names!r}: a worker serving {', '.join(served)} "
        "must accept JSON only; set accept_content=['json'] on the app (or serve our queues from "
        f"`{OWN_WORKER.format(queues=','.join(served))}` with ALMA_CELERY_APP naming this app)"
    )


def prepare_worker(composition: Composition, queues: set[str]) -> list[str] | None:
    """Run the checks above for a worker consuming ``queues``; return the kinds checked (None when
    the worker serves none of our queues, or only the tick queue). Raises :class:`ConfigurationError`."""
    from alma_schedule.settings import refuse_lost_sends

    names = our_queue_names(composition)
    served = sorted(set(names.values()) & queues)
    if not served:
        log.debug("alma_schedule: this worker serves none of %s; nothing checked", sorted(names.values()))
        return None
    app = composition.app
    settings = composition.settings  # full validation, here and in our tasks only
    problem = accept_problem(app, served)
    if problem:
        raise ConfigurationError(problem)
    broker = "ALMA_BROKER_URL" if not composition.fleet else f"the broker_url of the Celery app {app.main!r}"
    refuse_lost_sends(settings, str(app.conf.broker_url or ""), broker=broker)
    apply_limits(app, settings)
    if settings.run_queue in queues:
        connect_loss_reports(composition)
    if not {settings.run_queue, settings.collect_queue} & queues:
        return None
    kinds = composition.check()
    log.info("alma_schedule: this worker serves the stored kinds %s", kinds or "(none yet)")
    return kinds


class KindCheckStep(bootsteps.Step):
    """Worker bootstep running :func:`prepare_worker`; a refusal ends the worker with one line."""

    name = "alma_schedule.kind_check"
    label = "alma_schedule start-up check"

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        composition = composition_of(parent.app)
        if composition is None:
            return
        queues = consumed_queues(parent) or set()
        composition.connections = threaded_concurrency(parent)
        try:
            prepare_worker(composition, queues)
            start_worker_metrics(composition, queues)
        except ConfigurationError as exc:
            raise ProcessRefused.of(exc) from None


#: Celery's pools whose tasks run in threads (or green threads) of the worker process itself.
THREADED_POOLS = ("celery.concurrency.thread", "celery.concurrency.gevent", "celery.concurrency.eventlet")


def threaded_concurrency(worker: Any) -> int | None:
    """The concurrency of ``worker`` (Celery's ``WorkController``) when its pool runs tasks in threads
    of this process (they share its store's connection pool), else None (prefork, solo)."""
    pool = getattr(worker, "pool_cls", None)
    concurrency = getattr(worker, "concurrency", None)
    if getattr(pool, "__module__", None) in THREADED_POOLS and isinstance(concurrency, int) and concurrency > 0:
        return concurrency
    return None


def start_worker_metrics(composition: Composition, queues: set[str]) -> str | None:
    """The worker exporter in this worker parent when ALMA_METRICS_PORT is set and the
    worker serves one of our queues; returns its multiprocess directory (None: off)."""
    if not set(our_queue_names(composition).values()) & queues:
        return None
    port = composition.settings.metrics_port
    if not port:
        return None
    try:
        from alma_schedule.tasks.metrics import start_exporter

        return start_exporter(port, composition.settings.metrics_bind)
    except ModuleNotFoundError as exc:
        raise missing_extra(exc, "http", "the worker exporter (ALMA_METRICS_PORT)") from None
    except OSError as exc:
        bind = composition.settings.metrics_bind
        raise ConfigurationError(
            f"ALMA_METRICS_PORT={port} on ALMA_METRICS_BIND={bind}: the worker exporter cannot listen ({exc})"
        ) from None


# --- a plain worker (no -Q) of a fleet's app: our run and collect queues too

#: What a worker of its own for our queues looks like (a pickle fleet's app cannot serve them).
OWN_WORKER = "celery -A alma_schedule.celery worker -Q {queues} -n alma@%h"
_NOTE = "_alma_schedule_plain_worker"


def is_plain(app: Celery) -> bool:
    """The starting worker was given no ``-Q``: it consumes the app's default queues."""
    return selected_queues(app.amqp.queues) is None


def add_our_queues(composition: Composition) -> tuple[int, str] | None:
    """Add the run and collect queues to what a plain worker of ``composition.app`` consumes (JSON-only
    app, a store configured); return the one line to log, with its level (a warning: nothing added)."""
    app = composition.app
    if not is_plain(app):
        return None
    names = our_queue_names(composition)
    wanted = [names["run_queue"], names["collect_queue"]]
    if composition.given_settings is None and peek("database_url", conf=app.conf) is None:
        return logging.WARNING, (
            f"alma_schedule: no store is configured for the Celery app {app.main!r} (alma_database_url, or "
            f"ALMA_DATABASE_URL), so this worker does not serve {', '.join(wanted)}"
        )
    problem = accept_problem(app, wanted)
    if problem is not None:
        own = OWN_WORKER.format(queues=",".join(wanted))
        return logging.WARNING, (
            f"alma_schedule: the Celery app {app.main!r} accepts more than JSON, so this worker does not serve "
            f"{', '.join(wanted)}: serve them from a worker of their own (`{own}`, with ALMA_CELERY_APP naming "
            "this app)"
        )
    queues = app.amqp.queues
    for name in wanted:
        queues.select_add(queues[name])  # a queue the fleet declares is kept as declared; else Celery's default
    return logging.INFO, f"alma_schedule: this worker (no -Q) also serves {', '.join(wanted)}"


@worker_init.connect(weak=False)
def _on_worker_init(sender: Any = None, **_: Any) -> None:
    """At ``worker_init`` (queues chosen, bootsteps not built yet) of a worker of a fleet's app."""
    app = getattr(sender, "app", None)
    composition = None if app is None else composition_of(app)
    if composition is not None and composition.fleet:
        note = add_our_queues(composition)
        if note is not None:
            sender.__dict__[_NOTE] = note  # logged at celeryd_after_setup: worker_init precedes the log set-up


@celeryd_after_setup.connect(weak=False)
def _on_after_setup(instance: Any = None, **_: Any) -> None:
    note = getattr(instance, "__dict__", {}).get(_NOTE)
    if note is not None:
        log.log(note[0], "%s", note[1])


__all__ = [
    "JSON_CONTENT",
    "KindCheckStep",
    "accept_problem",
    "add_our_queues",
    "consumed_queues",
    "is_plain",
    "prepare_worker",
]
