"""The worker bootstep: what a worker that serves one of our queues checks before it starts.

A worker whose queues (``-Q``) include none of ours (``tick_queue``, ``run_queue``,
``collect_queue``, read WITHOUT validation) runs none of our code and checks nothing: a fleet's own
workers never fail because of our settings. A worker that serves any of them, before it starts:

1. reads our settings, fully validated (an unknown ``alma_*`` key or ``ALMA_*`` variable, with a
   did-you-mean; a malformed value);
2. refuses an app whose ``accept_content`` holds anything but JSON (our queues must never
   unpickle), naming the setting and the fix;
3. refuses a production store with the ``memory://`` broker (every run or collect a tick sends
   would stay inside this process), naming both settings;
4. sets our task objects' time limits from settings (a fleet's app does not read them at import);
5. when it serves the run queue: connects the receiver of Celery's loss reports
   (:mod:`alma_schedule.tasks.loss_reports`: a child killed mid-run, a hard time limit);
6. when it serves the run or collect queue: checks that every kind in the store can be served.

A refusal ends the worker with ONE line (:class:`~alma_schedule.errors.ProcessRefused`, a
:class:`ConfigurationError` that Celery's ``worker`` command does not print as a traceback).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from alma_schedule.errors import ConfigurationError, ProcessRefused, missing_extra

try:
    from celery import bootsteps
except ModuleNotFoundError as exc:  # a bare install: no Celery
    raise missing_extra(exc, "celery", "the Celery face") from None

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
        "`celery -A alma_schedule.celery worker`)"
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
        try:
            prepare_worker(composition, queues)
            start_worker_metrics(composition, queues)
        except ConfigurationError as exc:
            raise ProcessRefused.of(exc) from None


def start_worker_metrics(composition: Composition, queues: set[str]) -> str | None:
    """The worker exporter (issue 17) in this worker parent when ALMA_METRICS_PORT is set and the
    worker serves one of our queues; returns its multiprocess directory (None: off)."""
    if not set(our_queue_names(composition).values()) & queues:
        return None
    port = composition.settings.metrics_port
    if not port:
        return None
    try:
        from alma_schedule.tasks.metrics import start_exporter

        return start_exporter(port)
    except ModuleNotFoundError as exc:
        raise missing_extra(exc, "http", "the worker exporter (ALMA_METRICS_PORT)") from None
    except OSError as exc:
        raise ConfigurationError(f"ALMA_METRICS_PORT={port}: the worker exporter cannot listen ({exc})") from None


__all__ = ["JSON_CONTENT", "KindCheckStep", "accept_problem", "consumed_queues", "prepare_worker"]
