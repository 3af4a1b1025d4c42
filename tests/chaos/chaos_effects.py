"""The side effects the chaos suite's runners write to their OWN table (never our ledger).

A SQLite file in the run's temp dir (``CHAOS_EFFECTS``): the chaos may kill Redis and PostgreSQL,
never this file. Every process opens its own connection (autocommit, WAL, a generous busy
timeout). Tables:

* ``effects``: one row per execution of a fleet task or a ``slow`` run: its kind, routine, key
  (the Celery task id of a task, the run key of a ``slow`` run), the process, and when it started
  and ended (``ended`` stays NULL when the process died mid-run).
* ``ticks``: one row per tick that completed: its report's ``at`` and when it completed (recorded
  by a ``task_success`` receiver in the worker, see ``chaos_fleet``).
* ``sends``: one row per fleet task message published (an ``after_task_publish`` receiver in the
  sending process): what a ``task`` run promises is one SEND per fire.
* ``takes``: one row per fire a run / run_many / collect task began (a ``task_prerun`` receiver):
  which process (and which Celery request) held the fire, so a run left ``running`` is traced to
  the fault that stranded it: through the request id the start CAS wrote as the run's ``owner``
  (a re-sent message that began later and lost the CAS does not own it), else the last taker.
"""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

DDL = """
CREATE TABLE IF NOT EXISTS effects (
    id INTEGER PRIMARY KEY, kind TEXT NOT NULL, routine_id TEXT NOT NULL, key TEXT NOT NULL,
    pid INTEGER NOT NULL, started REAL NOT NULL, ended REAL
);
CREATE TABLE IF NOT EXISTS ticks (at TEXT NOT NULL, done REAL NOT NULL, claimed INTEGER NOT NULL, pid INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sends (key TEXT NOT NULL, task TEXT NOT NULL, pid INTEGER NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS takes (
    key TEXT NOT NULL, task TEXT NOT NULL, pid INTEGER NOT NULL, at REAL NOT NULL, task_id TEXT
);
"""

_conn: sqlite3.Connection | None = None
_pid = -1


def _path() -> str:
    return os.environ["CHAOS_EFFECTS"]


def connect(path: str | Path | None = None) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path or _path()), timeout=60, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA busy_timeout=60000")
    return conn


def create(path: Path) -> None:
    with closing(connect(path)) as conn:
        conn.executescript(DDL)


def _mine() -> sqlite3.Connection:
    global _conn, _pid
    if _conn is None or _pid != os.getpid():
        _conn, _pid = connect(), os.getpid()
    return _conn


def started(kind: str, routine_id: str, key: str) -> int:
    cur = _mine().execute(
        "INSERT INTO effects (kind, routine_id, key, pid, started) VALUES (?, ?, ?, ?, ?)",
        (kind, routine_id, key, os.getpid(), time.time()),
    )
    return int(cur.lastrowid or 0)


def ended(row: int) -> None:
    _mine().execute("UPDATE effects SET ended = ? WHERE id = ?", (time.time(), row))


def tick_done(at: str, claimed: int) -> None:
    _mine().execute(
        "INSERT INTO ticks (at, done, claimed, pid) VALUES (?, ?, ?, ?)", (at, time.time(), claimed, os.getpid())
    )


def sent(task_id: str, task: str) -> None:
    _mine().execute(
        "INSERT INTO sends (key, task, pid, at) VALUES (?, ?, ?, ?)", (task_id, task, os.getpid(), time.time())
    )


def read_sends(path: Path) -> list[str]:
    """The task id of every fleet task message published (one per publish call)."""
    with closing(connect(path)) as conn:
        return [str(k) for (k,) in conn.execute("SELECT key FROM sends")]


def took(keys: list[str], task: str, task_id: str | None = None) -> None:
    now, pid = time.time(), os.getpid()
    rows = [(k, task, pid, now, task_id) for k in keys]
    _mine().executemany("INSERT INTO takes (key, task, pid, at, task_id) VALUES (?, ?, ?, ?, ?)", rows)


@dataclass(frozen=True, slots=True)
class Effect:
    kind: str
    routine_id: str
    key: str
    pid: int
    started: float
    ended: float | None


def read_effects(path: Path) -> list[Effect]:
    with closing(connect(path)) as conn:
        rows = conn.execute("SELECT kind, routine_id, key, pid, started, ended FROM effects").fetchall()
    return [Effect(*row) for row in rows]


def read_ticks(path: Path) -> list[tuple[str, float]]:
    """``(at, done)`` of every completed tick, in completion order."""
    with closing(connect(path)) as conn:
        return [(str(a), float(d)) for a, d in conn.execute("SELECT at, done FROM ticks ORDER BY done")]


def running_pids(path: Path, kind: str) -> list[int]:
    """Processes with an execution of ``kind`` started and not ended (kill targets)."""
    with closing(connect(path)) as conn:
        rows = conn.execute("SELECT DISTINCT pid FROM effects WHERE kind = ? AND ended IS NULL", (kind,))
        return sorted(int(pid) for (pid,) in rows)


def last_takers(path: Path) -> dict[str, int]:
    """The process that last began each fire (run key -> pid)."""
    with closing(connect(path)) as conn:
        return {str(k): int(p) for k, p in conn.execute("SELECT key, pid FROM takes ORDER BY at")}


def request_pids(path: Path) -> dict[str, int]:
    """The process that began each Celery request of a run / run_many / collect task (id -> pid)."""
    with closing(connect(path)) as conn:
        rows = conn.execute("SELECT task_id, pid FROM takes WHERE task_id IS NOT NULL ORDER BY at")
        return {str(t): int(p) for t, p in rows}
