"""Bulk loading of routines and runs straight into a migrated database (COPY through psycopg), for
the EXPLAIN test and the benchmark. Rows are realistic: every column the store writes is set."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

import psycopg

ROUTINE_COLS = (
    "org",
    "uid",
    "routine_id",
    "kind",
    "schedule",
    "definition",
    "registered_at",
    "config_revision",
    "enabled",
    "paused_reason",
    "consecutive_failures",
    "last_fire",
    "next_due_at",
    "deleted_at",
    "defer_until",
    "last_error",
    "error_count",
    "tzdata_version",
    "created_at",
    "updated_at",
)
RUN_COLS = (
    "org",
    "uid",
    "routine_id",
    "run_id",
    "state",
    "reason",
    "origin",
    "config_revision",
    "fire_at",
    "claimed_at",
    "state_at",
    "expires_at",
    "finished_at",
    "resend_at",
    "send_attempts",
    "next_poll_at",
    "poll_attempts",
    "deadline",
    "reserved_micros",
    "reserve_ceilings",
    "cost_micros",
    "caps_crossed",
)


def routine_id(i: int) -> str:
    return f"routine-{i:07d}"


def routine_rows(n: int, due: int, now: datetime, *, orgs: int = 100) -> Iterator[tuple[object, ...]]:
    """``n`` routines every minute, the first ``due`` of them due at ``now``; the rest spread over
    the next day (never due at ``now``)."""
    schedule = json.dumps({"every": 60})
    definition = json.dumps({"text": "hello"})
    registered = now - timedelta(days=1)
    for i in range(n):
        due_at = now - timedelta(seconds=i % 60) if i < due else now + timedelta(seconds=60 + (i % 86_000))
        yield (
            f"org-{i % orgs}",
            "user-1",
            routine_id(i),
            "test",
            schedule,
            definition,
            registered,
            "rev-1",
            True,
            None,
            0,
            None,
            due_at,
            None,
            None,
            None,
            0,
            None,
            registered,
            registered,
        )


def copy_routines(conninfo: str, n: int, due: int, now: datetime) -> None:
    with psycopg.connect(conninfo) as conn, conn.cursor() as cur:
        with cur.copy(f"COPY routines ({', '.join(ROUTINE_COLS)}) FROM STDIN") as copy:
            for row in routine_rows(n, due, now):
                copy.write_row(row)


def copy_runs(conninfo: str, rows: Iterator[tuple[object, ...]]) -> None:
    with psycopg.connect(conninfo) as conn, conn.cursor() as cur:
        with cur.copy(f"COPY runs ({', '.join(RUN_COLS)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)


def history_rows(n: int, now: datetime, per_routine: int = 1) -> Iterator[tuple[object, ...]]:
    """Terminal ``completed`` runs (the ledger's bulk): ``per_routine`` per routine, in the past."""
    for i in range(n):
        for k in range(per_routine):
            fire = now - timedelta(minutes=10 + k)
            yield (
                f"org-{i % 100}",
                "user-1",
                routine_id(i),
                fire.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "completed",
                "ok",
                "schedule",
                "rev-1",
                fire,
                fire,
                fire,
                fire + timedelta(hours=1),
                fire,
                None,
                0,
                None,
                0,
                None,
                0,
                "[]",
                0,
                "[]",
            )


def open_rows(ids: range, state: str, now: datetime, *, due: bool) -> Iterator[tuple[object, ...]]:
    """One non-terminal run per routine of ``ids``: ``claimed`` (re-send due or not) or ``submitted``
    (poll due or not)."""
    at = now - timedelta(minutes=1) if due else now + timedelta(hours=1)
    for i in ids:
        fire = now - timedelta(minutes=2)
        claimed = state == "claimed"
        yield (
            f"org-{i % 100}",
            "user-1",
            routine_id(i),
            fire.strftime("%Y-%m-%dT%H:%M:%SZ"),
            state,
            None,
            "schedule",
            "rev-1",
            fire,
            fire,
            fire,
            now + timedelta(hours=1),
            None,
            at if claimed else None,
            0,
            None if claimed else at,
            0,
            None if claimed else now + timedelta(hours=2),
            0,
            "[]",
            0,
            "[]",
        )


@contextmanager
def burst_ledger(routines: int, now: datetime) -> Iterator[str]:
    """A migrated database (its URL) whose ledger (``routines`` routines, two finished runs each) was
    ANALYZEd while no run was open, then a burst of 3,000 claimed and 300 running runs, not yet
    analyzed: a fleet's database at the top of the hour, before autovacuum's next ANALYZE."""
    from tests.stores.sql_support import libpq_url, pg_database

    with pg_database() as url:
        conninfo = libpq_url(url)
        copy_routines(conninfo, routines, 0, now)
        copy_runs(conninfo, history_rows(routines, now, per_routine=2))
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("ANALYZE")
        copy_runs(conninfo, open_rows(range(0, 3_000), "claimed", now, due=False))
        copy_runs(conninfo, open_rows(range(3_000, 3_300), "running", now, due=False))
        yield url
