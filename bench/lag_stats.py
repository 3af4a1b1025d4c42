"""What a lag run measured (``bench/lag.py``): each fire's nominal instant, its lag, missing and twice.

A fire is one ``(routine, nominal instant)`` with the instant in the window ``[ws, we)``. Its lag is
the fleet task's start (``time.time()`` at the start of ``bench.noop``) minus the instant:

* alma-schedule: the instant is the ledger's ``due_at`` (``fire_at`` without jitter), found by the
  fleet task's id (``task_id_for`` of the run key); the expected fires are the store's own schedule
  of each routine (``core.fires.next_fire`` from its anchor). Split into wake (the start of the tick
  that claimed it, matched by the report's ``at`` to the ledger's ``claimed_at``, minus the instant),
  claim-to-run-start (the ledger's ``started_at`` minus that tick's start) and run-to-task-start
  (the fleet task's start minus ``started_at``);
* celery beat and RedBeat: a crontab entry's instant is the minute its message was published in
  (``floor(published + 0.5 s)``: a send up to 0.5 s early is a negative lag, not the previous
  minute's); a spread's one-shot entry (RedBeat: an interval whose ``last_run_at`` the harness
  loaded) its whole second. Their intervals count the period from their previous send (no nominal
  instant): achieved rate only, their fires counted by publication in the window.

Missing: an expected fire with no start by the end of the grace; twice: a fire started more than once.
Our run side per fire (``per_fire``, ms): ``claim`` the claiming ticks' time (claim and dispatch)
over the fires they claimed; ``start_cas`` the ``started_at`` stamp (taken before the start CAS) to
the fleet task's publication (the CAS and the runner's checks); ``send`` the publication to
``finished_at``; ``finish`` a ``run_many``'s gap from one fire's ``finished_at`` to its next fire's
``started_at`` (the finish statement); ``run_side_wall`` the first start to the last finish of one
instant's fires over their count (medians; ``claim`` a mean).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter, defaultdict
from datetime import UTC, datetime
from typing import Any

Spec = dict[str, tuple[str, float, float | None]]
Start = tuple[str, str, float, float]  # name, task id, published, started


def pct(xs: list[float]) -> dict[str, float] | None:
    """p50, p99 (nearest rank) and max, in ms; None for no samples."""
    if not xs:
        return None
    s = sorted(xs)
    rank = lambda q: s[max(0, math.ceil(q * len(s)) - 1)]  # noqa: E731
    return {
        "n": len(s),
        "p50": round(rank(0.5) * 1e3, 1),
        "p99": round(rank(0.99) * 1e3, 1),
        "max": round(s[-1] * 1e3, 1),
    }


def nominal_of(kind: str, period: float, phase: float | None, pub: float) -> float | None:
    """The instant an incumbent's message was published for (None: no nominal instant)."""
    if kind == "cron":
        return math.floor((pub + 0.5) / 60.0) * 60.0
    if phase is None or kind == "never":
        return None
    return phase + math.floor((pub + 0.5 - phase) / period) * period


def expected_known(routines: Spec, phases: dict[str, float], ws: float, we: float) -> set[tuple[str, float]]:
    """An incumbent's fires with a nominal instant in the window."""
    out: set[tuple[str, float]] = set()
    for name, (kind, period, _phase) in routines.items():
        if kind == "cron":
            first, step = math.ceil(ws / 60.0) * 60.0, 60.0
        elif name in phases:
            phase, step = phases[name], period
            first = phase + math.ceil((ws - phase) / step) * step
        else:
            continue
        t = first
        while t < we:
            out.add((name, round(t, 3)))
            t += step
    return out


def rates(routines: Spec, counts: Counter[str], ws: float, we: float) -> dict[str, Any]:
    """Per interval class (``every`` period): fires counted in the window against the nominal count."""
    out: dict[str, Any] = {}
    by: dict[float, list[str]] = defaultdict(list)
    for name, (kind, period, _phase) in routines.items():
        if kind == "every":
            by[period].append(name)
    for period, names in sorted(by.items()):
        nominal = (we - ws) / period
        got = [counts.get(n, 0) for n in names]
        out[f"every {period:g}s"] = {
            "routines": len(names), "nominal_per_routine": round(nominal, 2),
            "achieved_min": min(got), "achieved_max": max(got),
            "rate_min": round(min(got) / nominal, 3), "rate_max": round(max(got) / nominal, 3),
            "all_nominal": all(abs(g - nominal) < 1e-9 for g in got),
        }  # fmt: skip
    return out


