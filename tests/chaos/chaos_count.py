"""The figures of a chaos run, counted from what the runners and the fakes recorded themselves.

Executions come from the suite's own table (``chaos_effects``), model calls from the fake
provider's own log, deliveries from the webhook receiver's; the ledger is only what they are held
against (which fire a task id or an idempotency key belongs to, which slots have a row, when a
governed run with no delivery ended).

* ``fires_run_twice``: executions beyond the first of one fire: a ``task`` fire's messages (its
  task id published twice; a message the broker itself delivers twice is counted apart, in
  ``info``), a ``slow`` run, a turn's model call, a job's batch.
* ``slots_without_row``: schedule slots ``[fire, next fire)`` with no ledger row although a tick
  ran in the window: completed with its report's ``at`` in it, before any tick of a later window
  had completed (a tick that already claimed a later fire legitimately supersedes this one:
  missed fires are not replayed).
* ``parallel_runs``: executions of one routine overlapping another of the same routine, where the
  README promises none (tracked tasks, ``slow``, ``turn``, ``job``; untracked tasks promise only
  one send per fire).
* ``deliveries_twice``: webhook requests beyond the first for one idempotency key.
* ``money_past_ceiling_micros``: what the provider billed past a daily ceiling or a per-run cap.
* ``running_not_stuck``: runs left ``running`` / ``collecting`` that ``runs stuck`` does not list.
* ``workers_died``: worker parents that exited while the chaos did not kill them (a raw item on a
  queue used to do it: ``Unrecoverable error``); the supervisor's restart hides it otherwise.
* ``bytes_not_dead_lettered``: raw items pushed on ``alma.run`` and the fleet's queue that were not
  on ``alma.dead``, as they were pushed, in time.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from chaos_effects import Effect

from alma_schedule.core import fire_id, next_fire
from alma_schedule.engine.decide import schedule_of
from alma_schedule.model import Routine, RunKey, governed_key
from alma_schedule.runners.adapters.openai import TokenPrices
from alma_schedule.runners.task import task_id_for

MUST_BE_ZERO = (
    "fires_run_twice",
    "slots_without_row",
    "parallel_runs",
    "deliveries_twice",
    "money_past_ceiling_micros",
    "running_not_stuck",
    "workers_died",
    "bytes_not_dead_lettered",
)


@dataclass(frozen=True, slots=True)
class LedgerRow:
    key: RunKey
    kind: str
    state: str
    reason: str | None
    state_at: datetime
    owner: str | None = None  # the Celery request the start CAS recorded (``<request id>[/<fire>]``)


@dataclass
class Observed:
    """Everything a count reads (gathered by ``chaos_run`` once the fleet is stopped)."""

    routines: list[Routine]
    ledger: list[LedgerRow]
    effects: list[Effect]
    sends: list[str]  # task id of every fleet task message published
    ticks: list[tuple[str, float]]  # (report at, completed at), in completion order
    model_calls: list[tuple[float, str, str, Any]]  # (at, path, governed key, usage or None)
    billed_lines: list[tuple[str, Any]]  # (governed key, usage) of completed batches' output
    deliveries: list[tuple[float, str]]  # (at, idempotency key)
    stuck: set[RunKey]  # what `runs stuck` lists with its defaults
    stuck_by_age: set[RunKey]  # what `runs stuck --older-than 1s` lists
    takers: Mapping[str, int]  # run key -> the process that last began it
    deaths: Mapping[int, tuple[float, str]]  # pid -> when the chaos killed it, and by which fault
    paused_at: float
    prices: TokenPrices
    ceiling_org_micros: int
    cap_per_run_micros: int
    requests: Mapping[str, int] = field(default_factory=dict)  # Celery request id -> the process that began it
    worker_deaths: list[str] = field(default_factory=list)  # worker parents that died, the chaos not killing them
    bytes_lost: list[str] = field(default_factory=list)  # raw items pushed that never reached alma.dead


@dataclass
class Figures:
    fires_run_twice: int = 0
    slots_without_row: int = 0
    parallel_runs: int = 0
    deliveries_twice: int = 0
    money_past_ceiling_micros: int = 0
    running_not_stuck: int = 0
    workers_died: int = 0
    bytes_not_dead_lettered: int = 0
    info: dict[str, Any] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def failing(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in MUST_BE_ZERO if getattr(self, name) != 0}


def _extra(counter: Counter[str]) -> tuple[int, list[str]]:
    over = {k: n for k, n in counter.items() if n > 1}
    return sum(n - 1 for n in over.values()), sorted(over)[:5]


def _overlaps(intervals: Iterable[tuple[float, float, str]]) -> tuple[int, list[str]]:
    n, examples, reach, holder = 0, [], -math.inf, ""
    for start, end, label in sorted(intervals):
        if start < reach:
            n += 1
            examples.append(f"{label} started while {holder} ran")
        if end > reach:
            reach, holder = end, label
    return n, examples[:5]


def count(o: Observed) -> Figures:
    f = Figures()
    by_task_id = {task_id_for(row.key): row for row in o.ledger if row.kind == "task"}
    by_governed = {governed_key(row.key.scope, row.key.routine_id, row.key.run_id): row for row in o.ledger}
    end_of = {row.key: row.state_at.timestamp() for row in o.ledger if row.state in TERMINAL}

    # fires run twice: a task routine promises one SEND per fire (Celery does not deduplicate task
    # ids: a message the broker delivers twice runs twice; counted apart), the other kinds one execution
    twice = Counter(o.sends)
    twice.update(e.key for e in o.effects if e.kind == "slow")
    twice.update(key for _, path, key, _ in o.model_calls if path in ("chat", "batch"))
    f.fires_run_twice, f.examples["fires_run_twice"] = _extra(twice)
    executed = Counter(e.key for e in o.effects if e.kind != "slow")
    f.info["task executions beyond their sends (broker redeliveries)"] = sum(
        max(0, n - twice.get(k, 0)) for k, n in executed.items()
    )
    f.info["executions of no claimed fire"] = sum(1 for e in o.effects if e.kind != "slow" and e.key not in by_task_id)

    # parallel runs: tracked tasks and slow runs from the effects, governed runs from the fakes
    intervals: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for e in o.effects:
        if e.kind == "untracked":
            continue
        end = e.ended if e.ended is not None else o.deaths.get(e.pid, (math.inf, ""))[0]
        intervals[f"fleet/chaos/{e.routine_id}"].append((e.started, end, e.key))
    delivered = {key: at for at, key in sorted(o.deliveries, reverse=True)}
    for at, path, key, _ in o.model_calls:
        row = by_governed.get(key)
        if path not in ("chat", "batch") or row is None:
            continue
        end = delivered.get(key, end_of.get(row.key, math.inf))
        intervals[f"{row.key.org}/{row.key.uid}/{row.key.routine_id}"].append((at, end, str(row.key)))
    for routine_intervals in intervals.values():
        n, ex = _overlaps(routine_intervals)
        f.parallel_runs += n
        f.examples.setdefault("parallel_runs", []).extend(ex)

    # deliveries attempted twice
    f.deliveries_twice, f.examples["deliveries_twice"] = _extra(Counter(key for _, key in o.deliveries))

    # money past any ceiling, from what the provider billed
    billed_by_key: Counter[str] = Counter()
    usages = [(key, usage) for _, path, key, usage in o.model_calls if path == "chat" and usage] + o.billed_lines
    for key, usage in usages:
        billed_by_key[key] += o.prices.cost_micros(int(usage["prompt_tokens"]), int(usage["completion_tokens"]))
    billed_by_org: Counter[str] = Counter()
    for key, micros in billed_by_key.items():
        row = by_governed.get(key)
        billed_by_org[row.key.org if row else "?"] += micros
        if o.cap_per_run_micros:
            f.money_past_ceiling_micros += max(0, micros - o.cap_per_run_micros)
    if o.ceiling_org_micros:
        f.money_past_ceiling_micros += sum(max(0, m - o.ceiling_org_micros) for m in billed_by_org.values())
    f.info["billed by org (µ$)"] = dict(sorted(billed_by_org.items()))

    # runs left running and not listed by `runs stuck`: a run whose worker PARENT was killed has no
    # Celery report by design (issue 14): it is promised visibility by age only
    left_rows = [row for row in o.ledger if row.state in ("running", "collecting")]
    left = [row.key for row in left_rows]
    fate = {row.key: _fate(o, row) for row in left_rows}
    unlisted = [k for k in left if k not in o.stuck and not (fate[k] == FATES["parent"] and k in o.stuck_by_age)]
    f.running_not_stuck = len(unlisted)
    f.examples["running_not_stuck"] = [f"{k} ({fate[k]})" for k in unlisted][:8]
    f.info["runs left running/collecting"] = dict(Counter(fate.values()))
    f.info["of them not listed by `runs stuck`"] = dict(Counter(fate[k] for k in unlisted))

    f.workers_died, f.examples["workers_died"] = len(o.worker_deaths), o.worker_deaths[:5]
    f.bytes_not_dead_lettered, f.examples["bytes_not_dead_lettered"] = len(o.bytes_lost), o.bytes_lost[:5]

    _slots(f, o)
    f.info["ledger"] = dict(sorted(Counter(f"{r.state}({r.reason})" for r in o.ledger).items()))
    f.info["executions"] = dict(sorted(Counter(e.kind for e in o.effects).items()))
    f.info["model calls"] = sum(1 for _, p, _, _ in o.model_calls if p in ("chat", "batch"))
    f.info["deliveries"] = len(o.deliveries)
    f.info["ticks completed"] = len(o.ticks)
    return f


TERMINAL = ("completed", "failed", "refused", "skipped", "timed_out")
FATES = {
    "child": "its pool child SIGKILLed",
    "parent": "its worker parent SIGKILLed",
    "": "its process lived: a store write lost in an outage",
}


def _fate(o: Observed, row: LedgerRow) -> str:
    """What became of the process that OWNS the run: the request its start CAS recorded (a re-sent
    message that began later and lost the CAS owns nothing), else the last process that began it."""
    request = row.owner.split("/", 1)[0] if row.owner else None
    pid = o.requests.get(request) if request else None
    if pid is None:
        pid = o.takers.get(str(row.key))
    if pid is None:
        return "never begun by a worker"
    return FATES.get(o.deaths.get(pid, (0.0, ""))[1], "?")


def _slots(f: Figures, o: Observed) -> None:
    ticks = sorted((datetime.fromisoformat(at).timestamp(), done) for at, done in o.ticks if done < o.paused_at)
    ats = [at for at, _ in ticks]
    suffix_min = [math.inf] * (len(ticks) + 1)  # suffix_min[i]: the first completion among ticks[i:]
    for i in range(len(ticks) - 1, -1, -1):
        suffix_min[i] = min(ticks[i][1], suffix_min[i + 1])
    rows = {(r.key.org, r.key.uid, r.key.routine_id, r.key.run_id) for r in o.ledger}
    owed = missing = 0
    examples: list[str] = []
    for routine in o.routines:
        schedule = schedule_of(routine)
        fire = next_fire(schedule, routine.registered_at, routine.registered_at)
        while fire is not None:
            following = next_fire(schedule, routine.registered_at, fire)
            if following is None or following.timestamp() > o.paused_at:
                break
            lo, hi = fire.timestamp(), following.timestamp()
            a, b = bisect_left(ats, lo), bisect_left(ats, hi)
            if a < b and min(done for _, done in ticks[a:b]) < suffix_min[b]:
                owed += 1
                if (routine.org, routine.uid, routine.routine_id, fire_id(fire)) not in rows:
                    missing += 1
                    examples.append(f"{routine.org}/{routine.uid}/{routine.routine_id}/{fire_id(fire)}")
            fire = following
    f.slots_without_row = missing
    f.examples["slots_without_row"] = examples[:5]
    f.info["slots a tick ran in"] = owed
