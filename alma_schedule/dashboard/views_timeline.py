"""The routine page's pictures and what it will do: its runs over time (one mark per run: start,
duration, outcome colour; a skipped fire a diamond), the pauses of its audit trail as spans and its
edits as marks, the missed-fire count; its next fires on a time axis with jitter and DST notes, or,
for a paused, disabled, deleted or finished routine, what it will do instead of a list of fires
that will not happen.

docs/architecture.md, section "The modules, in detail" (dashboard/views_timeline.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from alma_schedule.core import parse_schedule, preview_fires
from alma_schedule.dashboard.charts import Mark, Span, duration_text, timeline
from alma_schedule.dashboard.html import esc, instant, table
from alma_schedule.errors import AlmaScheduleError
from alma_schedule.model import Routine, RunRecord, RunState
from alma_schedule.model.events import RoutineEvent
from alma_schedule.policies import missed

__all__ = ["NEXT_FIRES", "RUNS", "next_section", "runs_section", "what_it_will_do"]

#: Runs the chart shows (the newest), and next fires previewed.
RUNS = 100
NEXT_FIRES = 10
_EDITS = ("register", "update", "sync", "enable", "disable", "delete")


def what_it_will_do(r: Routine, now: datetime) -> str | None:
    """The sentence for a routine that will not fire as scheduled, None for an active one."""
    if r.deleted_at is not None:
        return f"deleted at {r.deleted_at.isoformat()}: it will not fire again"
    if not r.enabled:
        why = f" ({r.disabled_reason})" if r.disabled_reason else ""
        return f"disabled{why}: no fire until it is enabled; it resumes at the next fire after enable"
    if r.paused_reason is not None:
        return f"paused ({r.paused_reason}): no fire until it is resumed; it resumes at the next fire after resume"
    return None


def _finished(r: Routine, fires: Sequence[object]) -> str | None:
    if fires or r.next_due_at is not None:
        return None
    last = f" (its last at {r.last_fire.isoformat()})" if r.last_fire else ""
    return f"finished: its schedule has no fire after now{last}"


def next_section(r: Routine, now: datetime) -> str:
    """ "Next fires": the sentence of an inactive or finished routine, else the axis and the table."""
    inactive = what_it_will_do(r, now)
    if inactive is not None:
        return f'<h2>Next fires</h2><p class="msg">{esc(inactive)}</p>'
    try:
        start = max(now.replace(microsecond=0), r.last_fire or r.registered_at)
        fires = preview_fires(parse_schedule(dict(r.schedule)), r.registered_at, start, NEXT_FIRES)
    except AlmaScheduleError as exc:
        return f'<p class="err">the schedule cannot be previewed: {esc(exc)}</p>'
    done = _finished(r, fires)
    if done is not None:
        return f'<h2>Next fires</h2><p class="msg">{esc(done)}</p>'
    rows = [
        [
            instant(p.utc),
            esc(p.local.isoformat()),
            esc(p.zone),
            esc(duration_text(p.jitter.total_seconds())),
            esc(p.dst_note or ""),
        ]
        for p in fires
    ]
    fallback = table(["UTC", "local", "zone", "jitter", "DST note"], rows, empty="no next fire")
    marks = [
        Mark(
            p.utc,
            None,
            "fire",
            f"{p.utc.isoformat()} ({p.local.strftime('%H:%M')} {p.zone})" + (f": {p.dst_note}" if p.dst_note else ""),
        )
        for p in fires
    ]
    notes = [Mark(p.utc, None, "dst", p.dst_note) for p in fires if p.dst_note]
    end = fires[-1].utc if fires else now + timedelta(days=1)
    title = f"The next {len(fires)} fires, {fires[0].utc.isoformat()} to {end.isoformat()}" if fires else "No next fire"
    chart = timeline(title, now, max(end, now + timedelta(minutes=1)), [*marks, *notes], [], fallback)
    return "<h2>Next fires</h2>" + chart


def _spans(events: Sequence[RoutineEvent], now: datetime) -> tuple[list[Span], list[Mark]]:
    """Pause spans (pause to resume) and edit marks from the audit trail (given newest first)."""
    spans: list[Span] = []
    edits: list[Mark] = []
    paused_at: RoutineEvent | None = None
    for e in sorted(events, key=lambda e: (e.at, e.event_id)):
        if e.action == "pause" and paused_at is None:
            paused_at = e
        elif e.action == "resume" and paused_at is not None:
            spans.append(Span(paused_at.at, e.at, f"paused by {paused_at.actor or '-'}: {paused_at.reason or ''}"))
            paused_at = None
        elif e.action in _EDITS:
            edits.append(Mark(e.at, None, "edit", f"{e.action} by {e.actor or '-'} at {e.at.isoformat()}"))
    if paused_at is not None:
        spans.append(Span(paused_at.at, None, f"paused by {paused_at.actor or '-'}: {paused_at.reason or ''} (still)"))
    return spans, edits


def runs_section(r: Routine, runs: Sequence[RunRecord], events: Sequence[RoutineEvent], now: datetime) -> str:
    """Its runs over time: one mark per run (a bar from start to end, a skipped fire a diamond)."""
    marks: list[Mark] = []
    rows: list[list[str]] = []
    for run in sorted(runs, key=lambda x: (x.fire_at, x.run_id)):
        begin = run.started_at or run.fire_at
        took = (run.finished_at - begin).total_seconds() if run.finished_at and run.started_at else None
        text = f"{run.run_id}: {run.state} ({run.reason or '-'}), fire {run.fire_at.isoformat()}"
        text += f", took {duration_text(took)}"
        if run.state == RunState.SKIPPED or (run.started_at is None and run.finished_at is not None):
            marks.append(Mark(run.fire_at, None, str(run.state), text))
        else:
            marks.append(Mark(begin, run.finished_at or now, str(run.state), text))
        rows.append(
            [instant(run.fire_at), instant(run.started_at), esc(duration_text(took)), esc(run.state), esc(run.reason)]
        )
    spans, edits = _spans(events, now)
    lost = missed.shown(r.fires_missed, r.fires_missed_capped)
    fallback = table(["fire (UTC)", "started", "took", "outcome", "reason"], rows, empty="no run yet")
    if not marks and not spans:
        return f'<h2>Runs over time</h2><p class="note">no run yet; missed fires (never claimed): {esc(lost)}</p>'
    instants = [m.start for m in [*marks, *edits]] + [s.start for s in spans]
    start = min(instants)
    end = max([now, *(m.end or m.start for m in marks)])
    skipped = sum(1 for m in marks if m.end is None)
    title = f"Runs over time: {len(marks)} runs ({skipped} skipped), {lost} missed fires (never claimed)"
    return "<h2>Runs over time</h2>" + timeline(title, start, end, [*marks, *edits], spans, fallback)
