"""The bench's schedule policies: 10 % of alma-schedule's routines carry policy keys, all of them firing.

Every tenth routine of each kind (due and not due alike, by routine id) gets one of these six mixes
beside its timing (the keys ``alma_schedule/core/policy.py`` reads), in turn; each still fires at the
bench's instant (a fire at T seen at T + 30 s):

* ``catch_up: 10m``: the fire is 30 s old, inside its window;
* ``overlap: latest``: a due routine with a ``running`` run (the overlap tenth) buffers its fire
  instead of ``skipped(overlap)``; the others claim as usual;
* ``max_runs: 1000``: counted inside the claim transaction (``schedule_claims``), far from the limit;
* ``jitter: 20s``: a stable delay of at most 20 s, under the 30 s the tick is late;
* ``not_before`` / ``not_after``: a 30-day-old start and a one-year end around the instant;
* all of ``overlap: latest``, ``catch_up``, ``jitter`` and ``max_runs`` at once.

Registration would accept each (``catch_up`` above tick period + clock tolerance, ``jitter`` under the
smallest gap). The rows are written after the COPY load (the bench's loader, not registration); the
due rows' stored ``next_due_at`` stays the nominal T (at most 20 s before the jittered instant, both
before the tick's now).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import psycopg


def mixes(t: datetime) -> list[dict[str, object]]:
    return [
        {"catch_up": "10m"},
        {"overlap": "latest"},
        {"max_runs": 1000},
        {"jitter": "20s"},
        {"not_before": (t - timedelta(days=30)).isoformat(), "not_after": (t + timedelta(days=365)).isoformat()},
        {"overlap": "latest", "catch_up": "10m", "jitter": "20s", "max_runs": 1000},
    ]


SHARE = 10  # one routine in SHARE carries a policy


def apply_policies(dsn: str, t: datetime) -> int:
    """Merge the mixes into every SHARE-th routine's schedule (per kind, by routine id); how many got one."""
    options = [json.dumps(m) for m in mixes(t)]
    with psycopg.connect(dsn) as conn:
        cur = conn.execute(
            "WITH ranked AS (SELECT org, uid, routine_id,"
            " row_number() OVER (PARTITION BY kind ORDER BY routine_id) - 1 AS k FROM routines)"
            " UPDATE routines r SET schedule = r.schedule || (%s::jsonb[])[(ranked.k / %s) %% %s + 1]"
            " FROM ranked WHERE (r.org, r.uid, r.routine_id) = (ranked.org, ranked.uid, ranked.routine_id)"
            " AND ranked.k %% %s = 3",
            (options, SHARE, len(options), SHARE),
        )
        count = cur.rowcount
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE routines")
    return count


NOTE = (
    "Workload: of alma-schedule's due routines 10 % have a pending `claimed` run (superseded) and 10 % a"
    " `running` one (overlap); 10 % of all routines (due and not) carry schedule policies, six mixes in turn"
    " (`catch_up: 10m`; `overlap: latest`; `max_runs: 1000`; `jitter: 20s`; `not_before`/`not_after` around"
    " the instant; `overlap: latest` + `catch_up` + `jitter` + `max_runs` at once), every one still firing"
    " at the instant (an `overlap: latest` one with a running run buffers its fire; bench/workload.py)."
)