def incumbent(routines: Spec, phases: dict[str, float], starts: list[Start], ws: float, we: float) -> dict[str, Any]:
    """celery beat's or RedBeat's fires in the window."""
    seen: Counter[tuple[str, float]] = Counter()
    lag: dict[tuple[str, float], float] = {}
    send: list[float] = []
    window_counts: Counter[str] = Counter()
    unknown: dict[str, list[float]] = defaultdict(list)
    cron: list[float] = []
    for name, _tid, pub, start in starts:
        if name not in routines:
            continue
        kind, period, _ = routines[name]
        nominal = nominal_of(kind, period, phases.get(name), pub)
        if nominal is None:
            if ws <= pub < we:
                window_counts[name] += 1
                unknown[name].append(pub)
            continue
        if not ws <= nominal < we:
            continue
        key = (name, round(nominal, 3))
        seen[key] += 1
        if seen[key] == 1:
            lag[key] = start - nominal
            send.append(pub - nominal)
            window_counts[name] += 1
            if kind == "cron":
                cron.append(start - nominal)
    expected = expected_known(routines, phases, ws, we)
    twice = sum(c - 1 for c in seen.values() if c > 1)
    for name, pubs in unknown.items():  # no instant: two sends of one entry closer than half its period
        period = routines[name][1]
        pubs.sort()
        twice += sum(1 for a, b in itertools.pairwise(pubs) if b - a < period / 2)
    return {
        "fires": len(expected) + sum(window_counts[n] for n in unknown), "timed_fires": len(expected),
        "missing": len(expected - set(seen)), "twice": twice, "unexpected": len(set(seen) - expected),
        "task_start": pct(list(lag.values())), "task_start_cron": pct(cron), "sent": pct(send),
        "rates": rates(routines, window_counts, ws, we),
    }  # fmt: skip


def expected_ours(anchors: dict[str, tuple[dict[str, Any], datetime]], ws: float, we: float) -> set[tuple[str, float]]:
    """Our routines' fires in the window, from the store's own schedule of each (its anchor)."""
    from alma_schedule.core.fires import next_fire

    out: set[tuple[str, float]] = set()
    end = datetime.fromtimestamp(we, UTC)
    for name, (schedule, registered_at) in anchors.items():
        after = datetime.fromtimestamp(ws - 0.5, UTC)
        while (f := next_fire(schedule, registered_at, after)) is not None and f < end:
            out.add((name, round(f.timestamp(), 3)))
            after = f
    return out


