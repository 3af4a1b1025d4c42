"""Bulk loading for the store benchmark: a scratch PostgreSQL database, migrated, filled by COPY."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

import psycopg

from alma_schedule.stores.sql import migrate_store

ADMIN = os.environ.get("ALMA_BENCH_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")

ROUTINE_COLS = (
    "org", "uid", "routine_id", "kind", "schedule", "definition", "registered_at", "config_revision",
    "enabled", "paused_reason", "consecutive_failures", "last_fire", "next_due_at", "deleted_at",
    "defer_until", "last_error", "error_count", "tzdata_version", "created_at", "updated_at",
)  # fmt: skip
RUN_COLS = (
    "org", "uid", "routine_id", "run_id", "state", "reason", "origin", "config_revision", "fire_at",
    "claimed_at", "state_at", "expires_at", "started_at", "finished_at", "resend_at", "send_attempts",
    "next_poll_at", "poll_attempts", "deadline", "reserved_micros", "reserve_ceilings", "cost_micros",
    "caps_crossed", "result_text", "erase_at",
)  # fmt: skip


@contextmanager
def scratch_database() -> Iterator[tuple[str, str]]:
    """A new migrated database: yields (SQLAlchemy URL, libpq conninfo); dropped afterwards."""
    name = f"alma_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
    base = ADMIN.rsplit("/", 1)[0]
    url = f"{base}/{name}".replace("postgresql://", "postgresql+psycopg://", 1)
    # The raw statements' unqualified names resolve to the store's schema (a bench convenience:
    # the store itself names the schema in every statement, never through search_path).
    conninfo = f"{base}/{name}?options=-csearch_path%3Dalma"
    try:
        migrate_store(url)
        yield url, conninfo
    finally:
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]


def rid(i: int) -> str:
    return f"routine-{i:07d}"


def org(i: int) -> str:
    return f"org-{i % 1000}"


def routine_rows(n: int, due: int, now: datetime) -> Iterator[tuple[object, ...]]:
    """Every-minute routines; the first ``due`` are due at ``now``, the rest later today."""
    schedule, definition = json.dumps({"every": 60}), json.dumps({"text": "hello"})
    registered = now - timedelta(days=1)
    for i in range(n):
        due_at = now - timedelta(seconds=i % 60) if i < due else now + timedelta(seconds=60 + i % 80_000)
        yield (
            org(i), "user-1", rid(i), "test", schedule, definition, registered, "rev-1",
            True, None, 0, None, due_at, None, None, None, 0, None, registered, registered,
        )  # fmt: skip


def run_row(i: int, state: str, now: datetime, **kw: object) -> tuple[object, ...]:
    fire = now - timedelta(minutes=5)
    values: dict[str, object] = {
        "org": org(i), "uid": "user-1", "routine_id": rid(i), "run_id": fire.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "state": state, "reason": None, "origin": "schedule", "config_revision": "rev-1", "fire_at": fire,
        "claimed_at": fire, "state_at": fire, "expires_at": now + timedelta(hours=1), "started_at": None,
        "finished_at": None, "resend_at": None, "send_attempts": 0, "next_poll_at": None, "poll_attempts": 0,
        "deadline": None, "reserved_micros": 0, "reserve_ceilings": "[]", "cost_micros": 0,
        "caps_crossed": "[]", "result_text": None, "erase_at": None,
    }  # fmt: skip
    values.update(kw)
    return tuple(values[c] for c in RUN_COLS)


def copy(conninfo: str, table: str, cols: tuple[str, ...], rows: Iterator[tuple[object, ...]]) -> None:
    with psycopg.connect(conninfo) as conn, conn.cursor() as cur:
        with cur.copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as out:  # type: ignore[arg-type]
            for row in rows:
                out.write_row(row)


def history(n: int, now: datetime) -> Iterator[tuple[object, ...]]:
    """One terminal ledger row per routine (fired an hour ago)."""
    for i in range(n):
        fire = now - timedelta(hours=1)
        yield run_row(
            i, "completed", now, reason="ok", run_id=fire.strftime("%Y-%m-%dT%H:%M:%SZ"),
            fire_at=fire, finished_at=fire, state_at=fire,
        )  # fmt: skip


def execute(conninfo: str, *sql: str) -> None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for statement in sql:
            conn.execute(statement)  # type: ignore[arg-type]
