"""How the CLI builds a Scheduler: the store from settings, runners from the kind registry, and a
dispatcher that matches the store (in-process on the embedded default, Celery in production: the
fleet's app of ``-A`` when it called ``install(app)``, else the ready app on ``ALMA_BROKER_URL``)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from alma_schedule.errors import InvalidInput
from alma_schedule.settings import Settings, is_embedded_store

if TYPE_CHECKING:
    from alma_schedule.cli.context import CliContext
    from alma_schedule.engine import Scheduler


def is_embedded(settings: Settings) -> bool:
    """The embedded default: a SQLite or in-memory store (no servers). Everything else is production."""
    return is_embedded_store(settings.database_url)


def parse_instant(text: str) -> datetime:
    """An ISO-8601 instant with an offset (``Z`` accepted); naive instants are refused."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"{text!r} is not an ISO-8601 instant (e.g. 2026-12-01T08:00:00Z)") from None
    if value.tzinfo is None:
        raise InvalidInput(f"{text!r} needs a time zone offset (e.g. Z or +01:00)")
    return value


def build_schedule(obj: CliContext, *, dispatcher: Any = None, sends: bool = False) -> Scheduler:
    """A Scheduler over the command's store. Embedded: runs in-process. Production: sends through Celery.

    ``sends``: the command will send (``routines trigger``): a production store with the
    ``memory://`` broker is refused before anything is written.
    """
    from alma_schedule.engine import create_scheduler
    from alma_schedule.runners.registry import registry_resolver

    settings = obj.settings
    if dispatcher is None and not is_embedded(settings):
        from alma_schedule.tasks.app import celery_app_for
        from alma_schedule.tasks.dispatcher import CeleryDispatcher

        dispatcher = CeleryDispatcher(obj.sender_app() or celery_app_for(settings), settings)
        if sends:
            dispatcher.refuse_lost_sends()
    return create_scheduler(
        store=obj.store(), runner=registry_resolver(settings), dispatcher=dispatcher, settings=settings
    )