def ours(routines: Spec, ledger: list[dict[str, Any]], anchors: dict[str, Any], ticks: list[dict[str, Any]],
         starts: list[Start], ws: float, we: float) -> dict[str, Any]:  # fmt: skip
    """alma-schedule's fires in the window, with the lag split and the run side's costs."""
    from alma_schedule.model import RunKey
    from alma_schedule.runners.task import task_id_for

    by_task = {task_id_for(RunKey(r["org"], r["uid"], r["routine_id"], r["run_id"])): r for r in ledger}
    tick_at = {round(datetime.fromisoformat(t["at"]).timestamp(), 3): t for t in ticks if t.get("at")}
    starts_of: dict[str, list[Start]] = defaultdict(list)
    for s in starts:
        starts_of[s[1]].append(s)
    parts: dict[str, list[float]] = defaultdict(list)
    seen: Counter[tuple[str, float]] = Counter()
    counts: Counter[str] = Counter()
    states: Counter[str] = Counter()
    cost: dict[str, list[float]] = defaultdict(list)
    batches: dict[str, list[tuple[float, float]]] = defaultdict(list)
    pool: dict[float, tuple[float, float, int]] = {}
    for task_id, row in by_task.items():
        instant = row["due_at"] or row["fire_at"]
        if not ws <= instant < we:
            continue
        states[f"{row['state']}({row['reason']})" if row["reason"] else row["state"]] += 1
        mine = starts_of.get(task_id, [])
        key = (row["routine_id"], round(instant, 3))
        seen[key] += len(mine)
        if not mine:
            continue
        counts[row["routine_id"]] += 1
        _n, _t, pub, start = min(mine, key=lambda s: s[3])
        tick = tick_at.get(round(row["claimed_at"], 3))
        woke = tick["start"] if tick else row["claimed_at"]
        parts["task_start"].append(start - instant)
        if routines.get(row["routine_id"], ("",))[0] == "cron":
            parts["task_start_cron"].append(start - instant)
        parts["wake"].append(woke - instant)
        parts["claimed_at"].append(row["claimed_at"] - instant)
        if row["started_at"] is not None:
            parts["run_start"].append(row["started_at"] - instant)
            parts["claim_to_run_start"].append(row["started_at"] - woke)
            parts["run_to_task_start"].append(start - row["started_at"])
            if pub and row["finished_at"] is not None:
                cost["start_cas"].append(pub - row["started_at"])
                cost["send"].append(row["finished_at"] - pub)
                first, last, n = pool.get(instant, (row["started_at"], row["finished_at"], 0))
                pool[instant] = (min(first, row["started_at"]), max(last, row["finished_at"]), n + 1)
                request, _, rest = (row["owner"] or "").partition("/")
                if rest:
                    batches[request].append((row["started_at"], row["finished_at"]))
    for fires in batches.values():  # a run_many runs its fires one by one: the gap is the finish
        fires.sort()
        cost["finish"] += [b[0] - a[1] for a, b in itertools.pairwise(fires)]
    claiming = [t for t in ticks if t.get("claimed")]
    claimed = sum(int(t["claimed"]) for t in claiming)
    expected = expected_ours(anchors, ws, we)
    out: dict[str, Any] = {
        "fires": len(expected), "missing": len(expected - {k for k, c in seen.items() if c}),
        "twice": sum(c - 1 for c in seen.values() if c > 1), "states": dict(states),
        "unexpected": len({k for k, c in seen.items() if c} - expected),
        "rates": rates(routines, counts, ws, we), "claiming_ticks": len(claiming),
    }  # fmt: skip
    out.update({k: pct(v) for k, v in parts.items()})
    breakdown: dict[str, float] = {}
    if claimed:  # the claiming ticks' time (claim, dispatch) over the fires they claimed
        breakdown["claim"] = round(sum(t["end"] - t["start"] for t in claiming) / claimed * 1e3, 2)
    breakdown.update({k: round(statistics.median(v) * 1e3, 2) for k, v in cost.items() if v})
    walls = [w for w in pool.values() if w[2] > 1]  # per instant: the run side's wall over its fires
    if walls:
        breakdown["run_side_wall"] = round(statistics.median((w[1] - w[0]) / w[2] for w in walls) * 1e3, 2)
    out["per_fire"] = breakdown
    return out


def per_hour(n: float, seconds: float) -> float:
    return round(n / seconds * 3600.0, 1) if seconds > 0 else 0.0


def started_ours(ledger: list[dict[str, Any]], starts: list[Start], ws: float, we: float) -> set[tuple[str, float]]:
    """Our fires in the window whose fleet task has started."""
    from alma_schedule.model import RunKey
    from alma_schedule.runners.task import task_id_for

    began = {s[1] for s in starts}
    return {
        (r["routine_id"], round(r["due_at"] or r["fire_at"], 3))
        for r in ledger
        if ws <= (r["due_at"] or r["fire_at"]) < we
        and task_id_for(RunKey(r["org"], r["uid"], r["routine_id"], r["run_id"])) in began
    }


def started_known(routines: Spec, phases: dict[str, float], starts: list[Start]) -> set[tuple[str, float]]:
    """An incumbent's fires with a nominal instant whose fleet task has started."""
    out: set[tuple[str, float]] = set()
    for name, _tid, pub, _start in starts:
        if name in routines:
            kind, period, _phase = routines[name]
            nominal = nominal_of(kind, period, phases.get(name), pub)
            if nominal is not None:
                out.add((name, round(nominal, 3)))
    return out
