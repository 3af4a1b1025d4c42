"""The dashboard's actions: pause (with a reason), resume, enable, disable, trigger and ``record``
of a stuck run. Each is a confirmation page (GET) and a POST that calls the same engine method as
the CLI (:class:`~alma_schedule.engine.Scheduler`), so the refusals are the CLI's, shown on the page.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from alma_schedule.dashboard.html import esc, form, link, routine_path, table
from alma_schedule.dashboard.views_runs import record_advice
from alma_schedule.errors import AlmaScheduleError, InvalidInput
from alma_schedule.model import REASONS, TERMINAL, RunKey, Scope

if TYPE_CHECKING:
    from alma_schedule.engine import Scheduler
    from alma_schedule.settings import Settings
    from alma_schedule.stores.base import Store

ROUTINE_ACTIONS = ("pause", "resume", "enable", "disable", "trigger")
ACTIONS = (*ROUTINE_ACTIONS, "record")

_WHAT = {
    "pause": "Pause: no fire is claimed until it is resumed (an existing pause reason is kept).",
    "resume": "Resume: the streak resets and the cursor restarts now (nothing missed fires).",
    "enable": "Enable: the cursor restarts now and the streak resets.",
    "disable": "Disable: no fire is claimed until it is enabled.",
    "trigger": "Trigger: claim one manual run now and dispatch it (refused while a run is active).",
    "record": "Record: move this run to a terminal outcome (the operator's reconciliation).",
}


def make_schedule(settings: Settings, store: Store) -> Scheduler:
    """The engine over ``store`` as the CLI builds it (in-process when embedded, Celery otherwise)."""
    from alma_schedule.engine import create_scheduler
    from alma_schedule.runners.registry import registry_resolver
    from alma_schedule.settings import is_embedded_store

    dispatcher: Any = None
    if not is_embedded_store(settings.database_url):
        from alma_schedule.tasks.app import celery_app_for
        from alma_schedule.tasks.dispatcher import CeleryDispatcher

        dispatcher = CeleryDispatcher(celery_app_for(settings), settings)
    return create_scheduler(store=store, runner=registry_resolver(settings), dispatcher=dispatcher, settings=settings)


def _record_fields() -> str:
    outcomes = "".join(f'<option value="{esc(o)}">{esc(o)}</option>' for o in sorted(TERMINAL))
    return (
        f'<p>outcome <select name="outcome">{outcomes}</select> '
        f'reason <input name="reason" value="operator" list="reasons"></p>'
        f'<datalist id="reasons">{"".join(f"<option value={esc(r)!r}>" for r in sorted(REASONS))}</datalist>'
    )


def confirm_page(action: str, key_text: str, path: str, csrf: str, advice: str = "") -> str:
    """The confirmation of ``action`` on ``key_text``: what it does, and the form that does it."""
    extra = ""
    if action == "pause":
        extra = '<p>reason <input name="reason" value="manual" maxlength="200"></p>'
    elif action == "record":
        extra = _record_fields()
    body = f"<p>{esc(_WHAT[action])}</p><p>on <code>{esc(key_text)}</code></p>"
    if advice:
        body += f'<p class="note">{esc(advice)}</p>'
    return body + form(path, csrf, {}, f"confirm {action}", extra=extra)


def perform(
    schedule: Scheduler,
    action: str,
    sc: Scope,
    routine_id: str,
    run_id: str | None,
    data: Mapping[str, str],
    *,
    actor: str | None = None,
) -> str:
    """Do ``action`` through the engine, by ``actor`` (the signed-in user: who the audit trail
    names); the result (or the engine's refusal) as markup."""
    back = link(routine_path(sc.org, sc.uid, routine_id), "back to the routine")
    try:
        if action == "pause":
            reason = (data.get("reason") or "manual").strip() or "manual"
            result: Any = schedule.pause(sc, routine_id, reason, actor=actor)
        elif action == "record":
            if run_id is None:
                raise InvalidInput("record needs a run")
            outcome, why = data.get("outcome", ""), data.get("reason", "")
            res = schedule.record(sc, routine_id, run_id, outcome, why, actor=actor)
            if res.record is None or not res.won:
                state = res.record.state if res.record is not None else "unknown"
                return f'<p class="err">nothing recorded: the run is {esc(state)} ({esc(res.reason)})</p>{back}'
            result = res.record
        else:
            result = getattr(schedule, action)(sc, routine_id, actor=actor)
    except AlmaScheduleError as exc:
        return f'<p class="err">refused: {esc(exc)}</p>{back}'
    shown = result.to_dict() if hasattr(result, "to_dict") else {}
    rows = [
        [esc(k), esc(v)]
        for k, v in shown.items()
        if k in ("routine_id", "run_id", "state", "reason", "paused_reason", "enabled", "next_due_at")
    ]
    return f'<p class="msg">{esc(action)} done</p>' + table(["field", "value"], rows) + back


def advice_for(store: Store, sc: Scope, routine_id: str, run_id: str | None) -> str:
    if run_id is None:
        return ""
    run = store.get(RunKey.of(sc, routine_id, run_id))
    return record_advice(run) if run is not None else "this run is not in the ledger"
